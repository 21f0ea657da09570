"""core.args: the one home of integer and number checks (issue 22: 19 hand-written copies of
``isinstance(x, bool) or not isinstance(x, int)`` became these)."""

import math

import numpy as np
import pytest

from lmms_genbench.core.args import check_int, finite_or_none, is_number, is_whole


@pytest.mark.parametrize("value", [0, 7, np.int64(3), np.int32(-2)])
def test_whole_numbers(value):
    assert is_whole(value) and is_number(value)


@pytest.mark.parametrize("value", [True, False, 2.0, "3", None, np.float32(1)])
def test_not_whole(value):
    assert not is_whole(value)


def test_check_int_returns_a_plain_int_and_names_the_argument():
    assert check_int("n", np.int64(4), minimum=1) == 4 and type(check_int("n", np.int64(4))) is int
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got 0$"):
        check_int("n", 0, minimum=1)
    with pytest.raises(ValueError, match=r"^n must be an integer, got True$"):
        check_int("n", True)
    with pytest.raises(ValueError, match=r"^size must be a positive integer \(pixels\), got '4'$"):
        check_int("size", "4", minimum=1, what="a positive integer (pixels)")


def test_finite_or_none_reads_numpy_scalars_and_refuses_bools():
    assert finite_or_none(np.float32(0.5)) == 0.5 and finite_or_none(np.int64(2)) == 2.0
    assert finite_or_none(True) is None and finite_or_none(math.nan) is None
    assert finite_or_none("0.5") is None
