"""The local test hub (tests/support/localhub, TEST SCAFFOLDING) answers the real clients as the Hub does:
revisions by branch and by commit sha, gated repos (401 without a token, 403 with a token that
has not accepted the terms), a missing revision (404), and the server going away mid-run.

huggingface_hub's own download code runs in-process against the server (``endpoint=``);
datasets' ``load_dataset`` and transformers' ``from_pretrained`` run in a subprocess, as they
read ``HF_ENDPOINT`` at import: tests/e2e/test_localhub_e2e.py.
"""

import json
import os
import time

import pytest

from tests.support.localhub.server import ACCEPTED, NOT_ACCEPTED, LocalHubServer

hf = pytest.importorskip("huggingface_hub")
errors = pytest.importorskip("huggingface_hub.errors")
hf_constants = pytest.importorskip("huggingface_hub.constants")
hf_http = pytest.importorskip("huggingface_hub.utils._http")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A server with one model (branch main and branch v1) and one gated dataset."""
    # conftest sets HF_HUB_OFFLINE=1 for the suite; these calls name the endpoint themselves
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    main, v1, data = tmp_path / "main", tmp_path / "v1", tmp_path / "data"
    for folder, text in ((main, "main"), (v1, "v1")):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"revision": text}))
        (folder / "model.safetensors").write_bytes(text.encode() * 1000)
    (data / "data").mkdir(parents=True)
    (data / "data" / "test-00000-of-00001.parquet").write_bytes(b"PAR1" * 100)
    server = LocalHubServer()
    server.add("org/model", main)
    server.add("org/model", v1, revision="v1")
    server.add("org/gated", data, repo_type="dataset", gated=True)
    with server:
        yield server


def _download(hub, filename, repo_id="org/model", tmp=None, **kwargs):
    return hf.hf_hub_download(repo_id, filename, endpoint=hub.url, cache_dir=tmp, etag_timeout=2, **kwargs)


def test_a_branch_and_a_commit_sha_resolve(hub, tmp_path):
    sha = hub.sha("org/model", "v1")
    assert sha != hub.sha("org/model")
    by_branch = _download(hub, "config.json", revision="v1", tmp=tmp_path, token=False)
    by_sha = _download(hub, "config.json", revision=sha, tmp=tmp_path / "2", token=False)
    assert json.loads(open(by_branch).read()) == json.loads(open(by_sha).read()) == {"revision": "v1"}
    assert f"/snapshots/{sha}/" in by_branch.replace(os.sep, "/")
    # an LFS-like file: HEAD answers with the CDN redirect's headers, GET is served there
    weights = _download(hub, "model.safetensors", tmp=tmp_path, token=False)
    assert open(weights, "rb").read() == b"main" * 1000
    info = hf.HfApi(endpoint=hub.url).model_info("org/model", revision="v1", files_metadata=True)
    assert info.sha == sha and {s.rfilename for s in info.siblings} == {"config.json", "model.safetensors"}
    assert ("HEAD", "/org/model/resolve/main/model.safetensors", 302) in hub.requests


def test_a_missing_revision_is_404(hub, tmp_path):
    with pytest.raises(errors.RevisionNotFoundError) as caught:
        _download(hub, "config.json", revision="v9", tmp=tmp_path, token=False)
    assert caught.value.response.status_code == 404
    with pytest.raises(errors.RepositoryNotFoundError):
        _download(hub, "config.json", repo_id="org/nothing", tmp=tmp_path, token=False)
    with pytest.raises(errors.EntryNotFoundError):
        _download(hub, "absent.json", tmp=tmp_path, token=False)


def test_a_gated_dataset_wants_a_token_with_accepted_terms(hub, tmp_path):
    name = "data/test-00000-of-00001.parquet"
    with pytest.raises(errors.GatedRepoError) as caught:
        _download(hub, name, "org/gated", tmp_path, repo_type="dataset", token=False)
    assert caught.value.response.status_code == 401
    with pytest.raises(errors.GatedRepoError) as caught:
        _download(hub, name, "org/gated", tmp_path, repo_type="dataset", token=NOT_ACCEPTED)
    assert caught.value.response.status_code == 403 and "authorized list" in str(caught.value)
    path = _download(hub, name, "org/gated", tmp_path, repo_type="dataset", token=ACCEPTED)
    assert open(path, "rb").read() == b"PAR1" * 100
    api = hf.HfApi(endpoint=hub.url)
    with pytest.raises(errors.GatedRepoError):
        api.auth_check("org/gated", repo_type="dataset", token=False)
    with pytest.raises(errors.GatedRepoError):
        api.auth_check("org/gated", repo_type="dataset", token=NOT_ACCEPTED)
    api.auth_check("org/gated", repo_type="dataset", token=ACCEPTED)
    assert api.whoami(token=NOT_ACCEPTED)["name"] == "localhub-user"
    with pytest.raises(errors.HfHubHTTPError) as caught:
        api.whoami(token="hf_wrong")
    assert caught.value.response.status_code == 401
    # the file list stays public, as on the Hub
    files = hf.HfApi(endpoint=hub.url).list_repo_files("org/gated", repo_type="dataset", token=False)
    assert files == [name]


def test_hf_file_system_lists_stats_and_reads_a_revision(hub):
    """What datasets' HfFileSystem calls: tree listings, paths-info, ranged reads, on a revision
    with a slash (the Parquet export's ``refs/convert/parquet``)."""
    folder = hub.repos[("dataset", "org/gated")].revisions["main"].folder
    hub.add("org/export", folder, repo_type="dataset", revision="refs/convert/parquet")
    fs = hf.HfFileSystem(endpoint=hub.url, token=False)
    root = "datasets/org/export@refs%2Fconvert%2Fparquet"
    assert fs.ls(root, detail=False) == [f"{root}/data"]
    assert fs.glob(f"{root}/**/*.parquet") == [f"{root}/data/test-00000-of-00001.parquet"]
    assert fs.info(f"{root}/data/test-00000-of-00001.parquet")["size"] == 400
    with fs.open(f"{root}/data/test-00000-of-00001.parquet", "rb") as f:
        f.seek(4)
        assert f.read(8) == b"PAR1PAR1"
    infos = hf.HfApi(endpoint=hub.url).get_paths_info("org/export", ["data", "data/test-00000-of-00001.parquet", "x"],
                                                      repo_type="dataset", revision="refs/convert/parquet")
    assert [type(i).__name__ for i in infos] == ["RepoFolder", "RepoFile"]


def test_the_server_going_away(hub, tmp_path, monkeypatch):
    cached = _download(hub, "config.json", tmp=tmp_path, token=False)
    hub.cut_downloads = 1  # the connection drops halfway through the body: the client resumes
    weights = _download(hub, "model.safetensors", revision="v1", tmp=tmp_path, token=False)
    assert open(weights, "rb").read() == b"v1" * 1000
    cut, resumed = [s for m, p, s in hub.requests if p.startswith("/lfs/")][-2:]
    assert cut == 599 and resumed in (200, 206)
    hub.stop()
    # gone: a cached file still comes from the cache; an uncached one fails naming the cache after
    # huggingface_hub's backoff (1 + 2 + 4 + 8 + 8 s, skipped here)
    assert _download(hub, "config.json", tmp=tmp_path, token=False) == cached
    slept = []
    monkeypatch.setattr(hf_http, "time", _NoSleep(slept))
    with pytest.raises(errors.LocalEntryNotFoundError):
        _download(hub, "config.json", revision="v1", tmp=tmp_path, token=False)
    assert sum(slept) >= 20


class _NoSleep:
    """The time module, with sleep recorded instead of slept."""

    def __init__(self, slept):
        self.sleep = slept.append

    def __getattr__(self, name):
        return getattr(time, name)
