"""The cycle model's request handling, with fake describer and generator."""


from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from PIL import Image

from lmms_genbench.engine import ArtifactStore, Chain, CycleEngine
from lmms_genbench.models.cycle import CycleModel

from .fakes import FakeDescriber, FakeGenerator


def _model(tmp_path):
    model = CycleModel.__new__(CycleModel)  # skip building real networks
    lmms.__init__(model)
    model.store = ArtifactStore(tmp_path)
    model.describer, model.generator = FakeDescriber(), FakeGenerator()
    model.engine = CycleEngine(model.describer, model.generator)
    model.last_stats = None
    return model


def _request(doc_id, gen_kwargs):
    args = ("Describe the image.", gen_kwargs, lambda doc: [doc["image"]], doc_id, "sdp", "test")
    return Instance("generate_until", args, 0, {"task": "sdp", "doc_id": doc_id, "repeats": 1})


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
    model.scorer_preset = "smoke"
    model._spec.cache_clear()
    assert Chain.from_json(model.generate_until([_request(0, dict(scored))])[0]).scorer == {"preset": "smoke", "sources": ["x"]}
    named = {**plain, "scorer": {"preset": "paper"}}
    assert Chain.from_json(model.generate_until([_request(0, dict(named))])[0]).scorer == {"preset": "paper"}
