"""This checkout installed as a user installs it, wheel or editable, in a throwaway virtual
environment built in seconds (tests/e2e/test_installs_e2e.py).

A fresh venv with torch, lmms-eval and the rest resolved again would take minutes and gigabytes
per install kind. Instead the new venv borrows this environment's packages: a ``.pth`` line of its
own appends a folder of symlinks to every entry of this environment's site-packages except this
package's own (its code, its ``*.dist-info`` or ``*.egg-info``, setuptools' ``__editable__`` files)
and except every ``.pth`` file, which a plain ``sys.path`` entry never runs anyway. So the only
``lmms_genbench``, the only ``lmms_eval.models`` entry point and the only start-up line the new
interpreter sees are those its own install put in its own site-packages, which comes first on
``sys.path``; whatever this environment's install is (CI: ``pip install --no-deps .``, a wheel;
a developer: ``pip install -e .``) cannot stand in for it. The install itself is pip's, offline,
with this environment's setuptools (``--no-build-isolation``), from a copy of the tree (an
editable install writes ``*.egg-info`` into its source):

* ``wheel``: ``pip wheel`` then ``pip install --no-deps`` of that wheel (``pip install .``);
* ``editable``: ``pip install --no-deps -e <copy>`` (``pip install -e .``: setuptools' PEP 660
  editable wheel), and then its start-up file removed: setup.py has the editable wheel carry
  ``lmms_genbench.pth`` as the wheel does (``had_startup_file`` says whether it did), but no run may
  depend on it (issue 52), so the editable runs go without it: an install with the file (the
  wheel) and one without it are both tested.

Commands run with the new venv's interpreter, outside the checkout, with no ``PYTHONPATH`` (the
checkout must not be importable): ``lmms-eval`` as ``python <this env's bin/lmms-eval>`` (the
console script is two lines that import ``lmms_eval.cli.dispatch``), ``python -m lmms_eval``,
and ``python <bin/accelerate> launch -m lmms_eval`` (accelerate starts ``sys.executable``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from tests.support.lmms_eval_runs import BIN, ROOT, offline_env

KINDS = ("wheel", "editable")
#: how each launcher is spelled after the interpreter
LAUNCHERS = {
    "lmms-eval": [str(BIN / "lmms-eval")],
    "python -m lmms_eval": ["-m", "lmms_eval"],
    "accelerate launch -m lmms_eval": [str(BIN / "accelerate"), "launch", "--num_processes", "1", "--num_machines", "1",
                                       "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lmms_eval"],
}
_OURS = ("lmms_genbench", "__editable__.lmms_genbench", "__editable___lmms_genbench")


@dataclass(frozen=True)
class Install:
    kind: str
    python: str
    purelib: Path
    had_startup_file: bool  # what pip installed, before the editable kind's was removed

    def env(self, tmp_path, **extra) -> dict:
        """The offline environment for a command run in ``tmp_path`` (outside the checkout)."""
        env = offline_env(tmp_path, **extra)
        env.pop("PYTHONPATH", None)
        if "PYTHONPATH" in extra:
            env["PYTHONPATH"] = extra["PYTHONPATH"]
        return env

    def command(self, launcher: str, *args: str) -> list[str]:
        return [self.python, *LAUNCHERS[launcher], *args]


def _borrowed(tmp: Path) -> Path:
    """The symlink folder of this environment's site-packages, less our own entries and .pth files."""
    folder = tmp / "borrowed"
    folder.mkdir()
    source = Path(sysconfig.get_paths()["purelib"])
    for entry in source.iterdir():
        if entry.name.startswith(_OURS) or entry.suffix == ".pth":
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


def make(kind: str, tmp: Path) -> Install:
    """``kind`` (:data:`KINDS`) installed in a new venv under ``tmp`` (module docstring)."""
    src = tmp / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "lmms_genbench", src / "lmms_genbench", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True, timeout=120)
    python = str(tmp / "venv" / "bin" / "python")
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "_borrow_test_env.pth").write_text(f"import sys; sys.path.append({str(_borrowed(tmp))!r})\n")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python", python]
    quiet = {"check": True, "timeout": 600, "capture_output": True}
    env = dict(os.environ, PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)
    if kind == "wheel":
        subprocess.run([sys.executable, "-m", "pip", "-q", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "-w", str(tmp / "dist"), str(src)], env=env, **quiet)
        wheel = next((tmp / "dist").glob("lmms_genbench-*.whl"))
        subprocess.run([*pip, "install", "--no-deps", str(wheel)], env=env, **quiet)
    elif kind == "editable":
        subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "-e", str(src)], env=env, **quiet)
    else:
        raise ValueError(f"install kind {kind!r}: one of {KINDS}")
    startup_file = purelib / "lmms_genbench.pth"
    had = startup_file.is_file()
    if kind == "editable":
        startup_file.unlink(missing_ok=True)
    return Install(kind, python, purelib, had)
