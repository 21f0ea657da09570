"""Suite-wide settings, the ``--e2e`` switch and the one shared smoke run.

``python -m pytest`` runs the unit tests and every end-to-end assertion that reads the
shared smoke run (:func:`smoke_run`: one ``lmms-eval`` call, made once per session).
``python -m pytest --e2e`` also runs the other end-to-end tests (marked ``integration``:
each starts its own ``lmms-eval`` runs); CI runs that.
"""

import os

import pytest

# No test may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_RUN = "smoke_run"


def pytest_addoption(parser):
    parser.addoption("--e2e", action="store_true", default=False,
                     help="also run the end-to-end tests that start lmms-eval runs of their own (CI does)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--e2e"):
        return
    skip = pytest.mark.skip(reason="an end-to-end test with runs of its own: give pytest --e2e")
    for item in items:
        if "integration" in item.keywords and SHARED_RUN not in getattr(item, "fixturenames", ()):
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
