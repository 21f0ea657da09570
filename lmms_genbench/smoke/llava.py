"""Tiny random-weight LLaVA and Qwen2-VL checkpoints for offline smoke runs and tests.

The folders written here load with lmms-eval's real model classes: the LLaVA one
with ``llava_hf`` (chat and simple), the Qwen2-VL one with ``qwen2_vl`` (simple
only, but with batched generation, unlike ``llava_hf``'s batch size 1). The
Qwen2-VL built with ``head_dim=32`` also loads with vLLM (``vllm``), whose CPU
attention takes head sizes 32, 64, 80, ... but not the default 16. So smoke
presets exercise the genuine harness code path with no download: tokenizers are
built locally from a small word list, image processors and models are
constructed from explicit tiny configs, and the weights are seeded. Generations
are deterministic word salad of real image words.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

__all__ = [
    "QWEN2_VL_MAX_PIXELS",
    "QWEN2_VL_MIN_PIXELS",
    "VLLM_HEAD_DIM",
    "build_key",
    "build_tiny_llava",
    "build_tiny_qwen2_vl",
    "tiny_llava_path",
    "tiny_qwen2_vl_path",
]

_ASSETS = Path(__file__).resolve().parent / "assets"
_WORDS_FILE = _ASSETS / "words.txt"
# Written last into a finished build; its presence with the right key means "complete".
_MARKER = "genbench_smoke.json"

UNK, BOS, EOS, PAD, IMAGE = "<unk>", "<s>", "</s>", "<pad>", "<image>"
_SPECIALS = [UNK, BOS, EOS, PAD, IMAGE]
_PUNCTUATION = list(".,:;!?'\"()-/")
# Needed by the chat template ("USER: ... ASSISTANT:"), so they must not map to <unk>.
_TEMPLATE_WORDS = ["user", "assistant", "system"]

IMAGE_SIZE = 32
PATCH_SIZE = 8
# CLIP adds a CLS token; the "default" strategy drops it, leaving one token per patch.
NUM_IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2

# Vicuna-style like llava-1.5 ("USER: <image>\n{prompt} ASSISTANT:"). Content may be a
# string (lmms-eval's simple class puts "<image>\n" in the text itself) or a list of
# typed parts (the chat class), so the template handles both.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% if message['content'] is string %}{{ message['content'] + ' ' }}"
    "{% else %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}"
    "{% for part in message['content'] | selectattr('type', 'equalto', 'text') %}{{ part['text'] + ' ' }}{% endfor %}"
    "{% endif %}"
    "{% if message['role'] == 'assistant' %}{{ '</s>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

# Qwen2-VL's special tokens (ChatML turns, vision delimiters, grounding markers), so
# prompts tokenize like the real model's. Qwen has no <unk>; WordLevel needs one.
QWEN_EOT, QWEN_IM_START, QWEN_IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
QWEN_VISION_START, QWEN_VISION_END = "<|vision_start|>", "<|vision_end|>"
QWEN_IMAGE_PAD, QWEN_VIDEO_PAD = "<|image_pad|>", "<|video_pad|>"
_QWEN_SPECIALS = [
    QWEN_EOT,
    QWEN_IM_START,
    QWEN_IM_END,
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    QWEN_VISION_START,
    QWEN_VISION_END,
    "<|vision_pad|>",
    QWEN_IMAGE_PAD,
    QWEN_VIDEO_PAD,
    UNK,
]

QWEN2_VL_PATCH_SIZE = 14
QWEN2_VL_MERGE_SIZE = 2
_QWEN_TOKEN_PIXELS = (QWEN2_VL_PATCH_SIZE * QWEN2_VL_MERGE_SIZE) ** 2  # one LLM token: 28x28
# Pixel bounds of an image: 4 to 16 LLM tokens (16 to 64 patches). lmms-eval's qwen2_vl
# class overrides the saved processor's bounds with its own min_pixels/max_pixels
# arguments (default 3136/602112, i.e. up to 768 tokens), so pass these to it too.
QWEN2_VL_MIN_PIXELS = 4 * _QWEN_TOKEN_PIXELS
QWEN2_VL_MAX_PIXELS = 16 * _QWEN_TOKEN_PIXELS

# Attention head sizes the tiny Qwen2-VL can be built with, and M-RoPE's split of each
# head's head_dim / 2 rotary frequencies into temporal, height and width sections (the
# real model uses [16, 24, 24] of 64). 16 is the original tiny model; 32 is the
# smallest head size vLLM's CPU attention accepts.
QWEN2_VL_MROPE_SECTIONS = {16: [2, 3, 3], 32: [4, 6, 6]}
#: the head size of the tiny Qwen2-VL that vLLM can serve
VLLM_HEAD_DIM = 32

# Qwen2-VL-Instruct's own template: ChatML turns, a default system turn, and image or
# video parts as <|vision_start|><|image_pad|><|vision_end|> (the processor expands the
# pad to one token per merged patch). Content may be a string or a list of typed parts.
QWEN_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _read_words() -> list[str]:
    """Return the packaged vocabulary words, lowercased, first occurrence kept."""
    words: list[str] = []
    for line in _WORDS_FILE.read_text(encoding="utf-8").splitlines():
        word = line.strip().lower()
        if word and not word.startswith("#"):
            words.append(word)
    return list(dict.fromkeys(words))


def _vocab(specials: list[str]) -> dict[str, int]:
    """Token -> id: ``specials`` first, then punctuation, template words and the word list."""
    tokens = specials + _PUNCTUATION + _TEMPLATE_WORDS + _read_words()
    return {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}


def build_key(*extra_files: Path) -> str:
    """Identify the builder: a hash of this module, the word list and transformers' version.

    Any change to how the checkpoint is made yields a new key, so cached builds
    made by an older builder are rebuilt instead of silently reused. Builders in
    other modules pass their own source file as ``extra_files``.
    """
    import transformers

    digest = hashlib.sha256()
    for source in (Path(__file__), *extra_files):
        digest.update(source.read_bytes())
    digest.update(_WORDS_FILE.read_bytes())
    digest.update(transformers.__version__.encode())
    return digest.hexdigest()[:16]


def _is_complete(path: Path, seed: int, model: str = "llava", key: str | None = None) -> bool:
    """True when ``path`` holds a finished ``model`` build of this builder version and seed.

    ``key`` is the builder key to match (default :func:`build_key`).
    """
    try:
        marker = json.loads((path / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        marker.get("key") == (key or build_key())
        and marker.get("seed") == seed
        and marker.get("model", "llava") == model
    )


def _word_level_tokenizer(
    vocab: dict[str, int],
    specials: list[str],
    *,
    eos: str,
    pad: str,
    bos: str | None,
    extra_special_tokens: dict[str, str],
    chat_template: str,
):
    """A word-level fast tokenizer over ``vocab`` that decodes to space-joined words.

    Args:
        vocab: token -> id, holding every entry of ``specials`` and ``UNK``.
        specials: tokens matched verbatim before word splitting (and skipped when
            decoding with ``skip_special_tokens``).
        eos, pad: the tokenizer's end-of-sequence and padding tokens.
        bos: prepended when special tokens are added (Llama-style); ``None`` for
            none (Qwen-style).
        extra_special_tokens: named extras such as ``{"image_token": "<image>"}``,
            which processors read as tokenizer attributes.
        chat_template: Jinja template stored with the tokenizer.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    # WordPiece decoding with no "##" pieces joins tokens by spaces and tidies " ." -> ".".
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    if bos is not None:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, vocab[bos])]
        )
    backend.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=bos,
        eos_token=eos,
        unk_token=UNK,
        pad_token=pad,
        extra_special_tokens=extra_special_tokens,
        model_max_length=4096,
        # Generation appends on the right, so batched prompts must be padded on the left.
        padding_side="left",
        chat_template=chat_template,
    )


