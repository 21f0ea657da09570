"""The chef model's inferencers against a scripted inner model: which requests it
sends, in which order, with which context, and how loglikelihood values become scores."""

import json
import math

import pytest
from lmms_eval.api.instance import Instance

from lmms_genbench.models.chef import COT_TRIGGER, ChefModel


class ScriptedInner:
    """Answers generate_until with a fixed text and scores options by a table (as a loss)."""

    is_simple = True

    def __init__(self, losses, answer="(B) purple"):
        self.losses, self.answer = losses, answer
        self.calls, self.shown = [], []

    def generate_until(self, requests):
        out = []
        for r in requests:
            ctx, _kwargs, to_visual, doc_id, task, split = r.args
            self.shown.append(to_visual(self.task_dict[task][split][doc_id]))
            self.calls.append(("gen", ctx, len(self.shown[-1])))
            out.append("it looks purple" if ctx.endswith(COT_TRIGGER) else self.answer)
        return out

    def loglikelihood(self, requests):
        out = []
        for r in requests:
            ctx, cont = r.args[:2]
            self.calls.append(("ll", ctx, cont))
            out.append((self.losses[cont.strip()], False))
        return out


def _model(inner, ll_returns="loss"):
    m = ChefModel.__new__(ChefModel)
    m.inner, m.inner_name, m.judge = inner, "scripted", None
    m.ppl, m.ll_returns, m.judge_temperature, m.judge_image = "lmms", ll_returns, 0.0, False
    m.cot_max_new_tokens, m.answer_max_new_tokens = 256, 32
    return m


def _request(inferencer, options=("(A) red", "(B) purple")):
    payload = {"chef": 1, "key": "k", "inferencer": inferencer, "desideratum": "calibration",
               "answer_prompt": "Answer:", "judge_samples": 0, "question": "Q?", "gold_text": "purple",
               "variants": [{"name": "base", "prompt": "Q?\nOptions: (A) red (B) purple", "options": list(options),
                             "labels": ["A", "B"], "option_texts": ["red", "purple"], "gold": 1, "visuals": [0]}],
               "n_visuals": 1}
    return Instance(request_type="generate_until",
                    arguments=(json.dumps(payload), {"max_new_tokens": 8}, lambda doc: ["img"], 0, "t", "s"),
                    idx=0, metadata={"task": "t", "doc_id": 0, "repeats": 1})


def _run(model, inferencer):
    model.task_dict = {"t": {"s": [{}]}}
    (out,) = model.generate_until([_request(inferencer)])
    return json.loads(out)["variants"][0]


def test_multiturn_scores_options_after_the_reasoning():
    inner = ScriptedInner({"(A) red": 2.0, "(B) purple": 1.0})
    v = _run(_model(inner), "multiturn")
    assert [c[0] for c in inner.calls] == ["gen", "ll", "ll"]
    assert inner.calls[0][1].endswith(COT_TRIGGER) and inner.calls[0][2] == 1  # the image goes along
    assert f"{COT_TRIGGER} it looks purple\nAnswer:" in inner.calls[1][1]
    # loss -> score = -loss: B wins; confidence = softmax(-1, -2)[B]
    assert v["scores"] == [-2.0, -1.0] and v["pred"] == 1 and v["cot"] == "it looks purple"
    assert v["confidence"] == pytest.approx(1 / (1 + math.exp(-1)))


def test_ppl_alone_sends_no_generation():
    inner = ScriptedInner({"(A) red": 0.5, "(B) purple": 3.0})
    v = _run(_model(inner), "ppl")
    assert [c[0] for c in inner.calls] == ["ll", "ll"] and v["pred"] == 0 and "cot" not in v


def test_logprob_conventions():
    inner = ScriptedInner({"(A) red": -4.0, "(B) purple": -6.0})
    v = _run(_model(inner, ll_returns="logprob_mean"), "ppl")
    assert v["scores"] == [-4.0, -6.0] and v["pred"] == 0
    v = _run(_model(inner, ll_returns="logprob_sum"), "ppl")  # no tokenizer: the sum, said so
    assert v["ppl_score"] == "sum" and v["pred"] == 0


def test_direct_and_cot_match_the_generated_answer():
    inner = ScriptedInner({})
    v = _run(_model(inner), "direct")
    assert [c[0] for c in inner.calls] == ["gen"] and v["pred"] == 1 and v["answer"] == "(B) purple"
    inner = ScriptedInner({}, answer="no idea")
    v = _run(_model(inner), "cot")
    assert [c[0] for c in inner.calls] == ["gen", "gen"] and v["pred"] == -1


def test_a_bad_request_fails_alone():
    model = _model(ScriptedInner({"(A) red": 1.0, "(B) purple": 2.0}))
    model.task_dict = {"t": {"s": [{}]}}
    bad = Instance(request_type="generate_until", arguments=("not json", {}, lambda d: [], 0, "t", "s"), idx=0,
                   metadata={"task": "t", "doc_id": 0, "repeats": 1})
    out = [json.loads(o) for o in model.generate_until([bad, _request("ppl")])]
    assert "error" in out[0] and out[1]["variants"][0]["pred"] == 0


