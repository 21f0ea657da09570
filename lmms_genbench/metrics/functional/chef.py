"""ChEF desiderata metrics (paper 004, §2.3 and Fig. 5), numpy only.

Every quantity here is either a pure function of a few accuracies or an
accumulator whose state is sufficient statistics (counts and sums) with
``merge``, so per-process partial results combine exactly. The one exception
is ChEF's equal-mass ECE: its bins are quantiles of the confidence, so it needs
every ``(confidence, correct)`` pair; those pairs are two numbers per doc.

Formulas (paper numbering) and where ChEF's code differs (REFERENCE_NOTES):

* PPL confidence: softmax over the options' scores, the score being the mean
  token log-probability of the option (ChEF's PPL inferencer). See
  :func:`softmax_confidence`.
* ECE (Naeini et al. 2015; Guo et al. 2017): ``Σ_b |B_b|/N · |acc(B_b) − conf(B_b)|``.
  ChEF sorts by confidence and cuts into 10 equal-count bins
  (:func:`ece_equal_mass`); the common variant uses 10 equal-width bins on
  [0, 1] (:class:`EqualWidthECE`).
* RIAM, Eq. (1): ``(acc_ICL − acc_0shot) / (acc_0shot − acc_rand)``; in ChEF's
  code this formula is commented out, only accuracies are printed.
* RRM, Eq. (2): ``(acc_crp − acc_rand) / (acc − acc_rand)``; RR (relative
  robustness, Chen et al. 2023b) ``= acc_crp / acc``.
* Match ratio (instruction following): share of samples whose option index
  chosen under a verbalizer equals the index chosen without it (ChEF's code;
  the paper says "outputs matched with the outputs indicated by the verbalizer").
* POPE: accuracy, precision, recall, F1 with "yes" as the positive class, and
  the share of "yes" answers.
* Circular accuracy (MMBench's CircularEval, as lmms-eval's ``mmbench_evals.py``):
  copies of one question (options rotated) form a group that scores 1 only when
  every copy is right; the mean over groups. See :func:`circular_accuracy`.
* Normalised 0–100 desideratum scores (Fig. 5): see :func:`desideratum_score`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "DESIDERATA",
    "EqualWidthECE",
    "PopeCounts",
    "circular_accuracy",
    "circular_accuracy_weighted",
    "desideratum_score",
    "desideratum_stderr",
    "ece_equal_mass",
    "ece_equal_mass_weighted",
    "equal_mass_bins",
    "match_ratio",
    "pope_metrics",
    "random_accuracy",
    "riam",
    "rr",
    "rrm",
    "softmax_confidence",
]

DESIDERATA = (
    "calibration",
    "in_context_learning",
    "instruction_following",
    "language_performance",
    "robustness",
    "hallucination",
)


def softmax_confidence(scores: Sequence[float]) -> np.ndarray:
    """Softmax over option scores (higher = more likely), as ChEF's PPL inferencer.

    With mean token log-probabilities as scores this is *not* a normalised
    probability of the option strings; it is ChEF's definition of confidence.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"scores must be a non-empty 1-d sequence of finite numbers, got {scores!r}")
    e = np.exp(s - s.max())
    return e / e.sum()


def _pairs(confidences: Iterable[float], correct: Iterable[float]) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(list(confidences), dtype=np.float64)
    corr = np.asarray(list(correct), dtype=np.float64)
    if conf.shape != corr.shape or conf.ndim != 1:
        raise ValueError(f"confidences and correct must be 1-d of equal length, got {conf.shape} and {corr.shape}")
    if conf.size and (conf.min() < 0 or conf.max() > 1):
        raise ValueError("confidences must lie in [0, 1]")
    return conf, corr


