"""The unified models' front-door runs, as docs/models.md gives them, through the local test hub.

``run_unified`` is ``lmms-eval --model cycle --model_args unified=...`` on ``sdp_nocaps``; it checks
what every unified run must show (exit 0, every doc scored, all four MCD mappings a cosine) and
returns what the test checks beyond that. ``check_unified`` is ``lmms-genbench check`` on the same
arguments. Used by tests/e2e/test_{showo,vila_u,janus13,blip3o,bagel}_e2e.py and test_front_door_e2e.py.
"""

from __future__ import annotations

import math
import subprocess

from tests.support.lmms_eval_runs import BIN, offline_env, results_file, run

MAPPINGS = ("text->text", "text->image", "image->image", "image->text")


def run_unified(local_hub, tmp_path, args: str, ids: list[str], limit: int = 3, **env) -> tuple[dict, list]:
    """``args`` (``unified=...``, without ``artifacts``) on ``sdp_nocaps --limit limit`` with the
    hub serving ``ids``; ``env`` adds to the run's environment. Returns the task's metrics
    (``{name: value}``, the ``,none`` filter dropped) and the hub requests the run made."""
    from tests.support.localhub.repos import add_models

    first = len(local_hub.requests)
    add_models(local_hub, ids=list(ids))
    cmd = [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", args + ",artifacts=./artifacts",
           "--tasks", "sdp_nocaps", "--limit", str(limit), "--output_path", "./logs"]
    proc = run(cmd, tmp_path, timeout=1500, **env, **local_hub.env(hf_home=tmp_path / "hf"))
    log = (tmp_path / "lmms_eval.log").read_text()
    assert proc.returncode == 0, log[-3000:]
    _, results = results_file(tmp_path / "logs")
    got = {k.split(",")[0]: v for k, v in results["results"]["sdp_nocaps"].items() if "," in k}
    assert (got["n_scored"], got["n_failed"]) == (limit, 0), got
    for mapping in MAPPINGS:
        value = got[f"mcd_{mapping}"]
        assert isinstance(value, float) and math.isfinite(value) and -1.0 <= value <= 1.0, (mapping, got)
    return got, local_hub.requests[first:]


def served(requests, prefix: str = "", statuses=(200, 206, 302)) -> list[str]:
    """The paths among hub ``requests`` answered with one of ``statuses`` that start with ``prefix``."""
    return [path for _, path, status in requests if status in statuses and path.startswith(prefix)]


def check_unified(local_hub, tmp_path, args: str, limit: int | None = 3) -> subprocess.CompletedProcess:
    """``lmms-genbench check`` on ``args`` (``artifacts`` included) for ``sdp_nocaps``, offline but
    for the local hub; ``limit`` None leaves ``--limit`` out."""
    env = {**offline_env(tmp_path), **local_hub.env(hf_home=tmp_path / "hf")}
    cmd = [str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", args, "--tasks", "sdp_nocaps",
           *(["--limit", str(limit)] if limit is not None else []), "--output_path", str(tmp_path / "logs")]
    return subprocess.run(cmd, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def assert_batches_store_alike(one_run, batched_run) -> None:
    """Two runs' ``artifacts`` folders (a run's folder each; ``unified.batch_size`` names no store)
    hold the same hops: texts equal, images within one level (float rounding at a uint8 boundary)."""
    import numpy as np
    from PIL import Image

    stores = []
    for run_dir in (one_run, batched_run):
        root = run_dir / "artifacts"
        stores.append({p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.suffix in (".txt", ".png")})
    one, batched = stores
    assert sorted(one) == sorted(batched), sorted(set(one) ^ set(batched))
    assert any(n.endswith(".png") for n in one) and any(n.endswith(".txt") for n in one), sorted(one)
    for name, path in one.items():
        if name.endswith(".txt"):
            assert batched[name].read_text() == path.read_text(), name
        else:
            a, b = (np.asarray(Image.open(p).convert("RGB")).astype(int) for p in (path, batched[name]))
            assert a.shape == b.shape and np.abs(a - b).max() <= 1, name