def _make_tokenizer(vocab: dict[str, int]):
    """The LLaVA tokenizer: like llava-1.5's Llama one, a BOS in front of each text."""
    return _word_level_tokenizer(
        vocab,
        _SPECIALS,
        eos=EOS,
        pad=PAD,
        bos=BOS,
        extra_special_tokens={"image_token": IMAGE},
        chat_template=CHAT_TEMPLATE,
    )


def _write_checkpoint(folder: Path, seed: int) -> None:
    """Build the tokenizer, image processor and seeded model and save them into ``folder``."""
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    vocab = _vocab(_SPECIALS)
    tokenizer = _make_tokenizer(vocab)
    # Never generated: specials, plus template words that would read like a new chat turn.
    banned_ids = [vocab[t] for t in _SPECIALS + _TEMPLATE_WORDS]

    image_processor = CLIPImageProcessor(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        do_center_crop=True,
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token
        chat_template=CHAT_TEMPLATE,
    )

    vision_config = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=32,
    )
    text_config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=vocab[BOS],
        eos_token_id=vocab[EOS],
        pad_token_id=vocab[PAD],
        tie_word_embeddings=False,
    )
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=vocab[IMAGE],
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_seq_length=NUM_IMAGE_TOKENS,
        tie_word_embeddings=False,
    )
    _init_and_save(folder, LlavaForConditionalGeneration, config, processor, seed, banned_ids,
                   bos_token_id=vocab[BOS], eos_token_id=vocab[EOS], pad_token_id=vocab[PAD])


