"""Every role's checkpoint keys its store folder by content (issue 52), through the real `lmms-eval`
command: a local folder whose weights change in place (every float tensor of its
``model.safetensors`` rewritten, as a training script overwrites its ``output_dir``) after a run
stopped by SIGTERM opens a new namespace whose scores equal a clean run of the new weights; the
same folder unchanged reuses every hop; a complete store whose checkpoint changed is not reused,
and the line says which checkpoint differs. For a unified model (``unified=janus``), a describer
(``describer=llava_hf``) and a diffusers generator, on the tiny random-weight folders of
``lmms_genbench/smoke`` (copied: the test changes them). The in-process checks:
tests/unit/core/test_checkpoints.py, tests/unit/store/test_identity_checkpoints.py."""

from __future__ import annotations

import json
import math
import shutil
import signal

from tests.support.lmms_eval_runs import BIN, results_file, run

PREFLIGHT_SAME = "made by the same weights"


def _perturb(folder):
    """Every float tensor of ``folder``'s safetensors files changed in place (x1.5 + 0.01)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    files = sorted(folder.rglob("*.safetensors"))
    assert files, folder
    for path in files:
        with safe_open(str(path), "pt") as fh:
            metadata = fh.metadata()
        tensors = {k: (v * 1.5 + 0.01 if v.is_floating_point() else v) for k, v in load_file(str(path)).items()}
        save_file(tensors, str(path), metadata=metadata)


def _lmms_eval(tmp_path, args, art, name, task, limit, **env):
    """One run; its process, the task's metrics (None when it wrote no results) and its log."""
    out = tmp_path / f"out-{name}"
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"{args},artifacts={art}",
           "--tasks", task, "--limit", str(limit), "--output_path", str(out)]
    proc = run(cmd, tmp_path, log=f"{name}.log", cwd=tmp_path, timeout=1500,
               LMMS_GENBENCH_CACHE=str(tmp_path / "cache"), **env)
    metrics = None
    if list(out.rglob("*_results.json")):
        metrics = results_file(out)[1]["results"][task]
    return proc, metrics, proc.stdout + proc.stderr


def _namespaces(art):
    """``{namespace folder relative to art: hop files it holds}``."""
    return {str(p.parent.relative_to(art)): len([f for f in p.parent.rglob("[0-9][0-9][0-9].*")])
            for p in art.glob("*/*/*/protocol.json")}


def _last_runs(art, namespace):
    return json.loads((art / namespace / "runs.jsonl").read_text().splitlines()[-1])


def _same_scores(a, b, allowance=1e-6):
    """Every float metric equal within ``allowance`` (the same machine and code: the chains are the
    same bytes, so only summation order could move a float)."""
    floats = {k for k, v in a.items() if isinstance(v, float) and math.isfinite(v)}
    assert floats and floats == {k for k, v in b.items() if isinstance(v, float) and math.isfinite(v)}, (a, b)
    for key in floats:
        assert abs(a[key] - b[key]) <= allowance, (key, a[key], b[key])


def _held_out_case(tmp_path, args, folder, task, limit):
    """The issue's case: a run stopped by SIGTERM, the weights changed in place, the same command
    again; then a clean run of the new weights, and the unchanged folder again over the store.
    Returns the log of the run over the changed weights and the store."""
    art = tmp_path / "art"
    stopped, _, log = _lmms_eval(tmp_path, args, art, "stopped", task, limit, LMMS_GENBENCH_INTERRUPT_AT="draw")
    assert stopped.returncode == 128 + signal.SIGTERM, log[-3000:]
    before = _namespaces(art)
    assert sum(before.values()) > 0, before  # part of the hops stored
    _perturb(folder)

    changed, metrics, log = _lmms_eval(tmp_path, args, art, "changed", task, limit)
    assert changed.returncode == 0 and metrics is not None, log[-3000:]
    after = _namespaces(art)
    new = sorted(set(after) - set(before))
    assert new and all(after[n] == before[n] for n in before), (before, after)  # the old work untouched
    assert all(_last_runs(art, n)["hops_reused"] == 0 for n in new), new  # nothing of the old weights reused
    assert "has other weights than its store folder" in log, log[-3000:]

    clean, clean_metrics, clean_log = _lmms_eval(tmp_path, args, tmp_path / "art-clean", "clean", task, limit)
    assert clean.returncode == 0 and clean_metrics is not None, clean_log[-3000:]
    _same_scores(metrics, clean_metrics)

    again, again_metrics, again_log = _lmms_eval(tmp_path, args, art, "again", task, limit)
    assert again.returncode == 0 and again_metrics is not None, again_log[-3000:]
    assert set(_namespaces(art)) == set(after)  # an unchanged folder: no new namespace
    assert PREFLIGHT_SAME in again_log, again_log[-3000:]  # the complete store checked and reused as is
    assert all(_last_runs(art, n)["hops_computed"] == 0 for n in new), new
    _same_scores(metrics, again_metrics)
    return log, art


