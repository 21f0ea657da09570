"""Stored scoring features end to end through the real `lmms-eval` command (issue 34, item 5):
a rerun of mmeception_smoke,sdp_smoke over its complete store loads no scoring network and
reports the first run's scores bit for bit, as does a rerun with the feature cache off; the
same for sdp_geneval_smoke, whose MGG keeps its detections and crop colours."""

import json

from tests.support.lmms_eval_runs import BIN, results_file, run

TASKS = "mmeception_smoke,sdp_smoke"


def _run(tmp_path, name, art, tasks=TASKS, reports=("report.json", "mcd_report.json"), **env):
    out = tmp_path / name
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={art}",
                "--tasks", tasks, "--output_path", str(out)], tmp_path, log=f"{name}.log", timeout=900, **env)
    results = results_file(out)[1]["results"]  # lmms-eval exits 0 even when a task crashed
    features = {p.parent.name: json.loads(p.read_text())["features"]
                for pattern in reports for p in art.rglob(pattern)}
    return proc, results, features


def test_a_rerun_over_a_complete_store_loads_no_scoring_network_and_scores_the_same(tmp_path):
    art = tmp_path / "art"
    proc, first, computed = _run(tmp_path, "first", art)
    assert set(first) == {"mmeception_smoke", "sdp_smoke"}, proc.stderr[-3000:]
    assert first["mmeception_smoke"]["n_scored,none"] == 9 and first["sdp_smoke"]["n_scored,none"] == 18
    assert len(computed) == 3  # mmeception_smoke's namespace, sdp_smoke's two (text-first, image-first)
    assert all(f["computed"] > 0 and f["networks_loaded"] for f in computed.values()), computed
    assert list((art / ".features").glob("*/identity.json"))  # at the store root, shared by every pair

    proc, rerun, stored = _run(tmp_path, "rerun", art)
    assert rerun == first, proc.stderr[-3000:]  # every metric and stderr, bit for bit
    assert all(f["computed"] == 0 and f["networks_loaded"] == [] and f["from_store"] > 0 for f in stored.values()), stored
    log = proc.stdout + proc.stderr  # lmms-eval's INFO lines
    assert "genception features: 72 read from the store, 0 computed; networks loaded: none" in log
    assert "mcd features: 108 read from the store, 0 computed; networks loaded: none" in log

    proc, off, recomputed = _run(tmp_path, "off", art, LMMS_GENBENCH_FEATURE_CACHE="0")
    assert off == first, proc.stderr[-3000:]
    assert all(f["cache"].startswith("off") and f["from_store"] == 0 for f in recomputed.values()), recomputed


def test_an_mgg_rerun_over_a_complete_store_loads_no_detector_or_colour_clip_and_scores_the_same(tmp_path):
    art = tmp_path / "art"
    runs = {}
    for name, env in (("first", {}), ("rerun", {}), ("off", {"LMMS_GENBENCH_FEATURE_CACHE": "0"})):
        runs[name] = _run(tmp_path, name, art, "sdp_geneval_smoke", ("mgg_report.json",), **env)
    (proc, first, computed), (rerun_proc, rerun, stored), (off_proc, off, recomputed) = runs.values()
    assert first["sdp_geneval_smoke"]["n_scored,none"] == 6, proc.stderr[-3000:]
    (cold,), (uncached,) = computed.values(), recomputed.values()
    assert cold["networks_loaded"] == ["tiny-clip", "tiny-owlv2"] and cold["computed"] > 0, cold
    assert uncached == {**cold, "cache": "off (LMMS_GENBENCH_FEATURE_CACHE=0)"}, uncached
    assert rerun == first == off, (rerun_proc.stderr[-3000:], off_proc.stderr[-3000:])  # bit for bit
    assert list(stored.values()) == [{**cold, "from_store": cold["computed"], "computed": 0, "networks_loaded": []}]
    assert f"mgg features: {cold['computed']} read from the store, 0 computed; networks loaded: none" in \
        rerun_proc.stdout + rerun_proc.stderr