def _write_qwen2_vl_checkpoint(folder: Path, seed: int, head_dim: int = 16) -> None:
    """Build the Qwen2-VL tokenizer, processor and seeded model and save them into ``folder``."""
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    vocab = _vocab(_QWEN_SPECIALS)
    tokenizer = _word_level_tokenizer(
        vocab,
        _QWEN_SPECIALS,
        # As in Qwen2-VL-Instruct: turns end with <|im_end|>, padding is <|endoftext|>.
        eos=QWEN_IM_END,
        pad=QWEN_EOT,
        bos=None,
        extra_special_tokens={"image_token": QWEN_IMAGE_PAD, "video_token": QWEN_VIDEO_PAD},
        chat_template=QWEN_CHAT_TEMPLATE,
    )
    # Never generated: specials (EOS would end early; a stray <|image_pad|> breaks the
    # image-token count check), plus template words that read like a new chat turn.
    banned_ids = [vocab[t] for t in _QWEN_SPECIALS + _TEMPLATE_WORDS]

    pixels = {"min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS}
    patching = {
        "patch_size": QWEN2_VL_PATCH_SIZE,
        "merge_size": QWEN2_VL_MERGE_SIZE,
        "temporal_patch_size": 2,
    }
    # AutoProcessor loads every sub-processor the processor class names, so the video
    # one is saved too (unused here; same small bounds per frame).
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels, **patching),
        video_processor=Qwen2VLVideoProcessor(**pixels, **patching),
        tokenizer=tokenizer,
        chat_template=QWEN_CHAT_TEMPLATE,
    )

    text_config = {
        "vocab_size": len(vocab),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 64 // head_dim,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                            "mrope_section": QWEN2_VL_MROPE_SECTIONS[head_dim]},
        "bos_token_id": None,
        "eos_token_id": vocab[QWEN_IM_END],
        "pad_token_id": vocab[QWEN_EOT],
    }
    vision_config = {
        "depth": 2,
        "embed_dim": 32,
        "num_heads": 2,
        "mlp_ratio": 2,
        "hidden_size": text_config["hidden_size"],  # the patch merger projects into the LLM
        "in_channels": 3,
        "patch_size": QWEN2_VL_PATCH_SIZE,
        "spatial_merge_size": QWEN2_VL_MERGE_SIZE,
        "temporal_patch_size": patching["temporal_patch_size"],
    }
    config = Qwen2VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=vocab[QWEN_IMAGE_PAD],
        video_token_id=vocab[QWEN_VIDEO_PAD],
        vision_start_token_id=vocab[QWEN_VISION_START],
        vision_end_token_id=vocab[QWEN_VISION_END],
        tie_word_embeddings=False,
    )
    _init_and_save(folder, Qwen2VLForConditionalGeneration, config, processor, seed, banned_ids,
                   eos_token_id=vocab[QWEN_IM_END], pad_token_id=vocab[QWEN_EOT])


