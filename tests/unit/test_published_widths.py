"""benchmarks/published_widths.py: the cut stacks found and extrapolated, the cost rows (fast, no model)."""

import pytest

from tests.support.scripts import load_script

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def pw():
    return load_script("benchmarks/published_widths.py", "published_widths")


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)


class _Model:
    def __init__(self):
        self.lm = torch.nn.Module()
        self.lm.layers = torch.nn.ModuleList([_Layer(), _Layer()])


def test_every_cut_stack_is_named_or_the_run_refuses(pw):
    model = _Model()
    [(path, _, depth)] = pw._stacks(model, {r"^lm\.layers$": 24}, 2)
    assert (path, depth) == ("lm.layers", 24)
    with pytest.raises(RuntimeError, match="lm.layers"):  # a stack of the cut size no pattern names
        pw._stacks(model, {}, 2)


def test_cost_rows_scale_draws_to_the_published_steps_and_mark_each_cell(pw):
    row = {"model": "showo", "describe_full_s": 10.0, "new_tokens": 32, "draw_full_s": 4.0}
    text = pw.cost_rows([row], steps=2)
    assert "| showo | 10 at 32 tokens | 100 |" in text  # 4 s at 2 steps -> 50 steps
    assert "(extrapolated)" in text and "(measured, H100)" in text and "- (not measured)" in text
    janus = pw.cost_rows([{**row, "model": "janus_1_3b"}], steps=2)
    assert "| janus_1_3b | 10 at 32 tokens | 4 |" in janus  # autoregressive: no steps to scale


def test_the_readme_shows_the_cost_rows_of_the_committed_measurements(pw):
    """The rows have one home: benchmarks/published_widths_cpu.jsonl (what the run printed); the README
    shows what ``--cost`` prints from it."""
    import json

    data = pw.ROOT / "benchmarks" / "published_widths_cpu.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    text = (pw.ROOT / "README.md").read_text()
    assert all(line in text for line in pw.cost_rows(rows, steps=2).splitlines())
