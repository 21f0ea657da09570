"""The stop a signal asked for (core/signals.py, issues 43, 52): inside an evaluation of ours the
first raises (or, inside a describe call, is held to the next checkpoint), later ones are ignored,
the third ends the process; outside one the first ends it."""

import pytest

from lmms_genbench.core import state
from lmms_genbench.core.errors import Interrupted
from lmms_genbench.core.signals import arrived, checkpoint, deferred, requested, stop


@pytest.fixture(autouse=True)
def _fresh():
    state.put("stop", None)
    stop().inside = 1  # as hooks.signals.handling() sets it around a simple_evaluate of ours
    yield
    state.put("stop", None)


def test_outside_an_evaluation_of_ours_the_first_signal_ends_the_process():
    """The command's start-up, lmms-eval saving the results, its closing summary: nothing to drain."""
    stop().inside = 0
    assert arrived(15) == "exit"


def test_the_first_signal_raises_later_ones_are_ignored_and_the_third_ends_it():
    assert [arrived(15), arrived(2), arrived(15)] == ["raise", "ignore", "exit"]
    assert requested() == 15
    checkpoint()  # raised already by the handler: nothing more


def test_a_signal_inside_a_describe_call_is_held_until_the_checkpoint():
    with deferred():
        assert arrived(2) == "defer"
        checkpoint()  # still inside: held
        assert arrived(2) == "ignore"
    with pytest.raises(Interrupted) as caught:
        checkpoint()
    assert caught.value.signum == 2
    checkpoint()  # once


def test_no_signal_no_stop():
    with deferred():
        pass
    checkpoint()
    assert requested() is None
