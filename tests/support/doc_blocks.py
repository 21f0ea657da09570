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
