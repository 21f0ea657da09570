"""The authors' own per-sample inference calls for each unified system, on our modules (arm (a) of
``unified_throughput.py``): their script's order of calls, one sample at a time, nothing of our
engine (no batching, no store, no ``run_isolated``). Each function takes a built model and one
image (describe) or one prompt and seed (draw).

Which of their files each follows (the snapshots under /work/.mirror/<owner>+<name>):

* Show-o (showlab/Show-o): ``inference_mmu.py``: ``vq_model.get_code`` of one image, the
  ``<|mmu|> <|soi|> codes <|eoi|> <|sot|> USER: ... ASSISTANT:`` row, ``create_attention_mask_for_mmu``,
  then ``Showo.mmu_generate`` (``models/modeling_showo.py``): the WHOLE sequence forwarded again for
  every new token (no key-value cache), its mask grown by one row and column, ``top_k=1``
  (ported below). ``inference_t2i.py``: one prompt's ``t2i_generate`` MaskGIT loop (our
  ``draw_codes``, step for step theirs) then ``vq_model.decode_code`` and the uint8 conversion.
* Janus (deepseek-ai/Janus): ``inference.py``: ``prepare_inputs_embeds`` (the image's aligned
  SigLIP features in place of its ``<image_placeholder>`` tokens) then ``language_model.generate``
  (greedy, key-value cache); ``generation_inference.py``'s ``generate``: a conditional row and an
  unconditional one (pads between BOS and the begin-of-image tag), ``image_token_num_per_image``
  steps of ``language_model.model`` with ``past_key_values``, ``gen_head``, CFG on the row pair,
  ``softmax(logits / temperature)`` then ``multinomial``, ``prepare_gen_img_embeds`` of the
  token for both rows, then ``gen_vision_model.decode_code`` (``parallel_size=1``: one sample).
* VILA-U (mit-han-lab/vila-u): ``inference.py``: ``model.generate_content([image, prompt])`` (the
  image's projected tower features spliced into the prompt's embeddings, then the LLaMA's
  ``generate``) and ``model.generate_image_content(prompt, cfg, generation_nums=1)`` (our
  ``image_codes``, their loop step for step, then the RQ-VAE decoder).
* BLIP3-o (JiuhaiChen/BLIP3o): ``inference.py``'s understanding turn (Qwen2.5-VL's processor on
  one image, ``model.generate``) and its drawing: ``generate_image`` per prompt (the Qwen2.5-VL
  states of the prompt and the 64 queries, the DiT sampler, then the same for the negative
  prompt) and ``pipeline_llava_gen.py``'s diffusion decoder loop, then the VAE (our
  ``features`` / ``decode_features``, their order).
* BAGEL (ByteDance-Seed/Bagel): ``inferencer.py``'s ``interleave_inference`` for ``[image, prompt]``
  with ``understanding_output=True`` (``gen_text``) and for ``[prompt]`` (``gen_image``: the
  conditional, text-guidance and image-guidance contexts, the flow loop, the VAE): our
  ``describe_one`` / ``draw_one`` are those calls for one sample.
"""

from __future__ import annotations

from typing import Any

from PIL import Image


def _torch():
    import torch

    return torch


# -- Show-o --------------------------------------------------------------------------------------

def showo_describe(m: Any, image: Image.Image, prompt: str, max_new: int) -> str:
    torch = _torch()
    from lmms_genbench.generators.unified.showo.loading import image_tensor
    from lmms_genbench.generators.unified.showo.omni import mmu_mask

    device = m.lm.device
    with torch.inference_mode():
        pixels = image_tensor(image, m.image_size)[None].to(device)
        codes = m.vq.encode(pixels)[0].tolist()  # vq_model.get_code
        idx = torch.tensor([m.vocab.mmu_row(codes, prompt)], device=device)
        mask = mmu_mask(idx, m.vocab, m.lm.dtype)[0, 0]
        result = []
        for _ in range(max_new):  # Showo.mmu_generate: no cache, the whole sequence each token
            logits = m.lm(input_ids=idx, attention_mask=mask[None, None]).logits
            n = mask.shape[-1]
            low = torch.finfo(logits.dtype).min
            mask = torch.vstack([torch.hstack([mask, torch.full((n, 1), low, dtype=mask.dtype, device=device)]),
                                 torch.hstack([mask[-1], torch.zeros(1, dtype=mask.dtype, device=device)])[None]])
            last = logits[:, -1, :]
            v, _ = torch.topk(last, 1)  # top_k=1
            last = last.masked_fill(last < v[:, [-1]], -float("inf"))
            nxt = torch.multinomial(torch.softmax(last, dim=-1), num_samples=1)
            result.append(int(nxt[0, 0]))
            idx = torch.cat([idx, nxt], dim=1)
            if result[-1] == m.vocab.eos:
                break
    return m.decode_text(result)


def showo_draw(m: Any, prompt: str, seed: int) -> Image.Image:
    codes = m.draw_codes([prompt], [seed])  # t2i_generate for one prompt
    return m.to_images(m.decode_pixels(codes))[0]


# -- Janus (DeepSeek's layout) -------------------------------------------------------------------

