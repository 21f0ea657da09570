"""AutoBench-V (paper 002): build a capability-targeted VQA benchmark with any
lmms-eval model as examiner and any generator backend, then evaluate on it
with the ``autobench`` tasks.

    lmms-genbench autobench build --capability spatial --examiner openai \\
        --examiner-args model_version=gpt-4o --generator diffusers ... --out ./ab
    AUTOBENCH_DATASET=./ab lmms-eval --model ... --tasks autobench
"""

from .balance import balanced_letters, move_answer
from .build import (
    BuildConfig,
    Builder,
    BuildError,
    BuildResult,
    default_build_cost,
    validation_outcome,
)
from .cache import CallCache
from .examiner import CachedExaminer, LmmsExaminer, build_examiner
from .graph import SemanticGraph

__all__ = [
    "BuildConfig", "BuildError", "BuildResult", "Builder", "CachedExaminer", "CallCache",
    "LmmsExaminer", "SemanticGraph", "balanced_letters", "build_examiner", "default_build_cost",
    "move_answer", "validation_outcome",
]
