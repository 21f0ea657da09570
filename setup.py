"""Everything is in pyproject.toml except one file setuptools cannot declare there.

The wheel ships ``lmms_genbench.pth`` at the top of site-packages so that
``lmms-eval tasks list`` shows our tasks (it never loads lmms-eval's plugin entry
point); why and how: ``lmms_genbench/hooks/startup.py``.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH_NAME = "lmms_genbench.pth"
# A .pth line starting with "import" is executed at interpreter start-up.
PTH_LINE = "import lmms_genbench.hooks.startup; lmms_genbench.hooks.startup.watch()\n"


class BuildPyWithStartupFile(build_py):
    def run(self):
        super().run()
        Path(self.build_lib, PTH_NAME).write_text(PTH_LINE)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib, PTH_NAME))]


setup(cmdclass={"build_py": BuildPyWithStartupFile})
