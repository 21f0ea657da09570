"""A rerun over a complete store against the first run (issue 34, item 7), interleaved.

Each repeat makes a fresh store and times, one after the other, the first run of
``lmms-eval --model cycle --model_args preset=smoke --tasks mmeception_smoke,sdp_smoke``, a rerun
over its complete store (stored hops and stored scoring features) and a rerun with the feature
cache off (``LMMS_GENBENCH_FEATURE_CACHE=0``), and checks that the three report the same results.
The tiny networks' cache (``LMMS_GENBENCH_CACHE``) is built once before the first repeat.

    python benchmarks/rerun_time.py --repeats 3
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = "mmeception_smoke,sdp_smoke"


def _run(work: Path, name: str, art: Path, **env: str) -> tuple[float, dict]:
    out = work / name
    cmd = [str(Path(sys.executable).parent / "lmms-eval"), "--model", "cycle", "--model_args",
           f"preset=smoke,artifacts={art}", "--tasks", TASKS, "--output_path", str(out)]
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=full, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    files = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    if proc.returncode or len(files) != 1:
        sys.exit(f"{name} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds, json.loads(Path(files[0]).read_text())["results"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rerun-time-"))
    os.environ.setdefault("LMMS_GENBENCH_CACHE", str(work / "cache"))
    _run(work, "warm-up", work / "warm-up")  # builds the tiny networks once
    rows = []
    for repeat in range(args.repeats):
        art = work / f"art{repeat}"
        load = os.getloadavg()[0]
        first, a = _run(work, f"first{repeat}", art)
        rerun, b = _run(work, f"rerun{repeat}", art)
        off, c = _run(work, f"off{repeat}", art, LMMS_GENBENCH_FEATURE_CACHE="0")
        if not a == b == c:
            sys.exit("the rerun's results differ from the first run's")
        rows.append((first, rerun, off, load, os.getloadavg()[0]))
        print(f"repeat {repeat}: first {first:.1f} s, rerun {rerun:.1f} s ({rerun / first:.2f}), "
              f"rerun without stored features {off:.1f} s ({off / first:.2f}); load {load:.2f} -> {rows[-1][4]:.2f}",
              flush=True)
    med = [statistics.median(r[i] for r in rows) for i in range(3)]
    print(f"median: first {med[0]:.1f} s, rerun {med[1]:.1f} s ({med[1] / med[0]:.2f}), "
          f"rerun without stored features {med[2]:.1f} s ({med[2] / med[0]:.2f}); "
          f"median of the per-repeat ratios {statistics.median(r[1] / r[0] for r in rows):.2f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
