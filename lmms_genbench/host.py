"""The one module that talks to an lmms-eval model in-process.

Our describer, AutoBench examiner and ChEF wrapper all call a registered
lmms-eval model directly, outside lmms-eval's evaluator. To do so they must
speak the host's in-process request format, which is not a public API and
changes between releases; it lives here, once, so that a new lmms-eval
release is one module to port.

What lmms-eval 0.7.3 expects (the facts this module encodes):

* ``lmms_eval.models.get_model(name)`` returns the class; ``cls(**args)`` builds it.
* A request is ``Instance(request_type, arguments, idx, metadata)`` and a model
  answers a list of them with one result each, in order.
* ``generate_until`` arguments for a simple model (``is_simple`` true, the
  default) are ``(context, gen_kwargs, doc_to_visual, doc_id, task, split)``;
  for a chat model ``(context, doc_to_messages, gen_kwargs, doc_id, task, split)``.
* ``loglikelihood`` arguments are ``(context, continuation, doc_to_visual,
  doc_id, task, split)`` for both: the chat classes inherit it.
* Models read a request's doc as ``lm.task_dict[task][split][doc_id]`` and
  pass it to ``doc_to_visual``/``doc_to_messages``; the evaluator normally sets
  ``task_dict``, so here we set it for the call and always clear it after
  (the docs hold images).
* Models mutate ``gen_kwargs`` (pop ``until``, add ``image_sizes``), so each
  request gets its own deep copy.
* ``generate_until`` may answer a ``GenerationResult`` or a ``(text, meta)``
  pair instead of a string: ``unwrap_generation_output`` normalises them.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .core.errors import from_exception, load_failure
from .core.keys import slug_key, stable_hash
from .core.model_args import identity_args

#: Task and split our requests are filed under unless a caller names its own
#: (the names show up in a model's logs, never in an lmms-eval results file).
DEFAULT_TASK, DEFAULT_SPLIT = "lmms_genbench", "requests"


def build_model(name: str, args: Mapping[str, Any], role: str = "model", prefix: str = "", otherwise: str = ""):
    """Instantiate the registered lmms-eval model ``name`` with ``args``.

    Args:
        role: what the model is for (``describer``, ``inner``, ``examiner``), named
            in errors.
        prefix: how the user spells these arguments (``describer.``), named in errors.
        otherwise: another way out added to the fix (``run offline with --model_args preset=smoke``).

    Raises:
        ActionableError: no model is registered as ``name``, or it failed to load; the
            one line names the weights argument and what to give instead.
    """
    _check_model(name, args)
    from lmms_eval.models import get_model  # heavy: only when a model is built

    try:
        cls = get_model(name)
    except Exception as exc:
        raise from_exception(
            exc, f"the {role} {name!r} is not a registered lmms-eval model",
            "name one that `lmms-eval models` lists (llava_hf, qwen2_5_vl, openai, ...)",
        )
    try:
        return cls(**args)
    except Exception as exc:
        raise load_failure(exc, role, name, args, prefix, otherwise)


def model_parameters(name: str) -> list[str]:
    """The constructor arguments of the registered lmms-eval model ``name`` (none if unknown)."""
    import inspect

    from lmms_eval.models import get_model

    try:
        cls = get_model(name)
    except Exception:  # build_model reports unknown names with the fix
        return []
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


def model_identity(name: str, args: Mapping[str, Any]) -> str:
    """``<name>-<model slug>-<hash of the output-deciding args>``.

    It keys artifact stores and call caches on users' disks, so it must never
    change: the model slug is ``pretrained`` (else ``model_version``, else
    ``model``, else ``name``), a local folder shortened to its own name; the
    hash covers :func:`~lmms_genbench.core.model_args.identity_args`, which
    leaves out operational settings and credentials.
    """
    _check_model(name, args)

    shown = identity_args(dict(args))
    ident = str(shown.get("pretrained") or shown.get("model_version") or shown.get("model") or name)
    if os.path.isabs(ident) or os.path.exists(ident):
        ident = os.path.basename(os.path.normpath(ident))  # a local folder: its name reads best
    return f"{name}-{slug_key(ident, 32)}-{stable_hash(shown, 8)}"


def generate(lm, items: Sequence[tuple], *, task: str = DEFAULT_TASK, split: str = DEFAULT_SPLIT) -> list:
    """One ``generate_until`` call: ``(context, gen_kwargs, images)`` items in,
    one unwrapped output per item out (a text; a list of texts where a model
    answers with rounds; callers decide what to do with anything but a text).

    The caller's ``gen_kwargs`` are never changed. Raises whatever the model
    raises, and ``RuntimeError`` when it answers the wrong number of results.
    """
    items = _check_items(items, "generate", ("context", "gen_kwargs", "images"), (Mapping, type(None)))
    if not items:
        return []
    from lmms_eval.api.instance import unwrap_generation_output

    simple = getattr(lm, "is_simple", True)
    arguments = []
    for doc_id, (context, gen_kwargs, _) in enumerate(items):
        kwargs = copy.deepcopy(dict(gen_kwargs or {}))
        arguments.append((context, kwargs, _doc_to_visual, doc_id, task, split) if simple
                         else (context, _doc_to_messages, kwargs, doc_id, task, split))
    out = _send(lm, "generate_until", items, arguments, task, split)
    return [unwrap_generation_output(o)[0] for o in out]


def loglikelihood(lm, items: Sequence[tuple], *, task: str = DEFAULT_TASK, split: str = DEFAULT_SPLIT) -> list:
    """One ``loglikelihood`` call: ``(context, continuation, images)`` items in,
    the model's result per item out as it gave it (lmms-eval 0.7.3 models
    answer ``(value, is_greedy)``; what ``value`` means differs by model)."""
    items = _check_items(items, "loglikelihood", ("context", "continuation", "images"), (str,))
    if not items:
        return []
    arguments = [(context, continuation, _doc_to_visual, doc_id, task, split)
                 for doc_id, (context, continuation, _) in enumerate(items)]
    return _send(lm, "loglikelihood", items, arguments, task, split)


def _doc_to_visual(doc):
    return doc["visuals"]


def _doc_to_messages(doc):
    content = [{"type": "image", "url": image} for image in doc["visuals"]]
    return [{"role": "user", "content": [*content, {"type": "text", "text": doc["context"]}]}]


def _send(lm, kind: str, items: list[tuple], arguments: list[tuple], task: str, split: str) -> list:
    from lmms_eval.api.instance import Instance

    requests = [Instance(request_type=kind, arguments=args, idx=0,
                         metadata={"task": task, "doc_id": doc_id, "repeats": 1})
                for doc_id, args in enumerate(arguments)]
    # a list serves as the split: models only index it by doc_id
    lm.task_dict = {task: {split: [{"context": item[0], "visuals": item[2]} for item in items]}}
    try:
        out = getattr(lm, kind)(requests)
    finally:
        lm.task_dict = {}
    if len(out) != len(requests):
        raise RuntimeError(f"{type(lm).__name__}.{kind} returned {len(out)} results for {len(requests)} requests")
    return list(out)


def _check_model(name, args) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a registered lmms-eval model name; got {name!r}")
    if not isinstance(args, Mapping):
        raise TypeError(f"args: expected a mapping of model arguments; got {type(args).__name__}")


def _check_items(items, call: str, fields: tuple[str, ...], middle_types: tuple[type, ...]) -> list[tuple]:
    """``items`` as a list of tuples with their images as lists, or an error naming the bad item.

    Checked before anything is sent: a model fed a malformed tuple fails deep
    inside its own code, far from the caller's mistake."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"items: expected a sequence of {call} items; got {type(items).__name__}")
    shape = "(" + ", ".join(fields) + ")"
    checked = []
    for i, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != len(fields):
            raise ValueError(f"items[{i}]: expected {shape}; got {item!r:.200}")
        context, middle, images = item
        if not isinstance(context, str):
            raise TypeError(f"items[{i}] context: expected str; got {type(context).__name__}")
        if not isinstance(middle, middle_types):
            expected = " or ".join("None" if t is type(None) else t.__name__ for t in middle_types)
            raise TypeError(f"items[{i}] {fields[1]}: expected {expected}; got {type(middle).__name__}")
        if isinstance(images, (str, bytes)) or not isinstance(images, Sequence):
            raise TypeError(f"items[{i}] images: expected a list of images; got {type(images).__name__}")
        checked.append((context, middle, list(images)))
    return checked
