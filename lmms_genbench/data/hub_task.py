"""The lmms-eval task class of our tasks that read a hub dataset: a dataset that
does not load stops the run with one line naming the dataset, the cause and the fix.

lmms-eval 0.7.3 loads a task's dataset in ``ConfigurableTask.download``, retried 5
times (tenacity) whatever the error; its command then prints the ``RetryError``'s
traceback and exits 0. A task YAML may name its own class (``class: !function
lmms_genbench.data.hub_task.HubDatasetTask``); this one's :meth:`~HubDatasetTask.download` gives up at once
on what no retry fixes (offline, no token, no access, no such dataset or revision)
and raises :class:`~lmms_genbench.core.errors.ActionableError`
(:func:`lmms_genbench.data.hub.dataset_failure`).
"""

from __future__ import annotations

from typing import Any

from lmms_eval.api.task import ConfigurableTask

from .hub import PERMANENT, dataset_failure, failure_kind, offline_mode

__all__ = ["HubDatasetTask"]


class HubDatasetTask(ConfigurableTask):
    """``ConfigurableTask`` whose dataset failures end the run with one line."""

    def __init__(self, data_dir=None, cache_dir=None, download_mode=None, config=None, model_name=None) -> None:
        # lmms-eval hands the class its own YAML, ``class`` key included, which TaskConfig rejects
        config = {key: value for key, value in (config or {}).items() if key != "class"}
        super().__init__(data_dir, cache_dir, download_mode, config, model_name)

    def download(self, dataset_kwargs=None) -> None:
        parent = ConfigurableTask.download
        retry_with = getattr(parent, "retry_with", None)  # tenacity's: same stop and wait
        if retry_with is not None:
            from tenacity import retry_if_exception

            offline = offline_mode()
            parent = retry_with(retry=retry_if_exception(lambda e: not offline and failure_kind(e, False) not in PERMANENT),
                                reraise=True)
        try:
            parent(self, dataset_kwargs)
        except Exception as exc:
            kwargs: dict[str, Any] = dataset_kwargs if isinstance(dataset_kwargs, dict) else {}
            raise dataset_failure(exc, self.config.task, str(self.DATASET_PATH), self.DATASET_NAME,
                                  kwargs.get("revision")) from exc
