"""The process-wide state in one module: every slot filled through its owner, and reset()
returning the process to its import-time state."""

from __future__ import annotations

import threading

import pytest
from PIL import Image

from lmms_genbench.chef import recipe
from lmms_genbench.core import secrets, signals, state
from lmms_genbench.hooks import call, run, scope
from lmms_genbench.metrics.networks import loading
from lmms_genbench.metrics.scorers import reports
from lmms_genbench.store import held


@pytest.fixture(autouse=True)
def _clean():
    state.reset()
    yield
    state.reset()


def _fill_every_slot(tmp_path):
    """Each slot filled by the public function of the module that owns it (where one fills it
    cheaply), else directly; returns what the owners should forget."""
    image = Image.new("RGB", (4, 4), (1, 2, 3))
    held.hold("sha", image)
    state.put("run", run.Run(model="cycle"))
    task = type("Task", (), {"config": type("Config", (), {"process_results": recipe.register_pool})()})()
    assert scope.is_our_task(task)
    reports.no_score("some_task", 2, {"no image": 2}, tmp_path / "report.json")
    network = loading.cached_network(("test-family", 1), object)
    loading.cached_view(("test-family", 1), (8,), object)
    state.slot("fid_resizer", lambda: (lambda pixels: pixels))  # clean-fid is not needed here
    pool_id = recipe.register_pool([{"question": "q"}])
    assert state.remember("a fact", lambda: 42) == 42
    secrets.remember(["sk-given-on-the-command-line"])
    signals.stop().inside = 1  # inside a simple_evaluate of ours (hooks.signals.handling)
    assert signals.arrived(15) == "raise"
    # the counting thread sets the process's wakeup fd: not in the test process (tests/unit/hooks/test_signals.py)
    state.slot("signal_wakeup", lambda: -1)
    assert call.active() == set()  # counts of call-scoped changes (none in place)
    return network, pool_id


def test_every_slot_is_filled_by_its_owner_and_reset_empties_them_all(tmp_path):
    network, pool_id = _fill_every_slot(tmp_path)
    assert {name for name in state.SLOTS if state.value(name) is not None} == set(state.SLOTS)
    assert run.current() == run.Run(model="cycle") and pool_id in state.value("chef_pools")

    state.reset()

    assert {name: state.value(name) for name in state.SLOTS if state.value(name) is not None} == {}
    # the owners see the import-time state
    assert held.counts() == {"decoded": 0, "held": 0} and not held.held().images
    assert run.current() is None
    assert loading.cached_network(("test-family", 1), object) is not network
    assert state.remember("a fact", lambda: 43) == 43
    assert recipe.register_pool([{"question": "q"}]).startswith("pool0-")


def test_each_slot_says_who_owns_it_and_why():
    for name, why in state.SLOTS.items():
        owner = why.split(":", 1)[0]
        assert ":" in why and len(why) > 40, name
        assert owner == "what the installed libraries and our own files say, read once" or owner.count(".") >= 1, name


def test_an_unknown_slot_is_a_one_line_error():
    with pytest.raises(KeyError, match="no process-wide slot 'nope'.*SLOTS"):
        state.slot("nope", dict)
    with pytest.raises(KeyError):
        state.put("nope", 1)


def test_a_slot_is_made_once_under_concurrent_first_use():
    made, started, release = [], threading.Event(), threading.Event()

    def make():
        made.append(1)
        started.set()
        release.wait(5)
        return object()

    got = []
    first = threading.Thread(target=lambda: got.append(state.slot("facts", make)))
    first.start()
    started.wait(5)
    second = threading.Thread(target=lambda: got.append(state.slot("facts", make)))
    second.start()
    assert state.value("run") is None  # other slots answer while one is being made
    release.set()
    first.join(5)
    second.join(5)
    assert len(made) == 1 and got[0] is got[1]


def test_a_make_that_raises_leaves_the_slot_empty():
    def broken():
        raise ImportError("clean-fid is needed")

    with pytest.raises(ImportError):
        state.slot("fid_resizer", broken)
    assert state.value("fid_resizer") is None


def test_the_no_score_lines_are_said_again_at_exit_once_after_a_reset(tmp_path, capsys):
    reports.no_score("a", 1, {}, tmp_path / "r.json")
    state.reset()
    reports.no_score("b", 1, {}, tmp_path / "r.json")
    reports._print_no_score()
    err = capsys.readouterr().err
    assert "b produced no score" in err and "a produced no score" not in err


def test_a_fact_is_computed_once_when_threads_ask_together():
    """Scoring's workers found an unwritable feature cache together and warned twice (issue 52's
    one warning line): the second asker waits for the first one's value."""
    import threading
    import time

    from lmms_genbench.core import state

    state.reset()
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return len(calls)

    threads = [threading.Thread(target=state.remember, args=("once", slow)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and state.remember("once", slow) == 1
    state.reset()
