"""The local folders each model of a run names, read by the very functions its loader reads them
with first, so the check lists what the run would stop on in the run's own line:

* a describer (any lmms-eval class): :func:`lmms_genbench.host.read_weights_folder`, which
  ``host.build_model`` calls before the class loads;
* the diffusers generator: :func:`lmms_genbench.generators.diffusers_plan.pipeline_class`, its
  plan's first step (``model_index.json``, the pipeline class, each component's folder, class
  and files: ``generators/pipeline_folder.py``);
* a native unified model: :func:`lmms_genbench.generators.unified.folders.read_unified_folders`,
  which ``build_unified`` calls before the class loads.

Each failure is told through the same explanation the run gives it (``load_failure``,
``explain_generator_failure``), with the same way out."""

from __future__ import annotations

from ..command import T2I_OFFLINE_HINT, Role, RunCommand
from ..command.cycle import OFFLINE_HINT
from ..core.checkpoint_folders import is_path
from .problems import Problem

__all__ = ["ROLE_WORDS", "otherwise_of", "role_folder_problem"]

#: how a describer's loader names it in its line (host.build_model's ``role``), by its prefix
ROLE_WORDS = {"describer.": "describer", "inner.": "inner model", "judge.": "judge", "": "model"}


def otherwise_of(command: RunCommand, role: Role) -> str:
    """The way out ``role``'s load failure names in the run (``models/cycle_roles.py``,
    ``models/t2i.py``, ``models/chef.py``), so the check's line is the run's."""
    if command.model == "cycle":
        return "" if command.top.get("preset") else OFFLINE_HINT
    if command.model == "t2i":
        return T2I_OFFLINE_HINT if role.name != "smoke" else ""
    if command.model == "chef" and role.prefix == "inner.":
        return "" if command.top.get("preset") else OFFLINE_HINT
    return ""


def role_folder_problem(role: Role, otherwise: str = "") -> Problem | None:
    """The first thing ``role``'s loader would stop on in the local folders its arguments name, as
    the run says it; None when they read, or when it names none."""
    try:
        if role.kind == "describer":
            from ..host import read_weights_folder

            read_weights_folder(role.name, role.args)
        elif role.kind == "unified":
            from ..generators.unified.folders import read_unified_folders

            read_unified_folders(role.name, role.args)
        elif role.name.strip().lower() == "diffusers" and is_path(role.args.get("pretrained")):
            from ..generators.diffusers_plan import pipeline_class
            from ..generators.registry import GENERATORS

            # through the registry, as the plan is called: its errors carry the same context
            GENERATORS.call("diffusers", lambda _cls, **args: pipeline_class(str(args["pretrained"]),
                                                                              args.get("revision")), **role.args)
    except Exception as exc:  # noqa: BLE001 - whatever the loader's reading raises stops the run
        if role.kind == "generator":
            from ..generators import explain_generator_failure

            line = explain_generator_failure(exc, role.name, role.args, otherwise)
        else:
            from ..core.errors import load_failure

            words = ROLE_WORDS.get(role.prefix, role.prefix.rstrip(".")) if role.kind == "describer" else "unified model"
            line = load_failure(exc, words, role.name, role.args, role.prefix, otherwise)
        return Problem(line.cause, line.fix)
    return None
