"""BLIP3-o (Salesforce; Chen et al. 2025) as a unified model, loaded as published.

    lmms-eval --model cycle --model_args unified=blip3o,\\
    unified.pretrained=BLIP3o/BLIP3o-Model-4B,unified.device=cuda \\
        --tasks sdp_nocaps

Describing is the frozen Qwen2.5-VL half, prompted as the authors' demo does (gradio/app.py: the
Qwen2.5-VL chat template with the image first, the image resized by qwen_vl_utils' rules).
Drawing is the generation half: the prompt in the authors' template goes through the language
model with 64 learnt queries appended; the queries' last states condition the Lumina-Next DiT
(:mod:`.dit`), which samples CLIP image features; the EMU2-style diffusion decoder turns them into
pixels at 1024 px. Defaults and their sources are listed in :class:`Blip3oUnified`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from PIL import Image

from ....core.deps import require
from ....core.failures import GeneratorConfigError
from ...base import GenerationResult
from ...common import check_image, describe_error
from ..arguments import Arg, Arguments, Rule, describing, runtime
from ..base import DescribeResult
from ..common import UnifiedCommon, authors_text, cut, hf_decoding

#: the authors' text-to-image instruction (inference.py, gradio/app.py, eval/geneval/generate.py)
DRAW_INSTRUCTION = "Please generate image based on the following caption: {}"
#: conversation.py's ``conv_qwen`` (ChatML, the Qwen system turn), which add_template fills
QWEN_CONVERSATION = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
#: the token the authors append to open image mode (id 151665, hard-coded in generate_image)
IMAGE_START = "[IMG]"
#: the decoder's unconditional prompt: pipeline_llava_gen.py encodes " " (EMU2's pipeline had "")
NEGATIVE_PROMPT = " "
#: qwen_vl_utils.fetch_image's bounds (4 to 16384 tokens of 28 x 28 px), which app.py applies
QWEN_FACTOR, QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 28, 4 * 28 * 28, 16384 * 28 * 28
#: the parts that may run in their own dtype
PARTS = ("lm", "dit", "decoder")
#: the authors' dtypes, which ``dtype=auto`` runs on CUDA: builder.py loads the language model,
#: the DiT and the queries inside it, in float16; inference.py the decoder pipeline in bfloat16
AUTHORS_DTYPES = {"lm": "float16", "dit": "float16", "decoder": "bfloat16"}


def part_dtypes(choice: str, device_type: str, resolved: str) -> dict[str, str]:
    """Each part's dtype: ``auto`` on CUDA as the authors run them (:data:`AUTHORS_DTYPES`); else
    every part in ``resolved`` (``auto`` made concrete: float32 on the CPU, where the authors never
    run and float16 has slow kernels; float16 on MPS) or the one dtype asked for."""
    if choice == "auto" and device_type == "cuda":
        return dict(AUTHORS_DTYPES)
    return dict.fromkeys(PARTS, resolved)


class Blip3oUnified(UnifiedCommon):
    """BLIP3-o checkpoints in the authors' layout (``BLIP3o/BLIP3o-Model-4B``, ``-8B``).

    Args: see ``ARGUMENTS``.

    Seeds: one CPU ``torch.Generator(seed)`` per prompt draws, in the authors' order, the DiT's
    noise for the prompt, the DiT's noise for " " (only when ``decoder_guidance`` > 1), and the
    decoder's starting latents, so an image
    depends on its own prompt and seed only. With ``torch.manual_seed(seed)`` before the authors'
    first call on a CPU this is exactly their draw; they cache the " " features after the first
    call, where each image here recomputes them from its own seed.
    """

    concurrent = False  # one network on one device: describe and draw in turn

    ARGUMENTS = Arguments("blip3o", (
        Arg("pretrained", str, "BLIP3o/BLIP3o-Model-4B", "hub id or local folder of a BLIP3-o checkpoint as "
            "published", source="the paper's 4B", key=None),
        Arg("processor", str, "Qwen/Qwen2.5-VL-7B-Instruct", "hub id or folder whose image processor and chat "
            "template describe with; the text is tokenized by the checkpoint's own tokenizer (the same Qwen2.5 "
            "vocabulary)", source="inference.py and gradio/app.py", attr="processor_id"),
        *runtime("auto", 1, "the authors' dtypes per part on CUDA: float16 language model and DiT, bfloat16 "
                 "decoder (their builder.py and inference.py)", dtype_doc="``auto``: on CUDA the authors' dtypes per "
                 "part, on the CPU float32, on MPS float16, for every part; ``float16``, ``bfloat16``, ``float32``: "
                 "every part in that dtype"),
        Arg("dit_steps", int, 30, "the DiT's Euler steps", source="`sample_images`"),
        Arg("dit_guidance", float, 3.0, "the DiT's guidance against a zero condition", source="`sample_images`"),
        Arg("decoder_steps", int, 50, "the diffusion decoder's steps (inference.py passes none)",
            source="pipeline_llava_gen.py's `__call__`"),
        Arg("decoder_guidance", float, 3.0, "the decoder's guidance against the features of \" \"; as the "
            "pipeline, guidance only above 1: at 1 or below the conditional branch alone (the scale then has no "
            "effect) and \" \" is not encoded", source="inference.py and gradio/app.py (guidance only above 1, as "
            "the pipeline's `guidance_scale > 1.0`)"),
        Arg("image_size", int, 1024, "output height and width in pixels", source="pipeline_llava_gen.py's "
            "`__call__`", minimum=8, rules=(Rule(lambda size: size % 8 == 0, "expected a multiple of 8 (the "
                                                 "decoder's latent grid); got {value}"),)),
        *describing(0.0, "greedy", 1024, "gradio/app.py"),
    ))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._check(*args, **kwargs)
        torch = self._torch
        transformers = require("transformers", "the blip3o unified model")
        require("diffusers", "the blip3o unified model")
        from . import checkpoint
        from .dit import NextDiTCrossAttn, dit_weights

        lm_dtype, dit_dtype, decoder_dtype = (getattr(torch, self.dtypes[part]) for part in PARTS)
        try:
            from ..common import CheckpointError, check_source

            check_source("unified.processor", self.processor_id)
            folder = checkpoint.local_folder(self.pretrained)
            raw = checkpoint.read_config(folder)
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
            self.lm = checkpoint.load_qwen(folder, raw, lm_dtype)
            generation = checkpoint.read_generation_weights(folder, dit_dtype)
            self.dit = NextDiTCrossAttn.from_state_dict(dit_weights(generation)).to(dit_dtype)
            self.queries = generation["model.latent_queries"].to(lm_dtype)  # a parameter of their language model
            self.unet, self.vae, self.decoder_scheduler = checkpoint.load_decoder(folder, decoder_dtype)
            try:
                image_processor = transformers.AutoImageProcessor.from_pretrained(self.processor_id)
            except (OSError, ValueError, KeyError) as exc:  # another model's folder, no preprocessor file
                raise CheckpointError(f"unified.processor: {self.processor_id}'s preprocessor_config.json is not a "
                                      f"Qwen2.5-VL image processor's ({describe_error(exc)})") from exc
            self.processor = transformers.Qwen2_5_VLProcessor(
                image_processor=image_processor, tokenizer=self.tokenizer,
                video_processor=transformers.Qwen2VLVideoProcessor(),  # required; never used (no video)
                chat_template=checkpoint.chat_template(self.processor_id))
        except Exception as exc:  # no such folder or id, not BLIP3-o's layout, ...
            raise GeneratorConfigError(
                f"unified.pretrained: cannot load a BLIP3-o checkpoint from {self.pretrained!r} "
                f"(processor {self.processor_id!r}): {describe_error(exc)}") from exc
        self._assemble(raw.get("n_query"))

    def _assemble(self, n_query: int | None) -> None:
        """Check the loaded parts (tokenizer, lm, dit, queries, unet, vae) and put them on the device."""
        self.image_start = self.tokenizer.convert_tokens_to_ids(IMAGE_START)
        if not isinstance(self.image_start, int) or self.image_start == self.tokenizer.unk_token_id:
            raise GeneratorConfigError(f"unified.pretrained: the tokenizer of {self.pretrained!r} lacks {IMAGE_START}")
        for module in (self.lm, self.dit, self.unet, self.vae):
            module.to(self._device).eval()
        self.queries = self.queries.to(self._device)
        self.n_query = int(n_query or self.queries.shape[1])
        self.vae_scale = 2 ** (len(self.vae.config.block_out_channels) - 1)

    def _resolve_dtype(self, choice: str) -> str:
        """``self.dtypes`` set per part; the name's dtype: the one dtype, or every part's where they differ."""
        self.dtypes = part_dtypes(choice, self._device.type, super()._resolve_dtype(choice))
        if len(set(self.dtypes.values())) == 1:
            return self.dtypes["lm"]
        return ",".join(f"{part}:{self.dtypes[part]}" for part in PARTS)

    # -- describing ------------------------------------------------------------

    def decode_texts(self, rows: Any) -> list[str]:
        """``batch_decode(rows, skip_special_tokens=True)`` as under transformers 4.51.3 (their pin),
        which cleans the spaces before punctuation where the config asks (Qwen2Tokenizer's default: off)."""
        texts = self.tokenizer.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [authors_text(t, self.tokenizer.init_kwargs, default=False) for t in texts]

    def describe(self, images: Sequence[Image.Image], prompt: str, gen_kwargs: dict[str, Any]) -> list[DescribeResult]:
        """One description (or failure) per image, with the task's decoding settings."""
        settings, until = hf_decoding(gen_kwargs or {}, self.temperature, self.max_new_tokens)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

        def call(chunk: list[Image.Image]) -> list[str]:
            self.tokenizer.padding_side = "left"  # generation appends on the right
            inputs = self.processor(text=[text] * len(chunk), images=[qwen_resize(image) for image in chunk],
                                    padding=True, return_tensors="pt").to(self._device)
            inputs["pixel_values"] = inputs["pixel_values"].to(self.lm.dtype)
            with self._torch.inference_mode():
                out = self.lm.generate(**inputs, **settings)
            new = out[:, inputs["input_ids"].shape[1]:]
            return [cut(t, until) for t in self.decode_texts(new)]

        return self._isolated(call, images, "describe")

    # -- drawing ---------------------------------------------------------------

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GenerationResult]:
        """One image (or failure) per prompt; each depends on its own prompt and seed only, so a
        chunk of ``batch_size`` prompts drawn together gives each the image it gets alone."""
        return self._isolated(self._draw_chunk, self._seeded(prompts, seeds), "generate")

    def query_states(self, texts: Sequence[str]) -> Any:
        """The language model's last states at the queries, ``(len(texts), n_query, d)``, for
        already-templated texts in one forward (generate_image's ``hidden_states[-1]``).

        Each row is its text's ids, ``[IMG]`` and the learnt queries, padded on the right: under
        the causal mask a position never sees the padding after it, and the default positions
        ``0..n-1`` (on all three M-RoPE axes) are each row's own, so a row's states are the ones
        it has alone."""
        torch = self._torch
        rows = [ids + [self.image_start] for ids in self.tokenizer(list(texts)).input_ids]
        embed = self.lm.get_input_embeddings()
        queries = self.queries.to(embed.weight.dtype)
        longest = max(len(r) for r in rows) + queries.shape[1]
        embeds = torch.zeros(len(rows), longest, queries.shape[-1], dtype=queries.dtype, device=self._device)
        mask = torch.zeros(len(rows), longest, dtype=torch.long, device=self._device)
        for i, ids in enumerate(rows):
            n = len(ids) + queries.shape[1]
            embeds[i, :n] = torch.cat([embed(torch.tensor(ids, dtype=torch.long, device=self._device)), queries[0]])
            mask[i, :n] = 1
        states = self.lm.model.language_model(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
        ends = mask.sum(dim=1).tolist()
        rows = torch.stack([states[i, end - self.n_query:end] for i, end in enumerate(ends)])
        return rows.to(getattr(torch, self.dtypes["dit"]))  # the DiT's dtype (float16 beside a bfloat16 LM on CUDA)

    def features(self, text: str, generator) -> Any:
        """CLIP features ``(1, 64, channels)`` for one already-templated text (generate_image)."""
        from .dit import sample_features

        return sample_features(self.dit, self.query_states([text]), [generator], self.dit_steps, self.dit_guidance)

    def _draw_chunk(self, chunk: list[tuple[str, int]]) -> list[GenerationResult]:
        # a lone prompt takes the authors' call order, one call per text (the parity tests follow it)
        return [self._draw(*chunk[0])] if len(chunk) == 1 else self._draw_batch(chunk)

    def _draw(self, prompt: str, seed: int) -> GenerationResult:
        torch = self._torch
        generator = torch.Generator().manual_seed(seed)
        with torch.inference_mode():
            cond = self.features(QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format(prompt)), generator)
            # the pipeline guides only above 1 (do_classifier_free_guidance = guidance_scale > 1.0):
            # at or below it " " is never encoded, so its DiT noise is never drawn
            null = self.features(NEGATIVE_PROMPT, generator) if self.decoder_guidance > 1 else None
            return self.latents_to_images(self.decode_features(cond, null, generator))[0]

    def _draw_batch(self, chunk: list[tuple[str, int]]) -> list[GenerationResult]:
        """:meth:`_draw` for several prompts at once: one language-model forward (" " once), one
        DiT sampling over every prompt's (and " "'s) rows, one decoder loop; each prompt's generator
        draws its prompt's DiT noise, then " "'s, then the decoder's, as :meth:`_draw` does."""
        from .dit import sample_features

        torch = self._torch
        generators = [torch.Generator().manual_seed(seed) for _, seed in chunk]
        guided = self.decoder_guidance > 1  # as in _draw: " " only where the decoder guides
        texts = [QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format(prompt)) for prompt, _ in chunk]
        n = len(chunk)
        with torch.inference_mode():
            states = self.query_states(texts + [NEGATIVE_PROMPT] * guided)
            if guided:  # the prompts' rows first: each generator's first draw is its prompt's noise
                states = torch.cat([states[:n], states[n:].expand(n, -1, -1)])
            features = sample_features(self.dit, states, generators * (1 + guided), self.dit_steps, self.dit_guidance)
            null = features[n:] if guided else None
            return self.latents_to_images(self.decode_features(features[:n], null, generators))

    def latents_to_images(self, latents) -> list[GenerationResult]:
        """The VAE's pixels for decoder ``latents``, one checked image per row."""
        # decode_latents' order and dtype (the decoder's: in bfloat16 another order rounds otherwise)
        pixels = self.vae.decode(1 / self.vae.config.scaling_factor * latents).sample
        pixels = (pixels / 2 + 0.5).clamp(0, 1)
        arrays = (pixels.permute(0, 2, 3, 1).cpu().float().numpy() * 255).round().astype("uint8")
        return [check_image(Image.fromarray(array), False) for array in arrays]

    def decode_features(self, cond, null, generator) -> Any:
        """The decoder's latents for features ``cond`` against ``null`` (pipeline_llava_gen.py's loop);
        ``null`` None: no guidance (the pipeline's ``guidance_scale <= 1``: the conditional
        branch alone, whatever the scale). ``generator``: the starting noise's, one per row of
        ``cond`` (a lone generator for one row); rows are independent, so a batch gives each row
        its single-row latents."""
        torch = self._torch
        generators = [generator] if isinstance(generator, torch.Generator) else list(generator)
        scheduler = self.decoder_scheduler.__class__.from_config(self.decoder_scheduler.config)
        size = self.image_size
        branches = 1 if null is None else 2
        embeds = (cond if null is None else torch.cat([cond, null])).to(self.unet.dtype)  # conditional rows first, as theirs
        # SDXL's micro-conditioning: original size (their fixed 1024 x 1024), crop (0, 0), target size
        time_ids = torch.tensor([[1024, 1024, 0, 0, size, size]] * embeds.shape[0], dtype=torch.long,
                                device=self._device)
        added = {"time_ids": time_ids, "text_embeds": embeds.mean(dim=1)}
        scheduler.set_timesteps(self.decoder_steps, device=self._device)
        shape = (1, self.unet.config.in_channels, size // self.vae_scale, size // self.vae_scale)
        latents = torch.cat([torch.randn(shape, generator=g, dtype=torch.float32) for g in generators])
        latents = latents.to(self._device, self.unet.dtype) * scheduler.init_noise_sigma
        for t in scheduler.timesteps:
            model_in = scheduler.scale_model_input(torch.cat([latents] * branches), t)
            noise = self.unet(model_in, t, encoder_hidden_states=embeds, added_cond_kwargs=added).sample
            if null is not None:
                cond_noise, null_noise = noise.chunk(2)
                noise = null_noise + self.decoder_guidance * (cond_noise - null_noise)
            latents = scheduler.step(noise, t, latents).prev_sample
        return latents


def qwen_resize(image: Image.Image) -> Image.Image:
    """qwen_vl_utils.fetch_image's preprocessing: RGB (alpha on white), then both sides rounded to
    multiples of 28 with the pixel count kept within its bounds, resized bicubically (PIL's default)."""
    if image.mode == "RGBA":
        rgb = Image.new("RGB", image.size, (255, 255, 255))
        rgb.paste(image, mask=image.split()[3])
        image = rgb
    image = image.convert("RGB")
    width, height = image.size
    h = max(QWEN_FACTOR, round(height / QWEN_FACTOR) * QWEN_FACTOR)
    w = max(QWEN_FACTOR, round(width / QWEN_FACTOR) * QWEN_FACTOR)
    if h * w > QWEN_MAX_PIXELS:
        beta = math.sqrt(height * width / QWEN_MAX_PIXELS)
        h, w = (math.floor(height / beta / QWEN_FACTOR) * QWEN_FACTOR, math.floor(width / beta / QWEN_FACTOR) * QWEN_FACTOR)
    elif h * w < QWEN_MIN_PIXELS:
        beta = math.sqrt(QWEN_MIN_PIXELS / (height * width))
        h, w = (math.ceil(height * beta / QWEN_FACTOR) * QWEN_FACTOR, math.ceil(width * beta / QWEN_FACTOR) * QWEN_FACTOR)
    return image.resize((w, h), Image.Resampling.BICUBIC)