def ece_equal_mass(confidences: Iterable[float], correct: Iterable[float], n_bins: int = 10) -> float:
    """ChEF's ECE: sort by confidence, cut into ``n_bins`` bins of (nearly) equal count.

    Bin sizes follow ``numpy.array_split`` (the first ``N mod n_bins`` bins get
    one extra sample); ties keep input order (stable sort). With fewer samples
    than bins, each sample is its own bin. NaN for no samples.
    """
    conf, corr = _pairs(confidences, correct)
    return float(ece_equal_mass_weighted(conf, corr, np.ones((1, conf.size)), n_bins)[0])


def equal_mass_bins(confidences: Iterable[float], correct: Iterable[float], n_bins: int = 10) -> list[dict[str, float]]:
    """The bins :func:`ece_equal_mass` averages over (ChEF's ``Acc_bins``/``Prob_bins``): per
    bin its count, mean confidence and accuracy, in order of confidence. With fewer samples than
    bins the last bins are empty (count 0, NaN means)."""
    conf, corr = _pairs(confidences, correct)
    order = np.argsort(conf, kind="stable")
    rows = []
    for part in np.array_split(order, n_bins):
        rows.append({"count": float(part.size),
                     "confidence": float(conf[part].mean()) if part.size else float("nan"),
                     "accuracy": float(corr[part].mean()) if part.size else float("nan")})
    return rows


