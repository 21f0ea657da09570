"""Per-document records and aggregations for the ``chef_*`` tasks.

``process_results`` turns the ``chef`` model's JSON response into one small
record and hands it, as ``(name, record)``, to every metric name of the
recipe's desideratum family (:data:`FAMILIES`); the single aggregation
:func:`aggregate` reads the name back and computes that metric over all
records. A task's ``metric_list`` names exactly its family (a test checks
every shipped YAML), and a new recipe needs no new Python.

Names (``<v>`` is a variant name; the first variant is the reference):

* ``acc``, ``acc_<v>``, ``acc_rand`` (the chance level of RRM and RIAM: the recipe's
  ``scoring.chance``, by default ChEF's constant for MMBench (0.2757) and ScienceQA (0.358),
  else the mean of 1/#options), ``n_docs``, ``n_failed``, ``n_unmatched`` (Direct/CoT answers
  naming no option, counted wrong; for POPE scored as the answer the truth is not),
  ``unreadable`` (those answers per reason, :data:`lmms_genbench.chef.readers.REASONS`:
  ``{"negation": 2, "several_options": 1}``).
* circular (scenarios with a ``group`` rule: the MMBench presets): with ``scoring.copies:
  original`` (the default, ChEF's ``vanilla`` scoring) ``acc`` and every relative metric
  (``ece`` and its bins, RIAM, RRM, RR, match ratio) are computed on each group's original
  question (``id mod 1e6``: the row the payload flags ``scoring.original``), as ChEF's ``desiderata.py``, ``vqa.py`` and
  ``eval_insfollow.py``; a group whose original row is missing (a sampled or cut split) is scored
  on its first remaining copy (smallest key), as ChEF's loop does, and counted by
  ``n_groups_no_original``; ``pooled`` scores every copy as a question of its own.
  ``acc_per_copy`` = accuracy over every copy, ``acc_circular`` = MMBench's CircularEval on
  the first variant (a group scores 1 only when all its answered copies are right; failed
  docs are left out and counted by ``n_failed``), ``n_groups`` = the groups it is over.
* calibration (first variant, needs PPL scores): ``ece`` (ChEF, 10 equal-mass bins),
  ``ece_equal_width`` (10 bins), ``bin<b>_acc``/``bin<b>_conf``/``bin<b>_n``: the equal-mass
  bins ``ece`` is computed from (ChEF's ``Acc_bins``/``Prob_bins``)
* in-context learning: ``riam`` (acc_ICL = mean accuracy of the other
  variants), ``riam_<v>``
* instruction following: ``match_ratio`` (mean over the other variants),
  ``match_ratio_<v>``
* robustness: ``rrm``, ``rr`` (acc_crp = mean accuracy of the other variants),
  ``rrm_<v>``, ``rr_<v>``
* hallucination (option 0 = "Yes"): ``pope_accuracy``, ``pope_precision``,
  ``pope_recall``, ``pope_f1_score``, ``pope_yes_ratio`` (lmms-eval's own ``pope``
  task's names)
* language performance: ``judge_score`` (0–10, mean over docs of each doc's
  mean over judge samples), ``n_judged``, ``n_judge_failed``
* ``<m>_stderr`` after each headline ``m`` (:data:`HEADLINE`): the standard error of a
  percentile bootstrap over docs (:mod:`lmms_genbench.metrics.functional.intervals`,
  :data:`BOOTSTRAP` resamples and seed; whole circular groups are resampled when the
  scenario has them), which lmms-eval's table shows as the ± of ``m``.

A metric that is not a number (no doc, a ratio over 0) is None: lmms-eval prints N/A and
its results file stays plain JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from lmms_genbench.core.errors import WrongModelError
from lmms_genbench.metrics.functional import chef as stats
from lmms_genbench.metrics.functional.intervals import bootstrap_interval

N_BINS = 10
_BINS = [f"bin{b}_{k}" for b in range(N_BINS) for k in ("acc", "conf", "n")]
_COUNTS = ["n_docs", "n_failed", "n_unmatched", "unreadable"]
#: metric name -> PopeCounts.metrics() key; the names are lmms-eval 0.7.3's pope task's
_POPE = {"pope_accuracy": "accuracy", "pope_precision": "precision", "pope_recall": "recall",
         "pope_f1_score": "f1", "pope_yes_ratio": "yes_ratio"}
#: metrics that get a ``<m>_stderr`` sibling right after them (lmms-eval aggregates in the
#: order process_results returns names, and its own "N/A" for ``<m>_stderr`` is written while
#: it aggregates ``m``: see metrics.scorers.base.with_stderr)
HEADLINE = ("acc", "acc_circular", "ece", "riam", "match_ratio", "rrm", "rr", "pope_accuracy",
            "pope_f1_score", "judge_score")
#: resamples and seed of the ``_stderr`` bootstrap
BOOTSTRAP = {"n_resamples": 1000, "seed": 0}


def _with_stderr(names: list[str]) -> list[str]:
    return [x for n in names for x in ((n, f"{n}_stderr") if n in HEADLINE else (n,))]


#: desideratum -> (metric names, per-variant metric prefixes for the non-reference variants).
#: A task's metric_list must name exactly these: lmms-eval 0.7.3 writes any emitted
#: name it has no aggregation for into the results file as the raw per-doc list.
FAMILIES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    name: (_with_stderr(fixed), per_variant) for name, (fixed, per_variant) in {
        "accuracy": (["acc", "acc_rand", *_COUNTS], ("acc",)),
        "calibration": (["acc", "acc_rand", "ece", "ece_equal_width", *_BINS, *_COUNTS], ()),
        "in_context_learning": (["acc", "acc_rand", "riam", *_COUNTS], ("acc", "riam")),
        "instruction_following": (["acc", "acc_rand", "match_ratio", *_COUNTS], ("acc", "match_ratio")),
        "robustness": (["acc", "acc_rand", "rrm", "rr", *_COUNTS], ("acc", "rrm", "rr")),
        "hallucination": ([*_POPE, *_COUNTS], ()),
        "language_performance": (["acc", "acc_rand", "judge_score", "n_judged", "n_judge_failed", *_COUNTS], ()),
    }.items()
}
#: added to a family that reports ``acc`` when the scenario has circular groups
CIRCULAR = [*_with_stderr(["acc_circular", "n_groups"]), "acc_per_copy", "n_groups_no_original"]
_PER_VARIANT = ("acc", "riam", "match_ratio", "rrm", "rr")


def record(response: str) -> dict[str, Any]:
    """The per-doc record kept from one ``chef`` response (a few numbers per variant)."""
    try:
        data = json.loads(response)
    except (TypeError, ValueError):
        return {"failed": True, "reason": f"response is not chef JSON: {str(response)[:200]!r}"}
    if not isinstance(data, dict) or data.get("error") or "variants" not in data:
        reason = data.get("error") if isinstance(data, dict) else data
        return {"failed": True, "reason": str(reason)[:500],
                "desideratum": data.get("desideratum") if isinstance(data, dict) else None}
    variants = [
        {"name": v["name"], "pred": int(v["pred"]), "gold": int(v["gold"]), "n": int(v["n_options"]),
         "conf": v.get("confidence"), **({"unread": str(v["unread"])} if v.get("unread") else {})}
        for v in data["variants"]
    ]
    judge = data.get("judge") or {}
    return {"failed": False, "desideratum": data.get("desideratum", "accuracy"), "variants": variants,
            "judge": judge.get("scores"), "judge_failed": int(judge.get("failed", 0)),
            "group": data.get("group"), "key": data.get("key"), "scoring": data.get("scoring") or {}}


def metric_names(rec: dict[str, Any], variant_names: list[str] | None = None) -> list[str]:
    """The metric names a record feeds: its desideratum's family (see :data:`FAMILIES`),
    plus :data:`CIRCULAR` when the record has a circular group and the family reports ``acc``."""
    fixed, per_variant = FAMILIES[rec.get("desideratum") or "accuracy"]
    names = variant_names if variant_names is not None else [v["name"] for v in rec.get("variants") or []]
    circular = CIRCULAR if rec.get("group") is not None and "acc" in fixed else []
    return [*fixed, *circular, *(f"{m}_{n}" for m in per_variant for n in names[1:])]


def process_results(doc, results):
    try:
        data = json.loads(results[0])
    except (TypeError, ValueError):
        data = None
    # --model chef answers a JSON object with "variants" (or "error" for a bad doc); an
    # echo of the request payload carries its "chef" marker. Anything else: stop the run.
    if not isinstance(data, dict) or "chef" in data or not ("variants" in data or "error" in data):
        raise WrongModelError("chef", "chef_* tasks", f"the answer is not the chef model's JSON: {str(results[0])[:80]!r}")
    rec = record(results[0])
    if rec["failed"] and rec.get("desideratum") is None:
        # no variant names to go by: feed only the counters (n_failed counts it)
        return {name: (name, rec) for name in _COUNTS}
    copies = (rec.get("scoring") or {}).get("copies", "original")
    if not rec["failed"] and (rec.get("group") is None or copies != "original" or _original(rec)):
        # the doc's share of acc (variant 0 correct), for lmms-eval's --baseline
        # (lmms_genbench.hooks.host_scores); a circular copy has none (one doc cannot tell whether
        # its group's original row is in the run, so a group scored on a copy has none either)
        rec["score"] = _correct([rec], 0)[0]
    return {name: (name, rec) for name in metric_names(rec, rec.get("variant_names"))}


def _correct(recs, idx: int) -> list[float]:
    return [float(r["variants"][idx]["pred"] == r["variants"][idx]["gold"]) for r in recs]


def _acc(recs, idx: int) -> float:
    vals = _correct(recs, idx)
    return float(np.mean(vals)) if vals else float("nan")


def _mean(xs) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return float(np.mean(xs)) if xs else float("nan")


def _key_order(key: Any) -> tuple:
    text = str(key)
    return (0, int(text), text) if text.lstrip("-").isdigit() else (1, 0, text)


def _original(rec: dict[str, Any]) -> bool:
    # records of responses written before 2.0 carry no flag: every row counted
    return bool((rec.get("scoring") or {}).get("original", True))


def scored_records(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records the relative metrics are computed on: with ``scoring.copies: original``
    (the default) one row per circular group, in key order as ChEF sorts them: its original
    question (``id mod 1e6``, as the payload flags it) or, where that row is missing, its first
    remaining copy (ChEF's loop scores the first row of each ``id mod 1e6``); else (pooled, or no
    groups) all."""
    grouped = any(r.get("group") is not None for r in ok)
    if not grouped or (ok[0].get("scoring") or {}).get("copies", "original") != "original":
        return ok
    originals = [r for r in ok if _original(r)]
    first: dict[Any, dict[str, Any]] = {}
    for r in sorted((r for r in ok if not _original(r)), key=lambda r: _key_order(r.get("key"))):
        first.setdefault(r.get("group"), r)
    covered = {r.get("group") for r in originals}
    rows = originals + [r for g, r in first.items() if g not in covered]
    return sorted(rows, key=lambda r: _key_order(r.get("key")))


