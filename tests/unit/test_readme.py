"""The README and docs/ run as written: every fenced shell block is marked, either
``<!-- offline-test -->`` (run here) or ``<!-- needs: ... -->`` (what it needs that a test
machine lacks: a GPU, an API key, the Hub, minutes). The offline blocks run in order, the
README's first, then docs/*.md's in file order, in one fresh folder, offline, and leave what
the docs say they leave (a later block may read an earlier one's ``./logs``). lmms-eval exits 0
even when a task crashed, so the results files are read too."""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from lmms_genbench.metrics.functional.chef import DESIDERATA

from tests.support.lmms_eval_runs import BIN, offline_env

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MARKER = "<!-- offline-test -->"
NEEDS = re.compile(r"^<!-- needs: \S.* -->$")
BLOCK = re.compile(rf"^{re.escape(MARKER)}\n```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL_FENCE = re.compile(r"^```(?:bash|sh|shell|console|zsh)\s*$")


def marked_blocks(text: str) -> list[str]:
    """The marked blocks, in order; a marker not followed by a bash fence is an error."""
    blocks = BLOCK.findall(text)
    assert len(blocks) == text.count(MARKER), f"every {MARKER} line must sit right above a ```bash fence"
    return blocks


def _tasks(block: str) -> list[str]:
    """The tasks each lmms-eval command of a block asks for."""
    words = shlex.split(block.replace("\\\n", " "), comments=True)
    return [t for i, w in enumerate(words) if w == "--tasks" for t in words[i + 1].split(",")]


def unmarked_blocks(path: Path) -> list[str]:
    """``file:line`` of each shell fence whose line above is neither marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [f"{path.relative_to(ROOT)}:{i + 1}" for i, line in enumerate(lines)
            if SHELL_FENCE.match(line) and not (i and (lines[i - 1] == MARKER or NEEDS.match(lines[i - 1])))]


def test_every_shell_block_is_run_or_says_what_it_needs():
    unmarked = [where for path in [README, *DOCS] for where in unmarked_blocks(path)]
    assert not unmarked, (f"shell blocks without {MARKER} or <!-- needs: <what> --> on the line above: "
                          f"{unmarked}")


def _commands(block: str) -> list[tuple[list[str], str]]:
    """``(tasks, output_path)`` of each lmms-eval command of a block."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if "--tasks" in words:
            out = words[words.index("--output_path") + 1] if "--output_path" in words else "."
            found.append((words[words.index("--tasks") + 1].split(","), out))
    return found


def doc_blocks() -> list[tuple[str, str]]:
    """``(where, block)`` of every offline block: the README's, then docs/'s in file order."""
    return [(path.name, block) for path in [README, *DOCS] for block in marked_blocks(path.read_text(encoding="utf-8"))]


def test_marked_blocks_are_the_offline_quickstarts_and_install_nothing():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert [_tasks(b) for b in blocks][:2] == [["mmeception_smoke"], ["sdp_smoke", "sdp_geneval_smoke"]]
    assert any(t.startswith("chef_") for b in blocks for t in _tasks(b))
    # installing is the reader's business, never the test's
    assert not [b for _, b in doc_blocks() if re.search(r"\bpip\s+install\b", b)]
    assert "--log_samples" in blocks[0]  # what report's gallery, compare and --baseline read


@pytest.mark.integration
def test_marked_blocks_run_offline_in_a_fresh_folder(tmp_path):
    blocks = doc_blocks()
    env = offline_env(tmp_path, LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "artifacts"))
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # lmms-eval and lmms-genbench as installed
    (tmp_path / "my_images" / "street").mkdir(parents=True)  # the folder docs/running.md calls ./my_images
    for i in range(3):
        Image.new("RGB", (64, 48), (40 * i, 120, 200 - 40 * i)).save(tmp_path / "my_images" / "street" / f"{i}.png")
    for i, (where, block) in enumerate(blocks):
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], check=False, cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600)
        (tmp_path / f"block{i}.log").write_text(proc.stdout + proc.stderr)
        assert proc.returncode == 0, f"{where} block {i} failed:\n{block}\n{proc.stderr[-3000:]}"

    # every task of every block has a score in a results file under its --output_path
    for where, block in blocks:
        for tasks, out in _commands(block):
            results = {}
            for path in sorted((tmp_path / out).rglob("*_results.json")):
                results.update(json.loads(path.read_text())["results"])
            for task in tasks:
                metrics = {k.split(",")[0]: v for k, v in results.get(task, {}).items() if "," in k}
                assert metrics, f"{where}: {task}: no results under {out}"
                if "n_scored" in metrics:
                    assert metrics["n_scored"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
                else:
                    assert metrics["n_docs"] > 0 and metrics["n_failed"] == 0, (where, task, metrics)
    # the README's main command logs the samples report's gallery, compare and --baseline read
    assert list((tmp_path / "logs").rglob("*_samples_mmeception_smoke.jsonl"))
    # docs/host-statistics.md: run B paired with run A
    (paired,) = [json.loads(p.read_text()) for p in (tmp_path / "runB").rglob("*_results.json")]
    assert "paired_ci_lower" in json.dumps(paired), "lmms-eval's --baseline left no paired interval"
    # what the commands say they write, in the folder they ran in
    assert {p.name for p in (tmp_path / "logs").rglob("sdp_*.png")} == {"sdp_drift_curves.png", "sdp_mgg_heatmap.png"}
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    # mmeception_smoke's chains, sdp_smoke's (both directions) and sdp_geneval_smoke's: the samples the
    # README's commands log (docs/analysis.md's report runs before docs/running.md's folder block)
    assert page.count('<article class="card') == 9 + 9 * 2 + 6
    summary = json.loads((tmp_path / "chef_figures" / "chef_summary.json").read_text())
    (model,) = summary.values()
    assert set(model["scores"]) | set(model["left_out"]) == set(DESIDERATA)  # none dropped silently
    assert list((tmp_path / "artifacts").rglob("report.json"))  # artifacts stayed in the folder