def ece_equal_mass_weighted(conf: np.ndarray, corr: np.ndarray, weights: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """:func:`ece_equal_mass` once per row of ``weights`` (B, n): each row counts how often
    each sample is drawn (a bootstrap resample; all ones for the score itself). The samples
    are sorted by confidence (stable) and a sample drawn k times fills k consecutive places,
    possibly across a cut, so a row of ones gives exactly ChEF's bins."""
    order = np.argsort(conf, kind="stable")
    w = weights[:, order]
    conf, corr = conf[order], corr[order]
    end = np.cumsum(w, axis=1)
    start = end - w
    total = end[:, -1] if w.shape[1] else np.zeros(w.shape[0])
    q, r = np.divmod(total, n_bins)
    gap = np.zeros(w.shape[0])
    lo = np.zeros(w.shape[0])
    for j in range(n_bins):
        hi = lo + q + (j < r)
        share = np.clip(np.minimum(end, hi[:, None]) - np.maximum(start, lo[:, None]), 0.0, None)
        gap += np.abs(share @ corr - share @ conf)
        lo = hi
    return _ratio(gap, total)


@dataclass
class EqualWidthECE:
    """Equal-width ECE on [0, 1] from per-bin counts and sums (mergeable).

    A confidence ``c`` goes to bin ``min(floor(c · n_bins), n_bins − 1)``, so
    1.0 falls in the last bin.
    """

    n_bins: int = 10
    count: np.ndarray = field(default=None)  # type: ignore[assignment]
    sum_conf: np.ndarray = field(default=None)  # type: ignore[assignment]
    sum_correct: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        for name in ("count", "sum_conf", "sum_correct"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(self.n_bins, dtype=np.float64))

    def update(self, confidences: Iterable[float], correct: Iterable[float]) -> EqualWidthECE:
        conf, corr = _pairs(confidences, correct)
        bins = np.minimum((conf * self.n_bins).astype(int), self.n_bins - 1)
        np.add.at(self.count, bins, 1.0)
        np.add.at(self.sum_conf, bins, conf)
        np.add.at(self.sum_correct, bins, corr)
        return self

    def merge(self, other: EqualWidthECE) -> EqualWidthECE:
        if other.n_bins != self.n_bins:
            raise ValueError(f"cannot merge ECE with {self.n_bins} and {other.n_bins} bins")
        return EqualWidthECE(self.n_bins, self.count + other.count, self.sum_conf + other.sum_conf,
                             self.sum_correct + other.sum_correct)

    def value(self) -> float:
        n = self.count.sum()
        if n == 0:
            return float("nan")
        used = self.count > 0
        gap = np.abs(self.sum_correct[used] - self.sum_conf[used])  # = |B|·|acc − conf|
        return float(gap.sum() / n)

    def reliability(self) -> list[dict[str, float]]:
        """Per bin: edges, count, mean confidence and accuracy (NaN when empty)."""
        rows = []
        for b in range(self.n_bins):
            c = self.count[b]
            rows.append({
                "lo": b / self.n_bins, "hi": (b + 1) / self.n_bins, "count": float(c),
                "confidence": float(self.sum_conf[b] / c) if c else float("nan"),
                "accuracy": float(self.sum_correct[b] / c) if c else float("nan"),
            })
        return rows


def random_accuracy(n_options: Iterable[int]) -> float:
    """Expected accuracy of a uniform random guess: mean of 1/k over questions."""
    ks = np.asarray(list(n_options), dtype=np.float64)
    if ks.size == 0:
        return float("nan")
    if np.any(ks < 1):
        raise ValueError("every question needs at least one option")
    return float(np.mean(1.0 / ks))


def circular_accuracy(groups: Sequence[Hashable], correct: Sequence[bool]) -> float:
    """Share of groups whose every member is correct (MMBench CircularEval). NaN for none.

    lmms-eval scores only groups whose main row (index < 1e6) is present; here every
    group that has a member counts, which is the same on a full split.
    """
    if len(groups) != len(correct):
        raise ValueError(f"need one group per answer, got {len(groups)} groups and {len(correct)} answers")
    index: dict[Hashable, int] = {}
    group_of = np.array([index.setdefault(g, len(index)) for g in groups], dtype=np.int64)
    right = np.asarray([bool(c) for c in correct], dtype=bool)
    return float(circular_accuracy_weighted(group_of, right, np.ones((1, len(groups))))[0])


def circular_accuracy_weighted(group_of: np.ndarray, right: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`circular_accuracy` once per row of ``weights`` (B, n), ``group_of`` the group
    number of each answer. A group weighs the mean of its answers' weights, so a cluster
    resample (every answer of a drawn group carries the group's count) weighs each group
    by its count, and a row of ones weighs each group once."""
    if group_of.size == 0:
        return np.full(weights.shape[0], np.nan)
    sizes = np.bincount(group_of)
    all_right = np.ones(sizes.size, dtype=bool)
    np.logical_and.at(all_right, group_of, right)
    # each group's weight, summed per group before dividing: a row of ones gives exactly 1.0 a
    # group, so the score itself is the plain share of right groups (no 1/3 + 1/3 + 1/3 drift)
    group_w = np.zeros((weights.shape[0], sizes.size))
    np.add.at(group_w, (slice(None), group_of), weights)
    group_w /= sizes
    return _ratio(group_w @ all_right, group_w.sum(axis=1))


def _ratio(num, den):
    """``num / den``, NaN where ``den`` is 0 or not finite: floats for numbers, arrays
    (one value per bootstrap resample, :mod:`.estimators`) for arrays."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    ok = (den != 0) & np.isfinite(den)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(ok, num / np.where(ok, den, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def riam(acc_icl: float, acc_zero_shot: float, acc_rand: float) -> float:
    """Eq. (1): gain from in-context examples relative to the 0-shot margin over chance.

    NaN when the 0-shot accuracy equals chance (the ratio is undefined). Like
    :func:`rrm` and :func:`rr`, takes numbers or arrays (one accuracy per resample).
    """
    return _ratio(acc_icl - acc_zero_shot, acc_zero_shot - acc_rand)


def rrm(acc_corrupted: float, acc_clean: float, acc_rand: float) -> float:
    """Eq. (2): share of the clean above-chance margin kept under corruption."""
    return _ratio(acc_corrupted - acc_rand, acc_clean - acc_rand)


def rr(acc_corrupted: float, acc_clean: float) -> float:
    """Relative robustness ``acc_crp / acc`` (= 1 − relative accuracy drop)."""
    return _ratio(acc_corrupted, acc_clean)


def match_ratio(chosen_with_verbalizer: Sequence[int], chosen_without: Sequence[int]) -> float:
    """Share of samples whose option index is the same with and without the verbalizer."""
    a, b = list(chosen_with_verbalizer), list(chosen_without)
    if len(a) != len(b):
        raise ValueError(f"need one index per sample in both lists, got {len(a)} and {len(b)}")
    if not a:
        return float("nan")
    return sum(int(x == y) for x, y in zip(a, b)) / len(a)


@dataclass
class PopeCounts:
    """POPE confusion counts with "yes" (object present) as the positive class."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def add(self, predicted_yes: bool, gold_yes: bool) -> PopeCounts:
        if predicted_yes and gold_yes:
            self.tp += 1
        elif predicted_yes:
            self.fp += 1
        elif gold_yes:
            self.fn += 1
        else:
            self.tn += 1
        return self

    def merge(self, other: PopeCounts) -> PopeCounts:
        return PopeCounts(self.tp + other.tp, self.fp + other.fp, self.tn + other.tn, self.fn + other.fn)

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def metrics(self) -> dict[str, float]:
        return pope_metrics(self.tp, self.fp, self.tn, self.fn)


def pope_metrics(tp, fp, tn, fn) -> dict[str, float]:
    """POPE's statistics from confusion counts: numbers, or arrays of weighted counts (one
    per bootstrap resample). F1 is NaN where precision or recall is."""
    n = tp + fp + tn + fn
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    return {
        "accuracy": _ratio(tp + tn, n),
        "precision": precision,
        "recall": recall,
        "f1": _ratio(2 * precision * recall, precision + recall),
        "yes_ratio": _ratio(tp + fp, n),
    }


def _clip100(x: float) -> float:
    return float(min(100.0, max(0.0, x))) if math.isfinite(x) else float("nan")


def desideratum_score(name: str, value: float) -> float:
    """Map a desideratum's raw metric to 0–100 (paper Fig. 5), clipped.

    The paper states the rule for four of them; for ICL and robustness it only
    says "normalised", so ours is a documented choice:

    * calibration: ``100 · (1 − ECE)`` (ECE as a fraction, equal-mass bins);
    * in_context_learning: mean RIAM over shot counts, ``50 · (1 + RIAM)`` — 50
      means in-context examples change nothing, 100 that they double the
      above-chance margin, 0 that they erase it (our choice);
    * instruction_following: ``100 · mean match ratio`` over verbalizer settings;
    * language_performance: ``10 · mean judge score`` (scores 0–10);
    * robustness: ``100 · mean RRM`` (our choice; RRM above 1 clips to 100);
    * hallucination: ``100 · POPE accuracy`` (mean over the three splits).
    """
    if name not in DESIDERATA:
        raise ValueError(f"desideratum must be one of {DESIDERATA}, got {name!r}")
    value = float(value)
    if name == "calibration":
        return _clip100(100.0 * (1.0 - value))
    if name == "in_context_learning":
        return _clip100(50.0 * (1.0 + value))
    if name == "language_performance":
        return _clip100(10.0 * value)
    return _clip100(100.0 * value)


#: d(score)/d(raw) of :func:`desideratum_score` inside its clipping
_SCALE = {"calibration": -100.0, "in_context_learning": 50.0, "language_performance": 10.0}


def desideratum_stderr(name: str, raw_stderrs: Sequence[float]) -> float:
    """Standard error of a desideratum's 0–100 score from the standard errors of the raw
    metrics of the tasks averaged into it: the tasks are independent samples, so the mean's
    is ``sqrt(Σ se²) / k``, times the score's slope (clipping at 0 or 100 is ignored)."""
    if name not in DESIDERATA:
        raise ValueError(f"desideratum must be one of {DESIDERATA}, got {name!r}")
    se = np.asarray(list(raw_stderrs), dtype=np.float64)
    if se.size == 0 or not np.all(np.isfinite(se)):
        return float("nan")
    return float(abs(_SCALE.get(name, 100.0)) * math.sqrt(float(np.sum(se**2))) / se.size)
