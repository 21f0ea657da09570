"""BAGEL's language model: Qwen2 with a second set of weights for image tokens (Mixture of
Transformers), run on several packed sequences at once, each against its own key/value cache.

Every layer holds Qwen2's attention projections, QK RMS norms, MLP and the two layer norms twice:
the plain ones (understanding: text and ViT tokens, and the text markers around a latent image)
and the ``*_moe_gen`` ones (generation: the latent image's tokens). Both sets share one attention
over the whole sequence. The building blocks are transformers' Qwen2 ones (RMSNorm, MLP, rotary
embedding); the state-dict keys are the published ``language_model.*`` ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence
from transformers.models.qwen2.modeling_qwen2 import (
    Qwen2MLP,
    Qwen2RMSNorm,
    Qwen2RotaryEmbedding,
    apply_rotary_pos_emb,
)

__all__ = ["KVCache", "MoTLanguageModel"]

@dataclass
class KVCache:
    """Several sequences' keys and values side by side (one sequence: one row).

    ``layers``: one (keys, values) pair per layer, each [rows, slots, kv heads, head dim]; rows of
    different lengths are padded, and ``valid`` ([rows, slots], None where every slot is a row's
    own token) says which slots hold a row's tokens. Rotary positions are applied before caching,
    so a row's tokens need not be contiguous: a padding slot is only ever masked out.
    """

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    valid: torch.Tensor | None = None

    @property
    def slots(self) -> int:
        return self.layers[0][0].shape[1]

    def select(self, rows: list[int]) -> KVCache:
        """The cache of ``rows`` only (finished sequences dropped)."""
        index = torch.tensor(rows, device=self.layers[0][0].device)
        layers = [(k.index_select(0, index), v.index_select(0, index)) for k, v in self.layers]
        return KVCache(layers, None if self.valid is None else self.valid.index_select(0, index))


class _Layout:
    """How one pass's new tokens (packed: [tokens, ...], row after row, ``lengths`` each) meet
    their rows' caches in attention. A new token sees its own row's cached tokens and its row's new
    ones (all of them, or up to itself when causal).

    Decoding steps of several rows (one new token each) run as one padded batch: the cache's rows
    padded to the longest, padding masked. Longer passes (prefills, flow steps) run attention row by row on each
    row's own tokens, in exactly the shapes and call a row gets alone, so each row's attention is
    the one it gets alone and no padded [tokens x tokens] scores are spent.
    """

    def __init__(self, lengths: list[int], cache: KVCache | None, causal: bool, device: torch.device,
                 keep: bool) -> None:
        rows, self.width, self.keep = len(lengths), max(lengths), keep
        slots = 0 if cache is None else cache.slots
        self.rows, self.padded = rows, self.width == 1 and rows > 1
        old = None if cache is None else cache.valid
        if self.padded:
            lengths_t = torch.tensor(lengths, device=device)
            new_valid = torch.arange(self.width, device=device) < lengths_t[:, None]  # [rows, width]
            self.index = new_valid.flatten().nonzero().squeeze(1)  # each packed token's padded place
            old = torch.ones(rows, slots, dtype=torch.bool, device=device) if old is None else old
            self.valid = torch.cat([old, new_valid], dim=1)  # [rows, slots + width]
            mask = self.valid[:, None, :].expand(rows, self.width, slots + self.width)
            if causal:
                mask = mask & torch.ones(self.width, slots + self.width, dtype=torch.bool, device=device).tril(slots)
            # a padding query sees everything (its output is dropped): no row is fully masked, no NaN
            self.mask = (mask | ~new_valid[:, :, None])[:, None]
            return
        # row by row: each row's cached slots (a prefix, or scattered after padded decoding steps)
        counts = [slots] * rows if old is None else old.sum(1).tolist()
        prefix = [True] * rows if old is None else \
            (old == (torch.arange(slots, device=device) < old.sum(1, keepdim=True))).all(1).tolist()
        self.cached: list[Any] = [slice(0, n) if p else old[r].nonzero().squeeze(1)
                                  for r, (n, p) in enumerate(zip(counts, prefix))]
        self.starts = [0, *torch.tensor(lengths).cumsum(0).tolist()]
        # one new token sees every key: no mask, causal or not
        self.masks = [torch.ones(n, c + n, dtype=torch.bool, device=device).tril(c) if causal and n > 1 else None
                      for n, c in zip(lengths, counts)]
        totals = torch.tensor([c + n for c, n in zip(counts, lengths)], device=device)
        self.valid = None if rows == 1 else torch.arange(int(totals.max()), device=device) < totals[:, None]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: Any) -> tuple[torch.Tensor, Any]:
        """Attention output ([tokens, heads * dim]) and the extended cache layer (None unless kept)."""
        if self.padded:
            q, k, v = self._pad(q), self._pad(k), self._pad(v)
            if past is not None:
                k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
            out = _attend(q, k, v, self.mask)
            return out.reshape(self.rows * self.width, -1)[self.index], (k, v)
        outs, keys, values = [], [], []
        for r, mask in enumerate(self.masks):
            s, e = self.starts[r], self.starts[r + 1]
            k_r, v_r = k[s:e], v[s:e]
            if past is not None:
                k_r, v_r = torch.cat([past[0][r, self.cached[r]], k_r]), torch.cat([past[1][r, self.cached[r]], v_r])
            outs.append(_attend(q[s:e].unsqueeze(0), k_r.unsqueeze(0), v_r.unsqueeze(0), mask)[0])
            keys.append(k_r)
            values.append(v_r)
        out = torch.cat(outs).reshape(q.shape[0], -1)
        if not self.keep:
            return out, None
        if self.rows == 1:
            return out, (keys[0].unsqueeze(0), values[0].unsqueeze(0))
        return out, (pad_sequence(keys, batch_first=True), pad_sequence(values, batch_first=True))

    def _pad(self, x: torch.Tensor) -> torch.Tensor:
        """[tokens, ...] to [rows, width, ...]."""
        out = x.new_zeros(self.rows * self.width, *x.shape[1:])
        out[self.index] = x
        return out.view(self.rows, self.width, *x.shape[1:])


class _Attention(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        d, heads, kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
        self.heads, self.kv_heads, self.head_dim = heads, kv, d // heads
        eps = config.rms_norm_eps
        for suffix in ("", "_moe_gen"):  # the published names: q_proj, q_proj_moe_gen, ...
            setattr(self, f"q_proj{suffix}", nn.Linear(d, heads * self.head_dim, bias=True))
            setattr(self, f"k_proj{suffix}", nn.Linear(d, kv * self.head_dim, bias=True))
            setattr(self, f"v_proj{suffix}", nn.Linear(d, kv * self.head_dim, bias=True))
            setattr(self, f"o_proj{suffix}", nn.Linear(heads * self.head_dim, d, bias=False))
            setattr(self, f"q_norm{suffix}", Qwen2RMSNorm(self.head_dim, eps=eps))
            setattr(self, f"k_norm{suffix}", Qwen2RMSNorm(self.head_dim, eps=eps))

    def _project(self, x: torch.Tensor, suffix: str) -> tuple[torch.Tensor, ...]:
        q = getattr(self, f"q_proj{suffix}")(x).view(-1, self.heads, self.head_dim)
        k = getattr(self, f"k_proj{suffix}")(x).view(-1, self.kv_heads, self.head_dim)
        v = getattr(self, f"v_proj{suffix}")(x).view(-1, self.kv_heads, self.head_dim)
        return getattr(self, f"q_norm{suffix}")(q), getattr(self, f"k_norm{suffix}")(k), v

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], past: Any, gen: torch.Tensor | None,
                layout: _Layout) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        if gen is None:
            q, k, v = self._project(x, "")
        else:  # text markers through the understanding weights, latent tokens through the generation ones
            q = x.new_empty(x.shape[0], self.heads, self.head_dim)
            k = x.new_empty(x.shape[0], self.kv_heads, self.head_dim)
            v = torch.empty_like(k)
            und = ~gen
            q[und], k[und], v[und] = self._project(x[und], "")
            q[gen], k[gen], v[gen] = self._project(x[gen], "_moe_gen")
        cos, sin = rope
        q, k = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
        out, kv = layout.attend(q, k, v, past)
        if gen is None:
            return self.o_proj(out), kv
        y = x.new_empty(x.shape[0], self.o_proj.out_features)
        y[~gen], y[gen] = self.o_proj(out[~gen]), self.o_proj_moe_gen(out[gen])
        return y, kv


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax attention of [rows, new, heads, dim] queries over [rows, cache + new, kv heads, dim]
    keys and values under ``mask`` (causal is bottom-right aligned, as flash-attn's varlen call)."""
    if k.shape[2] != q.shape[2]:  # grouped-query attention: kv head j serves query heads j*g .. j*g+g-1
        groups = q.shape[2] // k.shape[2]
        k, v = k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return out.transpose(1, 2)


