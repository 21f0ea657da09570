"""Failures before the first doc, through the real ``lmms-eval`` command: wrong ``--model cycle``
arguments, an openai generator without a key or with a wrong URL, a ``--model t2i`` generator
that does not load, an artifact store that cannot be written, an offline hub task. Each is one
line naming cause and fix (the in-process checks: tests/unit/models/test_startup_errors.py)."""

import errno
import glob
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.cycle_args import CYCLE_ARGS
from tests.support.lmms_eval_runs import BIN, last_line, results_file, run


def _lmms_eval(tmp_path, *args, **env):
    return run([str(BIN / "lmms-eval"), *args, "--output_path", str(tmp_path / "out")], tmp_path, timeout=600, **env)


def _one_line(proc, tmp_path) -> str:
    """The run's last line, after the checks every case shares."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = last_line(proc.stderr)
    assert last.startswith("lmms-genbench: error:") and "Fix:" in last, last
    assert not glob.glob(str(tmp_path / "out" / "**" / "*_results.json"), recursive=True)
    return last


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


def test_openai_generator_without_a_key_stops_at_load(tmp_path):
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args",
                      f"preset=smoke,generator=openai,artifacts={tmp_path / 'art'}",
                      "--tasks", "mmeception_smoke", "--limit", "1", OPENAI_API_KEY="")
    last = _one_line(proc, tmp_path)
    assert last.startswith("lmms-genbench: error: the generator openai cannot work (MissingAPIKeyError: ")
    assert last.endswith("Fix: export OPENAI_API_KEY=<your API key>, or name the variable that holds it with "
                         "generator.api_key_env=<VARIABLE>")


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


@pytest.mark.parametrize("code, reason", [(errno.ENOSPC, "the disk is full"),
                                          (errno.EROFS, "it is on a read-only filesystem")], ids=["full", "read-only"])
def test_a_store_that_cannot_be_written_at_start_is_one_line(code, reason, tmp_path):
    store = tmp_path / "art"
    proc = _lmms_eval(tmp_path, "--model", "cycle", "--model_args", f"preset=smoke,artifacts={store}",
                      "--tasks", "mmeception_smoke", "--limit", "1", **_faulty(tmp_path, store, code))
    last = _one_line(proc, tmp_path)
    assert last.startswith(f"lmms-genbench: error: the artifact store {store} cannot be written: {reason}"), last
    assert "Fix: " in last and "artifacts=" in last


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
