"""The in-process adapter to lmms-eval models (:mod:`lmms_genbench.host`)."""

import lmms_eval.models
import pytest

# Model identities key artifact stores and call caches on users' disks: these
# strings were computed with the code before the adapter existed and must not move.
PINNED_IDENTITIES = [
    ("llava_hf", {"pretrained": "llava-hf/llava-1.5-7b-hf", "device": "cuda", "batch_size": 4},
     "llava_hf-llava-hf_llava-1.5-7b-hf-f114cc7c-91bf6482"),
    # an absolute path: its folder name, not the whole path
    ("llava_hf", {"pretrained": "/models/tiny-llava/", "dtype": "float32", "device_map": "cpu"},
     "llava_hf-tiny-llava-2bc83de0-56a2b5e5"),
    # credentials never enter the identity
    ("openai", {"model_version": "gpt-4o", "api_key": "SECRET"}, "openai-gpt-4o-57a2032f-30c2c89d"),
    ("dummy", {"response": "x"}, "dummy-dummy-ebbe2dfb-58e3fa9b"),
]


class _Built:
    """Stands in for a registered lmms-eval model class: records its arguments."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


@pytest.fixture
def fake_registry(monkeypatch):
    names = []

    def get_model(name, *a, **kw):
        names.append(name)
        return _Built

    monkeypatch.setattr(lmms_eval.models, "get_model", get_model)
    return names


@pytest.mark.parametrize("name, args, expected", PINNED_IDENTITIES)
def test_builders_keep_their_identity_strings(fake_registry, name, args, expected, monkeypatch):
    from lmms_genbench import host
    from lmms_genbench.autobench.examiner import build_examiner
    from lmms_genbench.models.cycle import build_describer

    # the fake class behind the real names reads no folder: the pinned paths need not exist
    monkeypatch.setattr(host, "read_weights_folder", lambda name, args: None)

    describer = build_describer(name, dict(args))
    examiner = build_examiner(name, dict(args))
    assert describer.name == expected and examiner.name == expected
    assert describer.lm.kwargs == args and examiner.lm.kwargs == args  # every argument reaches the model
    assert fake_registry == [name, name]


# -- identity and construction ---------------------------------------------------


@pytest.mark.parametrize("name, args, expected", PINNED_IDENTITIES)
def test_model_identity_is_pinned(name, args, expected):
    from lmms_genbench.host import model_identity

    assert model_identity(name, args) == expected


def test_a_relative_local_folder_is_named_by_its_folder(tmp_path, monkeypatch):
    from lmms_genbench.host import model_identity, model_legacy_names

    monkeypatch.setenv("LMMS_GENBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "my-model").mkdir(parents=True)
    name = model_identity("llava_hf", {"pretrained": "models/my-model"})
    # its label is the folder's name; its hash holds the folder's content digest (core/checkpoints.py),
    # and the name it had before that (a store so named is adopted) is pinned
    assert name.startswith("llava_hf-my-model-e5fe511f-") and name != "llava_hf-my-model-e5fe511f-f361c876"
    assert model_legacy_names("llava_hf", {"pretrained": "models/my-model"}) == ("llava_hf-my-model-e5fe511f-f361c876",)
    (tmp_path / "models" / "my-model" / "model.safetensors").write_bytes(b"new weights")
    assert model_identity("llava_hf", {"pretrained": "models/my-model"}) != name  # weights changed in place
    # a hub id that is no folder here keeps its whole name
    assert model_identity("llava_hf", {"pretrained": "models/other-model"}) == (
        "llava_hf-models_other-model-ab213eaf-3a06e1c7")


def test_build_model_passes_every_argument(fake_registry):
    from lmms_genbench.host import build_model

    lm = build_model("llava_hf", {"pretrained": "x", "device": "cpu"})
    assert isinstance(lm, _Built) and lm.kwargs == {"pretrained": "x", "device": "cpu"}
    assert fake_registry == ["llava_hf"]


def test_bad_names_and_args_are_named():
    from lmms_genbench.host import build_model, model_identity

    with pytest.raises(ValueError, match="^name: "):
        build_model("", {})
    with pytest.raises(TypeError, match="^args: "):
        model_identity("llava_hf", "pretrained=x")


# -- requests --------------------------------------------------------------------


class RecordingLM:
    """Answers every request from its doc, as a real model reads it, and records the requests."""

    is_simple = True

    def __init__(self, answers=None, fail=False):
        self.task_dict = {}
        self.requests, self.seen = [], []
        self.answers, self.fail = answers, fail

    def generate_until(self, requests):
        self.requests += requests
        if self.fail:
            raise RuntimeError("out of memory")
        out = []
        for r in requests:
            if self.is_simple:
                ctx, kwargs, to_visual, doc_id, task, split = r.args
                seen = to_visual(self.task_dict[task][split][doc_id])
            else:
                ctx, to_messages, kwargs, doc_id, task, split = r.args
                seen = to_messages(self.task_dict[task][split][doc_id])
            kwargs.pop("until", None)  # real models mutate their kwargs
            self.seen.append(seen)
            out.append(f"{ctx} #{doc_id}")
        return out if self.answers is None else self.answers

    def loglikelihood(self, requests):
        self.requests += requests
        out = []
        for r in requests:
            ctx, continuation, to_visual, doc_id, task, split = r.args
            self.seen.append(to_visual(self.task_dict[task][split][doc_id]))
            out.append((-float(len(continuation)), False))
        return out if self.answers is None else self.answers


class ChatLM(RecordingLM):
    is_simple = False


def test_simple_requests_have_lmms_eval_simple_shape():
    from lmms_genbench.host import generate

    lm, kwargs = RecordingLM(), {"max_new_tokens": 3, "until": ["\n"]}
    out = generate(lm, [("a", kwargs, ["img1", "img2"]), ("b", kwargs, [])], task="t", split="s")
    assert out == ["a #0", "b #1"]
    first = lm.requests[0]
    assert first.request_type == "generate_until" and first.idx == 0
    assert first.metadata == {"task": "t", "doc_id": 0, "repeats": 1}
    assert first.args[0] == "a" and first.args[3:] == (0, "t", "s") and callable(first.args[2])
    assert lm.seen == [["img1", "img2"], []]
    # each request had its own copy; the caller's dict is untouched
    assert kwargs == {"max_new_tokens": 3, "until": ["\n"]}
    assert first.args[1] is not lm.requests[1].args[1]
    assert lm.task_dict == {}


def test_chat_requests_carry_messages():
    from lmms_genbench.host import DEFAULT_SPLIT, DEFAULT_TASK, generate

    lm = ChatLM()
    assert generate(lm, [("Describe.", None, ["img"])]) == ["Describe. #0"]
    ctx, to_messages, kwargs, doc_id, task, split = lm.requests[0].args
    assert (ctx, kwargs, doc_id, task, split) == ("Describe.", {}, 0, DEFAULT_TASK, DEFAULT_SPLIT)
    assert lm.seen == [[{"role": "user", "content": [{"type": "image", "url": "img"},
                                                     {"type": "text", "text": "Describe."}]}]]


def test_task_dict_is_cleared_when_the_model_raises():
    from lmms_genbench.host import generate

    lm = RecordingLM(fail=True)
    with pytest.raises(RuntimeError, match="out of memory"):
        generate(lm, [("a", {}, ["img"])])
    assert lm.requests and lm.task_dict == {}


def test_a_wrong_number_of_results_is_an_error():
    from lmms_genbench.host import generate, loglikelihood

    with pytest.raises(RuntimeError, match=r"RecordingLM.generate_until returned 1 results for 2 requests"):
        generate(RecordingLM(answers=["only one"]), [("a", {}, []), ("b", {}, [])])
    with pytest.raises(RuntimeError, match=r"loglikelihood returned 0 results for 1 requests"):
        loglikelihood(RecordingLM(answers=[]), [("a", " b", [])])


def test_wrapped_outputs_are_unwrapped_and_others_passed_on():
    from lmms_eval.api.instance import GenerationResult

    from lmms_genbench.host import generate

    answers = [GenerationResult(text="wrapped"), ("paired", {"output_tokens": 2}), ["round 1", "round 2"]]
    out = generate(RecordingLM(answers=answers), [("a", {}, [])] * 3)
    assert out == ["wrapped", "paired", ["round 1", "round 2"]]


def test_loglikelihood_requests_have_one_shape_for_both_apis():
    from lmms_genbench.host import loglikelihood

    for lm in (RecordingLM(), ChatLM()):
        out = loglikelihood(lm, [("Q?", " yes", ["img"]), ("Q?", " no way", [])], task="t", split="s")
        assert out == [(-4.0, False), (-7.0, False)]
        r = lm.requests[1]
        assert r.request_type == "loglikelihood" and r.metadata == {"task": "t", "doc_id": 1, "repeats": 1}
        assert r.args[:2] == ("Q?", " no way") and r.args[3:] == (1, "t", "s")
        assert lm.seen == [["img"], []] and lm.task_dict == {}


def test_no_items_sends_nothing():
    from lmms_genbench.host import generate, loglikelihood

    lm = RecordingLM(fail=True)
    assert generate(lm, []) == [] and loglikelihood(lm, []) == [] and lm.requests == []


@pytest.mark.parametrize("items, error, message", [
    ("abc", TypeError, r"^items: expected a sequence"),
    ([("a", {})], ValueError, r"^items\[0\]: expected \(context, gen_kwargs, images\)"),
    ([("a", {}, []), (1, {}, [])], TypeError, r"^items\[1\] context: expected str"),
    ([("a", "max_new_tokens=3", [])], TypeError, r"^items\[0\] gen_kwargs: expected Mapping or None"),
    ([("a", {}, "img.png")], TypeError, r"^items\[0\] images: expected a list"),
])
def test_malformed_items_are_named_before_anything_is_sent(items, error, message):
    from lmms_genbench.host import generate

    lm = RecordingLM()
    with pytest.raises(error, match=message):
        generate(lm, items)
    assert lm.requests == []


def test_a_loglikelihood_continuation_must_be_text():
    from lmms_genbench.host import loglikelihood

    with pytest.raises(TypeError, match=r"^items\[0\] continuation: expected str"):
        loglikelihood(RecordingLM(), [("a", None, [])])


# -- what the callers add ----------------------------------------------------------


def test_examiner_sends_a_blank_image_with_text_only_prompts_and_wants_text():
    from lmms_genbench.autobench.examiner import LmmsExaminer

    lm = RecordingLM()
    assert LmmsExaminer(lm, "x", text_only="blank").generate("Q?", (), {"max_new_tokens": 2}) == "Q? #0"
    (image,) = lm.seen[0]
    assert image.size == (64, 64) and image.getpixel((0, 0)) == (255, 255, 255)
    assert LmmsExaminer(lm, "x").generate("Q?") == "Q? #0" and lm.seen[1] == []
    with pytest.raises(TypeError, match="examiner returned list, not text"):
        LmmsExaminer(RecordingLM(answers=[["round 1", "round 2"]]), "x").generate("Q?")