class _Layer(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        d, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = _Attention(config)
        self.mlp, self.mlp_moe_gen = Qwen2MLP(config), Qwen2MLP(config)
        self.input_layernorm = Qwen2RMSNorm(d, eps=eps)
        self.input_layernorm_moe_gen = Qwen2RMSNorm(d, eps=eps)
        self.post_attention_layernorm = Qwen2RMSNorm(d, eps=eps)
        self.post_attention_layernorm_moe_gen = Qwen2RMSNorm(d, eps=eps)

    def forward(self, x: torch.Tensor, rope: Any, past: Any, gen: torch.Tensor | None, layout: _Layout) -> tuple:
        h, kv = self.self_attn(_split(x, gen, self.input_layernorm, self.input_layernorm_moe_gen), rope, past, gen,
                               layout)
        x = x + h
        h = _split(x, gen, self.post_attention_layernorm, self.post_attention_layernorm_moe_gen)
        return x + _split(h, gen, self.mlp, self.mlp_moe_gen), kv


def _split(x: torch.Tensor, gen: torch.Tensor | None, und_fn: nn.Module, gen_fn: nn.Module) -> torch.Tensor:
    """``und_fn`` on the understanding tokens, ``gen_fn`` on the generation ones."""
    if gen is None:
        return und_fn(x)
    y = torch.empty_like(x)
    y[~gen], y[gen] = und_fn(x[~gen]), gen_fn(x[gen])
    return y


class _Model(nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(_Layer(config) for _ in range(config.num_hidden_layers))
        self.norm = Qwen2RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.norm_moe_gen = Qwen2RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen2RotaryEmbedding(config=config)


class MoTLanguageModel(nn.Module):
    """``language_model`` of the checkpoint: ``model.*`` and ``lm_head``."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.model = _Model(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(ids)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None, *,
                gen: torch.Tensor | None = None, causal: bool = True,
                lengths: list[int] | None = None, keep: bool = True) -> tuple[torch.Tensor, KVCache | None]:
        """Run ``x`` ([tokens, hidden]: the new tokens of every row, row after row) at rotary
        ``positions`` after ``cache``.

        Args:
            gen: bool per token, True for latent-image tokens (the generation expert); None when
                every token is an understanding one.
            causal: text is causal; an image's tokens (ViT or latent) attend to each other fully.
            lengths: new tokens per row (None: one row); the cache has as many rows.
            keep: False where the caller drops the extended cache (a flow step): None is returned.

        Returns the final-norm hidden states and the cache extended by these tokens. Linear layers
        run on the packed tokens; attention as :class:`_Layout` says.
        """
        lengths = [x.shape[0]] if lengths is None else lengths
        layout = _Layout(lengths, cache, causal, x.device, keep)
        cos, sin = self.model.rotary_emb(x, positions.unsqueeze(0))
        rope = (cos[0], sin[0])
        layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        for i, layer in enumerate(self.model.layers):
            x, kv = layer(x, rope, None if cache is None else cache.layers[i], gen, layout)
            layers.append(kv)
        hidden = _split(x, gen, self.model.norm, self.model.norm_moe_gen)
        return hidden, KVCache(layers, layout.valid) if keep else None
