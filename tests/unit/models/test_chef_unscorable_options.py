"""A PPL option the chef model cannot score fails its doc (counted in n_failed, with the reason);
before, it became pred -1 and was scored as the model's wrong answer."""

import json

from lmms_eval.api.instance import Instance

import lmms_genbench.chef.option_logprob as option_logprob
from lmms_genbench.chef.results import process_results
from lmms_genbench.models.chef import ChefModel


class LossTable:
    """An inner model answering loglikelihood requests from a table of losses."""

    is_simple = True

    def __init__(self, losses):
        self.losses = losses

    def loglikelihood(self, requests):
        return [(self.losses[r.args[1].strip()], False) for r in requests]


def _model(inner, ppl):
    m = ChefModel.__new__(ChefModel)
    m.inner, m.inner_name, m.judge = inner, "table", None
    m.ppl, m.ll_returns, m.judge_temperature, m.judge_image = ppl, "loss", 0.0, False
    m.cot_max_new_tokens, m.answer_max_new_tokens = 256, 32
    m.task_dict = {"t": {"s": [{}, {}]}}
    return m


def _request(doc_id, options):
    payload = {"chef": 1, "key": f"k{doc_id}", "inferencer": "ppl", "desideratum": "calibration",
               "answer_prompt": "Answer:", "judge_samples": 0, "question": "Q?", "gold_text": "purple",
               "variants": [{"name": "base", "prompt": "Q?", "options": list(options), "labels": ["A", "B"],
                             "option_texts": ["red", "purple"], "gold": 1, "visuals": [0]}],
               "n_visuals": 1}
    return Instance(request_type="generate_until",
                    arguments=(json.dumps(payload), {}, lambda doc: ["img"], doc_id, "t", "s"),
                    idx=0, metadata={"task": "t", "doc_id": doc_id, "repeats": 1})


def test_an_option_the_hf_scorer_cannot_tokenise_fails_its_doc_alone(monkeypatch):
    def fake_logprob(inner, ctx, cont, images):
        if cont == " (A) red!":
            raise ValueError(f"continuation {cont!r} changes the tokenisation of the context; start options with a space")
        return {" (A) red": -2.0, " (B) purple": -1.0}[cont], 2

    monkeypatch.setattr(option_logprob, "option_logprob", fake_logprob)
    model = _model(None, "hf")
    good, bad = (json.loads(o) for o in model.generate_until(
        [_request(0, ["(A) red", "(B) purple"]), _request(1, ["(A) red!", "(B) purple"])]))
    assert good["variants"][0]["pred"] == 1 and "error" not in good
    assert bad["error"].startswith("base: option 0 ('(A) red!') could not be scored: continuation")

    got = process_results({}, [json.dumps(bad)])
    rec = got["n_failed"][1]
    assert rec["failed"] and "could not be scored" in rec["reason"] and "acc" in got


def test_a_non_finite_loglikelihood_fails_the_doc():
    model = _model(LossTable({"(A) red": float("nan"), "(B) purple": 1.0}), "lmms")
    (out,) = (json.loads(o) for o in model.generate_until([_request(0, ["(A) red", "(B) purple"])]))
    assert out["error"] == "base: an option's log-likelihood is not a finite number"
    assert out["variants"][0]["scores"] == [None, -1.0]
