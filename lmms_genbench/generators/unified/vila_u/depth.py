"""VILA-U's depth transformer and its sampler (the authors' ``rqtransformer``).

For each image position the language model's last hidden state starts a short causal sequence
over the residual depth: ``[in_mlp_2(h), in_mlp_1(e_1), in_mlp_1(e_1+e_2), ...] + pos_emb_d``,
where ``e_d`` are the embeddings of the codes drawn so far; a head of GPT blocks (pre-LayerNorm,
exact GELU, 4x MLP) and ``classifier_mlp`` give the logits of the next code. Read from the
authors' ``rqtransformer/modeling_rqtransformer.py`` and ``attention.py``; module names follow
their state-dict keys.

Sampling follows their ``sample_from_logits``: guided logits ``u + cfg * (c - u)``, divided by
the temperature, cut to the ``top_k`` best, softmax, cut to the smallest set whose mass reaches
``top_p``, renormalised, one draw. The draw is ``argmax(p / E)`` with ``E ~ Exp(1)``, which is
what ``torch.multinomial(p, 1)`` computes, with ``E`` taken from the prompt's own generator.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.key, self.query, self.value, self.proj = (nn.Linear(dim, dim) for _ in range(4))
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        d = c // self.heads

        def split(t_):
            return t_.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = q @ (k.transpose(-2, -1) * (1.0 / math.sqrt(d)))
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = _Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class DepthTransformer(nn.Module):
    """``rqtransformer`` of ``vision_tower/config.json``: ``block_size`` (h, w, depth),
    ``input_embed_dim_1`` (code embedding width), ``input_embed_dim_2`` (the LLM's width),
    ``embed_dim``, ``vocab_size`` (codes) and ``head`` (``n_layer``, ``block.n_head``)."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        dim = int(config["embed_dim"])
        self.depth = int(config["block_size"][2])
        self.in_mlp_1 = nn.Linear(int(config["input_embed_dim_1"]), dim)
        self.in_mlp_2 = nn.Linear(int(config["input_embed_dim_2"]), dim)
        self.head_transformer = nn.Module()
        heads = int(config["head"]["block"]["n_head"])
        self.head_transformer.blocks = nn.ModuleList(_Block(dim, heads) for _ in range(int(config["head"]["n_layer"])))
        self.pos_emb_d = nn.Parameter(torch.zeros(1, self.depth, dim))
        self.classifier_mlp = nn.Sequential(OrderedDict(
            [("layer_norm", nn.LayerNorm(dim)), ("linear", nn.Linear(dim, int(config["vocab_size"])))]))

    def next_logits(self, body: torch.Tensor, partial: torch.Tensor | None) -> torch.Tensor:
        """Logits (N, codes) of the next depth level.

        Args:
            body: the language model's hidden states (N, llm width), one per position.
            partial: cumulative code embeddings of the levels drawn so far (N, d, code width), or None.
        """
        seq = self.in_mlp_2(body).unsqueeze(1)
        if partial is not None:
            seq = torch.cat([seq, self.in_mlp_1(partial)], dim=1)
        x = seq + self.pos_emb_d[:, : seq.shape[1]]
        for block in self.head_transformer.blocks:
            x = block(x)
        return self.classifier_mlp(x[:, -1])


def filtered_probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """The authors' ``sample_from_logits`` up to the draw: probabilities (N, codes), float32."""
    logits = logits.to(torch.float32) / temperature
    if top_k is not None:
        kth = torch.topk(logits, top_k).values[:, [-1]]
        logits = logits.masked_fill(logits < kth, -float("inf"))
    logits = torch.nan_to_num(logits, nan=-float("inf"))
    probs = F.softmax(logits, dim=-1)
    if top_p is not None:
        ordered, order = torch.sort(probs, dim=-1, descending=True)
        drop = torch.cumsum(ordered, dim=-1) >= top_p
        drop[..., 1:] = drop[..., :-1].clone()  # keep the code that crosses top_p
        drop[..., 0] = False
        probs = probs.masked_fill(drop.scatter(-1, order, drop), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def draw(probs: torch.Tensor, generators: list[torch.Generator]) -> torch.Tensor:
    """One code per row: ``argmax(p / E)``, ``E ~ Exp(1)`` from row ``i``'s generator (on the CPU),
    as ``torch.multinomial(p, 1)`` draws with one row."""
    noise = torch.stack([torch.empty(probs.shape[-1]).exponential_(generator=g) for g in generators])
    return (probs / noise.to(probs.device)).argmax(dim=-1)