def janus_describe(m: Any, image: Image.Image, prompt: str, max_new: int) -> str:
    torch = _torch()
    chat, model = m._chat, m.model
    device = model.device
    ids = torch.tensor([chat.understanding_ids(prompt)], device=device)
    pixels = torch.from_numpy(chat.pixels(image))[None].to(device, model.dtype)
    with torch.inference_mode():  # prepare_inputs_embeds
        embeds = model.get_input_embeddings()(ids)
        features = model.model.get_image_features(pixels)
        features = getattr(features, "pooler_output", features)
        at = (ids == chat.image_id)[..., None].expand_as(embeds)
        embeds = embeds.masked_scatter(at, features.to(embeds.dtype))
        out = model.generate(inputs_embeds=embeds, attention_mask=torch.ones_like(ids), generation_mode="text",
                             max_new_tokens=max_new, do_sample=False, eos_token_id=chat.eos_id,
                             pad_token_id=chat.eos_id, use_cache=True)
    return chat.decode(out[0].tolist())


def janus_draw(m: Any, prompt: str, seed: int) -> Image.Image:
    torch = _torch()
    chat, model = m._chat, m.model
    inner = model.model
    row = chat.generation_ids(prompt)
    tokens = torch.tensor([row, [row[0]] + [chat.pad_id] * (len(row) - 2) + [row[-1]]], device=model.device)
    generator = torch.Generator().manual_seed(seed)
    generated = []
    with torch.inference_mode():
        embeds, past = model.get_input_embeddings()(tokens), None
        for _ in range(m.image_tokens):
            out = inner.language_model(inputs_embeds=embeds, use_cache=True, past_key_values=past)
            past = out.past_key_values
            logits = inner.generation_head(out.last_hidden_state[:, -1, :])
            cond, uncond = logits[0::2], logits[1::2]
            logits = uncond + m.guidance_scale * (cond - uncond)
            probs = torch.softmax(logits / max(m.image_temperature, 1e-6), dim=-1)
            nxt = torch.multinomial(probs.float().cpu(), 1, generator=generator).to(model.device)
            generated.append(nxt)
            embeds = model.prepare_embeddings_for_image_generation(torch.cat([nxt, nxt]).view(-1)).unsqueeze(1)
        pixels = model.decode_image_tokens(torch.cat(generated, dim=1))
    array = ((pixels.float().cpu() + 1) / 2 * 255).clamp(0, 255).to(torch.uint8).numpy()[0]
    return Image.fromarray(array)


# -- VILA-U --------------------------------------------------------------------------------------

def vila_u_describe(m: Any, image: Image.Image, prompt: str, max_new: int) -> str:
    torch = _torch()
    with torch.inference_mode():  # generate_content([image, prompt])
        embeds = m.prompt_embeds([image], prompt)
        out = m.llm.generate(inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2], dtype=torch.long,
                                                                               device=embeds.device),
                             max_new_tokens=max_new, do_sample=False, temperature=None, top_p=None, top_k=None,
                             eos_token_id=m.eos_ids, pad_token_id=m.pad_id)
    return m.tokenizer.decode(out[0].tolist()).strip()


def vila_u_draw(m: Any, prompt: str, seed: int) -> Image.Image:
    torch = _torch()
    with torch.inference_mode():  # generate_image_content(prompt, cfg, generation_nums=1)
        pixels = m.decode_codes(m.image_codes([prompt], [seed]))
    return Image.fromarray(pixels.permute(0, 2, 3, 1).to(torch.uint8).cpu().numpy()[0])


# -- BLIP3-o -------------------------------------------------------------------------------------

def blip3o_describe(m: Any, image: Image.Image, prompt: str, max_new: int) -> str:
    torch = _torch()
    from lmms_genbench.generators.unified.blip3o.model import qwen_resize

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = m.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = m.processor(text=[text], images=[qwen_resize(image)], return_tensors="pt").to(m.lm.device)
    inputs["pixel_values"] = inputs["pixel_values"].to(m.lm.dtype)
    with torch.inference_mode():
        out = m.lm.generate(**inputs, max_new_tokens=max_new, do_sample=False)
    return m.decode_texts(out[:, inputs["input_ids"].shape[1]:])[0]


def blip3o_draw(m: Any, prompt: str, seed: int) -> Image.Image:
    torch = _torch()
    from lmms_genbench.generators.unified.blip3o.model import DRAW_INSTRUCTION, NEGATIVE_PROMPT, QWEN_CONVERSATION

    generator = torch.Generator().manual_seed(seed)
    with torch.inference_mode():  # generate_image: the prompt's features, then the negative prompt's
        cond = m.features(QWEN_CONVERSATION.format(DRAW_INSTRUCTION.format(prompt)), generator)
        null = m.features(NEGATIVE_PROMPT, generator) if m.decoder_guidance > 1 else None
        latents = m.decode_features(cond, null, generator)  # pipeline_llava_gen.py's loop
        # the pipeline's decode_latents: its order, in the decoder's dtype
        pixels = (m.vae.decode(1 / m.vae.config.scaling_factor * latents).sample / 2 + 0.5).clamp(0, 1)
    array = (pixels[0].permute(1, 2, 0).cpu().float().numpy() * 255).round()
    return Image.fromarray(array.astype("uint8"))


# -- BAGEL ---------------------------------------------------------------------------------------

def bagel_describe(m: Any, image: Image.Image, prompt: str, max_new: int) -> str:
    return m.describe_one(image, prompt, max_new, 0.0)


def bagel_draw(m: Any, prompt: str, seed: int) -> Image.Image:
    return m.draw_one(prompt, seed, m.image_size, m.image_size)[1]


#: system -> (describe one image, draw one prompt)
AUTHORS = {
    "showo": (showo_describe, showo_draw),
    "janus": (janus_describe, janus_draw),
    "vila_u": (vila_u_describe, vila_u_draw),
    "blip3o": (blip3o_describe, blip3o_draw),
    "bagel": (bagel_describe, bagel_draw),
}
