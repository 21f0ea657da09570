"""The smoke scores equal their pins: exactly under CI's lock, within measured float noise
elsewhere; and that noise allowance still catches a real change of formula."""

import dataclasses
import shutil

from tests.support.score_pins import DRIFT_REL, headline, mismatches, pins, tolerance
from tests.support.smoke_run import SMOKE_TASKS


def test_smoke_scores_equal_the_pinned_scores(smoke_run):
    rel, why = tolerance()
    bad = mismatches({t: headline(smoke_run.results, t) for t in SMOKE_TASKS}, pins(), rel)
    assert not bad, f"smoke scores moved ({why}, rel {rel:g}):\n" + "\n".join(bad)


def test_the_noise_allowance_catches_other_gc_weights():
    """GC@T weights generation t by t (GenCeption's formula); equal weights would move the
    smoke gc@3 by 7e-4 relative, 14x the allowance."""
    pinned = pins()
    gc = pinned["mmeception_smoke"]
    uniform = sum(gc[f"s@{t}"] for t in (1, 2, 3)) / 3
    now = {t: dict(v) for t, v in pinned.items() if not t.startswith("_")}
    now["mmeception_smoke"]["gc@3"] = uniform
    bad = mismatches(now, pinned, DRIFT_REL)
    assert len(bad) == 1 and bad[0].startswith("mmeception_smoke/gc@3"), bad


def test_the_noise_allowance_catches_one_mgg_threshold(smoke_run, tmp_path, monkeypatch):
    """The smoke run's stored chains rescored with one GenEval threshold changed (counting's,
    0.1 -> 0.99; the random tiny OWLv2's scores sit near 0 or 1, so only a threshold near 1
    moves a verdict): MGG moves by a whole verdict, far outside the allowance."""
    from lmms_eval.evaluator import simple_evaluate

    from lmms_genbench.metrics.functional.geneval import RULE_PRESETS

    store = tmp_path / "art"
    shutil.copytree(smoke_run.art, store)  # the shared run's reports stay as they were
    monkeypatch.setitem(RULE_PRESETS, "owlv2", dataclasses.replace(RULE_PRESETS["owlv2"], counting_threshold=0.99))
    results = simple_evaluate(model="cycle", model_args=f"preset=smoke,artifacts={store}",
                              tasks=["sdp_geneval_smoke"], log_samples=False)
    task = "sdp_geneval_smoke"
    now = headline(results, task)
    assert now["n_scored"] == 6 and now["n_failed"] == 0
    bad = mismatches({task: now}, {task: pins()[task]}, DRIFT_REL)
    assert any(line.startswith(f"{task}/mgg:") for line in bad), bad
