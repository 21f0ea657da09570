"""VILA-U's image generation loop (the authors' ``generate_image_content`` and the sampling loop
their patched transformers runs: ``train/transformers_replace/{generation/utils.py,
models/llama/modeling_llama.py}``).

Rows are ``[conditional prompts..., unconditional prompts...]``, left-padded. Each step the
LLaMA's last hidden state of every row goes to the depth transformer; the guided logits give
one code per level for the prompt, the same codes serve both of its rows, and the projected sum
of their embeddings is the next input of both rows. ``image_tokens`` steps make one image.

Their loop also samples a language-model token after each position (``lm_head`` over the
projected image embedding) that nothing reads unless it happens to be ``</s>`` or ``<im_start>``
(then their loop would stop or feed that token; with trained weights this does not happen). We
skip that token but draw its noise, so each prompt's generator advances as theirs does.
"""

from __future__ import annotations

import torch

from .depth import draw, filtered_probs
from .inputs import conversation, token_ids


def _left_padded(rows: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, width - len(row):] = torch.tensor(row)
        mask[i, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def position_codes(model, hidden: torch.Tensor, generators: list[torch.Generator]) -> torch.Tensor:
    """The residual codes (n, depth) of one position from the hidden states (2n, width)."""
    n = len(generators)
    depth, quantizer = model.depth, model.tower.quantizer
    top_k = min(model.image_top_k, depth.classifier_mlp.linear.out_features)
    drawn: list[torch.Tensor] = []
    partial = None
    for _ in range(depth.depth):
        logits = depth.next_logits(hidden, partial)
        guided = logits[n:] + model.guidance_scale * (logits[:n] - logits[n:])
        if model.image_temperature == 0:
            code = guided.float().argmax(dim=-1)
        else:
            code = draw(filtered_probs(guided, model.image_temperature, top_k, model.image_top_p), generators)
        drawn.append(code)
        both = torch.stack(drawn, dim=-1).repeat(2, 1)
        partial = quantizer.embed(both).cumsum(dim=-2)
    return torch.stack(drawn, dim=-1)


def draw_codes(model, prompts: list[str], seeds: list[int]) -> torch.Tensor:
    """Codes (n, image_tokens, depth), one image per prompt and seed."""
    n, device = len(prompts), model._device
    rows = [token_ids(conversation(p, image_generation=True), model.tokenizer) for p in prompts]
    rows += [token_ids(conversation(" ", image_generation=True), model.tokenizer)] * n
    ids, mask = _left_padded(rows, model.pad_id, device)
    positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]
    lm_vocab = model.llm.get_output_embeddings().out_features
    out = model.llm.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
    codes = []
    for step in range(model.image_tokens):
        code = position_codes(model, out.last_hidden_state[:, -1], generators)
        codes.append(code)
        for g in generators:  # the noise of the token their loop samples over 2 rows and discards
            torch.empty(2 * lm_vocab).exponential_(generator=g)
        if step == model.image_tokens - 1:
            break
        summed = model.tower.quantizer.embed(code.repeat(2, 1)).cumsum(dim=-2)[:, -1]
        embeds = model.projector(summed).unsqueeze(1)
        mask = torch.cat([mask, mask.new_ones((2 * n, 1))], dim=1)
        positions = positions[:, -1:] + 1
        out = model.llm.model(inputs_embeds=embeds, attention_mask=mask, position_ids=positions,
                              cache=out.cache, use_cache=True)
    return torch.stack(codes, dim=1)
