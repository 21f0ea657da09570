"""Everything this package changes in lmms-eval's process, declared in one table.

:data:`TABLE` lists each change: what is changed, when it is put in place, for whom it acts,
and why. docs/plugin.md shows the same table and tests/unit/hooks/test_hooks_table.py holds it equal to
what :func:`changed` finds in place at run time. The code: :mod:`.startup` (before any run),
:mod:`.run` (during one of our runs only), :mod:`.scope` (which models and tasks are ours),
:mod:`.wrap` (wrapping a method once, and undoing it). Importing this package imports nothing.
"""

from __future__ import annotations

import sys
from collections import namedtuple

__all__ = ["TABLE", "Hook", "changed"]

# a namedtuple, not a dataclass: the start-up line imports this package in every process
#: target: what is changed, as lmms-eval's module path names it; when: "start-up", "import"
#: (lasts for the process), "run" (one of our runs, then undone) or "call" (one call, then undone:
#: :mod:`.call`); scope: for which models or tasks it acts; why
Hook = namedtuple("Hook", "target when scope why")


TABLE = (
    Hook("sys.meta_path import watcher", "start-up",
         "every process of the environment (the `lmms_genbench.pth` line of wheel and editable installs), else from "
         "the entry point on; acts on two lmms-eval modules",
         "lmms-eval has no tasks entry point and `lmms-eval tasks list` never loads the models one: "
         "the watcher installs the two import hooks below when their modules load"),
    Hook("lmms_eval.models.AVAILABLE_SIMPLE_MODELS", "import",
         "adds the names cycle, t2i, chef (a built-in name keeps its class)",
         "`lmms-eval models` prints this static table, not the registry the entry point fills"),
    Hook("lmms_eval.tasks.TaskManager.initialize_tasks", "import",
         "every TaskManager: our tasks folder indexed after the built-in one (built-in names win)",
         "lmms-eval 0.7.3 has no entry point for task folders"),
    Hook("lmms_eval.evaluator.evaluate", "import",
         "decides whose run it is; a run with neither our model nor our tasks calls lmms-eval's own",
         "the one place that knows the model that runs and the tasks it runs"),
    Hook("lmms_eval.api.task.ConfigurableTask.process_results", "run",
         "--model t2i runs: a failed drawing's per-doc values become failures",
         "a doc t2i could not draw is N/A, not scored as a missing image"),
    Hook("lmms_eval.evaluator_utils.TaskOutput.calculate_aggregate_metric", "run",
         "--model t2i runs (failures set aside, counted in n_failed); our tasks (per-doc scores)",
         "lmms-eval pairs --baseline runs on each sample's score, known only once our chains are scored"),
    Hook("loguru.logger patcher", "run", "runs of --model cycle, t2i, chef",
         "an endpoint may echo an API key in an error body that lmms-eval logs"),
    Hook("torch.set_num_threads", "run",
         "our model types built by a smoke preset (cycle's preset=smoke), OMP_NUM_THREADS unset",
         "tiny random-weight networks only contend for extra threads"),
    Hook("signal.signal SIGTERM SIGINT", "run",
         "runs of --model cycle, t2i, chef (main thread): under the lmms-eval command from the entry point to the "
         "process's end, else for simple_evaluate; with signal.set_wakeup_fd, when nothing else holds it",
         "a stop in any phase drains queued store writes and ends in one line, exit 128 + signal; the one handler; "
         "a third signal ends the process whichever thread the kernel gave it to"),
    Hook("logging.setLogRecordFactory", "run", "runs of our model types or tasks; acts on loggers lmms_genbench.*",
         "a file name, dataset field or answer in our log lines shows control characters and bidi overrides as escapes"),
    Hook("lmms_eval.evaluator.simple_evaluate", "import",
         "runs of --model cycle, t2i, chef: the signal handler from the model's construction; keys in --model_args "
         "(under the command also the namespace its closing summary line prints, and one warning line)",
         "lmms-eval writes --model_args into the results file and prints it in its closing summary line; its "
         "redaction misses dotted keys (describer.api_key=...); `ps` shows a key on the command line"),
    Hook("lmms_eval.models module tqdm", "call",
         "host.generate of a describer (quiet): the tqdm of the module defining the model's generate_until draws nothing",
         "the engine shows the run's own progress; one bar per describe call would bury it"),
    Hook("lmms_eval model task_dict", "call",
         "host.generate and host.loglikelihood: the model instance's task_dict holds the call's docs",
         "lmms-eval models read a request's images and messages from task_dict, which no task of ours fills"),
    Hook("lmms_eval model max_new_tokens", "call",
         "host.generate, models whose class answers max(request, model) (_select_max_new_tokens)",
         "each request gets its task's own length rather than the model's larger default"),
    Hook("lmms_eval.models.chat.vllm.VLLM make_one_request", "call",
         "host.generate on lmms-eval's vllm chat class with PIL images (LMMS_GENBENCH_VLLM_IMAGES=pil)",
         "images reach vLLM as PIL images, not base64 PNG data URLs encoded and decoded again"),
    Hook("PIL.ImageFile.LOAD_TRUNCATED_IMAGES", "call",
         "decoding a seed image (engine.images)",
         "lmms-eval sets it at import; a truncated seed would be scored as a half-grey picture"),
    Hook("logging filters of a diffusers pipeline module and transformers.tokenization_utils_base", "call",
         "drawing with a diffusers pipeline: only its per-batch truncation warnings",
         "the tokens a prompt loses are counted per hop instead of warned per batch"),
    Hook("diffusers pipeline tokenizer attributes", "call",
         "drawing with a diffusers pipeline whose encoders cut prompts: counting stand-ins, past its config",
         "the tokens each encoder cut are counted on the very text the pipeline passed"),
)


def changed() -> set[str]:
    """The :data:`TABLE` targets in place in this process now, found by looking at them."""
    from . import run, startup, wrap
    from .scope import MODEL_CLASSES

    found = set()
    if any(isinstance(f, startup._AfterImport) for f in sys.meta_path):
        found.add(TABLE[0].target)
    listed = getattr(sys.modules.get("lmms_eval.models"), "AVAILABLE_SIMPLE_MODELS", None) or {}
    if any(listed.get(name) == path for name, path in MODEL_CLASSES.items()):
        found.add(TABLE[1].target)
    for hook in TABLE[2:6]:
        module, _, attribute = hook.target.rpartition(".")
        owner = sys.modules.get(module)
        if owner is None and "." in module:  # a class: module.Class
            module, _, cls = module.rpartition(".")
            owner = getattr(sys.modules.get(module), cls, None)
        if owner is not None and wrap.is_wrapped(owner, attribute):
            found.add(hook.target)
    core = getattr(getattr(sys.modules.get("loguru"), "logger", None), "_core", None)
    if getattr(getattr(core, "patcher", None), "lmms_genbench", False):
        found.add(TABLE[6].target)
    active = run.current()  # a thread count cannot be told apart by looking: the run says
    if active is not None and TABLE[7].target in active.changed:
        found.add(TABLE[7].target)
    import signal

    if getattr(signal.getsignal(signal.SIGTERM), "lmms_genbench", False):
        found.add(TABLE[8].target)
    import logging

    if getattr(logging.getLogRecordFactory(), "lmms_genbench", False):
        found.add(TABLE[9].target)
    for hook in TABLE[10:11]:
        module, _, attribute = hook.target.rpartition(".")
        owner = sys.modules.get(module)
        if owner is not None and wrap.is_wrapped(owner, attribute):
            found.add(hook.target)
    from .call import active

    found |= active()  # call-scoped changes: counted while in place
    return found
