"""Scorers of stored chains: records in, a report out (GenCeption, MCD, MGG)."""

from importlib import import_module

__all__ = ["SCORERS", "scorer_named"]

#: each scorer by its ``name`` (what a :class:`~.records.MetricItem` carries), imported on first use
SCORERS = {"genception": ".genception:GENCEPTION", "mcd": ".mcd:MCD", "mgg": ".mgg:MGG"}


def scorer_named(name: str):
    """The scorer called ``name``, or None for a name not in :data:`SCORERS`."""
    if name not in SCORERS:
        return None
    module, _, attribute = SCORERS[name].partition(":")
    return getattr(import_module(module, __name__), attribute)
