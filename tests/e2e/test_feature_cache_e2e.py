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


def _flip_headers(art, how):
    """Every feature file's header changed as issue 43 found it trusted: one bit of its dtype
    ('<' 0x3c -> '>' 0x3e) or its shape [n] -> [1, n] ([k, 7] -> [1, k, 7]); returns how many files were changed."""
    import re

    changed = 0
    for path in art.glob(".features/*/*/*.feat"):
        blob = path.read_bytes()
        if how == "dtype":
            new = re.sub(rb'"dtype": "<', b'"dtype": ">', blob, count=1)
        else:
            new = re.sub(rb'"shape": \[(\d[\d, ]*)\]', rb'"shape": [1, \1]', blob, count=1)
        if new != blob:
            path.write_bytes(new)
            changed += 1
    return changed


def test_a_flipped_feature_header_of_any_network_is_recomputed_counted_and_scores_the_same(tmp_path):
    """Issue 43: a one-bit dtype flip or a shape [n] -> [1, n] (detections: [k, 7] -> [1, k, 7])
    in the header of every stored feature (ViT, CLIP image and text towers, MiniLM, Inception,
    OWLv2 detections, the colour CLIP's answers) gives the clean run's scores bit for bit, each
    report counting what it recomputed; `store verify` names the bad files first and finds none after the rerun."""
    tasks = "mmeception_smoke,sdp_smoke,sdp_geneval_smoke"
    reports = ("report.json", "mcd_report.json", "mgg_report.json")
    art = tmp_path / "art"
    proc, first, clean = _run(tmp_path, "first", art, tasks, reports)
    assert set(first) == set(tasks.split(",")), proc.stderr[-3000:]
    families = {spec for f in clean.values() for spec in f["networks_loaded"]}
    for how in ("dtype", "shape"):
        assert _flip_headers(art, how) > 0
        verify = run([str(BIN / "lmms-genbench"), "store", "verify", str(art)], tmp_path, log=f"verify-{how}.log")
        assert verify.returncode == 1 and "fails its checks" in verify.stdout, verify.stdout[-2000:]
        proc, again, counted = _run(tmp_path, how, art, tasks, reports)
        assert again == first, (how, proc.stderr[-3000:])  # bit for bit, no wrong score, no crash
        assert all(f["corrupt_recomputed"] > 0 and f["computed"] > 0 for f in counted.values()), (how, counted)
        assert {spec for f in counted.values() for spec in f["networks_loaded"]} == families, (how, counted)
        verify = run([str(BIN / "lmms-genbench"), "store", "verify", str(art)], tmp_path, log=f"verified-{how}.log")
        assert verify.returncode == 0 and ", 0 bad" in verify.stdout, verify.stdout[-2000:]


def test_an_unwritable_feature_cache_says_so_once_and_the_report_names_it(tmp_path):
    """Issue 43: `.features` a file (as a read-only or full disk would refuse the writes): the run
    scores as without the cache, one warning line says the features are not kept, and each
    report's `cache` field says why."""
    art = tmp_path / "art"
    art.mkdir()
    (art / ".features").write_text("a file where the cache folder would go")
    proc, results, features = _run(tmp_path, "ro", art)
    _, clean, _ = _run(tmp_path, "clean", tmp_path / "clean-art", LMMS_GENBENCH_FEATURE_CACHE="0")
    assert results == clean, proc.stderr[-3000:]
    warned = [line for line in proc.stderr.splitlines() if "feature cache: cannot write under" in line]
    assert len(warned) == 1, warned
    assert features and all(f["cache"].startswith(f"read-only (cannot write under {art / '.features'}")
                            for f in features.values()), features
