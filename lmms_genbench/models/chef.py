"""lmms-eval model type ``chef``: ChEF's inferencers around any lmms-eval model.

    lmms-eval --model chef \\
        --model_args inner=llava_hf,inner.pretrained=llava-hf/llava-1.5-7b-hf \\
        --tasks chef_calibration_mmbench

Why a wrapper and not lmms-eval's native ``multiple_choice``: ChEF's default
inferencer for five of the six desiderata is Multi-Turn (a chain of thought is
generated first and the options are then scored with it in the context), which
chains a generation into a likelihood request; the native types cannot chain.
The wrapper issues only ordinary ``generate_until`` and ``loglikelihood``
requests to the inner model, so every lmms-eval model implementing them works.

Each ``chef_*`` request's context is the JSON payload of
:func:`lmms_genbench.chef.recipe.render`; its visuals are the request's
``doc_to_visual`` (:func:`lmms_genbench.chef.recipe.visuals`) applied to the full
doc, ``self.task_dict[task][split][doc_id]``: lmms-eval 0.7.3 renders contexts
from docs whose Image columns it dropped. A doc whose images cannot be found
answers ``{"error": ...}`` (counted by ``n_failed``), never a text-only score.
Per variant:

* ``direct``: generate after ``answer_prompt``, then read the text as an option with the
  recipe's ``answer_reader`` (:mod:`lmms_genbench.chef.readers`: ChEF's own reading by default);
* ``ppl``: one loglikelihood request per option (continuation = the option);
* ``cot``: generate after "Let's think step by step." (``cot_max_new_tokens``,
  256 as ChEF), then generate the answer with the reasoning in the context;
* ``multiturn``: the CoT reasoning, then PPL over the options with it.

PPL score of an option (ChEF: mean token log-probability). lmms-eval 0.7.3 has
no single convention for the number a model's ``loglikelihood`` returns: its
own ``multiple_choice`` code treats it as a loss and takes the argmin, and
``llava_hf`` returns the mean cross-entropy over the continuation tokens (the
assistant turn, so the chat template's end-of-turn tokens are included). The
argument ``ll_returns`` says what the inner model returns:

* ``loss`` (default; llava_hf): score = −value = mean token log-probability;
* ``logprob_mean``: score = value;
* ``logprob_sum`` (lm-eval-harness style): score = value / number of tokens of
  the continuation counted with the inner model's ``tokenizer`` attribute, or
  the sum itself when it has none (then stated in the response as
  ``"ppl_score": "sum"``).

The response per request is JSON: per variant the predicted and gold option
index, the options' scores and the softmax confidence (PPL-based inferencers),
the generated texts; plus the judge's scores when the recipe asks for them.
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any

from lmms_eval.api.model import lmms

from .. import host, preflight
from ..chef.readers import read_answer
from ..command import read_command
from ..command.cycle import OFFLINE_HINT
from ..core.model_args import optional_int, split_prefixed

logger = logging.getLogger(__name__)

COT_TRIGGER = "Let's think step by step."
INNER_TASK, INNER_SPLIT = "chef_inner", "requests"
LL_RETURNS = ("loss", "logprob_mean", "logprob_sum")
#: inner models whose lmms-eval 0.7.3 loglikelihood fails on transformers 5 (see chef_scoring)
HF_SCORED = frozenset({"llava_hf"})

#: The judge's prompt for language performance (ChEF used GPT-4 with its own
#: prompt, not published in the paper); scored 0–10 from the first number.
JUDGE_PROMPT = (
    "You are grading the reasoning an assistant wrote before answering a multiple-choice "
    "question about an image.\n"
    "Question: {question}\n"
    "Correct answer: {answer}\n"
    "Assistant's reasoning: {reasoning}\n"
    "Rate the language quality of the reasoning from 0 to 10: is it fluent, coherent, "
    "relevant to the question and consistent with the correct answer? "
    "Reply with the number only.\nScore:"
)


def parse_judge_score(text: str) -> float | None:
    m = re.search(r"\d+(?:\.\d+)?", text)
    if not m:
        return None
    value = float(m.group())
    return value if 0 <= value <= 10 else None


def _slots(images, payload: dict[str, Any]) -> list:
    """The doc's visual slots, checked against the payload's layout."""
    images = list(images or [])
    if len(images) != payload.get("n_visuals"):
        raise ValueError(f"doc_to_visual gave {len(images)} visual slots, the payload lays out "
                         f"{payload.get('n_visuals')}: the task's doc_to_visual must be utils.doc_to_visual")
    return images


class ChefModel(lmms):
    """Run ChEF inferencers through an inner lmms-eval model.

    Args:
        inner: registered lmms-eval model name (``llava_hf``, ``qwen2_vl``, ...);
            its arguments as ``inner.<arg>=<value>``.
        preset: ``smoke`` = the tiny random-weight llava (offline tests).
        ll_returns: what the inner model's loglikelihood returns (see module doc).
        ppl: how options are scored: ``lmms`` (the inner model's loglikelihood
            requests), ``hf`` (:mod:`lmms_genbench.chef.option_logprob`, for
            LLaVA-style HF models whose loglikelihood is broken in lmms-eval
            0.7.3), ``auto`` (``hf`` for ``llava_hf``, else ``lmms``).
        cot_max_new_tokens: reasoning length (256, as ChEF).
        answer_max_new_tokens: answer length for direct and cot.
        judge: ``inner`` (reuse the inner model) or a model name with
            ``judge.<arg>=...``; needed only by recipes with ``judge_samples``.
        judge_temperature: sampling temperature for judge samples after the
            first (the first is greedy).
        judge_image: also show the judge the question's image (default true:
            ChEF's GPT-4 judge read text only, but lmms-eval 0.7.3's llava_hf
            cannot generate from text alone; set false for text judges).
        batch_size, max_batch_size, device: passed by lmms-eval; set
            ``inner.batch_size`` etc. instead.
    """

    def __init__(
        self,
        inner: str | None = None,
        preset: str | None = None,
        ll_returns: str = "loss",
        ppl: str = "auto",
        cot_max_new_tokens: int = 256,
        answer_max_new_tokens: int = 32,
        judge: str | None = None,
        judge_temperature: float = 0.7,
        judge_image: bool = True,
        batch_size: Any = None,
        max_batch_size: Any = None,
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        grouped, unknown = split_prefixed(kwargs, ("inner", "judge"))
        if unknown:
            raise ValueError(
                f"unknown model_args for chef: {sorted(unknown)}; inner-model arguments take a "
                "prefix, e.g. inner.pretrained=... (judge model: judge.pretrained=...)"
            )
        if preset is not None and preset != "smoke":
            raise ValueError(f"model_args preset must be 'smoke', got {preset!r}")
        # read once (command/): the preflight and the inner model take what was read (the smoke preset applied)
        command = read_command("chef", {"inner": inner, "preset": preset, "judge": judge, **kwargs})
        inner_role = next((r for r in command.roles if r.prefix == "inner."), None)
        inner, inner_args = (inner_role.name, inner_role.args) if inner_role else (None, {})
        if not inner:
            raise ValueError("model_args inner is required (an lmms-eval model name such as llava_hf), or use preset=smoke")
        if ll_returns not in LL_RETURNS:
            raise ValueError(f"model_args ll_returns must be one of {LL_RETURNS}, got {ll_returns!r}")
        if ppl not in ("auto", "lmms", "hf"):
            raise ValueError(f"model_args ppl must be auto, lmms or hf, got {ppl!r}")
        # what the run needs (the inner model's and judge's weights, devices, keys, datasets), before they load
        preflight.at_start(command)
        self.ll_returns = ll_returns
        self.cot_max_new_tokens = optional_int("cot_max_new_tokens", cot_max_new_tokens) or 256
        self.answer_max_new_tokens = optional_int("answer_max_new_tokens", answer_max_new_tokens) or 32
        self.judge_temperature = float(judge_temperature)
        self.judge_image = judge_image not in (False, "false", "False", 0, "0")

        self.inner = host.build_model(inner, inner_args, role="inner model", prefix="inner.", otherwise=OFFLINE_HINT if preset is None else "")
        self.inner_name = inner
        from ..chef.option_logprob import supports_hf_scoring

        self.ppl = ("hf" if inner in HF_SCORED else "lmms") if ppl == "auto" else ppl
        if self.ppl == "hf" and not supports_hf_scoring(self.inner):
            raise ValueError(f"model_args ppl=hf needs an inner model with model, tokenizer and _image_processor "
                             f"attributes (llava_hf); {inner} has not: use ppl=lmms")
        if judge in (None, ""):
            self.judge = None
        elif judge == "inner":
            self.judge = self.inner
        else:
            self.judge = host.build_model(judge, grouped["judge"], role="judge", prefix="judge.")
        self._rank = getattr(self.inner, "rank", 0)
        self._world_size = getattr(self.inner, "world_size", 1)

    @property
    def device(self):
        return getattr(self.inner, "device", "cpu")

    # ------------------------------------------------------------ inner calls

    def _call(self, model, kind: str, items: list[tuple[str, Any, list]]) -> list:
        """Send ``(context, gen_kwargs or continuation, images)`` requests to ``model``."""
        send = {"generate_until": host.generate, "loglikelihood": host.loglikelihood}[kind]
        return send(model, items, task=INNER_TASK, split=INNER_SPLIT)

    def _gen_kwargs(self, max_new_tokens: int, temperature: float = 0.0) -> dict[str, Any]:
        return {"until": [], "max_new_tokens": max_new_tokens, "temperature": temperature,
                "do_sample": temperature > 0}

    def _score(self, value: float, continuation: str) -> tuple[float, str]:
        if self.ll_returns == "loss":
            return -float(value), "mean"
        if self.ll_returns == "logprob_mean":
            return float(value), "mean"
        tokenizer = getattr(self.inner, "tokenizer", None)
        if tokenizer is None:
            return float(value), "sum"
        n = len(tokenizer(continuation, add_special_tokens=False)["input_ids"])
        return float(value) / max(n, 1), "mean"

    # ------------------------------------------------------------ requests

    def generate_until(self, requests) -> list[str]:
        from lmms_genbench.metrics.functional.chef import softmax_confidence

        jobs = []  # one per (request, variant)
        outputs: list[dict[str, Any]] = []
        for r, request in enumerate(requests):
            context, gen_kwargs, doc_to_visual, doc_id, task, split = request.args
            try:
                payload = json.loads(context)
                if payload.get("chef") != 1:
                    raise ValueError("context is not a chef payload")
                if payload.get("error"):  # the task could not render this doc
                    raise ValueError(payload["error"])
                images = _slots(doc_to_visual(self.task_dict[task][split][doc_id]), payload)
                gen_kwargs = gen_kwargs or {}
                cot_tokens = optional_int("cot_max_new_tokens", gen_kwargs.get("cot_max_new_tokens")) or self.cot_max_new_tokens
                answer_tokens = optional_int("max_new_tokens", gen_kwargs.get("max_new_tokens")) or self.answer_max_new_tokens
            except Exception as exc:  # noqa: BLE001 - a bad doc fails itself (typed record), not the run
                logger.warning("chef: request %d (%s doc %s) failed: %s", r, task, doc_id, exc)
                outputs.append({"error": f"{type(exc).__name__}: {exc}"})
                continue
            out = {"key": payload["key"], "group": payload.get("group"), "inferencer": payload["inferencer"],
                   "desideratum": payload.get("desideratum"), "scoring": payload.get("scoring"),
                   "inner": self.inner_name, "variants": []}
            outputs.append(out)
            for v in payload["variants"]:
                shown = [images[i] for i in v["visuals"] if images[i] is not None]
                # n_images: what the inner model was shown (a text-only question shows none)
                rec = {"name": v["name"], "gold": v["gold"], "n_options": len(v["options"]), "pred": -1,
                       "n_images": len(shown)}
                out["variants"].append(rec)
                jobs.append({"payload": payload, "out": out, "variant": v, "rec": rec, "images": shown,
                             "cot_tokens": cot_tokens, "answer_tokens": answer_tokens})

        # round 1: reasoning (cot, multiturn)
        cot_jobs = [j for j in jobs if j["payload"]["inferencer"] in ("cot", "multiturn")]
        texts = self._call(self.inner, "generate_until", [
            (f"{j['variant']['prompt']}\n{COT_TRIGGER}", self._gen_kwargs(j["cot_tokens"]), j["images"]) for j in cot_jobs])
        for j, text in zip(cot_jobs, texts):
            j["rec"]["cot"] = text
        # round 2: answer prompt, with the reasoning where there is one
        for j in jobs:
            v, answer_prompt = j["variant"], j["payload"]["answer_prompt"]
            reasoning = f"\n{COT_TRIGGER} {j['rec']['cot']}" if "cot" in j["rec"] else ""
            j["answer_ctx"] = f"{v['prompt']}{reasoning}\n{answer_prompt}"
        gen_jobs = [j for j in jobs if j["payload"]["inferencer"] in ("direct", "cot")]
        texts = self._call(self.inner, "generate_until", [
            (j["answer_ctx"], self._gen_kwargs(j["answer_tokens"]), j["images"]) for j in gen_jobs])
        for j, text in zip(gen_jobs, texts):
            j["rec"]["answer"] = text
            pred, reason = read_answer(text, j["variant"]["labels"], j["variant"]["option_texts"],
                                       j["payload"].get("answer_reader", "chef"), pope=j["payload"].get("pope", False))
            j["rec"]["pred"] = pred
            if reason:  # why the answer names no option, counted per reason (results' ``unreadable``)
                j["rec"]["unread"] = reason
        ppl_jobs = [j for j in jobs if j["payload"]["inferencer"] in ("ppl", "multiturn")]
        items, owners = [], []
        for j in ppl_jobs:
            for k, option in enumerate(j["variant"]["options"]):
                items.append((j["answer_ctx"], f" {option}", j["images"]))
                owners.append((j, k))
        if self.ppl == "hf":
            from ..chef.option_logprob import option_logprob

            lls, unscorable = [], {}
            for (j, k), (ctx, cont, imgs) in zip(owners, items):
                try:
                    lls.append((-option_logprob(self.inner, ctx, cont, imgs)[0], False))
                except ValueError as exc:  # this option cannot be scored: its doc fails (below)
                    unscorable.setdefault(id(j), f"option {k} ({cont.strip()!r}) could not be scored: {exc}")
                    lls.append((float("nan"), False))
        else:
            lls, unscorable = self._call(self.inner, "loglikelihood", items), {}
        scored: dict[int, list] = {}
        for (j, k), result, (_, cont, _) in zip(owners, lls, items):
            value = result[0] if isinstance(result, (tuple, list)) else result
            score, kind = self._score(value, cont) if self.ppl == "lmms" else (-float(value), "mean")
            scored.setdefault(id(j), [j, []])[1].append(score)
            j["rec"]["ppl_score"] = kind
            j["rec"]["ppl_via"] = self.ppl
        for j, scores in scored.values():
            if all(math.isfinite(s) for s in scores):
                conf = softmax_confidence(scores)
                pred = int(max(range(len(scores)), key=lambda i: scores[i]))
                j["rec"].update(scores=scores, pred=pred, confidence=float(conf[pred]))
            else:
                # an option we could not score says nothing about the model: the doc is a counted
                # failure (n_failed), never a wrong answer
                j["rec"].update(scores=[s if math.isfinite(s) else None for s in scores], pred=-1)
                reason = unscorable.get(id(j)) or "an option's log-likelihood is not a finite number"
                logger.warning("chef: %s doc failed: %s", j["payload"]["key"], reason)
                j["out"]["error"] = f"{j['rec']['name']}: {reason}"

        self._judge(jobs)
        return [json.dumps(o, ensure_ascii=False) for o in outputs]

    def _judge(self, jobs) -> None:
        """Language performance: the judge scores the first variant's reasoning, n samples."""
        wanted = [j for j in jobs if j["payload"]["judge_samples"] > 0 and j["variant"] is j["payload"]["variants"][0]]
        if not wanted:
            return
        if self.judge is None:
            raise ValueError("this recipe has judge_samples > 0: give model_args judge=inner or judge=<model name>")
        items, owners = [], []
        for j in wanted:
            reasoning = j["rec"].get("cot") or j["rec"].get("answer") or ""
            prompt = JUDGE_PROMPT.format(question=j["payload"]["question"], answer=j["payload"]["gold_text"],
                                         reasoning=reasoning.strip())
            for s in range(j["payload"]["judge_samples"]):
                images = j["images"][-1:] if self.judge_image else []
                items.append((prompt, self._gen_kwargs(8, 0.0 if s == 0 else self.judge_temperature), images))
                owners.append(j)
        texts = self._call(self.judge, "generate_until", items)
        for j, text in zip(owners, texts):
            judge = j["out"].setdefault("judge", {"scores": [], "failed": 0, "raw": []})
            score = parse_judge_score(text)
            judge["raw"].append(text)
            if score is None:
                judge["failed"] += 1  # an unparsable verdict is counted, never scored as 0
            else:
                judge["scores"].append(score)

    def loglikelihood(self, requests):
        raise NotImplementedError("chef tasks send generate_until requests; run native loglikelihood tasks on the inner model")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("chef does not support generate_until_multi_round")
