"""Show-o (Xie et al., 2024) as a unified model, loading the authors' published checkpoints.

    lmms-eval --model cycle --model_args unified=showo,unified.device=cuda --tasks sdp_nocaps

reads the three repositories the authors' ``configs/showo_demo_512x512.yaml`` names:
``showlab/show-o-512x512`` (the transformer: ``config.json`` + ``pytorch_model.safetensors``),
``showlab/magvitv2`` (the image tokenizer, same two files) and ``microsoft/phi-1_5`` (its
tokenizer and ``config.json``, the language model's geometry, which the authors read through the
checkpoint's ``llm_model_path``). Each argument also takes a local folder in that layout.

Describing is Show-o's understanding mode at 512 px as that config runs it (no CLIP tower):
the image becomes 1024 MAGVIT-v2 codes and the question follows as
``USER: \\n<prompt> ASSISTANT:`` under the omni-attention mask (:mod:`.omni`); the answer is
decoded greedily (inference_mmu.py samples with top_k=1). Drawing is its MaskGIT decoding of the
1024 codes (:mod:`.maskgit`), decoded to 512 x 512 pixels by the MAGVIT-v2 decoder.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

from PIL import Image

from ....core.deps import MissingDependencyError, require
from ....core.failures import GeneratorConfigError
from ...base import GenerationResult
from ...common import check_image, describe_error
from ..arguments import Arg, Arguments, describing, runtime
from ..base import DescribeResult
from ..common import UnifiedCommon, authors_text, cut, plain_decoding

#: configs/showo_demo_512x512.yaml: model.showo.pretrained_model_path, vq_model_name, llm_model_path
PRETRAINED, VQ_MODEL, TOKENIZER = "showlab/show-o-512x512", "showlab/magvitv2", "microsoft/phi-1_5"
YAML = "`configs/showo_demo_512x512.yaml`"


class ShowoUnified(UnifiedCommon):
    """Show-o from its published checkpoints (see the module docstring for the command).

    Args: see ``ARGUMENTS``.

    Seeds: each prompt's draws come from its own CPU ``torch.Generator(seed)`` (:mod:`.maskgit`),
    so an image depends only on its prompt and seed. Describing with a temperature samples from
    torch's global generator, as lmms-eval models do.
    """

    concurrent = False  # one network on one device: describe and draw in turn

    ARGUMENTS = Arguments("showo", (
        Arg("pretrained", str, PRETRAINED, "the Show-o transformer, hub id or folder", source=YAML, key=None),
        Arg("vq_model", str, VQ_MODEL, "the MAGVIT-v2 tokenizer, hub id or folder", source=YAML),
        Arg("tokenizer", str, TOKENIZER, "Phi-1.5's tokenizer and config, hub id or folder", source=YAML,
            attr="tokenizer_id"),
        # bfloat16 halves the 5.8 GB at some drift from their numbers; the image tokenizer stays float32
        *runtime("float32", 4, "their scripts run the published float32 weights"),
        Arg("guidance_scale", float, 5.0, "classifier-free guidance, logits = (1 + s) cond - s uncond; 0 turns it "
            "off", source="the README's 512 px `inference_t2i.py` command"),
        Arg("generation_timesteps", int, 50, "MaskGIT steps", source="the README's 512 px `inference_t2i.py` command",
            attr="steps"),
        Arg("image_temperature", float, 1.0, "the Gumbel temperature of re-masking at the first step",
            source="inference_t2i.py's `generation_temperature`"),
        *describing(0.0, "inference_mmu.py's `top_k=1` (greedy)", 100, "the README's inference_mmu.py command"),
    ))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._check(*args, **kwargs)
        torch = self._torch
        try:
            self._load()
        except (GeneratorConfigError, MissingDependencyError):
            raise
        except Exception as exc:  # no such folder or id, not a Show-o checkpoint, ...
            raise GeneratorConfigError(f"unified: cannot load Show-o from pretrained={self.pretrained!r}, "
                                       f"vq_model={self.vq_model!r}, tokenizer={self.tokenizer_id!r}: "
                                       f"{describe_error(exc)}") from exc
        self.image_size = math.isqrt(self.num_codes) * self.vq.geometry.downsample
        self._dtype = getattr(torch, self.dtype)

    @classmethod
    def weights(cls, pretrained: str = PRETRAINED, vq_model: str = VQ_MODEL, tokenizer: str = TOKENIZER,
                **_settings: Any) -> list[tuple[str, str, str]]:
        """``(argument, hub id or folder, a file it must hold)`` for each repository a run reads
        (``lmms-genbench check`` asks the Hub about each)."""
        return [("pretrained", str(pretrained), "pytorch_model.safetensors"),
                ("vq_model", str(vq_model), "pytorch_model.safetensors"),
                ("tokenizer", str(tokenizer), "tokenizer_config.json")]

    # -- loading ---------------------------------------------------------------

    def _load(self) -> None:
        for module in ("transformers", "safetensors"):
            require(module, "the showo unified model")
        from ..common import CheckpointError, check_source, need
        from .loading import build_language_model, load_vocab, read_json, read_state
        from .magvit import WEIGHTS_FILE, build_magvit

        for arg, value in (("pretrained", self.pretrained), ("vq_model", self.vq_model),
                           ("tokenizer", self.tokenizer_id)):
            check_source(arg, value)
        shown = read_json(self.pretrained, "config.json")
        source = f"{self.pretrained}/config.json"
        for key in ("vocab_size", "llm_vocab_size", "codebook_size", "num_vq_tokens"):
            value = need(shown, key, source)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CheckpointError(f"{source}: {key} is {value!r}, not a positive integer")
        # the image is a square grid of codes (the authors reshape to sqrt x sqrt when drawing)
        if math.isqrt(shown["num_vq_tokens"]) ** 2 != shown["num_vq_tokens"]:
            raise CheckpointError(f"{source}: num_vq_tokens {shown['num_vq_tokens']} is not a square "
                                  "(the image is a square grid of codes)")
        self.num_codes = int(shown["num_vq_tokens"])
        if shown.get("w_clip_vit"):
            raise GeneratorConfigError(f"unified.pretrained: {self.pretrained!r} is a CLIP-ViT variant of Show-o "
                                       "(w_clip_vit: true); only the MAGVIT-v2 understanding path is supported")
        self.config = shown
        self.vocab = load_vocab(self.tokenizer_id, int(shown["llm_vocab_size"]), int(shown["codebook_size"]))
        if self.vocab.mask != int(shown["vocab_size"]) - 1:
            raise GeneratorConfigError(f"unified.pretrained: vocab_size {shown['vocab_size']} does not hold "
                                       f"llm_vocab_size + 10 + codebook_size + 1 = {self.vocab.mask + 1}")
        self.lm = build_language_model(self.tokenizer_id, self.pretrained, int(shown["vocab_size"]),
                                       self._device, self.dtype)
        # the image tokenizer stays float32, as the authors' scripts run it (it is small)
        try:
            self.vq = build_magvit(read_state(self.vq_model, self._torch.float32)).to(self._device)
        except (KeyError, ValueError, RuntimeError) as exc:
            if isinstance(exc, CheckpointError):
                raise
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise CheckpointError(f"{self.vq_model}/{WEIGHTS_FILE}: {message}") from exc
        if self.vq.codebook_size != self.vocab.codebook_size:
            raise GeneratorConfigError(f"unified.vq_model: {self.vq_model!r} has {self.vq.codebook_size} codes; "
                                       f"the checkpoint expects codebook_size {self.vocab.codebook_size}")

    # -- describing ------------------------------------------------------------

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image, with the task's decoding settings."""
        max_new, temperature, until = plain_decoding(gen_kwargs or {}, self.temperature, self.max_new_tokens)
        torch = self._torch
        from .loading import image_tensor
        from .omni import mmu_mask

        def call(chunk: list[Image.Image]) -> list[str]:
            with torch.inference_mode():
                pixels = torch.stack([image_tensor(im, self.image_size) for im in chunk]).to(self._device)
                codes = self.vq.encode(pixels).tolist()
                # one question for all: every row has the same layout, so no padding is needed
                ids = torch.tensor([self.vocab.mmu_row(c, prompt) for c in codes], device=self._device)
                new = self.continue_text(ids, mmu_mask(ids, self.vocab, self._dtype), max_new, temperature)
            return [cut(self.decode_text(n), until) for n in new]

        return self._isolated(call, images, "describe")

    def continue_text(self, ids, mask, max_new_tokens: int, temperature: float = 0.0) -> list[list[int]]:
        """The tokens after each row of ``ids`` up to and with the end-of-text token (the
        authors' ``mmu_generate``, with a key-value cache: later tokens attend causally, as the
        rows their mask adds). Greedy at temperature 0."""
        torch = self._torch
        out = self.lm(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        cache, logits = out.cache, out.logits[:, -1]
        rows: list[list[int]] = [[] for _ in range(ids.shape[0])]
        done = [False] * len(rows)
        for step in range(max_new_tokens):
            if temperature > 0:
                nxt = torch.multinomial(torch.softmax(logits.float() / temperature, -1), 1)[:, 0]
            else:
                nxt = logits.argmax(-1)
            for row, token in enumerate(nxt.tolist()):
                if not done[row]:
                    rows[row].append(token)
                    done[row] = token == self.vocab.eos
            if all(done) or step == max_new_tokens - 1:
                break
            out = self.lm(input_ids=nxt[:, None], cache=cache, use_cache=True)
            cache, logits = out.cache, out.logits[:, -1]
        return rows

    def decode_text(self, tokens: list[int]) -> str:
        # the authors batch_decode with skip_special_tokens; ids past the text vocabulary
        # (image codes) have no text and are dropped, as the tokenizer drops them; their
        # transformers 4.41.1 then cleans the spaces before punctuation where the config asks
        # (phi-1_5's does; CodeGenTokenizer's default there is on too)
        tokenizer = self.vocab.tokenizer
        known = [t for t in tokens if t < len(tokenizer)]
        text = tokenizer.decode(known, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return authors_text(text, tokenizer.init_kwargs, default=True)

    # -- drawing ---------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt; each depends on its own prompt and seed only."""
        return self._isolated(self._draw, self._seeded(prompts, seeds), "generate")

    def draw_codes(self, prompts: Sequence[str], seeds: Sequence[int]):
        """(B, num_codes) image codes, one row per prompt and seed."""
        torch = self._torch
        from .maskgit import unmask
        from .omni import MAX_TEXT_LEN, t2i_mask

        cond = torch.tensor([self.vocab.t2i_row(p, self.num_codes) for p in prompts], device=self._device)
        uncond_text = None
        rows = cond
        if self.guidance_scale > 0:
            uncond = torch.tensor([self.vocab.t2i_row("", self.num_codes)] * len(prompts), device=self._device)
            uncond_text = uncond[:, : MAX_TEXT_LEN + 1]
            rows = torch.cat([cond, uncond])
        mask = t2i_mask(rows, self.vocab, self._dtype)
        keep = self.num_codes + 1  # the codes and <|eoi|>, whose logits are dropped
        # the text part (the padded text and its task token) attends causally and never sees the
        # image part, so its keys and values are the same at every step: computed once, and each
        # step runs <|soi|>, the codes and <|eoi|> over a copy of them (the authors' t2i_generate
        # reruns the whole row)
        prefix = MAX_TEXT_LEN + 1

        def forward(batch):
            step_cache = copy.deepcopy(text_cache)  # the step's forward appends the image part's
            return self.lm(input_ids=batch[:, prefix:], attention_mask=mask[:, :, prefix:], cache=step_cache,
                           use_cache=True, logits_to_keep=keep).logits[:, :-1]

        with torch.inference_mode():
            text_cache = self.lm(input_ids=rows[:, :prefix], attention_mask=mask[:, :, :prefix, :prefix],
                                 use_cache=True, logits_to_keep=1).cache
            return unmask(forward, cond, uncond_text, [torch.Generator().manual_seed(int(s)) for s in seeds],
                          num_codes=self.num_codes, image_offset=self.vocab.image_offset,
                          codebook_size=self.vocab.codebook_size, mask_id=self.vocab.mask, steps=self.steps,
                          guidance_scale=self.guidance_scale, temperature=self.image_temperature)

    def decode_pixels(self, codes):
        """(B, N) codes -> (B, 3, H, W) float pixels in about [-1, 1] (the MAGVIT-v2 decoder)."""
        with self._torch.inference_mode():
            return self.vq.decode(codes.to(self._device))

    def _draw(self, chunk: list[tuple[str, int]]) -> list[GenerationResult]:
        pixels = self.decode_pixels(self.draw_codes([p for p, _ in chunk], [s for _, s in chunk]))
        return [check_image(image, False) for image in self.to_images(pixels)]

    def to_images(self, pixels) -> list[Image.Image]:
        """Decoded pixels as PIL images, as inference_t2i.py: clamp((x + 1) / 2) * 255, truncated."""
        torch = self._torch
        arrays = (torch.clamp((pixels.float() + 1.0) / 2.0, 0.0, 1.0) * 255.0).permute(0, 2, 3, 1).cpu().numpy()
        return [Image.fromarray(a.astype("uint8")) for a in arrays]
