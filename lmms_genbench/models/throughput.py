"""The cycle model's engine figures in lmms-eval's own throughput log.

lmms-eval collects what models pass to ``log_metrics`` and writes its summary into the
results file as ``"throughput"``: the host's three fields (summed seconds, tokens, tokens per
second) and, for every other figure, ``avg_<name>``, its mean over the calls. The report and
``benchmarks/cost.py`` turn those means into seconds per hop (:mod:`lmms_genbench.analysis.rates`).
"""

from __future__ import annotations

import logging
from numbers import Number
from typing import Any

logger = logging.getLogger(__name__)

# lmms-eval's space_tokenizer, the estimate its GenMetrics uses by default: words x 1.5
TOKENS_PER_WORD = 1.5


def log_engine_run(stats: Any) -> dict[str, Any] | None:
    """Log one engine run (one direction of one ``generate_until``) that computed a hop; a run
    served wholly from the store logs nothing, so its zeros do not read as a speed."""
    if not (stats.describe_items or stats.generate_items):
        return None
    # every number of the engine's RunStats (its one list of figures); the failures table stays out
    figures = {name: value for name, value in stats.to_dict().items()
               if isinstance(value, Number) and not isinstance(value, bool)}
    tokens = round(TOKENS_PER_WORD * stats.describe_words)
    seconds = stats.describe_seconds
    try:
        from lmms_eval.models.model_utils.gen_metrics import log_metrics

        log_metrics(total_elapsed_time=seconds, total_gen_tokens=tokens,
                    avg_speed=tokens / seconds if seconds > 0 else 0.0, additional_metrics=figures)
    except Exception as exc:  # a figure the host cannot take must not lose the chains computed
        logger.warning("lmms-eval's throughput log refused this run's figures (%s: %s); runs.jsonl keeps them",
                       type(exc).__name__, exc)
        return None
    return figures
