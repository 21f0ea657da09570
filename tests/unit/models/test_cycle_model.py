"""The cycle model's request handling, with fake describer and generator."""


from PIL import Image

from lmms_genbench.engine import Chain, CycleEngine
from lmms_genbench.models.cycle import CycleModel

from tests.support.fakes import FakeDescriber, FakeGenerator
from tests.support.fakes import cycle_model as _model
from tests.support.fakes import cycle_request as _request


def test_each_doc_can_choose_its_chain_direction(tmp_path):
    model = _model(tmp_path)
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    docs = [
        {"chain_id": "p1/text", "direction": "text_first", "caption": "a square of colour 1 2 3", "image": image},
        {"chain_id": "p1/image", "direction": "image_first", "caption": "unused", "image": image},
        {"chain_id": "p2/text", "direction": "text_first", "caption": "a square of colour 4 5 6", "image": image},
    ]
    model.task_dict = {"sdp": {"test": docs}}
    gen_kwargs = {"generations": 3, "direction_field": "direction", "seed_field": "caption",
                  "generate_prompt": "{description}"}
    chains = [Chain.from_json(r) for r in model.generate_until([_request(i, dict(gen_kwargs)) for i in range(3)])]
    assert [c.direction for c in chains] == ["text_first", "image_first", "text_first"]
    assert [chains[0].kind(h) for h in range(chains[0].hops)] == ["text", "image", "text", "image"]
    assert [chains[1].kind(h) for h in range(chains[1].hops)] == ["image", "text", "image", "text"]
    assert chains[0].path(0).read_text() == "a square of colour 1 2 3"
    # the fake generator draws the colour named in the prompt; the fake describer reads it back
    assert chains[0].path(2).read_text() == "a square of colour 11 12 13"
    assert all(c.status == "ok" and c.length == 3 and c.hops == 4 and c.task == "sdp" for c in chains)
    # one engine run per direction (image-first, then text-first), each breadth-first:
    # hop 2 of the image-first doc, then hops 1 and 3 of both text-first docs together
    assert model.generator.calls == [1, 2, 2]


def test_scorer_settings_ride_on_the_chain_and_stay_out_of_its_key(tmp_path):
    model = _model(tmp_path)
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    model.task_dict = {"sdp": {"test": [{"chain_id": "a", "image": image}]}}
    plain = {"iterations": 1, "generate_prompt": "{description}"}
    scored = {**plain, "scorer": {"sources": ["x"]}}
    first = Chain.from_json(model.generate_until([_request(0, dict(plain))])[0])
    second = Chain.from_json(model.generate_until([_request(0, dict(scored))])[0])
    assert first.scorer == {} and second.scorer == {"sources": ["x"]}
    # the same chain: changing the scorer recomputes nothing
    assert second.namespace == first.namespace and model.last_stats.hops_reused == 3
    # a smoke model's chains are scored offline unless the task names a preset
    model.scorer_preset = "smoke"  # the spec memo is keyed by it: nothing to clear
    assert Chain.from_json(model.generate_until([_request(0, dict(scored))])[0]).scorer == {"preset": "smoke", "sources": ["x"]}
    named = {**plain, "scorer": {"preset": "paper"}}
    assert Chain.from_json(model.generate_until([_request(0, dict(named))])[0]).scorer == {"preset": "paper"}


# -- describer=vllm: defaults and resume -----------------------------------------------


