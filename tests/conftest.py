"""Suite-wide settings, the ``--e2e`` switch, the folder markers and the shared fixtures.

The folders say what a test is, and each folder has its one marker (CONTRIBUTING.md, "Tests"):

- ``tests/unit/<package>/`` mirrors ``lmms_genbench/<package>/``: no mark, always run.
- ``tests/smoke/`` reads the one shared smoke run (:func:`smoke_run`: one ``lmms-eval`` call, made
  once per session): marked ``smoke``, in the default suite (``pytest -m smoke`` runs just these).
- ``tests/e2e/`` starts ``lmms-eval`` runs (or other slow end-to-end processes) of its own: marked
  ``e2e`` and skipped unless pytest is given ``--e2e`` (CI gives it).

``distributed`` (several processes under accelerate) is the one marker a test applies itself.
"""

import os
from pathlib import Path

import pytest

# No test may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
#: folder -> the marker every test in it carries
FOLDER_MARKS = {"smoke": "smoke", "e2e": "e2e"}


def pytest_addoption(parser):
    parser.addoption("--e2e", action="store_true", default=False,
                     help="also run tests/e2e/: the end-to-end tests that start runs of their own (CI does)")


def folder_of(item) -> str:
    """The first folder under tests/ that holds ``item``'s file ("" for a file in tests/ itself)."""
    parts = Path(str(item.path)).resolve().relative_to(HERE).parts
    return parts[0] if len(parts) > 1 else ""


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="an end-to-end test with runs of its own (tests/e2e): give pytest --e2e")
    for item in items:
        mark = FOLDER_MARKS.get(folder_of(item))
        if mark:
            item.add_marker(mark)
        if mark == "e2e" and not config.getoption("--e2e"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One lmms-eval call for the three smoke tasks and a 5-iteration variant, shared by
    every test that asks for it (one process start and one model load)."""
    from tests.support.smoke_run import run_smoke_tasks

    return run_smoke_tasks(tmp_path_factory.mktemp("smoke"))


@pytest.fixture
def offline(monkeypatch):
    """GenCeption scored with a mean-colour encoder (tests/support/chains.py), FID off."""
    import lmms_genbench.metrics.networks.encoders as encoders

    from tests.support.chains import MeanColourEncoder

    monkeypatch.setattr(encoders, "get_image_encoder", lambda *a, **k: MeanColourEncoder())
    monkeypatch.setenv("LMMS_GENBENCH_FID_FEATURES", "none")


@pytest.fixture(scope="session")
def local_hub(tmp_path_factory):
    """TEST SCAFFOLDING: a Hub-compatible server on 127.0.0.1 (tests/support/localhub) serving tiny
    random-weight models and synthetic datasets under the real ids the docs and task YAMLs name.
    Start clients in a subprocess with ``env={**os.environ, **local_hub.env(hf_home=...)}``
    (huggingface_hub reads HF_ENDPOINT at import); use a fresh ``hf_home`` per test."""
    from tests.support.localhub.repos import add_all
    from tests.support.localhub.server import LocalHubServer

    root = tmp_path_factory.mktemp("localhub")
    hub = LocalHubServer(log=root / "requests.log")
    add_all(hub, root)
    with hub:
        yield hub


@pytest.fixture(scope="session")
def tiny_janus(tmp_path_factory):
    """The folder of a tiny random-weight Janus checkpoint (lmms_genbench/smoke/janus.py), built once."""
    from lmms_genbench.smoke.janus import tiny_janus_path

    return str(tiny_janus_path(tmp_path_factory.mktemp("janus")))
