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


class BasicTransformerBlock(_Layer):  # the name of diffusers' UNet attention block
    pass


def test_a_unets_attention_blocks_are_not_a_stack(pw):
    """At published widths BLIP3-o's SDXL UNet has 2 transformer blocks in down_blocks.1 and
    up_blocks.1: of the cut size, yet a convolutional part built whole (the first run refused it)."""
    model = _Model()
    model.unet = torch.nn.Module()
    model.unet.transformer_blocks = torch.nn.ModuleList([BasicTransformerBlock(), BasicTransformerBlock()])
    [(path, _, _)] = pw._stacks(model, {r"^lm\.layers$": 24}, 2)
    assert path == "lm.layers"


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/clear_refs"), reason="Linux only")
def test_each_stage_peak_starts_from_the_memory_of_now_not_the_build(pw):
    big = torch.ones(64 * 2**20 // 4)  # 64 MiB, freed: the peak (VmHWM) stays above the RSS
    del big
    assert pw._rss_gb()[1] > pw._rss_gb()[0] + 0.05
    assert pw._reset_peak() is True
    now, peak = pw._rss_gb()
    assert peak < now + 0.01


def test_cost_rows_scale_draws_to_the_published_steps_and_mark_each_cell(pw):
    row = {"model": "showo", "describe_full_s": 10.0, "new_tokens": 32, "draw_full_s": 4.0}
    text = pw.cost_rows([row], steps=2)
    assert "| showo | 10 at 32 tokens (extrapolated, CPU) | 100 (extrapolated, CPU) |" in text  # 2 -> 50 steps
    assert "(measured rate, H100 preset)" in text and "- (not measured)" in text
    cells = [c.strip() for c in text.splitlines()[-1].strip("|").split("|")[1:]]
    assert all(c.endswith(("(extrapolated, CPU)", "(measured rate, H100 preset)", "(not measured)")) for c in cells)
    janus = pw.cost_rows([{**row, "model": "janus_1_3b"}], steps=2)
    assert "| janus_1_3b | 10 at 32 tokens (extrapolated, CPU) | 4 (extrapolated, CPU) |" in janus  # autoregressive: no steps to scale


def test_the_readme_shows_the_cost_rows_of_the_committed_measurements(pw):
    """The rows have one home: benchmarks/published_widths_cpu.jsonl (what the run printed); the README
    shows what ``--cost`` prints from it."""
    import json

    data = pw.ROOT / "benchmarks" / "published_widths_cpu.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
    text = (pw.ROOT / "README.md").read_text()
    assert all(line in text for line in pw.cost_rows(rows, steps=2).splitlines())


def test_activations_are_each_stages_peak_over_its_start_and_only_when_the_peak_was_reset(pw):
    row = {"peak_reset": True, "peak_describe_gb": 5.5, "rss_before_describe_gb": 5.0,
           "peak_draw_gb": 7.0, "rss_before_draw_gb": 5.0}
    assert pw.activations(row) == "0.50 (describe), 2.00 (draw)"
    assert pw.activations({**row, "peak_reset": False}) == "not reset per stage"
    assert pw.activations({"peak_draw_gb": 9.5}) == "not reset per stage"  # a row from before the reset
