"""The Hugging Face Hub as a preflight sees it: whether a model id resolves at its revision
with the files a run reads, whether a dataset and its config are there for this token, and
whether the Hub answers at all, each in one short request through huggingface_hub (so
``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` count as they do for the run).

The first request the Hub does not answer stops the asking: every later id would wait for
its own timeout, and :func:`collapse` tells them all as one line naming the endpoint."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import describe
from ..data.hub import dataset_failure, failure_kind, offline_mode
from .problems import Problem

__all__ = ["TIMEOUT_S", "HubProbe", "collapse"]

#: seconds one Hub request may take (the Hub answers metadata in well under one)
TIMEOUT_S = 8.0


class HubProbe:
    """Asks the Hub about model ids and datasets; remembers whether it answered."""

    def __init__(self, timeout: float = TIMEOUT_S) -> None:
        from huggingface_hub import constants, get_token

        self.endpoint = str(constants.ENDPOINT).rstrip("/")
        self.offline = offline_mode()
        self.token = get_token()
        self.timeout = timeout
        self.unreachable: str | None = None  # the error of the request that got no answer
        self.asked = 0

    # ------------------------------------------------------------------ models
    def model(self, what: str, repo: str, revision: str | None, filename: str) -> Problem | None:
        """The problem with model ``repo`` at ``revision`` (``what``: as the user named it),
        which must hold ``filename``; None when it is there."""
        if self.offline:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(repo, filename, revision=revision)
            if isinstance(cached, str):
                return None
            return Problem(f"{what}: this run is offline (HF_HUB_OFFLINE) and the local Hugging Face cache has no "
                           f"{filename} of {repo}" + (f" at revision {revision}" if revision else ""),
                           "download it once online, or point HF_HOME at a cache that has it, or name a local folder",
                           hub=what)
        if self.unreachable:
            return Problem(f"{what}: not checked, the Hub did not answer", "", hub=what)
        from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

        try:
            self.asked += 1
            info = HfApi(endpoint=self.endpoint).model_info(repo, revision=revision, timeout=self.timeout,
                                                            token=self.token or False)
            files = {s.rfilename for s in (info.siblings or [])}
            if files and filename not in files:
                return Problem(f"{what}: {repo}" + (f"@{revision}" if revision else "") + f" has no {filename}, "
                               f"so it is not what this role loads (it has {', '.join(sorted(files)[:5])}...)",
                               f"name a repository that has {filename}, or a local folder with it")
            if getattr(info, "gated", False):  # the metadata is public; the files need the grant
                get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision), timeout=self.timeout,
                                     token=self.token or False)
        except Exception as exc:  # noqa: BLE001 - every Hub error is read by failure_kind
            return self._explain(exc, what, repo, revision, "model")
        return None

    # ---------------------------------------------------------------- datasets
    def dataset(self, task: str, repo: str, config: str | None, revision: str | None) -> Problem | None:
        """The problem with ``task``'s dataset ``repo`` (config, revision) for this token."""
        what = f"dataset {repo}" + (f" (config {config})" if config else "")
        if self.offline:
            if _dataset_cached(repo):
                return None
            from huggingface_hub.errors import OfflineModeIsEnabled

            line = dataset_failure(OfflineModeIsEnabled("no cached copy"), task, repo, config, revision, offline=True)
            return Problem(line.cause, line.fix, hub=what)
        if self.unreachable:
            return Problem(f"{what}: not checked, the Hub did not answer", "", hub=what)
        from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url

        try:
            self.asked += 1
            info = HfApi(endpoint=self.endpoint).dataset_info(repo, revision=revision, timeout=self.timeout,
                                                              token=self.token or False)
            files = sorted(s.rfilename for s in (info.siblings or []))
            # a gated dataset shows its metadata to anyone: asking for a file tells whether this token may read it
            data = [f for f in files if f.endswith((".parquet", ".json", ".jsonl", ".py"))]
            probe = (data or files or ["README.md"])[0]
            if getattr(info, "gated", False) or files:
                get_hf_file_metadata(hf_hub_url(repo, probe, repo_type="dataset", revision=revision),
                                     timeout=self.timeout, token=self.token or False)
            configs = _configs(info, files)
            if config and configs and config not in configs:
                return Problem(f"task {task} reads config {config!r} of dataset {repo}, which has "
                               f"{', '.join(sorted(configs))}", f"check the task's dataset_name ({config})")
        except Exception as exc:  # noqa: BLE001 - every Hub error is read by failure_kind
            if failure_kind(exc, False) == "other" and _is_missing_file(exc):
                return None  # the probe file itself: the repository answered, so it is there
            return self._explain(exc, what, repo, revision, "dataset", task=task, config=config)
        return None

    # ------------------------------------------------------------------ errors
    def _explain(self, exc: BaseException, what: str, repo: str, revision: str | None, kind: str, *,
                 task: str | None = None, config: str | None = None) -> Problem:
        reason = failure_kind(exc, False)
        if reason == "network":
            self.unreachable = describe(exc)
            return Problem(f"{what}: not checked, the Hub did not answer", "", hub=what)
        if kind == "dataset":
            line = dataset_failure(exc, task, repo, config, revision, offline=False)
            return Problem(line.cause, line.fix)
        page = f"{self.endpoint}/{repo}"
        cause, fix = {
            "revision": (f"revision {revision} of {repo} does not exist",
                         f"give a branch, tag or commit of {page} (or leave the revision out for main)"),
            "no_access": (f"{repo} is gated and your token's account has not been granted access",
                          f"accept its terms on {page} with the account of your token (HF_TOKEN)"),
            "no_token": (f"{repo} is gated or private and no valid Hugging Face token was sent",
                         f"set HF_TOKEN=<a token whose account accepted the terms on {page}> (or `hf auth login`)"),
            "not_found": (f"the Hub has no model {repo} (or it is private and your token has no access)",
                          ("check the id's spelling (org/name), or give a local folder, or set HF_TOKEN for a "
                           "private one")),
        }.get(reason, (f"{repo} could not be checked ({describe(exc)})",
                       "check the id and the network, or give a local folder"))
        return Problem(f"{what}: {cause}", fix)


