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

Classes disagree on the request's decoding settings, so :func:`generate` makes
them hold whatever the class (read from lmms-eval 0.7.3's source):

* ``max_new_tokens``: the transformers classes (``llava_hf``, ``qwen2_vl``,
  ``qwen2_5_vl``, ...) and ``openai`` use the request's value (defaults 1024,
  128, 128, 1024). The
  ``vllm`` classes use ``max(request's, their own max_new_tokens)`` (own
  default 4096 for the chat class, 1024 for the simple one), which makes the
  request's length a floor: for the call their own value is lowered to the
  smallest the requests ask (see :func:`_length_ceiling`).
* ``temperature``: every class above uses the request's (default 0).
* ``until`` (stop strings): only the simple transformers classes honour it; the
  ``vllm``, ``openai``, ``llava_hf`` and ``qwen2_5_vl`` chat classes ignore it,
  so every answer is cut at its first stop string here.
* Images: the ``vllm`` chat class base64-encodes each image as PNG for vLLM to
  decode again (most of the describe time on small models). vLLM's ``LLM.chat``
  takes PIL images as they are, so for the call the class's request builder is
  swapped for one that hands them over (``$LMMS_GENBENCH_VLLM_IMAGES=encoded``
  keeps the class's own encoding).
* Progress: the classes draw a tqdm bar ("Model Responding") per
  ``generate_until`` call, from the name ``tqdm`` of the module that defines the
  method. A caller that calls many times and shows its own progress asks for
  ``quiet=True``: for the call that name gives bars that draw nothing.
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from .core.args import as_int
from .core.checkpoints import checkpoint_keys, recorded_checkpoints
from .core.errors import WEIGHT_ARGS, from_exception, load_failure
from .core.keys import recorded_name
from .core.model_args import identity_args

#: Task and split our requests are filed under unless a caller names its own
#: (the names show up in a model's logs, never in an lmms-eval results file).
DEFAULT_TASK, DEFAULT_SPLIT = "lmms_genbench", "requests"

#: the arguments whose checkpoint names a describer in the store (``pretrained``; ``model``: vllm's)
CHECKPOINT_ARGS = ("pretrained", "model")


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
    cls = model_class(name, role)
    try:
        read_weights_folder(name, args)  # a local folder: what the class would stop on, said first
        return cls(**args)
    except Exception as exc:
        raise load_failure(exc, role, name, args, prefix, otherwise)


#: lmms-eval classes that load a folder through transformers' own ``from_pretrained`` (config,
#: weights, tokenizer, processor), or vLLM's, which reads the same files (lmms-eval 0.7.3's source)
TRANSFORMERS_CLASSES = frozenset({"llava_hf", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "idefics2", "gemma3",
                                  "llama_vision", "mistral3_vl", "vllm"})


def read_weights_folder(name: str, args: Mapping[str, Any]) -> None:
    """The local folder lmms-eval model ``name``'s weights argument names, read before the class
    loads it (:func:`build_model`) and by ``lmms-genbench check``: for :data:`TRANSFORMERS_CLASSES`
    a folder whose ``config.json`` reads as a transformers config, with weights, tokenizer and image
    processor files (:func:`~lmms_genbench.core.checkpoint_folders.read_transformers_folder`); for any other
    class only that the path exists (its layout is the class's own). A Hub id is not read here.

    Raises:
        FileNotFoundError, ValueError: what the class would stop on (the message names the file).
    """
    from .core.checkpoint_folders import is_path, read_transformers_folder

    weight = next((key for key in WEIGHT_ARGS if args.get(key) not in (None, "")), None)
    if weight is None or not is_path(args[weight]):
        return
    if name in TRANSFORMERS_CLASSES:
        read_transformers_folder(str(args[weight]), tokenizer=True, processor=True)
    elif not os.path.exists(os.path.expanduser(str(args[weight]))):
        raise FileNotFoundError(f"{args[weight]} does not exist")


def model_class(name: str, role: str = "model"):
    """The registered lmms-eval class ``name``: its module imported, no model built.

    Raises:
        ActionableError: no model is registered as ``name`` (one line with the fix).
    """
    from lmms_eval.models import get_model  # heavy: only when a model is named

    try:
        return get_model(name)
    except Exception as exc:
        raise from_exception(
            exc, f"the {role} {name!r} is not a registered lmms-eval model",
            "name one that `lmms-eval models` lists (llava_hf, qwen2_5_vl, openai, ...)",
        )


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
    return recorded_name(model_record(name, args))  # type: ignore[return-value]


def model_record(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The parts :func:`model_identity` hashes, as the store writes them beside the folder
    they name (``core.keys.recorded_name`` hashes them back)."""
    _check_model(name, args)

    shown = identity_args(dict(args))
    ident = str(shown.get("pretrained") or shown.get("model_version") or shown.get("model") or name)
    if os.path.isabs(ident) or os.path.exists(ident):
        ident = os.path.basename(os.path.normpath(ident))  # a local folder: its name reads best
    record = {"recipe": "model_name", "model": name, "label": ident, "args": shown}
    # the checkpoint it reads, by content: weights changed in place or a new revision name anew
    sources = {arg: shown[arg] for arg in CHECKPOINT_ARGS if isinstance(shown.get(arg), str)}
    revision = shown.get("revision") if isinstance(shown.get("revision"), str) else None
    weights = checkpoint_keys(sources, revision)
    if weights:
        record["weights"] = weights
        record["checkpoints"] = recorded_checkpoints(sources, weights, revision)
    return record


def model_legacy_names(name: str, args: Mapping[str, Any]) -> tuple[str, ...]:
    """The name :func:`model_identity` gave before a model's weights were part of it (a store so
    named is adopted: ``store.identity.adopt_folder``); empty when no checkpoint is keyed."""
    record = model_record(name, args)
    if "weights" not in record:
        return ()
    return (recorded_name({k: v for k, v in record.items() if k != "weights"}),)  # type: ignore[return-value]


def generate(lm, items: Sequence[tuple], *, task: str = DEFAULT_TASK, split: str = DEFAULT_SPLIT,
             quiet: bool = False) -> list:
    """One ``generate_until`` call: ``(context, gen_kwargs, images)`` items in,
    one unwrapped output per item out (a text; a list of texts where a model
    answers with rounds; callers decide what to do with anything but a text).

    The task's ``max_new_tokens``, ``temperature`` and ``until`` hold whatever
    the model's class (see the module's notes). The caller's ``gen_kwargs`` are
    never changed. Raises whatever the model raises, and ``RuntimeError`` when
    it answers the wrong number of results. ``quiet`` turns off the class's own
    per-call progress bar.
    """
    items = _check_items(items, "generate", ("context", "gen_kwargs", "images"), (Mapping, type(None)))
    if not items:
        return []
    from lmms_eval.api.instance import unwrap_generation_output

    simple = getattr(lm, "is_simple", True)
    requests = [copy.deepcopy(dict(gen_kwargs or {})) for _, gen_kwargs, _ in items]
    # read before sending: models pop ``until`` from their copy
    stops = [_stop_strings(i, kwargs.get("until")) for i, kwargs in enumerate(requests)]
    arguments = []
    for doc_id, ((context, _, _), kwargs) in enumerate(zip(items, requests)):
        arguments.append((context, kwargs, _doc_to_visual, doc_id, task, split) if simple
                         else (context, _doc_to_messages, kwargs, doc_id, task, split))
    with _task_settings(lm, requests, items), (_quiet_bars(lm, "generate_until") if quiet else contextlib.nullcontext()):
        out = _send(lm, "generate_until", items, arguments, task, split)
    return [_cut_at_stop(unwrap_generation_output(o)[0], stop) for o, stop in zip(out, stops)]


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


# -- the task's decoding settings, whatever the class -------------------------------

#: ``$LMMS_GENBENCH_VLLM_IMAGES``: how images reach vLLM through its chat class
VLLM_IMAGE_MODES = ("pil", "encoded")


@contextlib.contextmanager
def _task_settings(lm, requests: list[dict], items: list[tuple]):
    """Adjust ``lm`` for one call so that its own rules give each request the
    task's settings; undone after the call, whatever happens."""
    with contextlib.ExitStack() as stack:
        if callable(getattr(lm, "_select_max_new_tokens", None)) and isinstance(getattr(lm, "max_new_tokens", None), int):
            stack.enter_context(_length_ceiling(lm, requests))
        if _is_vllm_chat(lm) and _vllm_image_mode() == "pil" and all(
                isinstance(image, Image.Image) for item in items for image in item[2]):
            stack.enter_context(_pil_images(lm))
        yield


