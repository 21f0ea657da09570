"""How far a resumed smoke run's scores sit from a clean run's, after ``kill -9`` mid-run.

Runs ``lmms-eval --model cycle --model_args preset=smoke --tasks mmeception_smoke`` once
cleanly, then, for each count N, starts the same command on a fresh store, kills it with
SIGKILL as soon as N hops are stored (of 63: 9 chains x 7 hops), reruns it to completion, and
prints the largest relative difference of any score from the clean run, with how many hops
each rerun computed.

    python benchmarks/resume_drift.py [--after-hops 12,25,38,50]

Why scores can move at all: the smoke generator's output depends on which prompts share a
batch (one pixel level in one image), and a resumed run batches only the chains with work.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TASK = "mmeception_smoke"


def _command(root: Path, name: str) -> list[str]:
    return [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"preset=smoke,artifacts={root / 'art'}",
            "--tasks", TASK, "--output_path", str(root / name)]


def _stored(art: Path) -> int:
    """Hops recorded in the store so far (one hops.jsonl line per stored hop)."""
    total = 0
    for path in art.rglob("hops.jsonl") if art.exists() else ():
        try:
            total += path.read_bytes().count(b"\n")
        except OSError:
            pass
    return total


def _scores(out: Path) -> dict[str, float]:
    (path,) = out.rglob("*_results.json")
    results = json.loads(path.read_text())["results"][TASK]
    return {k.split(",")[0]: v for k, v in results.items() if "," in k and isinstance(v, float) and "stderr" not in k}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after-hops", default="12,25,38,50", help="stored hops before each kill, comma-separated")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        clean_root = Path(tmp) / "clean"
        subprocess.run(_command(clean_root, "out"), env=env, capture_output=True, check=True)
        clean = _scores(clean_root / "out")
        worst = 0.0
        counts = [int(n) for n in args.after_hops.split(",")]
        for count in counts:
            root = Path(tmp) / f"killed-{count}"
            proc = subprocess.Popen(_command(root, "first"), env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            while proc.poll() is None and _stored(root / "art") < count:
                time.sleep(0.02)
            finished = proc.poll() is not None
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            subprocess.run(_command(root, "resumed"), env=env, capture_output=True, check=True)
            resumed = _scores(root / "resumed")
            rel = max(abs(resumed[k] - v) / max(abs(v), 1e-12) for k, v in clean.items())
            runs = [json.loads(line) for line in next((root / "art").rglob("runs.jsonl")).read_text().splitlines()]
            worst = max(worst, rel)
            print(f"kill after {count} stored hops{' (had finished)' if finished else ''}: rerun computed "
                  f"{runs[-1]['hops_computed']} hops, largest relative score difference {rel:.2e}", flush=True)
        print(f"largest relative difference over {len(counts)} kills: {worst:.2e}")


if __name__ == "__main__":
    main()
