"""Reading finished runs: intervals, paired comparisons, rank stability, the HTML report."""

from ..core.lazy import lazy_exports

_EXPORTS = {
    **{name: ".runs" for name in ("Run", "RunError", "TaskRun", "load_run")},
    **{name: ".results" for name in ("ResultsError", "find_results", "label_from_config", "read_results")},
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
