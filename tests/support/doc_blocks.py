"""The README's and docs/' fenced shell blocks marked ``<!-- offline-test -->``: read by
tests/unit/test_readme.py (how blocks are marked) and run by tests/e2e/test_readme_e2e.py."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKER = "<!-- offline-test -->"
BLOCK = re.compile(rf"^{re.escape(MARKER)}\n```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def marked_blocks(text: str) -> list[str]:
    """The marked blocks, in order; a marker not followed by a bash fence is an error."""
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARKER), f"every {MARKER} line must sit right above a ```bash fence"
    return blocks


def doc_blocks() -> list[tuple[str, str]]:
    """``(where, block)`` of every offline block: the README's, then docs/'s in file order."""
    return [(path.name, block) for path in [README, *DOCS] for block in marked_blocks(path.read_text(encoding="utf-8"))]


def _commands(block: str) -> list[tuple[list[str], str]]:
    """``(tasks, output_path)`` of each lmms-eval command of a block."""
    import shlex

    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "--tasks" in words:
            out = words[words.index("--output_path") + 1] if "--output_path" in words else "."
            found.append((words[words.index("--tasks") + 1].split(","), out))
    return found


def run_blocks(folder: Path) -> None:
    """Run every offline block as written in ``folder`` (fresh, offline, with this interpreter's
    ``lmms-eval`` and ``lmms-genbench`` first on PATH) and check what they say they leave; an
    AssertionError names the block or file that failed. tests/e2e/test_readme_e2e.py runs it under
    CI's lock, and .ci/run's canary in the README's plain ``pip install .`` (``python -m
    tests.support.doc_blocks DIR``), where no test tool is installed."""
    import json
    import os
    import subprocess

    from PIL import Image

    from lmms_genbench.metrics.functional.chef import DESIDERATA
    from tests.support.lmms_eval_runs import BIN, offline_env

    blocks = doc_blocks()
    env = offline_env(folder, LMMS_GENBENCH_ARTIFACTS=str(folder / "artifacts"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # lmms-eval and lmms-genbench as installed
    (folder / "my_images" / "street").mkdir(parents=True)  # the folder docs/running.md calls ./my_images
    for i in range(3):
        Image.new("RGB", (64, 48), (40 * i, 120, 200 - 40 * i)).save(folder / "my_images" / "street" / f"{i}.png")
    for i, (where, block) in enumerate(blocks):
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], check=False, cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600)
        (folder / f"block{i}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"{where} block {i} failed:\n{block}\n{proc.stderr[-3000:]}"

    # every task of every block has a score in a results file under its --output_path
    for where, block in blocks:
        for tasks, out in _commands(block):
            results = {}
            for path in sorted((folder / out).rglob("*_results.json")):
                results.update(json.loads(path.read_text())["results"])
            for task in tasks:
                metrics = {k.split(",")[0]: v for k, v in results.get(task, {}).items() if "," in k}
                assert metrics, f"{where}: {task}: no results under {out}"
                if "n_scored" in metrics:
                    assert metrics["n_scored"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
                else:
                    assert metrics["n_docs"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
    # the README's main command logs the samples report's gallery, compare and --baseline read
    assert list((folder / "logs").rglob("*_samples_mmeception_smoke.jsonl"))
    # docs/host-statistics.md: run B paired with run A
    (paired,) = [json.loads(p.read_text()) for p in (folder / "runB").rglob("*_results.json")]
    assert "paired_ci_lower" in json.dumps(paired), "lmms-eval's --baseline left no paired interval"
    # what the commands say they write, in the folder they ran in
    assert {p.name for p in (folder / "logs").rglob("sdp_*.png")} == {"sdp_drift_curves.png", "sdp_mgg_heatmap.png"}
    page = (folder / "report.html").read_text(encoding="utf-8")
    # mmeception_smoke's chains, sdp_smoke's (both directions) and sdp_geneval_smoke's: the samples the
    # README's commands log (docs/analysis.md's report runs before docs/running.md's folder block)
    assert page.count('<article class="card') == 9 + 9 * 2 + 6
    summary = json.loads((folder / "chef_figures" / "chef_summary.json").read_text())
    (model,) = summary.values()
    assert set(model["scores"]) | set(model["left_out"]) == set(DESIDERATA)  # none dropped silently
    assert list((folder / "artifacts").rglob("report.json"))  # artifacts stayed in the folder


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.support.doc_blocks EMPTY_DIR")
    target = Path(sys.argv[1]).resolve()
    target.mkdir(parents=True, exist_ok=True)
    try:
        run_blocks(target)
    except AssertionError as exc:
        sys.exit(f"doc_blocks: {exc}")
    print(f"doc_blocks: the {len(doc_blocks())} offline blocks of the README and docs/ ran and left what they say")
