"""Failures before the first doc, through the real ``lmms-eval`` command: wrong
``--model cycle`` arguments, an openai generator without a key or with a wrong URL,
a ``--model t2i`` generator that does not load, an artifact store that cannot be
written, a hub dataset that cannot be loaded. Each ends with one line naming the cause
and the fix, exit status 1, no traceback and no results file (lmms-eval itself would
print the traceback and exit 0)."""

import errno
import glob
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from lmms_genbench.core.errors import ActionableError
from lmms_genbench.data.hub import dataset_failure, failure_kind

from tests.support.lmms_eval_runs import BIN, results_file, run


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _lmms_eval(tmp_path, *args, **env):
    return run([str(BIN / "lmms-eval"), *args, "--output_path", str(tmp_path / "out")], tmp_path, timeout=600, **env)


def _one_line(proc, tmp_path) -> str:
    """The run's last line, after the checks every case shares."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = _last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error:") and "Fix:" in last, last
    assert not glob.glob(str(tmp_path / "out" / "**" / "*_results.json"), recursive=True)
    return last


# ----------------------------------------------------------------------- --model cycle arguments
CYCLE_ARGS = [
    ("foo=1", ["unknown model_args foo=1", "allowed: describer, generator, unified, preset", "describer.foo=..."]),
    ("describer_batch=abc", ["describer_batch must be an integer >= 1, got 'abc'", "Fix: give describer_batch="]),
    ("stop_after_hop=x", ["stop_after_hop must be an integer >= 0, got 'x'", "Fix: give stop_after_hop="]),
    ("preset=nope", ["preset must be one of ['smoke', 'smoke_unified'], got 'nope'", "Fix: give preset=smoke or"]),
]


@pytest.mark.parametrize("args, expected", CYCLE_ARGS, ids=[a for a, _ in CYCLE_ARGS])
def test_a_wrong_cycle_argument_is_refused_before_anything_loads(args, expected, tmp_path):
    from lmms_genbench.models.cycle import CycleModel

    key, _, value = args.partition("=")
    extra = {} if key == "preset" else {"preset": "smoke"}
    with pytest.raises(ActionableError) as info:
        CycleModel(artifacts=str(tmp_path), **extra, **{key: value})
    assert all(part in str(info.value) for part in expected), str(info.value)


@pytest.mark.integration
@pytest.mark.parametrize("args, expected", CYCLE_ARGS, ids=[a for a, _ in CYCLE_ARGS])
def test_lmms_eval_with_a_wrong_cycle_argument_says_which_one(args, expected, tmp_path):
    preset = "" if args.startswith("preset=") else "preset=smoke,"
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"{preset}{args},artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "1")
    last = _one_line(proc, tmp_path)
    assert last.startswith("lmms-genbench: error: --model cycle: model_args ") or "unknown model_args" in last
    assert all(part in last for part in expected), last
    assert not (tmp_path / "art").exists()


# ----------------------------------------------------------------------- openai generator
class _NotFound(BaseHTTPRequestHandler):
    """An API root that answers 404 to everything, counting the requests."""

    def _answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests += 1
        body = json.dumps({"error": {"message": "Not Found", "type": "invalid_request_error"}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def not_found():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)  # this machine only
    server.requests = 0
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


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


@pytest.mark.integration
def test_openai_generator_without_a_key_stops_at_load(tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args",
                      f"preset=smoke,generator=openai,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "1", OPENAI_API_KEY="")
    last = _one_line(proc, tmp_path)
    assert last.startswith("lmms-genbench: error: the generator openai cannot work (MissingAPIKeyError: ")
    assert last.endswith("Fix: export OPENAI_API_KEY=<your API key>, or name the variable that holds it with "
                         "generator.api_key_env=<VARIABLE>")


@pytest.mark.integration
def test_openai_generator_at_a_url_that_answers_404_stops_at_the_first_request(tmp_path, not_found):
    url = f"http://127.0.0.1:{not_found.server_port}/v1"
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args",
                      f"preset=smoke,generator=openai,generator.base_url={url},generator.max_retries=0,"
                      f"artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "1",
                      OPENAI_API_KEY="sk-test", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    last = _one_line(proc, tmp_path)
    assert last.startswith("lmms-genbench: error: the generator openai cannot work (OpenAIConfigError: "
                           "openai images API answered HTTP 404"), last
    assert f"Fix: check generator.base_url (the API root, e.g. https://api.openai.com/v1; here {url})" in last
    assert 1 <= not_found.requests <= 4  # one batch, no retries
    assert "sk-test" not in proc.stdout + proc.stderr


# ----------------------------------------------------------------------- --model t2i
@pytest.mark.integration
@pytest.mark.parametrize("args, start", [
    ("generator=diffusers,generator.pretrained={tmp}/missing_pipeline,generator.device=cpu",
     "lmms-genbench: error: the generator diffusers did not load: its weights generator.pretrained={tmp}/"
     "missing_pipeline do not exist"),
    ("generator=smoke,generator.foo=1",
     "lmms-genbench: error: the generator smoke did not load (ArgumentError: smoke generator: unknown "
     "argument(s) 'foo'; allowed: "),
], ids=["missing-pipeline", "unknown-generator-arg"])
def test_t2i_generator_that_does_not_load_is_one_line(args, start, tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "t2i", "--model_args", args.format(tmp=tmp_path) + f",output_dir={tmp_path}/img",
                      "--tasks", "mmeception_smoke", "--limit", "1")
    last = _one_line(proc, tmp_path)
    assert last.startswith(start.format(tmp=tmp_path)), last


# ----------------------------------------------------------------------- the artifact store
# A store that cannot be written, simulated in the lmms-eval process (root ignores
# permissions, and a full disk cannot be made in a test): every write under the
# store's folder fails with the given errno; reads work.
_FAULTS = '''
import builtins, errno, io, os
_ROOT = os.path.abspath({root!r})
_ERRNO = {errno_value}

def _inside(path):
    try:
        path = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return False
    return path == _ROOT or path.startswith(_ROOT + os.sep)

def _fail(path):
    raise OSError(_ERRNO, os.strerror(_ERRNO), os.fsdecode(path))

def _wrap_open(real):
    def fake(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and set(mode) & set("wax+") and _inside(file):
            _fail(file)
        return real(file, mode, *args, **kwargs)
    return fake

_os_open, _mkdir, _replace = os.open, os.mkdir, os.replace

def _open(path, flags, *args, **kwargs):
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and _inside(path):
        _fail(path)
    return _os_open(path, flags, *args, **kwargs)

def _mkdir_(path, *args, **kwargs):
    if _inside(path) and not os.path.isdir(path):
        _fail(path)
    return _mkdir(path, *args, **kwargs)

def _replace_(src, dst, *args, **kwargs):
    if _inside(dst):
        _fail(dst)
    return _replace(src, dst, *args, **kwargs)

builtins.open = io.open = _wrap_open(io.open)
os.open, os.mkdir, os.replace = _open, _mkdir_, _replace_
'''


def _faulty(tmp_path, store, code) -> dict:
    """Environment of an lmms-eval run whose writes under ``store`` fail with ``code``."""
    folder = tmp_path / "faults"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(_FAULTS.format(root=str(store), errno_value=int(code)))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}




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


@pytest.mark.integration
@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "the disk is full"),
                                          (errno.EROFS, "it is on a read-only filesystem")], ids=["full", "read-only"])
def test_a_store_that_cannot_be_written_at_start_is_one_line(code, reason, tmp_path):
    store = tmp_path / "art"
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={store}",
                      "--tasks", "mmeception_smoke", "--limit", "1", **_faulty(tmp_path, store, code))
    last = _one_line(proc, tmp_path)
    assert last.startswith(f"lmms-genbench: error: the artifact store {store} cannot be written: {reason}"), last
    assert "Fix: " in last and "artifacts=" in last


@pytest.mark.integration
def test_a_finished_store_on_a_read_only_disk_still_scores(tmp_path):
    store = tmp_path / "art"
    args = ["--model", "cycle", "--model_args", f"preset=smoke,artifacts={store}", "--tasks", "mmeception_smoke",
            "--limit", "2"]
    (tmp_path / "first").mkdir()
    first = _lmms_eval(tmp_path / "first", *args)
    scored = results_file(tmp_path / "first" / "out")[1]["results"]["mmeception_smoke"]
    assert scored["n_scored,none"] == 2, first.stderr[-3000:]
    again = _lmms_eval(tmp_path, *args, **_faulty(tmp_path, store, errno.EROFS))
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-3000:]
    rescored = results_file(tmp_path / "out")[1]["results"]["mmeception_smoke"]
    assert rescored["n_scored,none"] == 2 and rescored["gc@3,none"] == scored["gc@3,none"]


# ----------------------------------------------------------------------- hub datasets
def _hub_error(cls, status, message="denied"):
    request = httpx.Request("GET", "https://huggingface.co/api/datasets/org/data")
    return cls(message, response=httpx.Response(status, request=request))


def test_failure_kind_reads_the_hub_errors_and_what_datasets_makes_of_them():
    from datasets.exceptions import DatasetNotFoundError
    from huggingface_hub.errors import (GatedRepoError, LocalTokenNotFoundError, OfflineModeIsEnabled,
                                        RepositoryNotFoundError, RevisionNotFoundError)
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


@pytest.mark.integration
@pytest.mark.parametrize("tasks, dataset", [("mmeception", "lmms-lab-encoder/MME"),
                                            ("sdp_nocaps", "mollahsabbir/nd400")])
def test_an_offline_hub_task_names_its_dataset_and_the_way_out(tasks, dataset, tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={tmp_path / 'art'}",
                      "--tasks", tasks, "--limit", "1")
    last = _one_line(proc, tmp_path)
    assert "RetryError" not in proc.stdout + proc.stderr
    if tasks == "sdp_nocaps":  # it reads three datasets: the preflight names them and the Hub in one line
        assert last.startswith("lmms-genbench: error: this run is offline (HF_HUB_OFFLINE is set) and the local "
                               "Hugging Face cache lacks what it reads from the Hub (https://huggingface.co): "
                               f"dataset {dataset}, dataset google/docci, dataset HuggingFaceM4/NoCaps"), last
        return
    assert last.startswith(f"lmms-genbench: error: task {tasks} could not load its dataset {dataset}: this run is "
                           "offline (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set)"), last
    assert f"https://huggingface.co/datasets/{dataset}" in last
