"""Everything is in pyproject.toml except one file setuptools cannot declare there.

Wheel and editable installs ship ``lmms_genbench.pth`` at the top of site-packages so that
``lmms-eval tasks list`` shows our tasks (it never loads lmms-eval's plugin entry point); why and
how: ``lmms_genbench/hooks/startup.py``. A run needs nothing from it: what a run gets at start-up
comes from the entry point (issue 52), so an install without the file runs the same.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_NAME = "lmms_genbench.pth"
# A .pth line starting with "import" is executed at interpreter start-up.
PTH_LINE = "import lmms_genbench.hooks.startup; lmms_genbench.hooks.startup.watch()\n"


class BuildPyWithStartupFile(build_py):
    def run(self):
        super().run()
        Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib, PTH_NAME))]


class _WithStartupFile:
    """An editable wheel's strategy (setuptools writes its own path file or finder) that also
    writes our start-up file: ``pip install -e .`` lists our tasks as the wheel does. Sorted
    after setuptools' ``__editable__.*.pth``, so the package is importable when it runs."""

    def __init__(self, strategy):
        self.strategy = strategy

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.strategy.__exit__(*exc)

    def __call__(self, wheel, files, mapping):
        done = self.strategy(wheel, files, mapping)
        wheel.writestr(PTH_NAME, PTH_LINE)
        return done


class EditableWithStartupFile(editable_wheel):
    # setuptools' own hook point for what an editable wheel holds (84.x); were it renamed, the
    # editable install would only lack the task listing's file, which no run depends on
    def _select_strategy(self, *args, **kwargs):
        return _WithStartupFile(super()._select_strategy(*args, **kwargs))


setup(cmdclass={"build_py": BuildPyWithStartupFile, "editable_wheel": EditableWithStartupFile})
