"""How lmms-eval finds this package: the ``lmms_eval.models`` entry point.

lmms-eval 0.7.3 loads :func:`model_manifests` while ``lmms_eval.models`` is imported (the
evaluation command, ``simple_evaluate`` and every listing import it). It returns our model
types as manifests (lmms-eval imports each class only when that model type is used), starts
:func:`lmms_genbench.hooks.startup.watch` and, under the lmms-eval command running one of our
model types, our signal handler (:func:`lmms_genbench.hooks.startup.command_start`): the earliest
moment every install and launcher shares. It imports no torch, no numpy and none of our engine,
so listing models costs what it costs without us. Everything we change in lmms-eval, and when,
is declared in :data:`lmms_genbench.hooks.TABLE` (docs/plugin.md shows it).
"""

from __future__ import annotations

from .hooks.scope import MODEL_CLASSES, MODEL_TYPES, TASKS_DIR

__all__ = ["MODEL_TYPES", "TASKS_DIR", "model_manifests"]


def model_manifests():
    """Entry-point payload: our model types; the hooks follow the modules they change."""
    from lmms_eval.models.registry_v2 import ModelManifest

    from .hooks import startup

    startup.add_model_names(MODEL_CLASSES)
    startup.watch()
    startup.command_start()
    return [ModelManifest(model_id=name, simple_class_path=path) for name, path in MODEL_CLASSES.items()]