def _init_and_save(
    folder: Path, model_cls, config, processor, seed: int, banned_ids, generation: dict | None = None, **token_ids
) -> None:
    """Seeded random weights that never stop early, saved with their processor.

    ``generation`` replaces the default text safeguards of the saved generation
    config (suppressed specials, no repeated bigrams), e.g. for a model whose
    image mode must not see them.
    """
    import torch
    from transformers import GenerationConfig

    # fork_rng: seed the weights without disturbing the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).eval()
        with torch.no_grad():
            # Zero logit rows for banned tokens: a random model would otherwise emit EOS
            # early (empty text) or image tokens (breaking the image-token bookkeeping).
            model.lm_head.weight[banned_ids] = 0.0
    if generation is None:
        # lmms-eval passes only sampling/length kwargs, so these stay in force: never
        # end early or emit specials, and avoid the loops greedy random models fall into.
        generation = {"suppress_tokens": banned_ids, "no_repeat_ngram_size": 2}
    model.generation_config = GenerationConfig(**token_ids, **generation)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def _build_atomically(dest: Path, seed: int, model: str, write, key: str | None = None) -> Path:
    """Run ``write(folder, seed)`` into a temporary sibling of ``dest``, then move it into place.

    Args:
        dest: absolute destination folder; its parent is created if missing.
        seed: passed to ``write`` and recorded in the completion marker.
        model: which checkpoint this is (``"llava"`` or ``"qwen2_vl"``); recorded in
            the marker so one kind's folder is never taken for the other.
        write: the checkpoint writer, ``write(folder: Path, seed: int) -> None``.
        key: the builder key recorded in the marker (default :func:`build_key`).

    The marker is written last, and ``os.replace`` is atomic, so readers never see
    a half-written folder. If a concurrent builder finishes first with the same
    builder key, seed and model, its (identical) folder is kept and ours
    discarded. An older or different build at ``dest`` is moved aside and deleted.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
    try:
        # mkdtemp makes it owner-only; a shared cache should stay readable.
        tmp.chmod(0o755)
        write(tmp, seed)
        key = key or build_key()
        marker = {"key": key, "seed": seed, "model": model, "builder": write.__module__}
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        for _ in range(10):
            try:
                # Atomic; succeeds if dest is absent or an empty folder.
                os.replace(tmp, dest)
                return dest
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if _is_complete(dest, seed, model, key):
                return dest  # another process won the race with an identical build
            # Stale or foreign content: rename it away (atomic) before deleting it.
            trash = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex}")
            try:
                os.rename(dest, trash)
            except FileNotFoundError:
                continue  # someone else moved it already; retry the replace
            shutil.rmtree(trash, ignore_errors=True)
        raise RuntimeError(f"could not move the tiny {model} build into place at {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # no-op after a successful replace


def build_tiny_llava(path: str | os.PathLike, seed: int = 0) -> Path:
    """Build the tiny random LLaVA checkpoint into ``path`` atomically; return ``path``.

    Args:
        path: destination folder. Its parent is created if missing. The build is
            written into a hidden temporary sibling and moved into place with
            ``os.replace``, so readers never see a half-written folder.
        seed: torch seed for the random weights; same seed, same checkpoint.

    If a concurrent builder finishes first with the same builder key and seed,
    its (identical) folder is kept and ours discarded. An older or different
    build at ``path`` is moved aside and deleted.
    """
    dest = Path(path).expanduser().absolute()
    return _build_atomically(dest, seed, "llava", _write_checkpoint)


def build_tiny_qwen2_vl(path: str | os.PathLike, seed: int = 0, head_dim: int = 16) -> Path:
    """Build the tiny random Qwen2-VL checkpoint into ``path`` atomically; return ``path``.

    Args:
        path: destination folder. Its parent is created if missing. The build is
            written into a hidden temporary sibling and moved into place with
            ``os.replace``, so readers never see a half-written folder.
        seed: torch seed for the random weights; same seed, same checkpoint.
        head_dim: the language model's attention head size, 16 or 32
            (:data:`VLLM_HEAD_DIM`: the one vLLM can serve).

    The folder loads with lmms-eval's ``qwen2_vl`` class on CPU given
    ``device="cpu", device_map="cpu", min_pixels=QWEN2_VL_MIN_PIXELS,
    max_pixels=QWEN2_VL_MAX_PIXELS`` (and any ``batch_size``). Concurrent and
    stale builds are handled as in :func:`build_tiny_llava`.
    """
    _check_head_dim(head_dim)
    dest = Path(path).expanduser().absolute()

    def write(folder: Path, seed: int) -> None:
        _write_qwen2_vl_checkpoint(folder, seed, head_dim)

    return _build_atomically(dest, seed, _qwen2_vl_kind(head_dim), write)


def _check_head_dim(head_dim: int) -> None:
    if head_dim not in QWEN2_VL_MROPE_SECTIONS:
        raise ValueError(f"head_dim: expected one of {sorted(QWEN2_VL_MROPE_SECTIONS)}; got {head_dim!r}")


def _qwen2_vl_kind(head_dim: int) -> str:
    """The build's name in its marker and folder: the original head size keeps its old name."""
    return "qwen2_vl" if head_dim == 16 else f"qwen2_vl_h{head_dim}"


