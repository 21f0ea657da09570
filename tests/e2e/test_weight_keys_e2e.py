"""Weight-true keys through the real ``lmms-eval`` command: a store keyed the legacy way (sampled
bytes) is reused (the in-process checks: tests/unit/generators/test_weight_keys.py)."""

from __future__ import annotations

import json



def test_a_legacy_store_is_reused_through_the_lmms_eval_command(tmp_path):
    """A store written before whole-file hashing (its generator folder under the legacy name) is
    adopted by the next run: nothing described or drawn again."""
    from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
    from lmms_genbench.smoke.pipelines import tiny_family_path

    from tests.support.lmms_eval_runs import BIN, results_file, run

    folder, art = str(tiny_family_path("flux")), tmp_path / "art"
    args = (f"preset=smoke,generator=diffusers,generator.pretrained={folder},generator.device=cpu,"
            f"generator.dtype=float32,generator.steps=1,generator.width=32,generator.height=32,artifacts={art}")
    plan = DiffusersGenerator.plan(pretrained=folder, device="cpu", dtype="float32", steps=1, width=32, height=32)

    def lmms_eval(out):
        run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args, "--tasks", "mmeception_smoke",
             "--limit", "1", "--output_path", str(tmp_path / out)], tmp_path, cwd=tmp_path)
        return results_file(tmp_path / out)[1]["results"]["mmeception_smoke"]

    assert lmms_eval("first")["n_scored,none"] == 1
    (current,) = [p for p in art.glob("*/*") if p.name == plan.name]
    current.rename(current.parent / plan.legacy_names[0])  # as an earlier version named it
    assert lmms_eval("second")["n_scored,none"] == 1
    assert current.is_dir() and not (current.parent / plan.legacy_names[0]).exists()
    (runs,) = current.glob("*/runs.jsonl")
    last = json.loads(runs.read_text().splitlines()[-1])
    assert last["hops_computed"] == 0 and last["hops_reused"] > 0
