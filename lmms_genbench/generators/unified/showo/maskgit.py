"""Show-o's text-to-image decoding: MaskGIT-style parallel unmasking of the image codes.

Our own loop, step for step the authors' ``Showo.t2i_generate`` (``models/modeling_showo.py``)
with ``mask_by_random_topk`` and the cosine schedule of ``models/sampling.py``. Every step:

1. one forward of the conditional rows and, under guidance, the unconditional ones (empty text,
   the same image part): logits = (1 + s) * cond - s * uncond over the codebook;
2. a code is drawn for every position from softmax(logits) (kept where already known);
3. the schedule says how many stay masked: floor(N * cos(pi/2 * (step+1)/steps)), at least one
   and fewer than are masked now;
4. the least confident draws are masked again: confidence = log p(drawn) + t * Gumbel noise, with
   known positions at the float maximum, and t shrinking by (1 - (step+1)/steps) each step
   (the authors multiply the previous step's t, so it compounds).

Randomness: the authors draw (2) with ``torch.multinomial`` and (4) with ``uniform_``, both from
one ``generator`` (torch's global one in inference_t2i.py, which passes none). Here each prompt
has its own CPU ``torch.Generator(seed)`` and its draws are made row by row on the CPU in the
authors' order and shapes, so an image depends only on its prompt and seed, and a prompt drawn
alone equals the authors' ``t2i_generate(..., generator=torch.Generator().manual_seed(seed))``
(= ``torch.manual_seed(seed)`` then their call without a generator) on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch


def cosine_schedule(ratio: float) -> torch.Tensor:
    """The fraction still masked after a step (``cosine_schedule``; float32 as the authors')."""
    return torch.cos(torch.tensor(ratio) * math.pi * 0.5)


def _gumbel(uniform: torch.Tensor) -> torch.Tensor:
    """-log(-log(u)), each log of a value clamped at 1e-20 as the authors' ``log``."""
    inner = -torch.log(uniform.clamp(min=1e-20))
    return -torch.log(inner.clamp(min=1e-20))


def unmask(
    forward: Callable[[torch.Tensor], torch.Tensor],
    cond: torch.Tensor,
    uncond_text: torch.Tensor | None,
    generators: Sequence[torch.Generator],
    *,
    num_codes: int,
    image_offset: int,
    codebook_size: int,
    mask_id: int,
    steps: int,
    guidance_scale: float,
    temperature: float,
) -> torch.Tensor:
    """The (B, num_codes) codes drawn for the conditional rows ``cond`` (B, L), whose last
    ``num_codes + 1`` tokens are the masked codes and ``<|eoi|>``.

    ``forward(rows)`` returns the (rows, num_codes, vocab) logits at the code positions of
    ``rows`` (cond, then uncond under guidance: the attention mask is the caller's); ``uncond_text`` (B, T) replaces the first T tokens of the
    unconditional rows (None: no guidance).
    """
    cond = cond.clone()
    rows, length = cond.shape
    codes = slice(length - num_codes - 1, length - 1)
    device = cond.device
    known = torch.full((rows, num_codes), mask_id, dtype=torch.long, device=device)
    sampled = known
    for step in range(steps):
        if uncond_text is not None:
            uncond = torch.cat([uncond_text, cond[:, uncond_text.shape[1]:]], dim=1)
            c, u = forward(torch.cat([cond, uncond])).chunk(2)
            logits = (1 + guidance_scale) * c - guidance_scale * u
        else:
            logits = forward(cond)
        logits = logits[..., image_offset : image_offset + codebook_size].float()
        probs = logits.softmax(dim=-1)
        cpu = probs.cpu()
        draws = [torch.multinomial(cpu[b], 1, generator=g)[:, 0] for b, g in enumerate(generators)]
        unknown = known == mask_id
        sampled = torch.where(unknown, torch.stack(draws).to(device), known)

        ratio = 1.0 * (step + 1) / steps
        selected = torch.gather(probs, -1, sampled[..., None]).squeeze(-1)
        selected = torch.where(unknown, selected, torch.finfo(selected.dtype).max)
        # float32 arithmetic as the authors' (the floor must land where theirs does)
        mask_len = (num_codes * cosine_schedule(ratio)).floor().unsqueeze(0).to(device)
        mask_len = torch.max(torch.tensor([1], device=device), torch.min(unknown.sum(-1, keepdim=True) - 1, mask_len))
        temperature = temperature * (1.0 - ratio)
        noise = torch.stack([torch.zeros(num_codes).uniform_(0, 1, generator=g) for g in generators]).to(device)
        confidence = torch.log(selected.clamp(min=1e-20)) + temperature * _gumbel(noise)
        cut_off = torch.gather(torch.sort(confidence, dim=-1).values, 1, mask_len.long())
        masking = confidence < cut_off
        cond[:, codes] = torch.where(masking, mask_id, sampled + image_offset)
        known = torch.where(masking, mask_id, sampled)
    return sampled.clamp(0, codebook_size - 1)
