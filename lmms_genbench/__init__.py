"""lmms-genbench: generative evaluation protocols as lmms-eval tasks.

The public surface is small on purpose. Names resolve lazily so that
lmms-eval's plugin loading (which imports this package) stays cheap and
cannot be broken by an optional dependency.
"""

from importlib import import_module

__version__ = "0.1.0"

_PUBLIC = {
    "gc_at_t": "lmms_genbench.metrics",
    "mcd": "lmms_genbench.metrics.functional.drift",
    "frechet_distance": "lmms_genbench.metrics",
    "build_generator": "lmms_genbench.generators",
    "CycleEngine": "lmms_genbench.engine",
    "ArtifactStore": "lmms_genbench.engine",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'lmms_genbench' has no attribute {name!r}")
