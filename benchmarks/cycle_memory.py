"""Peak memory of ``lmms-eval --model cycle`` against the number of docs.

Writes a synthetic folder of N photo-sized JPEGs (640x480, smooth colour fields
with noise) and runs the real ``lmms-eval`` command on it twice per N, in fresh
processes, with the smoke preset (random-weight describer and generator), one
iteration, 8-token descriptions, and GC@1 scored (FID off):

* ``folder``: docs hold a path (``mmeception_folder``: the engine opens the file);
* ``hf-image``: the same folder as a Hugging Face dataset with an ``Image`` column
  (like MME), whose rows decode their image whenever they are indexed.

For each run: the process's peak RSS (``wait4``), and, read inside the process,
the RSS when the cycle model's ``generate_until`` starts (what lmms-eval holds by
then: itself, the networks, the dataset and its requests) and the peak when it
returns, so the part the model adds is shown apart from the host's.

    python benchmarks/cycle_memory.py [--small 200] [--large 2000] [--variants folder,hf-image]

Ends with one line per variant: ``<variant>: peak RSS N=200 X MB, N=2000 Y MB, ratio R (goal <= 1.2)``.
Run it with ``PYTHONPATH=<another checkout>`` to measure that checkout's code.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 1.2

# runs lmms-eval in this process, noting RSS around the cycle model's generate_until
_WRAPPER = r"""
import json, resource, sys
from lmms_genbench.models.cycle import CycleModel

NOTES = sys.argv[1]

def rss_mb():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20

original = CycleModel.generate_until
def generate_until(self, requests):
    notes = {"rss_at_start_mb": rss_mb(), "peak_before_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
             "docs": len(requests)}
    out = original(self, requests)
    notes["peak_after_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(NOTES, "w") as fh:
        json.dump(notes, fh)
    return out
CycleModel.generate_until = generate_until

from lmms_eval.__main__ import cli_evaluate
sys.argv = ["lmms-eval", *sys.argv[2:]]
cli_evaluate()
"""

_UTILS = """\
from lmms_genbench.tasks.mmeception.utils import *  # noqa: F401,F403
from lmms_genbench.tasks.mmeception.utils import folder_docs


def folder_as_image_column(dataset):
    import datasets

    docs = folder_docs(dataset)
    return docs.cast_column("image_path", datasets.Image()).rename_column("image_path", "image")
"""


def write_folder(folder: Path, n: int) -> None:
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:480, 0:640]
    for k in range(n):
        path = folder / f"{k:05d}.jpg"
        if path.exists():
            continue
        base = rng.integers(0, 255, 6)
        field = np.stack([(base[c] + base[c + 3] * xx / 640 + 40 * np.sin((yy + k) / (13 + c))) % 255
                          for c in range(3)], axis=-1)
        noise = rng.normal(0, 12, field.shape)
        Image.fromarray(np.clip(field + noise, 0, 255).astype(np.uint8)).save(path, quality=90)


def write_tasks(folder: Path) -> None:
    from lmms_genbench.metrics.scorers.genception import GENCEPTION
    from lmms_genbench.plugin import TASKS_DIR

    here = Path(TASKS_DIR) / "mmeception"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "utils.py").write_text(_UTILS)
    scorer = {"preset": "smoke", "fid_features": "none"}
    metrics = "".join(f'  - {{metric: "{m}", aggregation: !function utils.aggregate, higher_is_better: true}}\n'
                      for m in GENCEPTION.metric_names(2, scorer))
    for name, process in (("folder", "utils.folder_docs"), ("hf-image", "utils.folder_as_image_column")):
        task = "genbench_memory_" + name.replace("-", "_")
        (folder / f"{task}.yaml").write_text(
            f"include: {here / '_mmeception_base.yaml'}\n"
            f"task: {task}\n"
            "dataset_path: json\n"
            f"dataset_kwargs:\n  data_files: {{test: {here / 'folder_placeholder.jsonl'}}}\n"
            "test_split: test\n"
            f"process_docs: !function {process}\n"
            "generation_kwargs:\n"
            "  iterations: 1\n  direction: image_first\n"
            '  generate_prompt: "Generate an image that fully and precisely reflects this description: {description}"\n'
            "  seed: 0\n  max_new_tokens: 8\n  temperature: 0\n  do_sample: false\n  until: []\n"
            f"  scorer: {json.dumps(scorer)}\n"
            f"metric_list:\n{metrics}"
        )


def run(variant: str, images: Path, tasks: Path, work: Path) -> dict:
    notes = work / "notes.json"
    task = "genbench_memory_" + variant.replace("-", "_")
    cmd = [sys.executable, "-c", _WRAPPER, str(notes), "--model", "cycle",
           "--model_args", f"preset=smoke,artifacts={work / 'art'}", "--tasks", task,
           "--include_path", str(tasks), "--output_path", str(work / "out"), "--verbosity", "ERROR"]
    env = {**os.environ, "MMECEPTION_IMAGE_DIR": str(images), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(work / "hf"), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    with open(work / "log.txt", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        _, status, usage = os.wait4(proc.pid, 0)
    if status != 0 or not notes.exists():
        raise SystemExit(f"{variant}: lmms-eval failed (status {status}); see {work / 'log.txt'}")
    result = json.loads(notes.read_text())
    result["peak_mb"] = usage.ru_maxrss / 1024
    result["seconds"] = time.perf_counter() - t0
    results = list((work / "out").rglob("*_results.json"))
    scores = json.loads(results[0].read_text())["results"][task] if results else {}
    result["n_scored"] = scores.get("n_scored,none")
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=2000)
    parser.add_argument("--variants", default="folder,hf-image")
    parser.add_argument("--keep", help="a folder to keep the images and runs in (reused: the images are made once)")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    with tempfile.TemporaryDirectory(prefix="cycle-memory-") as tmp:
        root = Path(args.keep or tmp)
        write_tasks(root / "tasks")
        peaks: dict[str, dict[int, dict]] = {v: {} for v in variants}
        for n in (args.small, args.large):
            images = root / f"images{n}"
            write_folder(images, n)
            for variant in variants:
                work = root / f"{variant}-{n}-{os.getpid()}"
                work.mkdir(parents=True)
                r = peaks[variant][n] = run(variant, images, root / "tasks", work)
                print(f"{variant:9s} N={n:5d}: peak RSS {r['peak_mb']:6.0f} MB (at generate_until's start "
                      f"{r['rss_at_start_mb']:6.0f} MB, peak by then {r['peak_before_mb']:6.0f} MB, "
                      f"after it {r['peak_after_mb']:6.0f} MB); scored {r['n_scored']}; {r['seconds']:.0f} s",
                      flush=True)
        for variant in variants:
            small, large = peaks[variant][args.small]["peak_mb"], peaks[variant][args.large]["peak_mb"]
            print(f"{variant}: peak RSS N={args.small} {small:.0f} MB, N={args.large} {large:.0f} MB, "
                  f"ratio {large / small:.2f} (goal <= {GOAL})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