class FakeVllm:
    """Mimics lmms-eval 0.7.3's vllm chat class where chains meet it: the
    max(request, own) length rule, ``batch_size`` requests per engine call."""

    is_simple = False
    built: list = []

    def __init__(self, model, batch_size=1, gpu_memory_utilization=0.8, max_new_tokens=4096, **kwargs):
        self.built.append({"model": model, "batch_size": batch_size,
                           "gpu_memory_utilization": gpu_memory_utilization, **kwargs})
        self.batch_size, self.max_new_tokens, self.calls, self.task_dict = int(batch_size), max_new_tokens, [], {}

    def _select_max_new_tokens(self, request_max_new_tokens):
        return max(int(request_max_new_tokens), self.max_new_tokens)

    def generate_until(self, requests):
        out = []
        for start in range(0, len(requests), self.batch_size):
            batch = requests[start:start + self.batch_size]
            self.calls.append(len(batch))
            out += [" ".join(["word"] * self._select_max_new_tokens(r.args[2]["max_new_tokens"])) for r in batch]
        return out


def _vllm_cycle(monkeypatch, tmp_path, **args):
    import lmms_eval.models
    import torch

    from lmms_genbench.models import cycle_roles

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name, *a, **k: {"vllm": FakeVllm}[name])
    # the smoke generator's name, the fake's drawings
    monkeypatch.setattr(cycle_roles, "plan_generator", lambda name, args: None)
    monkeypatch.setattr(cycle_roles, "build_generator_or_explain", lambda name, args, otherwise="": FakeGenerator())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    FakeVllm.built = []
    return CycleModel(describer="vllm", generator="smoke", artifacts=str(tmp_path), describer_batch=4,
                      **{"describer.model": "some/vlm", **args})


def test_vllm_describer_defaults_batch_and_length_and_resumes_after_machine_settings_change(tmp_path, monkeypatch):
    model = _vllm_cycle(monkeypatch, tmp_path)
    assert FakeVllm.built == []  # the engine starts at the first description, not before
    images = [Image.new("RGB", (8, 8), (i, 20, 30)) for i in range(6)]
    model.task_dict = {"sdp": {"test": [{"chain_id": f"c{i}", "image": im} for i, im in enumerate(images)]}}
    gen_kwargs = {"iterations": 2, "generate_prompt": "{description}", "max_new_tokens": 24, "temperature": 0}
    chains = [Chain.from_json(r) for r in model.generate_until([_request(i, dict(gen_kwargs)) for i in range(6)])]
    assert all(c.status == "ok" for c in chains)
    # batches from describer_batch, a memory fraction a CPU can give
    assert FakeVllm.built == [{"model": "some/vlm", "batch_size": 4, "gpu_memory_utilization": 0.1}]
    # the task's length, not the class's 4096 floor, in batches of describer_batch
    assert {len(c.path(h).read_text().split()) for c in chains for h in (1, 3)} == {24}
    assert model.describer.lm.calls == [4, 2, 4, 2]
    computed = model.last_stats

    # another machine: other memory fraction, parallelism and scheduling; same chains
    again = _vllm_cycle(monkeypatch, tmp_path, **{"describer.gpu_memory_utilization": 0.5,
                                                  "describer.tensor_parallel_size": 2,
                                                  "describer.max_num_seqs": 8, "describer.batch_size": 6})
    assert again.describer.name == model.describer.name
    again.task_dict = model.task_dict
    resumed = [Chain.from_json(r) for r in again.generate_until([_request(i, dict(gen_kwargs)) for i in range(6)])]
    assert [c.namespace for c in resumed] == [c.namespace for c in chains]
    stats = again.last_stats
    assert stats.describe_calls == stats.generate_calls == 0
    assert FakeVllm.built == [] and again.describer.loaded is None  # every hop stored: no engine started
    assert again.describer.lm.calls == []  # loads it now
    assert FakeVllm.built[0]["gpu_memory_utilization"] == 0.5 and FakeVllm.built[0]["batch_size"] == 6
    # every stored hop of the first run (seed, two descriptions, two drawings per chain) reused
    assert stats.hops_reused == computed.seeds_stored + computed.describe_items + computed.generate_items == 6 * 5


