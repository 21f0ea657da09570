"""BAGEL's network and its two inference paths, for several sequences at once (the authors'
``InterleaveInferencer`` takes one sample per call; each row here gets what it gets alone).

A context is the language model's key/value cache plus two counters: its length and the next
rotary position. Text enters as ``<|im_start|> ids <|im_end|>`` (causal, one position per token);
an image enters between ``<|vision_start|>`` and ``<|vision_end|>`` with every one of its tokens at
the same single position (full attention among them), after which the position advances by one.
A :class:`Batch` holds several contexts as rows of one padded cache; every pass runs all rows'
new tokens packed through the linear layers, and attention per row (:class:`.language._Layout`).

* describing: ViT image, then the prompt, then greedy decoding from ``<|im_start|>``, one pass
  per step for every unfinished row;
* drawing: the prompt, then rectified-flow sampling of the latent tokens, each step one pass of
  ``[<|vision_start|>, latents, <|vision_end|>]`` per row and context against the cache (not
  kept), with text guidance against an empty context and image guidance, then FLUX's decoder.

Sources: the authors' ``modeling/bagel/bagel.py`` (``prepare_*``, ``forward_cache_update_*``,
``generate_text``, ``generate_image``, ``_forward_flow``) and ``inferencer.py``, read at
oscarqjh/Bagel 751db47 (ByteDance-Seed/Bagel 056b5fd has the same inference code).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .checkpoint import AUTHORS
from .language import KVCache, MoTLanguageModel
from .vision import (
    Connector,
    NaViT,
    SinCosTable,
    TimestepEmbedder,
    grid_positions,
    patchify,
    resize_for,
    to_rgb,
    to_tensor,
)

__all__ = ["BagelNetwork", "Batch", "Context", "FlowSettings", "SpecialIds"]


@dataclass(frozen=True)
class SpecialIds:
    """The four tokens the authors' ``add_special_tokens`` looks up (Qwen2.5 has them all)."""

    bos: int  # <|im_start|>
    eos: int  # <|im_end|>
    start_of_image: int  # <|vision_start|>
    end_of_image: int  # <|vision_end|>


@dataclass
class Context:
    """One sequence's context (its cache has one row)."""

    cache: KVCache | None = None
    length: int = 0
    position: int = 0


@dataclass
class Batch:
    """Several contexts as the rows of one cache (None while every row is empty)."""

    cache: KVCache | None = None
    lengths: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @classmethod
    def empty(cls, rows: int) -> Batch:
        return cls(None, [0] * rows, [0] * rows)

    @classmethod
    def of(cls, contexts: Sequence[Context]) -> Batch:
        return cls.join([cls(c.cache, [c.length], [c.position]) for c in contexts])

    @classmethod
    def join(cls, batches: Sequence[Batch]) -> Batch:
        """The rows of ``batches`` in order, their caches padded to the longest."""
        if len(batches) == 1:
            return batches[0]
        lengths = [n for b in batches for n in b.lengths]
        positions = [p for b in batches for p in b.positions]
        caches = [b for b in batches if b.cache is not None]
        if not caches:
            return cls(None, lengths, positions)
        slots = max(b.cache.slots for b in caches)
        like, device = caches[0].cache.layers, caches[0].cache.layers[0][0].device
        valid = torch.zeros(len(lengths), slots, dtype=torch.bool, device=device)
        layers = [(k.new_zeros(len(lengths), slots, *k.shape[2:]), v.new_zeros(len(lengths), slots, *v.shape[2:]))
                  for k, v in like]
        row = 0
        for b in batches:
            if b.cache is not None:
                n = b.cache.slots
                valid[row:row + b.rows, :n] = True if b.cache.valid is None else b.cache.valid
                for (k, v), (k_b, v_b) in zip(layers, b.cache.layers):
                    k[row:row + b.rows, :n], v[row:row + b.rows, :n] = k_b, v_b
            row += b.rows
        return cls(KVCache(layers, valid), lengths, positions)

    def row(self, i: int) -> Context:
        """Row ``i`` alone, its padding dropped."""
        cache = self.cache
        if cache is not None and (self.rows > 1 or cache.valid is not None):
            keep = slice(None) if cache.valid is None else cache.valid[i]
            cache = KVCache([(k[i:i + 1, keep], v[i:i + 1, keep]) for k, v in cache.layers])
        return Context(cache, self.lengths[i], self.positions[i])


@dataclass(frozen=True)
class FlowSettings:
    """The sampler's settings; defaults are the authors' text-to-image ones (inference.ipynb)."""

    text_scale: float = 4.0
    image_scale: float = 1.0
    interval: tuple[float, float] = (0.4, 1.0)
    timestep_shift: float = 3.0
    steps: int = 50
    renorm_min: float = 0.0
    renorm_type: str = "global"


