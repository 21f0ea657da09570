"""Helpers shared by our lmms-eval model types for reading ``--model_args``."""

from __future__ import annotations

from typing import Any

from .args import ArgumentError, as_int

# Settings that change where or how fast a model runs but not what it outputs;
# they stay out of artifact keys so moving a run to another GPU reuses its work.
# The second group is vLLM's (lmms-eval's vllm class passes them to vllm.LLM):
# memory, parallelism and scheduling of the machine a run happens to use.
OPERATIONAL_ARGS = frozenset(
    {"device", "device_map", "batch_size", "max_batch_size", "attn_implementation", "num_workers"}
    | {"gpu_memory_utilization", "tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size",
       "max_num_seqs", "max_num_batched_tokens", "swap_space", "cpu_offload_gb", "kv_cache_memory_bytes",
       "enforce_eager", "disable_log_stats"}
)


_SECRET_WORDS = ("key", "token", "secret", "password")


def identity_args(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments that decide a model's output: no operational settings and
    no credentials (a key must never reach a folder name, a file or a log)."""
    return {
        k: v
        for k, v in sorted(args.items())
        if k not in OPERATIONAL_ARGS and not any(word in k.lower() for word in _SECRET_WORDS)
    }


def public_args(args: dict[str, Any]) -> dict[str, Any]:
    """``args`` as given, credentials left out: what a store may write down."""
    return {k: v for k, v in sorted(args.items()) if not any(word in k.lower() for word in _SECRET_WORDS)}


def split_prefixed(kwargs: dict[str, Any], prefixes: tuple[str, ...]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Split ``{"describer.pretrained": x, "foo": y}`` into per-prefix dicts and the rest."""
    grouped: dict[str, dict[str, Any]] = {p: {} for p in prefixes}
    rest: dict[str, Any] = {}
    for key, value in kwargs.items():
        head, dot, tail = key.partition(".")
        if dot and head in grouped and tail:
            grouped[head][tail] = value
        else:
            rest[key] = value
    return grouped, rest


def optional_int(name: str, value: Any) -> int | None:
    """``value`` as an int, None when unset; :func:`.args.as_int`'s rules (no bool, no 3.7)."""
    try:
        return as_int(name, value, optional=True)
    except ArgumentError:
        raise ValueError(f"model_args {name} must be an integer, got {value!r}") from None
