"""BAGEL's language model: Qwen2 with a second set of weights for image tokens (Mixture of
Transformers), run one packed sequence at a time against a key/value cache.

Every layer holds Qwen2's attention projections, QK RMS norms, MLP and the two layer norms twice:
the plain ones (understanding: text and ViT tokens, and the text markers around a latent image)
and the ``*_moe_gen`` ones (generation: the latent image's tokens). Both sets share one attention
over the whole sequence. The building blocks are transformers' Qwen2 ones (RMSNorm, MLP, rotary
embedding); the state-dict keys are the published ``language_model.*`` ones.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP, Qwen2RMSNorm, Qwen2RotaryEmbedding, apply_rotary_pos_emb

__all__ = ["KVCache", "MoTLanguageModel"]

#: one (keys, values) pair per layer, each [tokens, kv heads, head dim]; None before the first update
KVCache = list


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
                causal: bool) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
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
        if past is not None:
            k, v = torch.cat([past[0], k]), torch.cat([past[1], v])
        out = _attend(q, k, v, causal).reshape(x.shape[0], -1)
        if gen is None:
            return self.o_proj(out), (k, v)
        y = x.new_empty(x.shape[0], self.o_proj.out_features)
        y[~gen], y[gen] = self.o_proj(out[~gen]), self.o_proj_moe_gen(out[gen])
        return y, (k, v)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Softmax attention of the new tokens over cache + new; causal is bottom-right aligned (a new
    token sees the whole cache and the new tokens up to itself), as flash-attn's varlen call."""
    lq, lk = q.shape[0], k.shape[0]
    if k.shape[1] != q.shape[1]:  # grouped-query attention: kv head j serves query heads j*g .. j*g+g-1
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq) if causal else None
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
    return out.transpose(0, 1)


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

    def forward(self, x: torch.Tensor, rope: Any, past: Any, gen: torch.Tensor | None, causal: bool) -> tuple:
        h, kv = self.self_attn(_split(x, gen, self.input_layernorm, self.input_layernorm_moe_gen), rope, past, gen,
                               causal)
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
                gen: torch.Tensor | None = None, causal: bool = True) -> tuple[torch.Tensor, KVCache]:
        """Run ``x`` ([tokens, hidden]) at rotary ``positions`` after ``cache``.

        Args:
            gen: bool per token, True for latent-image tokens (the generation expert); None when
                every token is an understanding one.
            causal: text is causal; an image's tokens (ViT or latent) attend to each other fully.

        Returns the final-norm hidden states and the cache extended by these tokens (the caller
        keeps or drops it).
        """
        cos, sin = self.model.rotary_emb(x, positions.unsqueeze(0))
        rope = (cos[0], sin[0])
        extended: KVCache = []
        for i, layer in enumerate(self.model.layers):
            x, kv = layer(x, rope, None if cache is None else cache[i], gen, causal)
            extended.append(kv)
        return _split(x, gen, self.model.norm, self.model.norm_moe_gen), extended