@dataclass
class _Rows:
    """Where each drawn row's latent tokens sit in one flow pass's packed sequence."""

    sizes: list[int]  # latent tokens per row
    ids: torch.Tensor  # the two image markers
    latent: torch.Tensor  # the latents' places in the packed [start, latents, end] rows
    start: torch.Tensor  # the <|vision_start|> markers' places
    end: torch.Tensor  # the <|vision_end|> markers' places
    gen: torch.Tensor  # which tokens take the generation expert: the latents, not the markers
    pos_embed: torch.Tensor  # the latents' sin-cos positions, packed


class BagelNetwork(nn.Module):
    """The modules of ``ema.safetensors`` under their published names."""

    def __init__(self, llm_config: Any, vit_config: Any, latent_channels: int, downsample: int) -> None:
        super().__init__()
        hidden = llm_config.hidden_size
        self.patch = AUTHORS["latent_patch_size"]
        self.latent_channels = latent_channels
        self.latent_downsample = downsample * self.patch
        self.language_model = MoTLanguageModel(llm_config)
        self.vit_model = NaViT(vit_config)
        self.vit_patch = vit_config.patch_size
        self.connector = Connector(vit_config.hidden_size, hidden, AUTHORS["connector_act"])
        self.vit_pos_embed = SinCosTable(AUTHORS["vit_max_num_patch_per_side"], hidden)
        latent_dim = self.patch * self.patch * latent_channels
        self.time_embedder = TimestepEmbedder(hidden)
        self.vae2llm = nn.Linear(latent_dim, hidden)
        self.llm2vae = nn.Linear(hidden, latent_dim)
        self.latent_pos_embed = SinCosTable(AUTHORS["max_latent_size"], hidden)

    @property
    def device(self) -> torch.device:
        return self.llm2vae.weight.device

    # -- context ---------------------------------------------------------------

    def _extend(self, batch: Batch, x: torch.Tensor, lengths: list[int], positions: list[torch.Tensor], causal: bool,
                advance: list[int]) -> Batch:
        _, cache = self.language_model(x, torch.cat(positions).to(self.device), batch.cache, causal=causal,
                                       lengths=lengths)
        return Batch(cache, [n + m for n, m in zip(batch.lengths, lengths)],
                     [p + a for p, a in zip(batch.positions, advance)])

    def add_text(self, ctx: Context, ids: list[int], special: SpecialIds) -> Context:
        return self.add_texts(Batch.of([ctx]), [ids], special).row(0)

    def add_texts(self, batch: Batch, texts: Sequence[list[int]], special: SpecialIds) -> Batch:
        """Each row's text (token ids) after its context, in one pass."""
        tokens = [[special.bos, *ids, special.eos] for ids in texts]
        x = self.language_model.embed(torch.tensor([t for row in tokens for t in row], device=self.device))
        lengths = [len(row) for row in tokens]
        positions = [torch.arange(p, p + n) for p, n in zip(batch.positions, lengths)]
        return self._extend(batch, x, lengths, positions, True, lengths)

    def add_image(self, ctx: Context, image: Any, special: SpecialIds) -> Context:
        return self.add_images(Batch.of([ctx]), [image], special).row(0)

    def add_images(self, batch: Batch, images: Sequence[Any], special: SpecialIds) -> Batch:
        """An image for understanding per row, in one pass: the VAE transform's resize first (the
        inferencer resizes every input image so), then the ViT transform, then ViT features in the
        image markers."""
        patches, grids = [], []
        for image in images:
            size, smallest, stride = AUTHORS["vae_transform"]
            image = resize_for(to_rgb(image), size, smallest, stride)
            size, smallest, stride = AUTHORS["vit_transform"]
            pixels = to_tensor(resize_for(image, size, smallest, stride))
            rows, cols = pixels.shape[1] // self.vit_patch, pixels.shape[2] // self.vit_patch
            grids.append(grid_positions(rows, cols, AUTHORS["vit_max_num_patch_per_side"]).to(self.device))
            patches.append(patchify(pixels, self.vit_patch).to(self.device, self.llm2vae.weight.dtype))
        markers = self.language_model.embed(torch.tensor([special.start_of_image, special.end_of_image],
                                                         device=self.device))
        pieces = []
        for features, grid in zip(self.vit_model.forward_many(patches, grids), grids):
            features = self.connector(features) + self.vit_pos_embed(grid)
            pieces += [markers[:1], features.to(markers.dtype), markers[1:]]
        lengths = [len(grid) + 2 for grid in grids]
        positions = [torch.full((n,), p) for p, n in zip(batch.positions, lengths)]
        return self._extend(batch, torch.cat(pieces), lengths, positions, False, [1] * len(lengths))

    # -- describing ------------------------------------------------------------

    def generate_text(self, ctx: Context, special: SpecialIds, max_length: int,
                      pick: Callable[[torch.Tensor], int], on_logits: Callable[[torch.Tensor], None] | None = None,
                      ) -> list[int]:
        """The authors' ``generate_text`` for one sequence: from ``<|im_start|>``, at most ``max_length``
        passes; the token that ends the loop (``<|im_end|>`` or the one of the last pass) is not kept."""
        seen = None if on_logits is None else (lambda _, logits: on_logits(logits))
        return self.generate_texts(Batch.of([ctx]), special, [max_length], lambda rows: [pick(r) for r in rows],
                                   seen)[0]

    def generate_texts(self, batch: Batch, special: SpecialIds, max_lengths: Sequence[int],
                       pick: Callable[[torch.Tensor], list[int]],
                       on_logits: Callable[[int, torch.Tensor], None] | None = None) -> list[list[int]]:
        """:meth:`generate_text` for every row at once: one pass per step over the unfinished rows
        (``pick``: [rows, vocab] logits to one token each; ``on_logits(row, logits)``); a row that
        ends (``<|im_end|>`` or its ``max_lengths``) leaves the batch."""
        out: list[list[int]] = [[] for _ in range(batch.rows)]
        tokens, positions = [special.bos] * batch.rows, list(batch.positions)
        active, cache = [i for i in range(batch.rows) if max_lengths[i] > 0], batch.cache
        if len(active) < batch.rows and cache is not None:
            cache = cache.select(active)
        step = 0
        while active:
            if step:
                for i in active:
                    out[i].append(tokens[i])
            x = self.language_model.embed(torch.tensor([tokens[i] for i in active], device=self.device))
            where = torch.tensor([positions[i] for i in active], device=self.device)
            hidden, cache = self.language_model(x, where, cache, causal=True, lengths=[1] * len(active))
            logits = self.language_model.lm_head(hidden)
            if on_logits is not None:
                for j, i in enumerate(active):
                    on_logits(i, logits[j])
            keep = []
            for j, (i, token) in enumerate(zip(active, pick(logits))):
                tokens[i], positions[i] = token, positions[i] + 1
                if token != special.eos and step + 1 < max_lengths[i]:
                    keep.append(j)
            step += 1
            if len(keep) < len(active):
                active = [active[j] for j in keep]
                cache = cache.select(keep) if active else cache
        return out

    # -- drawing ---------------------------------------------------------------

    def draw(self, contexts: dict[str, Context], height: int, width: int, noise: torch.Tensor,
             settings: FlowSettings, special: SpecialIds) -> torch.Tensor:
        """Latent tokens ([h * w, p * p * C]) of one ``height`` x ``width`` image from ``noise``.

        ``contexts``: ``cond`` (the prompt), ``text`` (text guidance's: without the prompt) and
        ``image`` (image guidance's); the timesteps are the authors' shifted linear schedule.
        """
        cond = Batch.of([contexts["cond"]])
        image = cond if contexts["image"] is contexts["cond"] else Batch.of([contexts["image"]])
        batches = {"cond": cond, "text": Batch.of([contexts["text"]]), "image": image}
        return self.draw_many(batches, [(height, width)], [noise], settings, special)[0]

    def draw_many(self, contexts: dict[str, Batch], sizes: Sequence[tuple[int, int]], noises: Sequence[torch.Tensor],
                  settings: FlowSettings, special: SpecialIds) -> list[torch.Tensor]:
        """:meth:`draw` for every row at once (``sizes``: (height, width) per row): each flow step is
        one pass over every row's latents against each context the step needs; ``contexts["image"]``
        may be ``contexts["cond"]`` itself (text-to-image), and is then not run twice."""
        rows = self._rows(sizes, special)
        x = torch.cat([n.to(self.device, torch.float32) for n in noises])
        t = torch.linspace(1, 0, settings.steps, device=self.device)
        t = settings.timestep_shift * t / (1 + (settings.timestep_shift - 1) * t)
        own_image = settings.image_scale > 1.0 and contexts["image"] is not contexts["cond"]
        guidance = Batch.join([contexts["cond"], contexts["text"]] + ([contexts["image"]] if own_image else []))
        for i in range(settings.steps - 1):
            guided = settings.interval[0] < t[i] <= settings.interval[1]
            text_scale, image_scale = (settings.text_scale, settings.image_scale) if guided else (1.0, 1.0)
            if text_scale <= 1.0:
                v = self._flow_pass(x, t[i], rows, contexts["cond"], 1)
            else:
                passes = self._flow_pass(x, t[i], rows, guidance, 3 if own_image else 2).chunk(3 if own_image else 2)
                v_image = None if image_scale <= 1.0 else passes[2] if own_image else passes[0]
                v = _guide(passes[0], passes[1], v_image, rows.sizes, settings, text_scale, image_scale)
            x = x - v.to(x.dtype) * (t[i] - t[i + 1])  # the velocity points from data to noise
        return list(x.split(rows.sizes))

    def _rows(self, sizes: Sequence[tuple[int, int]], special: SpecialIds) -> _Rows:
        grids = [(h // self.latent_downsample, w // self.latent_downsample) for h, w in sizes]
        counts = [h * w for h, w in grids]
        starts = torch.tensor([0] + counts[:-1]).cumsum(0) + 2 * torch.arange(len(counts))
        latent = torch.cat([torch.arange(s + 1, s + 1 + n) for s, n in zip(starts.tolist(), counts)])
        end = starts + torch.tensor(counts) + 1
        gen = torch.zeros(sum(counts) + 2 * len(counts), dtype=torch.bool)
        gen[latent] = True
        pos = torch.cat([grid_positions(h, w, AUTHORS["max_latent_size"]) for h, w in grids]).to(self.device)
        ids = torch.tensor([special.start_of_image, special.end_of_image], device=self.device)
        return _Rows(counts, ids, latent.to(self.device), starts.to(self.device), end.to(self.device), gen.to(self.device),
                     self.latent_pos_embed(pos))

    def _flow_pass(self, x_t: torch.Tensor, t: torch.Tensor, rows: _Rows, batch: Batch, copies: int) -> torch.Tensor:
        """The velocities of every row's latents ``x_t`` against ``copies`` contexts per row (the
        first ``copies * len(rows.sizes)`` rows of ``batch``, context after context), stacked."""
        markers = self.language_model.embed(rows.ids)
        latents = self.vae2llm(x_t.to(markers.dtype)) + self.time_embedder(t.repeat(x_t.shape[0])) + rows.pos_embed
        seq = markers.new_empty(rows.gen.shape[0], markers.shape[1])
        seq[rows.latent], seq[rows.start], seq[rows.end] = latents.to(markers.dtype), markers[0], markers[1]
        lengths = [n + 2 for n in rows.sizes] * copies
        positions = torch.cat([torch.full((n,), p) for n, p in zip(lengths, batch.positions)]).to(self.device)
        hidden, _ = self.language_model(seq.repeat(copies, 1), positions, batch.cache, gen=rows.gen.repeat(copies),
                                        causal=False, lengths=lengths, keep=False)
        return self.llm2vae(hidden.view(copies, -1, hidden.shape[-1])[:, rows.latent].flatten(0, 1))

    def unpatchify(self, tokens: torch.Tensor, height: int, width: int) -> torch.Tensor:
        """Latent tokens to a [1, C, H/8, W/8] latent map (the inferencer's ``decode_image``)."""
        h, w, p, c = height // self.latent_downsample, width // self.latent_downsample, self.patch, self.latent_channels
        x = tokens.reshape(1, h, w, p, p, c)
        return torch.einsum("nhwpqc->nchpwq", x).reshape(1, c, h * p, w * p)


def _guide(v: torch.Tensor, v_text: torch.Tensor, v_image: torch.Tensor | None, sizes: list[int], s: FlowSettings,
           text_scale: float, image_scale: float) -> torch.Tensor:
    """``_forward_flow``'s guided velocity per row: text guidance, then image guidance, renormed."""
    guided_text = v_text + text_scale * (v - v_text)
    if s.renorm_type == "text_channel":
        scale = (v.norm(dim=-1, keepdim=True) / (guided_text.norm(dim=-1, keepdim=True) + 1e-8))
        guided_text = guided_text * scale.clamp(min=s.renorm_min, max=1.0)
        return guided_text if v_image is None else v_image + image_scale * (guided_text - v_image)
    out = guided_text if v_image is None else v_image + image_scale * (guided_text - v_image)
    if s.renorm_type == "global":  # one norm per image (the authors: batch size 1 only), row by row
        return torch.cat([o * (r.norm() / (o.norm() + 1e-8)).clamp(min=s.renorm_min, max=1.0)
                          for r, o in zip(v.split(sizes), out.split(sizes))])
    # "channel"
    scale = v.norm(dim=-1, keepdim=True) / (out.norm(dim=-1, keepdim=True) + 1e-8)
    return out * scale.clamp(min=s.renorm_min, max=1.0)
