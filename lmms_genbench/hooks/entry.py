"""lmms-eval's entry points, for runs of our model types: the one signal handler from our model's
construction on (:mod:`.signals`), and no key given in ``--model_args`` (``describer.api_key=sk-...``,
``token=...``) in a file lmms-eval writes or a line it prints (issue 43).

lmms-eval copies ``--model_args`` into the results file twice (``config.model_args`` and
``config.resolved_cli_args.model_args``) and prints it in its closing summary line; its own
redaction (``_redact_eval_config_secrets``) misses dotted keys such as ``describer.api_key``.
Two wrappers, for runs of our model types only:

* ``lmms_eval.evaluator.simple_evaluate``: our SIGTERM/SIGINT handler before the model is built
  (a signal during start-up ends in the run's one line, exit 128 + n, nothing written); the keys
  are remembered (masked by value from then on in every log line, report and failure reason:
  :func:`lmms_genbench.core.secrets.scrub`) and the returned ``config`` is masked before
  lmms-eval saves it;
* ``lmms_eval.__main__.cli_evaluate_single`` (the ``lmms-eval`` command): the handler kept to the
  process's end; one warning line that a key on the command line is visible to other users of
  the machine (``ps``), and the arguments the closing summary line prints masked once the
  evaluation is done.
"""

from __future__ import annotations

import sys
from typing import Any

from .scope import MODEL_TYPES, model_type
from .wrap import wrap_method

__all__ = ["install_config_mask", "install_summary_mask", "warning_line"]


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
            from ..core.secrets import remember, secret_args
            from ..core.signals import interrupt_at
            from .signals import exit_interrupted, handling

            model = kwargs["model"] if "model" in kwargs else (args[0] if args else None)
            if not _ours(model):
                return original(*args, **kwargs)
            model_args = kwargs["model_args"] if "model_args" in kwargs else (args[1] if len(args) > 1 else None)
            found = secret_args(model_args) if isinstance(model_args, str) else {}
            remember(found.values())
            with handling():
                try:
                    interrupt_at("start")
                    results = original(*args, **kwargs)
                except KeyboardInterrupt as exc:
                    exit_interrupted(exc)
            if found and isinstance(results, dict) and isinstance(results.get("config"), dict):
                results["config"] = _masked(results["config"])
            return results

        return simple_evaluate

    return wrap_method(evaluator, "simple_evaluate", hooked)


def warning_line(keys: Any) -> str:
    """The one line said when keys come on the command line."""
    names = ", ".join(sorted(keys))
    return (f"lmms-genbench: warning: {names} given in --model_args is visible to other users of this machine "
            "(ps, /proc); it is masked in what the run writes, but prefer the environment (OPENAI_API_KEY, HF_TOKEN)")


def install_summary_mask() -> bool:
    """Wrap ``lmms_eval.__main__.cli_evaluate_single`` (module docstring); idempotent."""
    main = sys.modules.get("lmms_eval.__main__")
    if main is None:
        return False

    def hooked(original):
        def cli_evaluate_single(args=None, *rest, **kwargs):
            from ..core.secrets import mask_model_args, remember, secret_args

            from .signals import exit_interrupted, keep

            if not _ours(getattr(args, "model", None)):
                return original(args, *rest, **kwargs)
            keep()  # a signal while lmms-eval saves or prints the results: the same one line
            model_args = getattr(args, "model_args", None)
            found = secret_args(model_args) if isinstance(model_args, str) else {}
            if found:
                remember(found.values())
                sys.stderr.write(warning_line(found) + "\n")
                sys.stderr.flush()
            try:
                return original(args, *rest, **kwargs)
            except KeyboardInterrupt as exc:
                exit_interrupted(exc)
            finally:
                if found:  # what lmms-eval's closing summary line prints, after the run used the key
                    args.model_args = mask_model_args(model_args)

        return cli_evaluate_single

    return wrap_method(main, "cli_evaluate_single", hooked)