def test_vllm_defaults_leave_gpus_and_other_describers_alone(tmp_path, monkeypatch):
    import torch

    _vllm_cycle(monkeypatch, tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    CycleModel(describer="vllm", generator="smoke", artifacts=str(tmp_path), **{"describer.model": "m"}).describer.load()
    # the class's own memory fraction on a GPU; describer_batch's default
    assert FakeVllm.built[-1] == {"model": "m", "batch_size": 16, "gpu_memory_utilization": 0.8}


def test_a_vllm_start_failure_names_the_memory_setting(tmp_path, monkeypatch):
    import pytest

    class Failing(FakeVllm):
        def __init__(self, **kwargs):
            raise RuntimeError("Engine core initialization failed. See root cause above.")

    _vllm_cycle(monkeypatch, tmp_path)
    import lmms_eval.models

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name, *a, **k: Failing)
    from lmms_genbench.core.errors import ActionableError

    model = CycleModel(describer="vllm", generator="smoke", artifacts=str(tmp_path), **{"describer.model": "m"})
    model.task_dict = {"sdp": {"test": [{"chain_id": "c0", "image": Image.new("RGB", (8, 8), (1, 2, 3))}]}}
    # the engine starts at the first description: its failure is the same one line there
    with pytest.raises(ActionableError, match=r"RuntimeError: Engine core initialization failed.*"
                                              r"describer.gpu_memory_utilization \(here 0.1\)"):
        model.generate_until([_request(0, {"iterations": 1, "generate_prompt": "{description}"})])


# -- docs are read when their wave runs ------------------------------------------------


class CountingSplit:
    """A dataset split that counts whole-doc reads (which decode images, as a Hugging
    Face dataset's do); its narrow view holds the placing fields only."""

    def __init__(self, n, fields=None):
        self.rows = [{"chain_id": f"c{i}", "image": Image.new("RGB", (8, 8), (i, 50, 90))} for i in range(n)]
        self.column_names = ["chain_id", "image"]
        self.fields = fields
        self.full_reads = []

    def select_columns(self, names):
        narrow = CountingSplit(0, names)
        narrow.rows = [{k: r[k] for k in names} for r in self.rows]
        return narrow

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        if self.fields is None:
            self.full_reads.append(i)
        return self.rows[i]


def test_docs_are_read_when_their_wave_runs_not_before(tmp_path):
    model = _model(tmp_path)
    split = CountingSplit(40)
    model.task_dict = {"sdp": {"test": split}}
    reads_at_call = []

    class Recording(FakeDescriber):
        def describe(self, images, prompt, gen_kwargs):
            reads_at_call.append(len(split.full_reads))
            return super().describe(images, prompt, gen_kwargs)

    model.describer = Recording()
    model.engine = CycleEngine(model.describer, model.generator, describer_batch=4, wave=4, progress=False)
    chains = [Chain.from_json(r) for r in model.generate_until(
        [_request(i, {"iterations": 1, "generate_prompt": "{description}"}) for i in range(40)])]
    assert [c.chain_id for c in chains] == [f"c{i}" for i in range(40)]  # keys from the narrow view
    assert all(c.status == "ok" for c in chains)
    assert sorted(split.full_reads) == list(range(40))  # each doc read whole once
    assert reads_at_call[0] <= 12  # the first waves only (4 per wave), not all 40


def test_a_hugging_face_dataset_is_keyed_from_its_narrow_view(tmp_path):
    import datasets

    model = _model(tmp_path)
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    ds = datasets.Dataset.from_list([{"question_id": f"q{i}", "image": image} for i in range(3)],
                                    features=datasets.Features({"question_id": datasets.Value("string"),
                                                                "image": datasets.Image()}))
    model.task_dict = {"sdp": {"test": ds}}
    chains = [Chain.from_json(r) for r in model.generate_until(
        [_request(i, {"iterations": 1, "generate_prompt": "{description}"}) for i in range(3)])]
    assert [c.chain_id for c in chains] == ["q0", "q1", "q2"] and all(c.status == "ok" for c in chains)
