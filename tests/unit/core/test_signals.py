"""The stop a signal asked for (core/signals.py, issue 43): the first raises (or, inside a
describe call, is held to the next checkpoint), later ones are ignored, the third ends the process."""

import pytest

from lmms_genbench.core import state
from lmms_genbench.core.errors import Interrupted
from lmms_genbench.core.signals import arrived, checkpoint, deferred, requested


@pytest.fixture(autouse=True)
def _fresh():
    state.put("stop", None)
    yield
    state.put("stop", None)


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
