"""lmms-eval's entry points, for runs of our model types: the one signal handler (:mod:`.signals`),
and no key given in ``--model_args`` (``describer.api_key=sk-...``, ``token=...``) in a file
lmms-eval writes or a line it prints (issues 43, 52, 53).

lmms-eval copies ``--model_args`` into the results file twice (``config.model_args`` and
``config.resolved_cli_args.model_args``) and prints it in its closing summary line; its own
redaction (``_redact_eval_config_secrets``) misses dotted keys such as ``describer.api_key``.
Everything here rides on what every install (wheel or editable) and every launcher
(``lmms-eval``, ``python -m lmms_eval``, ``accelerate launch -m lmms_eval``) goes through, never on
the wheel's start-up ``.pth`` line:

* :func:`lmms_genbench.hooks.startup.command_start`, called by our ``lmms_eval.models`` entry point, which lmms-eval loads
  while its command module imports the evaluator (before any argument is parsed or task
  loaded): under the lmms-eval command with ``--model`` one of ours, the signal handler from
  there to the process's end;
* the ``lmms_eval.evaluator.simple_evaluate`` wrapper (:func:`install_config_mask`), for our model
  types: the signal handler from before the model is built (:func:`.signals.handling`); the keys
  remembered (masked by value from then on in every log line, report and failure reason:
  :func:`lmms_genbench.core.secrets.scrub`); the returned ``config`` masked before lmms-eval
  saves it; and, under the command (``cli_args``: the namespace the closing summary line
  prints), one warning line that a key on the command line is visible to other users of the
  machine (``ps``), and the namespace's ``model_args`` masked once the evaluation is done.
"""

from __future__ import annotations

import sys
from typing import Any

from .scope import MODEL_TYPES, model_type
from .wrap import wrap_method

__all__ = ["install_config_mask", "warning_line"]


def _ours(model: Any) -> bool:
    return model in MODEL_TYPES if isinstance(model, str) else model_type(model) is not None


def _masked(value: Any) -> Any:
    from ..core.secrets import mask_model_args, scrub

    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_masked(v) for v in value)
    return scrub(mask_model_args(value)) if isinstance(value, str) else value


def install_config_mask() -> bool:
    """Wrap ``lmms_eval.evaluator.simple_evaluate`` (module docstring); idempotent."""
    from lmms_eval import evaluator

    def hooked(original):
        def simple_evaluate(*args, **kwargs):
            from ..core.secrets import mask_model_args, remember, secret_args
            from ..core.signals import interrupt_at
            from .signals import exit_interrupted, handling

            model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
            if not _ours(model):
                return original(*args, **kwargs)
            model_args = kwargs["model_args"] if "model_args" in kwargs else (args[1] if len(args) > 1 else None)
            found = secret_args(model_args) if isinstance(model_args, str) else {}
            remember(found.values())
            cli_args = kwargs.get("cli_args")  # the lmms-eval command's namespace
            if found and cli_args is not None:
                sys.stderr.write(warning_line(found) + "\n")
                sys.stderr.flush()
            try:
                with handling():
                    try:
                        interrupt_at("start")
                        results = original(*args, **kwargs)
                    except KeyboardInterrupt as exc:
                        exit_interrupted(exc)
            finally:
                # what the closing summary line prints, after the run used the key
                if found and getattr(cli_args, "model_args", None) == model_args:
                    cli_args.model_args = mask_model_args(model_args)
            if found and isinstance(results, dict) and isinstance(results.get("config"), dict):
                results["config"] = _masked(results["config"])
            interrupt_at("save")  # lmms-eval saves the results next
            return results

        return simple_evaluate

    return wrap_method(evaluator, "simple_evaluate", hooked)


def warning_line(keys: Any) -> str:
    """The one line said when keys come on the command line."""
    names = ", ".join(sorted(keys))
    return (f"lmms-genbench: warning: {names} given in --model_args is visible to other users of this machine "
            "(ps, /proc); it is masked in what the run writes, but prefer the environment (OPENAI_API_KEY, HF_TOKEN)")
