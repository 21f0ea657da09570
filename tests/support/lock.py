"""CI's lock, ``.ci/requirements.lock``, against what is installed.

``python -m tests.support.lock`` (from the checkout) prints the packages whose installed version differs
from the lock, and those installed that the lock does not name; .ci/run's drift canary calls it.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

LOCK = Path(__file__).resolve().parents[2] / ".ci" / "requirements.lock"
_LINE = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_versions(lock: Path = LOCK) -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of the lock."""
    pins = {}
    for line in lock.read_text().splitlines():
        m = _LINE.match(line.strip())
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


def off_lock(lock: Path = LOCK) -> dict[str, tuple[str, str | None]]:
    """The locked packages installed at another version (or not at all): name -> (locked, installed)."""
    off = {}
    for name, locked in lock_versions(lock).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = None
        if installed is None or installed.split("+")[0] != locked.split("+")[0]:
            off[name] = (locked, installed)
    return off


def unlocked(lock: Path = LOCK) -> list[str]:
    """Installed distributions the lock does not name (this package and the venv's pip aside)."""
    names = set(lock_versions(lock)) | {"lmms-genbench", "pip"}
    return sorted({f"{_norm(d.metadata['Name'])} {d.version}" for d in metadata.distributions()
                   if _norm(d.metadata["Name"]) not in names})


if __name__ == "__main__":
    off, extra = off_lock(), unlocked()
    for name, (locked, installed) in sorted(off.items()):
        print(f"  {name}: lock {locked}, installed {installed or 'none'}")
    for line in extra:
        print(f"  {line}: installed, not in the lock")
    if not off and not extra:
        print("  none: the installed set equals the lock")
    sys.exit(0)
