"""The README and docs/ run as written: every fenced shell block is marked, either
``<!-- offline-test -->`` (run here) or ``<!-- needs: ... -->`` (what it needs that a test
machine lacks: a GPU, an API key, the Hub, minutes). The offline blocks run in order, the
README's first, then docs/*.md's in file order, in one fresh folder, offline, and leave what
the docs say they leave (a later block may read an earlier one's ``./logs``). lmms-eval exits 0
even when a task crashed, so the results files are read too. Here how blocks are marked; the
run itself: tests/e2e/test_readme_e2e.py."""

import re
import shlex
from pathlib import Path

from tests.support.doc_blocks import DOCS, MARKER, README, ROOT, doc_blocks, marked_blocks

NEEDS = re.compile(r"^<!-- needs: \S.* -->$")
SHELL_FENCE = re.compile(r"^```(?:bash|sh|shell|console|zsh)\s*$")


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


def test_marked_blocks_are_the_offline_quickstarts_and_install_nothing():
    blocks = marked_blocks(README.read_text(encoding="utf-8"))
    assert [_tasks(b) for b in blocks][:2] == [["mmeception_smoke"], ["sdp_smoke", "sdp_geneval_smoke"]]
    assert any(t.startswith("chef_") for b in blocks for t in _tasks(b))
    # installing is the reader's business, never the test's
    assert not [b for _, b in doc_blocks() if re.search(r"\bpip\s+install\b", b)]
    assert "--log_samples" in blocks[0]  # what report's gallery, compare and --baseline read
