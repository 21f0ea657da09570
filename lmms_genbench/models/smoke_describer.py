"""A tiny random-weight LLaVA checkpoint for offline smoke runs and tests.

The folder written here loads with lmms-eval's real ``llava_hf`` model classes
(chat and simple), so smoke presets exercise the genuine harness code path with
no download: the tokenizer is built locally from a small word list, the image
processor and model are constructed from explicit tiny configs, and the weights
are seeded. Generations are deterministic word salad of real image words.
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

__all__ = ["build_key", "build_tiny_llava", "tiny_llava_path"]

_ASSETS = Path(__file__).resolve().parent / "smoke_assets"
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


def _read_words() -> list[str]:
    """Return the packaged vocabulary words, lowercased, first occurrence kept."""
    words: list[str] = []
    for line in _WORDS_FILE.read_text(encoding="utf-8").splitlines():
        word = line.strip().lower()
        if word and not word.startswith("#"):
            words.append(word)
    return list(dict.fromkeys(words))


def build_key() -> str:
    """Identify the builder: a hash of this module, the word list and transformers' version.

    Any change to how the checkpoint is made yields a new key, so cached builds
    made by an older builder are rebuilt instead of silently reused.
    """
    import transformers

    digest = hashlib.sha256()
    digest.update(Path(__file__).read_bytes())
    digest.update(_WORDS_FILE.read_bytes())
    digest.update(transformers.__version__.encode())
    return digest.hexdigest()[:16]


def _is_complete(path: Path, seed: int) -> bool:
    """True when ``path`` holds a finished build of this builder version and seed."""
    try:
        marker = json.loads((path / _MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker.get("key") == build_key() and marker.get("seed") == seed


def _make_tokenizer(vocab: dict[str, int]):
    """A word-level fast tokenizer over ``vocab`` that decodes to space-joined words."""
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
    # Like llava-1.5's Llama tokenizer: a BOS in front when special tokens are added.
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])]
    )
    backend.add_special_tokens(_SPECIALS)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        pad_token=PAD,
        extra_special_tokens={"image_token": IMAGE},
        model_max_length=4096,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )


def _write_checkpoint(folder: Path, seed: int) -> None:
    """Build the tokenizer, image processor and seeded model and save them into ``folder``."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        GenerationConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tokens = _SPECIALS + _PUNCTUATION + _TEMPLATE_WORDS + _read_words()
    vocab = {tok: i for i, tok in enumerate(dict.fromkeys(tokens))}
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
    # fork_rng: seed the weights without disturbing the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlavaForConditionalGeneration(config).eval()
        with torch.no_grad():
            # Zero logit rows for banned tokens: a random model would otherwise emit EOS
            # early (empty text) or <image> (breaks LLaVA's image-token bookkeeping).
            model.lm_head.weight[banned_ids] = 0.0
    model.generation_config = GenerationConfig(
        bos_token_id=vocab[BOS],
        eos_token_id=vocab[EOS],
        pad_token_id=vocab[PAD],
        # lmms-eval passes only sampling/length kwargs, so these stay in force: never
        # end early or emit specials, and avoid the loops greedy random models fall into.
        suppress_tokens=banned_ids,
        no_repeat_ngram_size=2,
    )
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


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
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
    try:
        # mkdtemp makes it owner-only; a shared cache should stay readable.
        tmp.chmod(0o755)
        _write_checkpoint(tmp, seed)
        marker = {"key": build_key(), "seed": seed, "builder": __name__}
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        for _ in range(10):
            try:
                # Atomic; succeeds if dest is absent or an empty folder.
                os.replace(tmp, dest)
                return dest
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if _is_complete(dest, seed):
                return dest  # another process won the race with an identical build
            # Stale or foreign content: rename it away (atomic) before deleting it.
            trash = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex}")
            try:
                os.rename(dest, trash)
            except FileNotFoundError:
                continue  # someone else moved it already; retry the replace
            shutil.rmtree(trash, ignore_errors=True)
        raise RuntimeError(f"could not move the tiny LLaVA build into place at {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # no-op after a successful replace


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
    if cache_dir is None:
        cache_dir = (
            os.environ.get("LMMS_GENBENCH_CACHE")
            or Path.home() / ".cache" / "lmms_genbench"
        )
    dest = Path(cache_dir).expanduser() / "smoke" / f"tiny-llava-s{seed}-{build_key()[:8]}"
    if _is_complete(dest, seed):
        return dest.absolute()
    return build_tiny_llava(dest, seed=seed)
