"""Nothing starts that has nothing to do (issue 24, item 3): the cycle model loads its
describer and its generator at their first use, so a rerun over a complete store loads
neither and scores the same; arguments are still checked before the first doc."""

import json

import pytest
from PIL import Image

from lmms_genbench.core.errors import ActionableError
from lmms_genbench.generators import build_generator, plan_generator
from lmms_genbench.generators.registry import GENERATORS
from lmms_genbench.metrics.scorers.genception import GenCeptionScorer
from lmms_genbench.models.cycle import CycleModel

from tests.support.fakes import FakeGenerator
from tests.support.fakes import cycle_request as _request

BUILT: list[str] = []


class CountingGenerator(FakeGenerator):
    """A registered backend that counts its builds and plans its name without one."""

    name = "counting-generator"

    def __init__(self, batch_size=2):
        BUILT.append("generator")
        super().__init__(batch_size=int(batch_size))

    @classmethod
    def plan(cls, batch_size=2):
        from lmms_genbench.generators import GeneratorPlan

        return GeneratorPlan(cls.name, int(batch_size))


class CountingVlm:
    """An lmms-eval simple model that counts its builds and describes with the image's colour."""

    is_simple = True

    def __init__(self, pretrained="fake/vlm", **kwargs):
        BUILT.append("describer")
        self.task_dict = {}

    def generate_until(self, requests):
        out = []
        for request in requests:
            doc = request.args[3]
            image = request.args[2](self.task_dict[request.args[4]][request.args[5]][doc])[0]
            out.append("a picture of " + " ".join(str(c) for c in image.convert("RGB").getpixel((4, 4))))
        return out


@pytest.fixture
def counting(monkeypatch):
    import lmms_eval.models

    real = lmms_eval.models.get_model
    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name, *a, **k: CountingVlm if name == "fake_vlm"
                        else real(name, *a, **k))
    monkeypatch.setitem(GENERATORS.entries, "counting", "tests.unit.generators.test_lazy_roles:CountingGenerator")
    BUILT.clear()
    return BUILT


def _run(tmp_path, **args):
    model = CycleModel(describer="fake_vlm", generator="counting", artifacts=str(tmp_path / "art"), **args)
    model.engine.progress = False
    images = [Image.new("RGB", (8, 8), (40 * i, 100, 200)) for i in range(5)]
    model.task_dict = {"sdp": {"test": [{"chain_id": f"c{i}", "image": im} for i, im in enumerate(images)]}}
    gen_kwargs = {"iterations": 2, "generate_prompt": "{description}", "scorer": {"fid_features": "none"}}
    answers = model.generate_until([_request(i, dict(gen_kwargs)) for i in range(5)])
    scorer = GenCeptionScorer()
    items = [scorer.process_results({"chain_id": f"c{i}", "category": "x"}, [a]) for i, a in enumerate(answers)]
    return model, answers, scorer.aggregate([item["gc@2"] for item in items])


def test_a_rerun_over_a_complete_store_loads_neither_role_and_scores_the_same(tmp_path, counting, offline):
    model, answers, score = _run(tmp_path)
    assert counting == ["describer", "generator"] or counting == ["generator", "describer"]
    assert model.last_stats.hops_computed == 5 * 4
    counting.clear()
    again, answers_again, score_again = _run(tmp_path)
    assert counting == [] and again.describer.loaded is None and again.generator.loaded is None
    assert again.last_stats.hops_computed == 0 and again.last_stats.hops_reused == 5 * 5
    assert answers_again == answers and score_again == score and json.loads(answers[0])["hops"] == 5


def test_a_rerun_with_one_hop_missing_loads_only_what_it_needs(tmp_path, counting, offline):
    _run(tmp_path)
    folder = next(p for p in (tmp_path / "art").rglob("c3*") if p.is_dir())
    (folder / "004.png").unlink()  # the last drawing: the generator's work only
    counting.clear()
    again, _, _ = _run(tmp_path)
    assert counting == ["generator"] and again.last_stats.hops_computed == 1


def test_arguments_are_still_checked_before_the_first_doc(tmp_path, counting):
    with pytest.raises(ActionableError, match="the describer 'no_such_vlm' is not a registered lmms-eval model"):
        CycleModel(describer="no_such_vlm", generator="counting", artifacts=str(tmp_path))
    with pytest.raises(ActionableError, match=r"the generator counting did not load .*unknown argument\(s\) 'foo'"):
        CycleModel(describer="fake_vlm", generator="counting", artifacts=str(tmp_path), **{"generator.foo": 1})
    with pytest.raises(ActionableError, match=r"size: expected a multiple of 8"):
        CycleModel(preset="smoke", artifacts=str(tmp_path), **{"generator.size": 12})
    assert counting == []


def test_a_generator_that_fails_at_first_use_is_one_line(tmp_path, counting, monkeypatch):
    def broken(self, batch_size=2):
        raise OSError("weights gone")

    monkeypatch.setattr(CountingGenerator, "__init__", broken)
    model = CycleModel(describer="fake_vlm", generator="counting", artifacts=str(tmp_path))
    model.engine.progress = False
    model.task_dict = {"sdp": {"test": [{"chain_id": "c0", "image": Image.new("RGB", (8, 8), (1, 2, 3))}]}}
    with pytest.raises(ActionableError, match=r"the generator counting did not load .*OSError: weights gone"):
        model.generate_until([_request(0, {"iterations": 1, "generate_prompt": "{description}"})])
    # with something to draw it loads before the first describe: its errors (and a diffusers
    # pipeline's size rules) stop the run before any describing (issue 21)
    assert "describer" not in counting


def test_planned_names_are_the_built_names(tmp_path):
    """The diffusers plan (the class model_index.json names) and the smoke plan name the store as loading does."""
    from lmms_genbench.smoke.diffusion import build_tiny_pipeline

    smoke = {"seed": 3, "size": 32, "steps": 1}
    assert plan_generator("smoke", smoke).name == build_generator("smoke", **smoke).name
    build_tiny_pipeline(0).save_pretrained(tmp_path / "tiny")
    args = {"pretrained": str(tmp_path / "tiny"), "device": "cpu", "steps": 2, "width": 32, "height": 32}
    plan = plan_generator("diffusers", args)
    built = build_generator("diffusers", **args)
    assert (plan.name, plan.batch_size) == (built.name, built.batch_size)
    assert plan_generator("openai", {}) is None  # no plan: built at once (its constructor loads nothing)


def test_a_lazy_describers_start_is_not_describe_time(tmp_path, counting, offline, monkeypatch):
    """The describe rate a run reports (runs.jsonl, the results file's throughput) is per
    description: a describer's start (a vLLM engine, ~40 s) happens outside the timed call."""
    import time

    slow_init = CountingVlm.__init__

    def slow(self, *args, **kwargs):
        time.sleep(1.0)
        slow_init(self, *args, **kwargs)

    monkeypatch.setattr(CountingVlm, "__init__", slow)
    model, _, _ = _run(tmp_path)
    assert model.last_stats.describe_items == 5 * 2
    assert model.last_stats.describe_seconds < 0.5, model.last_stats
