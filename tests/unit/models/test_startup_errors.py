"""Failures before the first doc, through the real ``lmms-eval`` command: wrong
``--model cycle`` arguments, an openai generator without a key or with a wrong URL,
a ``--model t2i`` generator that does not load, an artifact store that cannot be
written, a hub dataset that cannot be loaded. Each ends with one line naming the cause
and the fix, exit status 1, no traceback and no results file (lmms-eval itself would
print the traceback and exit 0). Here the checks in-process; through the command:
tests/e2e/test_startup_errors_e2e.py."""

import errno
from pathlib import Path

import httpx
import pytest

from lmms_genbench.core.errors import ActionableError
from lmms_genbench.data.hub import dataset_failure, failure_kind

from tests.support.cycle_args import CYCLE_ARGS

# ----------------------------------------------------------------------- --model cycle arguments


@pytest.mark.parametrize("args, expected", CYCLE_ARGS, ids=[a for a, _ in CYCLE_ARGS])
def test_a_wrong_cycle_argument_is_refused_before_anything_loads(args, expected, tmp_path):
    from lmms_genbench.models.cycle import CycleModel

    key, _, value = args.partition("=")
    extra = {} if key == "preset" else {"preset": "smoke"}
    with pytest.raises(ActionableError) as info:
        CycleModel(artifacts=str(tmp_path), **extra, **{key: value})
    assert all(part in str(info.value) for part in expected), str(info.value)


def test_openai_without_a_key_stops_at_construction_and_a_404_names_the_url(monkeypatch):
    from lmms_genbench.generators import build_generator, config_failure
    from lmms_genbench.generators.openai_backend import MissingAPIKeyError, OpenAIConfigError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError) as info:
        build_generator("openai")
    assert str(config_failure(info.value, "openai")).endswith(
        "Fix: export OPENAI_API_KEY=<your API key>, or name the variable that holds it with "
        "generator.api_key_env=<VARIABLE>")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    gen = build_generator("openai", base_url="http://127.0.0.1:9/v1", max_retries=0,
                          transport=httpx.MockTransport(lambda request: httpx.Response(404, json={})))
    with pytest.raises(OpenAIConfigError) as info:
        gen.generate(["a cat"], [0])
    line = str(config_failure(info.value, "openai"))
    assert "HTTP 404" in line and "Fix: check generator.base_url" in line and "http://127.0.0.1:9/v1" in line


def test_write_or_explain_names_the_folder_and_keeps_a_finished_store_readable(tmp_path):
    from lmms_genbench.engine import ArtifactStore
    from lmms_genbench.models.cycle import _write_or_explain

    store = ArtifactStore(tmp_path / "art")
    manifest = store.root / "d" / "g" / "p" / "protocol.json"
    _write_or_explain(store.write_json, manifest, {"task": "t"})
    stamp = manifest.stat().st_mtime_ns
    _write_or_explain(store.write_json, manifest, {"task": "t"})  # exists: not written again
    assert manifest.stat().st_mtime_ns == stamp

    class Full(ArtifactStore):
        def write_json(self, path, payload):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))

        def append_jsonl(self, path, payload):
            raise OSError(errno.EROFS, "Read-only file system", str(path))

    full = Full(tmp_path / "full")
    with pytest.raises(ActionableError) as info:
        _write_or_explain(full.write_json, full.root / "p" / "protocol.json", {})
    assert str(info.value).startswith(f"lmms-genbench: error: the artifact store {full.root} cannot be written: "
                                      "the disk is full")
    assert "Fix: free disk space there, or pass --model_args artifacts=" in str(info.value)
    runs = full.root / "p" / "runs.jsonl"
    _write_or_explain(full.append_jsonl, runs, {"hops_computed": 0, "describe_items": 0, "generate_items": 0})
    with pytest.raises(ActionableError, match="read-only filesystem.*Fix: pass --model_args artifacts=<a writable"):
        _write_or_explain(full.append_jsonl, runs, {"hops_computed": 3, "describe_items": 1, "generate_items": 2})


# ----------------------------------------------------------------------- hub datasets
def _hub_error(cls, status, message="denied"):
    request = httpx.Request("GET", "https://huggingface.co/api/datasets/org/data")
    return cls(message, response=httpx.Response(status, request=request))