def _cache_root(cache_dir: str | os.PathLike | None) -> Path:
    """``cache_dir``, else ``$LMMS_GENBENCH_CACHE``, else ``~/.cache/lmms_genbench``."""
    if cache_dir is None:
        cache_dir = (
            os.environ.get("LMMS_GENBENCH_CACHE")
            or Path.home() / ".cache" / "lmms_genbench"
        )
    return Path(cache_dir).expanduser()


def tiny_llava_path(cache_dir: str | os.PathLike | None = None, seed: int = 0) -> Path:
    """Return a cached tiny LLaVA checkpoint folder, building it on first use.

    Args:
        cache_dir: cache root; defaults to ``$LMMS_GENBENCH_CACHE`` if set, else
            ``~/.cache/lmms_genbench``. The checkpoint lives in
            ``<root>/smoke/tiny-llava-s{seed}-<build key>``: the key in the name
            also keys the artifact store, so a changed builder never reuses
            chains drawn by an older network.
        seed: torch seed for the random weights.

    A folder made by a different builder version is rebuilt. Safe to call from
    several processes at once (e.g. ranks of ``accelerate launch``).
    """
    dest = _cache_root(cache_dir) / "smoke" / f"tiny-llava-s{seed}-{build_key()[:8]}"
    if _is_complete(dest, seed, "llava"):
        return dest.absolute()
    return build_tiny_llava(dest, seed=seed)


def tiny_qwen2_vl_path(cache_dir: str | os.PathLike | None = None, seed: int = 0, head_dim: int = 16) -> Path:
    """Return a cached tiny Qwen2-VL checkpoint folder, building it on first use.

    Args:
        cache_dir: cache root; defaults to ``$LMMS_GENBENCH_CACHE`` if set, else
            ``~/.cache/lmms_genbench``. The checkpoint lives in
            ``<root>/smoke/tiny-qwen2-vl-s{seed}-<build key>`` (``tiny-qwen2-vl-h32-...``
            for ``head_dim=32``), keyed like :func:`tiny_llava_path`.
        seed: torch seed for the random weights.
        head_dim: as in :func:`build_tiny_qwen2_vl`; ``VLLM_HEAD_DIM`` for vLLM.

    A folder made by a different builder version is rebuilt. Safe to call from
    several processes at once.
    """
    _check_head_dim(head_dim)
    kind = "" if head_dim == 16 else f"h{head_dim}-"
    dest = _cache_root(cache_dir) / "smoke" / f"tiny-qwen2-vl-{kind}s{seed}-{build_key()[:8]}"
    if _is_complete(dest, seed, _qwen2_vl_kind(head_dim)):
        return dest.absolute()
    return build_tiny_qwen2_vl(dest, seed=seed, head_dim=head_dim)