def _quiet_bars(lm, method: str):
    """For one call, ``tqdm`` in the module defining ``lm``'s ``method`` draws nothing."""
    from .hooks.call import silent_tqdm

    return silent_tqdm(sys.modules.get(getattr(getattr(type(lm), method, None), "__module__", None) or ""))


@contextlib.contextmanager
def _length_ceiling(lm, requests: list[dict]):
    """For a class that answers ``max(request's max_new_tokens, its own)``.

    Its own value is lowered to the smallest the requests ask, so the rule picks
    each request's own; a request without one is given the model's own, as the
    class would. The rule is checked before anything is sent: if a new lmms-eval
    changed it, this refuses rather than letting the length drift."""
    own = lm.max_new_tokens
    wanted = []
    for i, kwargs in enumerate(requests):
        kwargs["max_new_tokens"] = as_int(f"items[{i}] gen_kwargs max_new_tokens",
                                          kwargs.get("max_new_tokens", own), minimum=1)
        wanted.append(kwargs["max_new_tokens"])
    from .hooks.call import TARGETS, attributes

    with attributes(lm, {"max_new_tokens": min(wanted)}, TARGETS["max_new_tokens"]):
        chosen = [lm._select_max_new_tokens(n) for n in wanted]
        if chosen != wanted:
            raise RuntimeError(
                f"{type(lm).__name__}._select_max_new_tokens chose {chosen} for the requested {wanted}: "
                "its rule is no longer lmms-eval 0.7.3's max(request, model); lmms_genbench.host needs porting"
            )
        yield


