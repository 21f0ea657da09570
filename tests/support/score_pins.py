"""Pinned smoke scores: exact on the machine that recorded them, within measured float noise elsewhere.

A score pinned to 1e-9 holds only where it was made: the same packages (``.ci/requirements.lock``)
and the same arithmetic, which depends on more than torch's capability string. Two AMD EPYCs that
both report ``AVX2`` (family 25 models 1 and 17 forced to AVX2) gave gc_fid@3 1.2e-8 apart (issue 53),
and oneDNN picks its kernels by the CPU's flags, not by torch's capability. So the pins record the
machine they were made on (:func:`machine`: vendor, family, model, stepping, a digest of the CPU
flags, torch's kernel choice and the variables that steer it) and are exact only on an equal one.
Anywhere else the same code moves the smoke scores by float noise: up to 6.4e-6 relative was
measured (issue 25: torch 2.14.1 on another machine than the pins'; 2.4e-6 on an AVX2 EPYC in issue
53), so :data:`DRIFT_REL` allows 5e-5, about 8x that, while a real formula change moves them far more
(tests/smoke/test_score_pins.py shows one: GC's weights move gc@3 by 7e-4 relative, and one MGG
threshold moves MGG by a whole image's verdict).

``python -m tests.support.score_pins record`` reruns the shared smoke run and records its scores and
this machine as the pins (after a change that moves a score on purpose: say so in the commit).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from pathlib import Path

from tests.support.lock import off_lock

PINS = Path(__file__).parent / "data" / "smoke_scores_before.json"
EXACT_REL = 1e-9
DRIFT_REL = 5e-5
ABS = 1e-12  # the pins hold exact zeros (MGG tags no image passes)
#: variables that change which kernels torch and oneDNN run (and so the last bits of a float)
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OPENBLAS_CORETYPE",
                    "MKL_ENABLE_INSTRUCTIONS")


def cpu_capability() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def machine() -> dict[str, str]:
    """What decides the smoke scores' last bits here, beside the packages (the lock checks those)."""
    info = _cpuinfo()
    flags = " ".join(sorted((info.get("flags") or info.get("Features") or "").split()))
    return {
        "arch": platform.machine(),
        "cpu": " / ".join(info.get(k, "?") for k in ("vendor_id", "cpu family", "model", "stepping")),
        "flags_sha256": hashlib.sha256(flags.encode()).hexdigest()[:16],
        "torch_kernels": cpu_capability(),
        "kernel_variables": ",".join(f"{k}={os.environ[k]}" for k in KERNEL_VARIABLES if k in os.environ),
    }


def pins() -> dict:
    return json.loads(PINS.read_text())


def tolerance() -> tuple[float, str]:
    """The relative tolerance that applies here, and why."""
    off = off_lock()
    made_on, here = pins()["_environment"]["machine"], machine()
    if not off and here == made_on:
        return EXACT_REL, "under the lock on the machine the pins were made on: exact"
    why = [f"{n} {v[1]} (lock {v[0]})" for n, v in sorted(off.items())][:8]
    why += [f"{k} {here[k]!r} (pins {made_on.get(k)!r})" for k in here if here[k] != made_on.get(k)]
    return DRIFT_REL, "off the lock or on another machine: " + ", ".join(why)


def mismatches(now: dict[str, dict[str, float]], pinned: dict, rel: float) -> list[str]:
    """Every pinned ``task/key`` whose value ``now`` differs beyond ``rel``, as readable lines."""
    bad = []
    for task, values in pinned.items():
        if task.startswith("_"):
            continue
        got = now.get(task, {})
        if set(got) != set(values):
            bad.append(f"{task}: keys differ: {sorted(set(got) ^ set(values))}")
            continue
        for key, value in values.items():
            if value is None or got[key] is None:  # pinned null (SDR of 2 generations): null now too
                if value is not got[key]:
                    bad.append(f"{task}/{key}: {got[key]!r} vs pinned {value!r}")
                continue
            if not math.isclose(got[key], value, rel_tol=rel, abs_tol=ABS):
                diff = abs(got[key] - value) / max(abs(value), ABS)
                bad.append(f"{task}/{key}: {got[key]!r} vs pinned {value!r} ({diff:.2e} relative)")
    return bad


def headline(results: dict, task: str) -> dict:
    """A task's ``metric -> value`` from lmms-eval's results (the ``,none`` filter, no stderr)."""
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k and "stderr" not in k}


def record() -> None:
    """Rerun the shared smoke run and write its scores and this machine as the pins."""
    import datetime
    import tempfile

    from tests.support.smoke_run import SMOKE_TASKS, run_smoke_tasks

    off = off_lock()
    if off:
        sys.exit(f"record the pins under .ci/requirements.lock; these differ: {sorted(off)}")
    with tempfile.TemporaryDirectory() as tmp:
        results = run_smoke_tasks(Path(tmp)).results
    data = {"_source": "the shared smoke run (tests/support/smoke_run.py: lmms-eval --model cycle "
                       "--model_args preset=smoke --tasks " + ",".join(SMOKE_TASKS) + ")",
            "_environment": {
        "machine": machine(),
        "checked": f"{datetime.date.today()}: recorded under .ci/requirements.lock by "
                   "`python -m tests.support.score_pins record`",
    }}
    data.update({task: headline(results, task) for task in SMOKE_TASKS})
    PINS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"pinned {sum(len(v) for k, v in data.items() if not k.startswith('_'))} scores in {PINS}")


if __name__ == "__main__":
    if sys.argv[1:] != ["record"]:
        sys.exit("usage: python -m tests.support.score_pins record")
    record()
