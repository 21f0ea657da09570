"""benchmarks/unified_throughput.py at its smallest (Show-o's tiny parity checkpoint, batch 1, one
sampler step, two tokens): the table holds the three arms and the goals' ratios, so the
benchmark does not rot (the five systems' run and their authors' ports: tests/e2e/test_unified_throughput_e2e.py)."""

import pytest

from tests.support.scripts import load_script
from tests.support.threads import single_thread

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ut():
    return load_script("benchmarks/unified_throughput.py", "unified_throughput")


def test_the_smallest_run_prints_the_three_arms_and_the_goals(ut, capsys):
    with single_thread():
        code = ut.main(["--models", "showo", "--sizes", "tiny", "--batches", "1", "--samples", "1", "--steps", "1",
                        "--new-tokens", "2", "--repeats", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| showo | tiny |")]
    assert [(r[2], r[3]) for r in rows] == [("authors", "1"), ("ours", "1"), ("floor", "1")]
    assert all(float(r[4]) > 0 for r in rows)
    assert "ours@1/authors" in rows[1][5] and "ours/floor" in rows[1][5]


def test_the_goals_are_flagged_where_not_reached(ut):
    rows = [{"arm": "authors", "batch": 1, "hops_s": 1.0}, {"arm": "ours", "batch": 1, "hops_s": 0.9},
            {"arm": "floor", "batch": 1, "hops_s": 0.9}, {"arm": "ours", "batch": 8, "hops_s": 3.0},
            {"arm": "floor", "batch": 8, "hops_s": 4.0}]
    goals = ut.ratios(rows)
    assert goals[("ours", 1)] == "ours@1/authors 0.90 NOT MET (goal >= 0.95); ours/floor 1.00"
    assert goals[("ours", 8)] == "ours@8/authors 3.00; ours/floor 0.75 NOT MET (goal >= 0.95)"


def test_unknown_models_and_sizes_are_refused_in_one_line(ut, capsys):
    assert ut.main(["--models", "showo,dalle"]) == 2
    assert ut.main(["--sizes", "huge"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "unknown ['dalle']" in err and "--sizes" in err


def test_the_clock_times_a_batched_entry_point_beside_forward(ut):
    """BAGEL's ViT runs its layers from ``forward_many``, four levels down: timed as a forward."""
    import time

    import torch

    class Slow(torch.nn.Module):
        def forward_many(self, xs):
            time.sleep(0.02)
            return xs

    class Model:
        def __init__(self):
            self.vit = Slow()

    model = Model()
    clock = ut.NetworkClock(model, "cpu")
    assert model.vit.forward_many([1]) == [1]
    assert clock.seconds >= 0.015
    clock.close()
    assert "forward_many" not in vars(model.vit)


def test_every_arm_describes_the_same_work_per_image(ut):
    sizes = [image.size for image in ut._images(8)]
    assert set(sizes) == {(96, 80), (80, 96)}  # one shape and its turn: equal token counts