def test_a_unified_folder_changed_after_a_stopped_run_opens_a_new_namespace(tmp_path):
    """unified=janus from a local folder on sdp_smoke: the issue's held-out case."""
    from lmms_genbench.smoke.janus import tiny_janus_path

    folder = tmp_path / "janus"
    shutil.copytree(tiny_janus_path(), folder)
    args = f"unified=janus,unified.pretrained={folder},unified.device=cpu,unified.dtype=float32"
    _, art = _held_out_case(tmp_path, args, folder, "sdp_smoke", 4)
    identity = json.loads(next(art.glob("*/identity.json")).read_text())
    assert set(identity["checkpoints"]["pretrained"]) == {"source", "folder"}


def test_a_describer_folder_changed_after_a_stopped_run_opens_a_new_namespace(tmp_path):
    """describer=llava_hf from a local folder (the smoke generator draws) on mmeception_smoke; and a
    complete store whose describer then changes is not reused: the preflight says which part differs."""
    from lmms_genbench.smoke.llava import tiny_llava_path

    folder = tmp_path / "llava"
    shutil.copytree(tiny_llava_path(), folder)
    args = f"preset=smoke,describer=llava_hf,describer.pretrained={folder}"
    _, art = _held_out_case(tmp_path, args, folder, "mmeception_smoke", 2)
    held = _namespaces(art)
    _perturb(folder)  # now over a complete store
    proc, metrics, log = _lmms_eval(tmp_path, args, art, "complete", "mmeception_smoke", 2)
    assert proc.returncode == 0 and metrics is not None, log[-3000:]
    assert PREFLIGHT_SAME not in log and "but its weights differ" in log, log[-3000:]
    assert f"pretrained={folder}" in log  # the part that differs, named
    assert len(_namespaces(art)) == len(held) + 1


def test_a_diffusers_folder_changed_in_place_opens_a_new_namespace(tmp_path):
    """generator=diffusers from a local folder: its digest (the mechanism every role now shares) keys
    it; over a complete store, the changed folder is named as the part that differs."""
    from lmms_genbench.smoke.pipelines import tiny_family_path

    folder = tmp_path / "flux"
    shutil.copytree(tiny_family_path("flux"), folder)
    args = (f"preset=smoke,generator=diffusers,generator.pretrained={folder},generator.device=cpu,"
            "generator.dtype=float32,generator.steps=1,generator.width=32,generator.height=32")
    art = tmp_path / "art"
    first, metrics, log = _lmms_eval(tmp_path, args, art, "first", "mmeception_smoke", 1)
    assert first.returncode == 0 and metrics is not None, log[-3000:]
    held = _namespaces(art)
    _, _, log = _lmms_eval(tmp_path, args, art, "same", "mmeception_smoke", 1)
    assert PREFLIGHT_SAME in log and _namespaces(art) == held, log[-3000:]
    _perturb(folder)
    changed, metrics, log = _lmms_eval(tmp_path, args, art, "changed", "mmeception_smoke", 1)
    assert changed.returncode == 0 and metrics is not None, log[-3000:]
    assert "for the generator diffusers with these arguments, but its weights differ" in log, log[-3000:]
    assert f"pretrained={folder}" in log
    new = sorted(set(_namespaces(art)) - set(held))
    assert new and all(_last_runs(art, n)["describe_items"] > 0 or _last_runs(art, n)["generate_items"] > 0
                       for n in new)