def _with_visual(request, doc_to_visual, doc_id=0):
    ctx, kwargs, _, _, task, split = request.args
    return Instance(request_type="generate_until", arguments=(ctx, kwargs, doc_to_visual, doc_id, task, split),
                    idx=0, metadata={"task": task, "doc_id": doc_id, "repeats": 1})


def test_images_come_from_the_full_doc_and_a_missing_one_fails_the_doc():
    """lmms-eval renders the payload from a doc without its Image columns; the chef model applies
    the request's doc_to_visual to task_dict's full row. No image there: a failed doc with the
    reason, never a text-only score; an empty slot (a text-only question) shows no image."""
    inner = ScriptedInner({"(A) red": 2.0, "(B) purple": 1.0})
    model = _model(inner)
    model.task_dict = {"t": {"s": [{"image": "IMG"}, {}, {"image": None}]}}

    def to_visual(doc):
        if "image" not in doc:
            raise ValueError("the doc has no image column 'image'")
        return [doc["image"]]

    out = [json.loads(o) for o in model.generate_until([_with_visual(_request("multiturn"), to_visual, doc_id)
                                                         for doc_id in range(3)])]
    assert out[1] == {"error": "ValueError: the doc has no image column 'image'"}
    assert inner.shown == [["IMG"], []]  # the reasoning of doc 0, then of doc 2
    assert out[0]["variants"][0]["n_images"] == 1 and out[0]["variants"][0]["pred"] == 1
    assert out[2]["variants"][0]["n_images"] == 0


def test_a_visual_layout_mismatch_fails_the_doc():
    model = _model(ScriptedInner({"(A) red": 1.0, "(B) purple": 2.0}))
    model.task_dict = {"t": {"s": [{}]}}
    (out,) = model.generate_until([_with_visual(_request("ppl"), lambda doc: [])])
    assert "0 visual slots, the payload lays out 1" in json.loads(out)["error"]


def _pope_request(inferencer, gold, reader="lenient"):
    payload = {"chef": 1, "key": "k", "group": None, "inferencer": inferencer, "desideratum": "hallucination",
               "answer_reader": reader, "pope": True,
               "scoring": {"copies": "original", "chance": None, "original": True},
               "answer_prompt": "Answer:", "judge_samples": 0, "question": "Is there a dog?", "gold_text": "No",
               "variants": [{"name": "base", "prompt": "Is there a dog?", "options": ["Yes", "No"],
                             "labels": ["A", "B"], "option_texts": ["Yes", "No"], "gold": gold, "visuals": [0]}],
               "n_visuals": 1}
    return Instance(request_type="generate_until",
                    arguments=(json.dumps(payload), {"max_new_tokens": 8}, lambda doc: ["img"], 0, "t", "s"),
                    idx=0, metadata={"task": "t", "doc_id": 0, "repeats": 1})


@pytest.mark.parametrize("inferencer", ["direct", "cot"])
@pytest.mark.parametrize("answer", ["I don't know.", "Not sure.", "I cannot tell."])
def test_free_text_naming_no_option_is_never_a_no(inferencer, answer):
    """The package's readers (answer_reader: lenient); ChEF's own reading is below."""
    from lmms_genbench.chef import results

    model = _model(ScriptedInner({}, answer=answer))
    model.task_dict = {"t": {"s": [{}]}}
    for gold in (0, 1):  # the truth Yes, then No: the answer is wrong both times
        (out,) = model.generate_until([_pope_request(inferencer, gold)])
        assert json.loads(out)["variants"][0]["pred"] == -1
        rec = results.process_results({}, [out])
        assert results.aggregate([rec["pope_accuracy"]]) == 0.0 and results.aggregate([rec["n_unmatched"]]) == 1
    model = _model(ScriptedInner({}, answer="No, there is none."))
    model.task_dict = {"t": {"s": [{}]}}
    (out,) = model.generate_until([_pope_request(inferencer, 1)])
    assert results.aggregate([results.process_results({}, [out])["pope_accuracy"]]) == 1.0


@pytest.mark.parametrize(("answer", "pred"), [("I don't know.", 0), ("Not sure.", 0), ("NO.", 0), ("B", 0),
                                              ("There is not a dog.", 1), ("Yes and no.", 1), ("No", 1)])
def test_chefs_reader_reads_pope_free_text_as_its_pope_metric(answer, pred):
    """answer_reader: chef (the default): POPE_Metric's reading, every answer a Yes or a No."""
    model = _model(ScriptedInner({}, answer=answer))
    model.task_dict = {"t": {"s": [{}]}}
    (out,) = model.generate_until([_pope_request("direct", 1, reader="chef")])
    v = json.loads(out)["variants"][0]
    assert v["pred"] == pred and "unread" not in v


def test_an_unreadable_answer_is_counted_with_its_reason():
    from lmms_genbench.chef import results

    model = _model(ScriptedInner({}, answer="Not B, it's A."))
    model.task_dict = {"t": {"s": [{}]}}
    (out,) = model.generate_until([_pope_request("direct", 1, reader="lenient")])
    assert json.loads(out)["variants"][0]["unread"] == "negation"
    rec = results.process_results({}, [out])
    assert results.aggregate([rec["unreadable"]]) == {"negation": 1}