def _is_vllm_chat(lm) -> bool:
    # by name, not isinstance: importing the class would import vLLM for every model
    return any(cls.__module__ == "lmms_eval.models.chat.vllm" and cls.__name__ == "VLLM" for cls in type(lm).__mro__)


def _vllm_image_mode() -> str:
    mode = os.environ.get("LMMS_GENBENCH_VLLM_IMAGES", "pil")
    if mode not in VLLM_IMAGE_MODES:
        raise ValueError(f"LMMS_GENBENCH_VLLM_IMAGES: expected one of {', '.join(VLLM_IMAGE_MODES)}; got {mode!r}")
    return mode


@contextlib.contextmanager
def _pil_images(lm):
    """The vllm chat class's ``make_one_request``, with images handed over as PIL
    images (vLLM's ``image_pil`` parts) instead of base64 PNG data URLs; the
    sampling parameters are the class's own (``_resolve_sampling_params``)."""

    def make_one_request(request):
        _, to_messages, gen_kwargs, doc_id, task, split = request.arguments
        messages = to_messages(lm.task_dict[task][split][doc_id])
        return _vllm_messages(messages), lm._resolve_sampling_params(gen_kwargs)

    from .hooks.call import TARGETS, attributes

    # an instance attribute shadows the method
    with attributes(lm, {"make_one_request": make_one_request}, TARGETS["make_one_request"]):
        yield


def _vllm_messages(messages: list[dict]) -> list[dict]:
    # RGB, as vLLM makes every image it decodes from a URL; it passes PIL images on as given
    parts = {"image": lambda part: {"type": "image_pil", "image_pil": _rgb(part["url"])},
             "text": lambda part: {"type": "text", "text": part["text"]}}
    return [{"role": m["role"], "content": [parts[p["type"]](p) for p in m["content"]]} for m in messages]


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == "RGB" else image.convert("RGB")


def _stop_strings(index: int, until) -> list[str]:
    if until is None:
        return []
    if isinstance(until, str):
        until = [until]
    if not isinstance(until, (list, tuple)) or not all(isinstance(u, str) for u in until):
        raise TypeError(f"items[{index}] gen_kwargs until: expected a string or a list of strings; got {until!r:.200}")
    return [u for u in until if u]


def _cut_at_stop(text, stops: list[str]):
    """``text`` up to its first stop string, as the transformers classes cut it."""
    if not isinstance(text, str):
        return text
    cut = min((text.index(stop) for stop in stops if stop in text), default=None)
    return text if cut is None else text[:cut]


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
    from .hooks.call import TARGETS, attributes

    # a list serves as the split: models only index it by doc_id
    docs = {task: {split: [{"context": item[0], "visuals": item[2]} for item in items]}}
    with attributes(lm, {"task_dict": docs}, TARGETS["task_dict"]):
        out = getattr(lm, kind)(requests)
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
