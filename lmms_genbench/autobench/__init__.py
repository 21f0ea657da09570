"""AutoBench-V (paper 002): build a capability-targeted VQA benchmark with any
lmms-eval model as examiner and any generator backend, then evaluate on it
with the ``autobench`` tasks.

    lmms-genbench autobench build --capability spatial --examiner openai \\
        --examiner-args model_version=gpt-4o --generator diffusers ... --out ./ab
    AUTOBENCH_DATASET=./ab lmms-eval --model ... --tasks autobench
"""

from ..core.lazy import lazy_exports

_EXPORTS = {
    "balanced_letters": ".balance", "move_answer": ".balance",
    **{name: ".build" for name in ("BuildConfig", "Builder", "BuildError", "BuildResult",
                                   "default_build_cost", "validation_outcome")},
    "CallCache": ".cache",
    **{name: ".examiner" for name in ("CachedExaminer", "LmmsExaminer", "build_examiner")},
    "SemanticGraph": ".graph",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
