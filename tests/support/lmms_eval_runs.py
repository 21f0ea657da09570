"""Running the real ``lmms-eval`` command offline and reading what it wrote.

lmms-eval exits 0 even when a task crashed, so callers read the results files.
"""

import ast
import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
#: the start-up line the wheel's ``lmms_genbench.pth`` runs in every process (setup.py): a child process
#: started with it behaves as under a wheel install (CI) whether this checkout is installed so or editable
PTH_LINE = re.search(r'^PTH_LINE = "(.*)\\n"$', (ROOT / "setup.py").read_text(), re.M).group(1)
NOWHERE = "http://127.0.0.1:9"  # the discard port: connection refused at once
#: the README's headline ``--model_args``: real hub ids (the local test hub serves them)
HEADLINE = ("describer=qwen2_5_vl,describer.pretrained=Qwen/Qwen2.5-VL-7B-Instruct,generator=diffusers,"
            "generator.pretrained=black-forest-labs/FLUX.1-schnell,generator.steps=4,generator.guidance=0.0")


def offline_env(tmp_path, **extra):
    """This environment with every hub access off and one thread per op."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_CACHE=str(Path(tmp_path) / "hf_datasets"),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


def run(cmd, tmp_path, log="lmms_eval.log", cwd=None, timeout=900, **env):
    """Run ``cmd`` offline, keeping its output in ``tmp_path / log``."""
    proc = subprocess.run(
        cmd, check=False, cwd=cwd or tmp_path, env=offline_env(tmp_path, **env),
        capture_output=True, text=True, timeout=timeout,
    )
    (Path(tmp_path) / log).write_text(proc.stdout + proc.stderr)
    return proc


def results_file(out_dir):
    """``(path, results)`` of the one ``*_results.json`` under ``out_dir``."""
    files = glob.glob(str(Path(out_dir) / "**" / "*_results.json"), recursive=True)
    assert len(files) == 1, f"expected one results file under {out_dir}, found {files}"
    return files[0], json.loads(Path(files[0]).read_text())


def samples(out_dir, task):
    """The logged samples of ``task`` (``--log_samples``)."""
    files = glob.glob(str(Path(out_dir) / "**" / f"*_samples_{task}.jsonl"), recursive=True)
    assert len(files) == 1, files
    return [json.loads(line) for line in Path(files[0]).read_text().splitlines()]


def response(sample):
    """A sample's filtered response, unwrapped from lmms-eval's nested lists."""
    resp = sample["filtered_resps"]
    while isinstance(resp, list):
        resp = resp[0]
    return resp


def nonblank_lines(text):
    """The lines of ``text`` that are not blank."""
    return [line for line in text.splitlines() if line.strip()]


def last_line(text: str) -> str:
    """The last line that is not blank: where a one-line error stands."""
    lines = nonblank_lines(text)
    return lines[-1] if lines else ""


def read_results(out_dir):
    """The one results file's contents under ``out_dir``."""
    return results_file(out_dir)[1]


def task_metrics(results, task):
    """``{metric: value}`` of ``task``, the filter suffix (``,none``) dropped."""
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k}


def sample_chain(sample):
    """The chain a cycle-model sample answered with."""
    from lmms_genbench.store import Chain

    return Chain.from_json(response(sample))


def setup_constant(name):
    """A constant of setup.py, read without running it."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == name:
            return ast.literal_eval(node.value)
    raise AssertionError(f"setup.py has no {name}")
