"""Reading finished runs: intervals, paired comparisons, rank stability, the HTML report."""

from .runs import Run, RunError, TaskRun, find_results, load_run

__all__ = ["Run", "RunError", "TaskRun", "find_results", "load_run"]
