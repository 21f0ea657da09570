"""One config and split of a hub dataset, read from the first copy that loads.

A dataset whose repository is a loading script (``google/docci``,
``HuggingFaceM4/NoCaps``) cannot be loaded by ``datasets`` 4 and later, but the
hub keeps a Parquet export of it on the ``refs/convert/parquet`` revision, one
folder per config and split: ``<config>/<split>/0000.parquet`` (``partial-<split>``
when the converter stopped at its size limit). ``datasets`` only sees files
there, not configs: asked for a split without the config's files named, it
globs every config's split of that name into one table (DOCCI's ``test`` would
take in ``docci_aar``'s). So :class:`HubCopy` names the config's files for an
export and the config name for an ordinary repository, and :func:`load_table`
checks that the copy has the columns the caller reads before using it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: the revision holding the hub's Parquet export of a dataset
PARQUET_EXPORT = "refs/convert/parquet"


@dataclass(frozen=True)
class HubCopy:
    """A place one dataset can be read from: a hub repository, its config, a revision."""

    path: str
    config: str
    revision: str | None = None

    def load_kwargs(self, split: str) -> dict[str, Any]:
        """Keyword arguments of ``datasets.load_dataset(self.path, **kwargs)`` for ``split``."""
        if self.revision == PARQUET_EXPORT:
            # a pattern that matches nothing is skipped, so a full or a partial export loads
            files = [f"{self.config}/{split}/*.parquet", f"{self.config}/partial-{split}/*.parquet"]
            return {"revision": PARQUET_EXPORT, "data_files": {split: files}, "split": split}
        kwargs: dict[str, Any] = {"name": self.config, "split": split}
        if self.revision:
            kwargs["revision"] = self.revision
        return kwargs

    def __str__(self) -> str:
        return f"{self.path}@{self.revision or 'main'} (config {self.config})"


@dataclass(frozen=True)
class HubTable:
    """A split of a dataset, its copies in the order to try, and the columns read from it."""

    copies: tuple[HubCopy, ...]
    split: str
    columns: tuple[str, ...]


def load_table(table: HubTable, load: Callable[..., Any] | None = None) -> tuple[Any, HubCopy]:
    """The split from the first copy that loads and has ``table.columns``, and that copy.

    ``load`` is ``datasets.load_dataset`` unless given. Raises RuntimeError naming
    every copy tried and why it was passed over.
    """
    if load is None:
        import datasets

        load = datasets.load_dataset
    errors = []
    for copy in table.copies:
        try:
            loaded = load(copy.path, **copy.load_kwargs(table.split))
        except Exception as exc:  # noqa: BLE001 - any failure moves on to the next copy
            errors.append(f"{copy}: {type(exc).__name__}: {exc}")
            continue
        absent = [c for c in table.columns if c not in loaded.column_names]
        if absent:
            errors.append(f"{copy}: split {table.split!r} has no column {absent} (it has {loaded.column_names})")
            continue
        if errors:
            logger.warning("loaded %s after: %s", copy, "; ".join(errors))
        return loaded, copy
    raise RuntimeError(f"no copy of split {table.split!r} could be loaded: " + " | ".join(errors))