def groups_without_original(ok: list[dict[str, Any]]) -> int:
    """How many circular groups have no original row among ``ok`` (scored on a copy)."""
    groups = {r.get("group") for r in ok if r.get("group") is not None}
    return len(groups - {r.get("group") for r in ok if _original(r)})


def chance_level(recs: list[dict[str, Any]]) -> float:
    """The chance accuracy of RRM and RIAM: the recipe's constant (``scoring.chance``), else
    the mean of 1/#options over ``recs``."""
    chance = (recs[0].get("scoring") or {}).get("chance") if recs else None
    return float(chance) if chance is not None else stats.random_accuracy([r["variants"][0]["n"] for r in recs])


def doc_columns(ok: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The per-doc table of scored records: per variant ``correct_<i>`` and ``match_<i>``
    (same option as variant 0), ``chance`` (the recipe's constant, else 1/#options), ``conf``,
    ``pred_yes``/``gold_yes`` (option 0 is "Yes"), ``judge`` (the doc's mean judge score) and
    ``group``."""
    n_variants = len(ok[0]["variants"])
    cols: dict[str, list[Any]] = {}
    for i in range(n_variants):
        cols[f"correct_{i}"] = [float(r["variants"][i]["pred"] == r["variants"][i]["gold"]) for r in ok]
        cols[f"match_{i}"] = [float(r["variants"][i]["pred"] == r["variants"][0]["pred"]) for r in ok]
    first = [r["variants"][0] for r in ok]
    constant = (ok[0].get("scoring") or {}).get("chance")
    cols["chance"] = [float(constant) if constant is not None else 1.0 / v["n"] for v in first]
    cols["conf"] = [v["conf"] for v in first]
    # an answer naming no option (pred -1) is wrong whatever the truth: the opposite of it
    cols["pred_yes"] = [float(v["pred"] == 0 if v["pred"] >= 0 else v["gold"] != 0) for v in first]
    cols["gold_yes"] = [float(v["gold"] == 0) for v in first]
    cols["judge"] = [_mean(r["judge"]) if r["judge"] else None for r in ok]
    cols["group"] = [str(r.get("group")) for r in ok]
    return cols


def estimator(name: str, names: list[str], grouped: bool) -> dict[str, Any] | None:
    """The estimator spec of metric ``name`` over :func:`doc_columns` (variant names
    ``names``); whole circular groups are resampled when ``grouped``. None: no spec."""
    others = [f"correct_{i}" for i in range(1, len(names))]
    spec: dict[str, Any] | None = None
    if name == "acc":
        spec = {"kind": "mean", "column": "correct_0"}
    elif name == "acc_circular":
        spec = {"kind": "circular", "column": "correct_0", "group": "group"}
    elif name == "ece":
        spec = {"kind": "ece", "confidence": "conf", "correct": "correct_0", "bins": N_BINS}
    elif name in ("riam", "rrm", "rr"):
        spec = {"kind": "ratio", "formula": name, "ref": "correct_0", "others": others, "chance": "chance"}
    elif name == "match_ratio":
        spec = {"kind": "avg", "of": [{"kind": "mean", "column": f"match_{i}"} for i in range(1, len(names))]}
    elif name in ("pope_accuracy", "pope_f1_score"):
        spec = {"kind": "pope", "stat": _POPE[name], "pred": "pred_yes", "gold": "gold_yes"}
    elif name == "judge_score":
        spec = {"kind": "mean", "column": "judge"}
    if spec is not None and grouped:
        spec["cluster"] = "group"
    return spec


def _stderr(name: str, ok: list[dict[str, Any]], names: list[str]) -> float:
    grouped = any(r.get("group") is not None for r in ok)
    spec = estimator(name, names, grouped)
    if spec is None:
        return float("nan")
    interval = bootstrap_interval(doc_columns(ok), spec, BOOTSTRAP["n_resamples"], seed=BOOTSTRAP["seed"])
    return float("nan") if interval["stderr"] is None else interval["stderr"]


def aggregate(items) -> float | dict[str, int] | None:
    """Value of the metric named in ``items`` (all ``(name, record)`` with one name); None
    when it is not a number."""
    value = _value(items)
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _value(items) -> float | dict[str, int]:
    if not items:
        return float("nan")
    name = items[0][0]
    recs = [r for _, r in items]
    ok = [r for r in recs if not r["failed"]]
    if name == "n_docs":
        return float(len(recs))
    if name == "n_failed":
        return float(len(recs) - len(ok))
    if not ok:
        return float("nan")
    names = [v["name"] for v in ok[0]["variants"]]
    if name == "n_unmatched":
        return float(sum(v["pred"] < 0 for r in ok for v in r["variants"]))
    if name == "unreadable":  # per reason; answers of responses written before 2.1 carry none
        reasons = [v.get("unread") or "no_option" for r in ok for v in r["variants"] if v["pred"] < 0]
        return {reason: reasons.count(reason) for reason in sorted(set(reasons))}
    if name == "n_groups_no_original":
        return float(groups_without_original(ok))
    if name == "acc_circular":
        return stats.circular_accuracy([r.get("group") for r in ok], _correct(ok, 0))
    if name == "n_groups":
        return float(len({r.get("group") for r in ok}))
    if name == "acc_per_copy":
        return _acc(ok, 0)
    if name == "acc_circular_stderr":
        return _stderr("acc_circular", ok, names)
    ok = scored_records(ok)  # every other metric: the original questions (ChEF's), or all copies
    if name == "acc":
        return _acc(ok, 0)
    acc_rand = chance_level(ok)
    if name == "acc_rand":
        return acc_rand
    if name.endswith("_stderr"):
        return _stderr(name[: -len("_stderr")], ok, names)
    others = list(range(1, len(names)))
    acc_other = _mean([_acc(ok, i) for i in others])
    if name in ("ece", "ece_equal_width") or name.startswith("bin"):
        pairs = [(r["variants"][0]["conf"], float(r["variants"][0]["pred"] == r["variants"][0]["gold"]))
                 for r in ok if r["variants"][0]["conf"] is not None]
        if not pairs:
            return float("nan")
        conf, corr = zip(*pairs)
        if name == "ece":
            return stats.ece_equal_mass(conf, corr, N_BINS)
        if name == "ece_equal_width":
            return stats.EqualWidthECE(N_BINS).update(conf, corr).value()
        b, _, kind = name[3:].partition("_")
        row = stats.equal_mass_bins(conf, corr, N_BINS)[int(b)]
        return float({"acc": row["accuracy"], "conf": row["confidence"], "n": row["count"]}[kind])
    if name == "riam":
        return stats.riam(acc_other, _acc(ok, 0), acc_rand)
    if name == "rrm":
        return stats.rrm(acc_other, _acc(ok, 0), acc_rand)
    if name == "rr":
        return stats.rr(acc_other, _acc(ok, 0))
    if name == "match_ratio":
        return _mean([stats.match_ratio([r["variants"][i]["pred"] for r in ok], [r["variants"][0]["pred"] for r in ok])
                      for i in others])
    if name in _POPE:
        counts = stats.PopeCounts()
        for r in ok:
            v = r["variants"][0]
            gold_yes = v["gold"] == 0
            # an answer naming no option is wrong whatever the truth, never a "No"
            counts.add(v["pred"] == 0 if v["pred"] >= 0 else not gold_yes, gold_yes)
        return counts.metrics()[_POPE[name]]
    if name == "judge_score":
        return _mean([_mean(r["judge"]) for r in ok if r["judge"]])
    if name == "n_judged":
        return float(sum(1 for r in ok if r["judge"] and math.isfinite(_mean(r["judge"]))))
    if name == "n_judge_failed":
        return float(sum(r["judge_failed"] for r in ok))
    for metric in _PER_VARIANT:
        prefix = metric + "_"
        if name.startswith(prefix) and name[len(prefix):] in names:
            i = names.index(name[len(prefix):])
            if metric == "acc":
                return _acc(ok, i)
            if metric == "riam":
                return stats.riam(_acc(ok, i), _acc(ok, 0), acc_rand)
            if metric == "rrm":
                return stats.rrm(_acc(ok, i), _acc(ok, 0), acc_rand)
            if metric == "rr":
                return stats.rr(_acc(ok, i), _acc(ok, 0))
            return stats.match_ratio([r["variants"][i]["pred"] for r in ok], [r["variants"][0]["pred"] for r in ok])
    return float("nan")