def collapse(problems: Sequence[Problem], probe: HubProbe | None, smoke: bool = False) -> list[Problem]:
    """``problems`` with those that only say the Hub could not be asked told as one line that
    names the endpoint and the offline switch (a single offline miss keeps its own line).
    ``smoke``: the command has a preset already (the offline smoke run is not suggested)."""
    hub = [p for p in problems if p.hub]
    if probe is None or not hub or (probe.offline and len(hub) == 1):
        return list(problems)
    rest = [p for p in problems if not p.hub]
    needed = ", ".join(p.hub for p in hub)
    if probe.offline:
        line = Problem(
            f"this run is offline (HF_HUB_OFFLINE is set) and the local Hugging Face cache lacks what it reads from "
            f"the Hub ({probe.endpoint}): {needed}",
            f"unset HF_HUB_OFFLINE (and HF_DATASETS_OFFLINE) on a machine that reaches {probe.endpoint} to fetch "
            "them once, or point HF_HOME at a cache that holds them, or name local folders"
            + ("" if smoke else "; the offline smoke run needs none: --model_args preset=smoke --tasks mmeception_smoke")
            + "; a run whose store holds every hop needs no model from the Hub, and the check says so")
    else:
        line = Problem(
            f"the Hugging Face Hub at {probe.endpoint} cannot be reached ({probe.unreachable}); this run reads "
            f"{needed} from it",
            "check the network or proxy, or set HF_ENDPOINT=<a mirror>; or run from the local cache with "
            "HF_HUB_OFFLINE=1 (it must hold them)")
    return [line, *rest]


def _configs(info: Any, files: list[str]) -> set[str]:
    """The configs a dataset declares in its card, or the top folders of its Parquet layout."""
    card = getattr(info, "card_data", None) or getattr(info, "cardData", None) or {}
    try:
        declared = card.get("configs") if hasattr(card, "get") else getattr(card, "configs", None)
    except Exception:  # noqa: BLE001 - a card that does not read declares nothing
        declared = None
    names = {str(c.get("config_name")) for c in declared or [] if isinstance(c, dict) and c.get("config_name")}
    return names


def _is_missing_file(exc: BaseException) -> bool:
    return any(cls.__name__ in ("EntryNotFoundError", "RemoteEntryNotFoundError") for cls in type(exc).__mro__)


def _dataset_cached(repo: str) -> bool:
    """Whether the Hub cache or datasets' own cache holds any copy of ``repo``."""
    from huggingface_hub import constants

    org, _, name = repo.partition("/")
    hub = Path(constants.HF_HUB_CACHE) / f"datasets--{org}--{name}"
    try:
        import datasets.config

        datasets_cache = str(datasets.config.HF_DATASETS_CACHE)
    except (ImportError, AttributeError):
        datasets_cache = os.path.join(constants.HF_HOME, "datasets")
    return hub.is_dir() or (Path(datasets_cache) / f"{org}___{name}").is_dir()
