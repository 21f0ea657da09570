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

:func:`dataset_failure` is the one line for a hub dataset that did not load
(offline, no token, no access, no such dataset or revision), read from the
exception chain by :func:`failure_kind`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.errors import NETWORK_ERRORS, ActionableError, error_chain, from_exception

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


#: another way to run a task family without its hub dataset, by task-name prefix
OTHERWISE = {
    "mmeception": "or run the mmeception_folder task on your own images (MMECEPTION_IMAGE_DIR=<folder>)",
    "sdp_": "or try the protocol offline with the sdp_smoke task",
    "chef_": "or try the recipe offline with its chef_*_smoke task",
}
#: kinds of dataset failure (:func:`failure_kind`) that no retry fixes
PERMANENT = frozenset({"offline", "no_token", "no_access", "not_found", "revision"})


def _is(error: BaseException, name: str) -> bool:
    # by class name: datasets and huggingface_hub move their errors between versions
    return any(cls.__name__ == name for cls in type(error).__mro__)


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def offline_mode() -> bool:
    """Whether ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` is set (as datasets reads them)."""
    try:
        import datasets.config

        if datasets.config.HF_HUB_OFFLINE:
            return True
    except (ImportError, AttributeError):
        pass
    try:
        from huggingface_hub import constants

        return bool(constants.is_offline_mode())
    except (ImportError, AttributeError):
        return False


def failure_kind(exc: BaseException, offline: bool | None = None) -> str:
    """Why a hub dataset did not load: ``revision``, ``no_access`` (gated, the token's
    account has no access), ``no_token`` (needs a token, none or an invalid one sent),
    ``not_found``, ``offline``, ``network`` or ``other``.

    ``datasets`` turns the hub's errors into ``DatasetNotFoundError`` or
    ``ConnectionError`` and often drops the original (``raise ... from None``), so its
    messages are read too."""
    chain = list(error_chain(exc))
    text = " ".join(str(error) for error in chain)
    if any(_is(e, "RevisionNotFoundError") for e in chain) or ("Revision '" in text and "doesn't exist" in text):
        return "revision"
    gated = [e for e in chain if _is(e, "GatedRepoError")]
    if any(_status(e) == 403 for e in gated) or "to ask for access" in text:
        return "no_access"
    if gated or "must be authenticated" in text or any(_is(e, "LocalTokenNotFoundError") for e in chain):
        return "no_token"
    if any(_is(e, "RepositoryNotFoundError") for e in chain) or "doesn't exist on the Hub" in text:
        return "not_found"
    if offline is None:
        offline = offline_mode()
    if offline or any(_is(e, "OfflineModeIsEnabled") for e in chain) or "OfflineModeIsEnabled" in text:
        return "offline"
    if any(_is(e, "LocalEntryNotFoundError") for e in chain):
        return "offline"  # asked for the cache only (local_files_only) and it has no copy
    if any(_is(e, name) for e in chain for name in NETWORK_ERRORS):
        return "network"
    return "other"


def dataset_failure(exc: BaseException, task: str | None, path: str, name: str | None = None,
                    revision: str | None = None, offline: bool | None = None) -> ActionableError:
    """The one line for ``task``'s dataset ``path`` (config ``name``, ``revision``) that did not load."""
    page = f"https://huggingface.co/datasets/{path}"
    details = ", ".join(part for part in (name and f"config {name}", revision and f"revision {revision}") if part)
    what = f"dataset {path}" + (f" ({details})" if details else "")
    who = f"task {task}" if task else "the task"
    otherwise = next((text for prefix, text in OTHERWISE.items() if (task or "").startswith(prefix)), "")
    otherwise = f"; {otherwise}" if otherwise else ""
    token = f"HF_TOKEN=<a Hugging Face token whose account accepted its terms on {page}>"
    kind = failure_kind(exc, offline)
    cause, fix = {
        "offline": ("this run is offline (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set) and the Hugging Face "
                    "cache has no copy of it",
                    f"run it once online so the cache holds it (a gated dataset also needs {token}), or point "
                    "HF_HOME or HF_DATASETS_CACHE at a cache that has it"),
        "network": ("the Hugging Face Hub could not be reached",
                    "check the network or proxy (HF_ENDPOINT for a mirror), or run offline (HF_HUB_OFFLINE=1) "
                    "from a cache that holds it"),
        "no_token": ("it is gated or needs a token, and no valid Hugging Face token was sent",
                     f"set {token} (or log in with `hf auth login`)"),
        "no_access": ("it is gated and your token's account has not been granted access",
                      f"accept the dataset's terms on {page} with the account of your token (HF_TOKEN), "
                      "wait for the grant and rerun"),
        "not_found": ("the Hub has no such dataset, or it is private and your token has no access",
                      f"check the task's dataset_path ({path}), or set HF_TOKEN=<a token with access> if it is "
                      "private or gated"),
        "revision": (f"the revision {revision or '(dataset_kwargs revision)'} does not exist",
                     f"set dataset_kwargs revision to a branch, tag or commit of {page}, or use a local copy"),
    }.get(kind, ("", f"check that it loads with datasets.load_dataset({path!r}"
                     + (f", {name!r}" if name else "") + "), or use a local copy"))
    return from_exception(exc, f"{who} could not load its {what}" + (f": {cause}" if cause else ""), fix + otherwise)