def test_failure_kind_reads_the_hub_errors_and_what_datasets_makes_of_them():
    from datasets.exceptions import DatasetNotFoundError
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalTokenNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from tenacity import RetryError

    def raised_from(outer, inner):
        try:
            try:
                raise inner
            except BaseException as exc:
                raise outer from exc
        except BaseException as exc:
            return exc

    assert failure_kind(_hub_error(GatedRepoError, 401), offline=False) == "no_token"
    assert failure_kind(_hub_error(GatedRepoError, 403), offline=False) == "no_access"
    assert failure_kind(raised_from(DatasetNotFoundError("Dataset 'org/data' is a gated dataset on the Hub. You must "
                                                         "be authenticated to access it."),
                                    _hub_error(GatedRepoError, 401)), offline=False) == "no_token"
    # datasets re-raises with ``from None``: its message is all that is left
    assert failure_kind(DatasetNotFoundError("Dataset 'org/data' is a gated dataset on the Hub. Visit the dataset "
                                             "page at https://huggingface.co/datasets/org/data to ask for access."),
                        offline=False) == "no_access"
    assert failure_kind(LocalTokenNotFoundError("Token is required (`token=True`), but no token found."),
                        offline=False) == "no_token"
    assert failure_kind(_hub_error(RepositoryNotFoundError, 404), offline=False) == "not_found"
    assert failure_kind(DatasetNotFoundError("Dataset 'org/data' doesn't exist on the Hub or cannot be accessed."),
                        offline=False) == "not_found"
    assert failure_kind(_hub_error(RevisionNotFoundError, 404), offline=False) == "revision"
    assert failure_kind(DatasetNotFoundError("Revision 'v9' doesn't exist for dataset 'org/data' on the Hub."),
                        offline=False) == "revision"
    offline = raised_from(ConnectionError("Couldn't reach 'org/data' on the Hub (OfflineModeIsEnabled)"),
                          OfflineModeIsEnabled("offline"))
    assert failure_kind(offline, offline=False) == "offline"
    assert failure_kind(ConnectionError("Couldn't reach 'org/data' on the Hub (ConnectError)"), offline=True) == "offline"
    assert failure_kind(ConnectionError("Couldn't reach 'org/data' on the Hub (ConnectError)"), offline=False) == "network"
    assert failure_kind(ValueError("BuilderConfig 'x' not found"), offline=False) == "other"

    class Attempt:  # tenacity's last attempt: what lmms-eval's retried download raises
        def exception(self):
            return _hub_error(GatedRepoError, 403)

    assert failure_kind(RetryError(Attempt()), offline=False) == "no_access"


def test_dataset_failure_names_the_dataset_the_cause_and_the_fix():
    from huggingface_hub.errors import GatedRepoError

    line = str(dataset_failure(_hub_error(GatedRepoError, 403), "chef_icl_mmbench", "lmms-lab-encoder/MMBench", "en",
                               offline=False))
    assert line.startswith("lmms-genbench: error: task chef_icl_mmbench could not load its dataset "
                           "lmms-lab-encoder/MMBench (config en): it is gated and your token's account has not been "
                           "granted access (GatedRepoError: denied). Fix: accept the dataset's terms on "
                           "https://huggingface.co/datasets/lmms-lab-encoder/MMBench"), line
    assert line.endswith("; or try the recipe offline with its chef_*_smoke task")
    line = str(dataset_failure(ConnectionError("Couldn't reach"), "mmeception", "lmms-lab-encoder/MME", offline=True))
    assert "this run is offline" in line and "HF_TOKEN=<a Hugging Face token whose account accepted its terms" in line
    assert line.endswith("or run the mmeception_folder task on your own images (MMECEPTION_IMAGE_DIR=<folder>)")


def test_the_hub_task_class_gives_up_at_once_offline(monkeypatch):
    import datasets
    from huggingface_hub.errors import OfflineModeIsEnabled

    from lmms_genbench.data.hub_task import HubDatasetTask

    calls = []

    def offline(*args, **kwargs):
        calls.append(args)
        raise ConnectionError("Couldn't reach 'org/data' on the Hub (OfflineModeIsEnabled)") from OfflineModeIsEnabled()

    monkeypatch.setattr(datasets, "load_dataset", offline)
    config = {"task": "sdp_x", "class": HubDatasetTask, "dataset_path": "org/data", "test_split": "test",
              "output_type": "generate_until", "doc_to_text": "x", "doc_to_target": "",
              "process_results": dict, "metric_list": [{"metric": "n", "aggregation": len, "higher_is_better": True}]}
    with pytest.raises(ActionableError, match=r"task sdp_x could not load its dataset org/data: this run is offline"):
        HubDatasetTask(config=config)
    assert len(calls) == 1  # not retried: nothing changes between attempts offline


TASKS = Path(__file__).resolve().parents[3] / "lmms_genbench" / "tasks"


def test_every_task_that_reads_a_hub_dataset_uses_the_hub_task_class():
    from lmms_eval.utils import load_yaml_config

    for path in sorted(TASKS.glob("*/*.yaml")):
        config = load_yaml_config(str(path), mode="simple")
        source = config.get("dataset_path") or ""
        if config.get("task") and source.count("/") == 1 and not (path.parent / source).exists():
            assert "lmms_genbench.data.hub_task.HubDatasetTask" in path.read_text(), path.name
