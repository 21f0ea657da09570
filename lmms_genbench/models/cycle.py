"""lmms-eval model type ``cycle``: a describer and a generator run as chains.

    lmms-eval --model cycle \\
        --model_args describer=llava_hf,describer.pretrained=llava-hf/llava-1.5-7b-hf,\\
    generator=diffusers,generator.pretrained=stabilityai/sdxl-turbo,artifacts=./artifacts \\
        --tasks mmeception

or with one unified model that both describes and draws (see
:mod:`lmms_genbench.generators.unified`):

    lmms-eval --model cycle \\
        --model_args unified=janus,unified.pretrained=deepseek-community/Janus-Pro-7B,unified.device=cuda \\
        --tasks sdp_nocaps

Each request is one doc; its response is the doc's chain as JSON (the
contract every scorer reads: :class:`lmms_genbench.engine.Chain`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from typing import Any

from lmms_eval.api.model import lmms

from .. import host
from ..engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine, LmmsDescriber
from ..generators import build_generator
from ..core.errors import load_failure
from ..core.model_args import optional_int, split_prefixed
from ..core.registry import lookup

logger = logging.getLogger(__name__)

PRESETS: dict[str, dict[str, Any]] = {
    # random-weight describer and generator built locally: proves the plumbing, not a model
    "smoke": {"describer": "llava_hf", "generator": "smoke"},
    # a random-weight Janus built locally, as one unified model
    "smoke_unified": {"unified": "janus"},
}
# a smoke model's chains are scored with offline networks too, whatever the task
# asks (explicit scorer settings of the task and LMMS_GENBENCH_* variables still win)
SCORER_PRESETS = {"smoke": "smoke", "smoke_unified": "smoke"}


def _smoke_describer_args() -> dict[str, Any]:
    import torch

    from ..smoke.llava import tiny_llava_path

    if "OMP_NUM_THREADS" not in os.environ:
        # the tiny smoke networks are dominated by per-op overhead; extra threads
        # only contend (about 10x slower on a loaded 2-core machine)
        torch.set_num_threads(1)
    return {"pretrained": str(tiny_llava_path()), "device": "cpu", "device_map": "cpu", "dtype": "float32"}


# lmms-eval's vllm chat class sends one prompt per call (batch_size=1) and asks
# vLLM for 80% of the device's memory. vLLM 0.32's CPU backend reserves that
# fraction of the RAM for the weights and the KV cache up front (its cpu_worker.py):
# 0.92 fails at start, 0.8 took 11 GB, 0.1 serves small models (issue 13). On a
# GPU the class's default stands.
VLLM_CPU_MEMORY_FRACTION = 0.1


def _vllm_describer_args(args: dict[str, Any], describer_batch: int) -> dict[str, Any]:
    """Defaults for ``describer=vllm`` under the user's own ``describer.<arg>`` values:
    each describe step's images in one vLLM call, and a memory fraction that
    fits the machine. None of these enter the artifact key (OPERATIONAL_ARGS)."""
    import torch

    filled: dict[str, Any] = {"batch_size": describer_batch}
    if not torch.cuda.is_available():
        filled["gpu_memory_utilization"] = VLLM_CPU_MEMORY_FRACTION
    return {**filled, **args}


def _smoke_unified_args() -> dict[str, Any]:
    from ..smoke.janus import tiny_janus_path

    _smoke_describer_args()  # the same single-thread setting for tiny networks
    return {"pretrained": str(tiny_janus_path()), "device": "cpu", "dtype": "float32"}


def _resolve_roles(preset, describer, generator, unified, describer_args, generator_args, unified_args):
    """Apply ``preset`` and check that the model_args name one decoupled pair or one unified model."""
    fill = {} if preset is None else lookup(PRESETS, preset, "model_args preset")
    if unified or unified_args or "unified" in fill:
        unified = unified or fill.get("unified")
        mixed = [role for role, name in (("describer", describer), ("generator", generator)) if name]
        mixed += [f"{role}.{k}" for role, args in (("describer", describer_args), ("generator", generator_args)) for k in args]
        if mixed:
            raise ValueError(
                f"model_args unified={unified!r} replaces the describer and the generator, but "
                f"{', '.join(mixed)} was given too; give either unified=... (with unified.<arg>=...) "
                "or describer=... and generator=..."
            )
        if not unified:
            raise ValueError(
                f"model_args {', '.join('unified.' + k for k in unified_args)} given without unified=<name>"
            )
        if preset == "smoke_unified" and unified == "janus":
            unified_args = {**_smoke_unified_args(), **unified_args}
        return None, None, unified, {}, {}, unified_args
    describer = describer or fill.get("describer")
    generator = generator or fill.get("generator")
    if preset == "smoke" and describer == "llava_hf":
        describer_args = {**_smoke_describer_args(), **describer_args}
    if not describer:
        raise ValueError(
            "model_args describer is required (an lmms-eval model name such as llava_hf), "
            "or unified=<model>, or use preset=smoke"
        )
    if not generator:
        raise ValueError("model_args generator is required (diffusers, openai or smoke), or use preset=smoke")
    return describer, generator, None, describer_args, generator_args, {}


#: the way out of a model that did not load, named in its error line
_OFFLINE = "run offline with --model_args preset=smoke"


def _build_roles(describer, generator, unified, describer_args, generator_args, unified_args):
    """The describer and generator, and whether they may run on two threads at once.

    A role that does not load stops the run with one line naming its weights
    argument (:class:`~lmms_genbench.core.errors.ActionableError`)."""
    if unified:
        from ..generators.unified import build_unified

        try:
            model = build_unified(unified, **unified_args)
        except Exception as exc:
            raise load_failure(exc, "unified model", unified, unified_args, "unified.", _OFFLINE)
        return model, model, bool(getattr(model, "concurrent", False))
    built_describer = build_describer(describer, describer_args)
    try:
        built_generator = build_generator(generator, **generator_args)
    except Exception as exc:
        raise load_failure(exc, "generator", generator, generator_args, "generator.", _OFFLINE)
    return built_describer, built_generator, True


def build_describer(name: str, args: dict[str, Any]):
    """Instantiate a registered lmms-eval model by name with its own arguments."""
    otherwise = _OFFLINE
    if name == "vllm":
        # vLLM's engine fails in a child process; the parent sees only "initialization
        # failed", most often for memory: say which argument decides it
        otherwise = (
            f"if vLLM's log above blames memory, change describer.gpu_memory_utilization (here "
            f"{args.get('gpu_memory_utilization', 'the class default 0.8')}): the fraction of the GPU's "
            f"memory, or without CUDA of the RAM (default {VLLM_CPU_MEMORY_FRACTION} there), that vLLM "
            f"reserves for the weights and the KV cache; or {_OFFLINE}"
        )
    model = host.build_model(name, args, role="describer", prefix="describer.", otherwise=otherwise)
    return LmmsDescriber(model, host.model_identity(name, args))


#: doc fields a chain's key is read from, first present wins
KEY_FIELDS = ("chain_id", "question_id", "id")


def _chain_key(doc: Any, doc_id: int) -> str:
    if isinstance(doc, dict):
        for field in KEY_FIELDS:
            if doc.get(field) not in (None, ""):
                return str(doc[field])
    return str(doc_id)


class _SplitDocs:
    """One split's docs, read in two ways: the few fields that place a chain (key,
    direction) for every doc up front, without decoding its images; the whole doc
    only when its chain's seed is loaded, shortly before its first step.

    A Hugging Face dataset decodes every image column of a row it is indexed for
    (MME: 2,374 images, about 2.5 GB if all are held); its narrow view selects the
    placing fields only. Any other sequence of docs is already in memory.
    """

    def __init__(self, docs: Any, fields: tuple[str, ...]) -> None:
        self.docs = docs
        self._narrow = docs
        columns = getattr(docs, "column_names", None)
        if columns is not None and callable(getattr(docs, "select_columns", None)):
            self._narrow = docs.select_columns([f for f in fields if f in columns])

    def placing(self, doc_id: int) -> Any:
        return self._narrow[doc_id]

    def full(self, doc_id: int) -> Any:
        return self.docs[doc_id]


def _load_seed(spec: ChainSpec, docs: _SplitDocs, doc_id: int, doc_to_visual):
    doc = docs.full(doc_id)  # decodes the doc's images: only now, in the engine's loader thread
    if spec.kind(0) == "image":
        return doc_to_visual(doc)
    if not spec.seed_field:
        raise ValueError("a text-first chain needs generation_kwargs.seed_field naming the doc's text field")
    return doc[spec.seed_field]


def _doc_error(error: Exception):
    raise error  # reading the doc itself failed (e.g. an undecodable image column)


class CycleModel(lmms):
    """Compose any lmms-eval describer with any text-to-image generator.

    Args:
        describer: registered lmms-eval model name (``llava_hf``, ``qwen2_5_vl``,
            ``vllm``, ``openai``, ...). Its own arguments are given as
            ``describer.<arg>=<value>``.
        generator: generator backend (``diffusers``, ``openai``, ``smoke``);
            its arguments as ``generator.<arg>=<value>``.
        unified: instead of a describer and a generator, one unified model
            (``janus``) that does both; its arguments as ``unified.<arg>=<value>``.
            Artifacts are keyed by its name in both roles. Unless the model says
            it may, describing and drawing then run in turn, not overlapped.
        preset: ``smoke`` fills in a tiny random-weight describer and generator,
            ``smoke_unified`` a tiny random-weight Janus (explicit arguments
            still win).
        artifacts: root folder of the artifact store (default
            ``$LMMS_GENBENCH_ARTIFACTS`` or ``~/.cache/lmms_genbench/artifacts``).
        describer_batch: images sent to the describer per call (also the
            batch size of ``describer=vllm`` unless ``describer.batch_size``
            is given; on a machine without CUDA that describer also gets
            ``describer.gpu_memory_utilization=0.1`` unless given).
        stop_after_hop: compute no hop beyond this one in this run.
        batch_size, max_batch_size, device: passed by lmms-eval to every model;
            ignored here (set ``describer.batch_size``/``generator.batch_size``).
    """

    #: "smoke" when a smoke preset built the model: its chains are scored offline too
    scorer_preset: str | None = None

    def __init__(
        self,
        describer: str | None = None,
        generator: str | None = None,
        unified: str | None = None,
        preset: str | None = None,
        artifacts: str | None = None,
        describer_batch: int = 16,
        stop_after_hop: int | None = None,
        batch_size: Any = None,
        max_batch_size: Any = None,
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        grouped, unknown = split_prefixed(kwargs, ("describer", "generator", "unified"))
        if unknown:
            raise ValueError(
                f"unknown model_args for cycle: {sorted(unknown)}; describer, generator and unified "
                "arguments take a prefix, e.g. describer.pretrained=..., generator.steps=4 or unified.device=cuda"
            )
        describer_args, generator_args, unified_args = grouped["describer"], grouped["generator"], grouped["unified"]
        describer, generator, unified, describer_args, generator_args, unified_args = _resolve_roles(
            preset, describer, generator, unified, describer_args, generator_args, unified_args
        )
        describer_batch = optional_int("describer_batch", describer_batch)
        if describer_batch is None or describer_batch < 1:
            raise ValueError(f"model_args describer_batch must be >= 1, got {describer_batch!r}")
        if describer == "vllm":
            describer_args = _vllm_describer_args(describer_args, describer_batch)

        from accelerate import Accelerator

        self.accelerator = Accelerator()
        self._rank = self.accelerator.process_index
        self._world_size = self.accelerator.num_processes
        self._device = self.accelerator.device

        self.store = ArtifactStore(artifacts)
        self.describer, self.generator, overlap = _build_roles(
            describer, generator, unified, describer_args, generator_args, unified_args
        )
        self.engine = CycleEngine(
            self.describer,
            self.generator,
            describer_batch=describer_batch,
            stop_after_hop=optional_int("stop_after_hop", stop_after_hop),
            overlap=overlap,
            progress=self._rank == 0,  # one bar, as lmms-eval's own
        )
        self.scorer_preset = SCORER_PRESETS.get(preset or "")
        self.last_stats = None

    @property
    def device(self):
        return self._device

    @functools.lru_cache(maxsize=64)
    def _spec(self, context: str, gen_kwargs_json: str, direction: str | None) -> ChainSpec:
        spec = ChainSpec.from_request(context, json.loads(gen_kwargs_json), direction)
        if self.scorer_preset and "preset" not in spec.scorer:
            spec = dataclasses.replace(spec, scorer={"preset": self.scorer_preset, **spec.scorer})
        return spec

    def generate_until(self, requests) -> list[str]:
        jobs, tasks, namespaces, splits = [], [], {}, {}
        for request in requests:
            context, gen_kwargs, doc_to_visual, doc_id, task, split = request.args
            field = (gen_kwargs or {}).get("direction_field")
            try:
                docs = splits.get((task, split, field))
                if docs is None:
                    fields = KEY_FIELDS + ((field,) if field else ())
                    docs = splits[(task, split, field)] = _SplitDocs(self.task_dict[task][split], fields)
                doc, doc_error = docs.placing(doc_id), None
            except Exception as exc:
                doc, doc_error = None, exc
            direction = doc.get(field) if field and isinstance(doc, dict) else None
            spec = self._spec(context, json.dumps(gen_kwargs or {}, sort_keys=True, default=str), direction)
            key = _chain_key(doc, doc_id)
            namespace = self.store.namespace(self.describer.name, self.generator.name, spec.protocol_id(task))
            namespaces[namespace] = (task, spec)
            location = self.store.chain(namespace, key)
            load = (functools.partial(_doc_error, doc_error) if doc_error is not None
                    else functools.partial(_load_seed, spec, docs, doc_id, doc_to_visual))
            jobs.append(ChainJob(key, spec, location, load))
            tasks.append(task)

        for namespace, (task, spec) in namespaces.items():
            manifest = namespace / "protocol.json"
            if not manifest.exists():
                self.store.write_json(
                    manifest,
                    {"task": task, "describer": self.describer.name, "generator": self.generator.name, **spec.describe_settings()},
                )

        # one engine run per direction, so describing and drawing can overlap in each
        by_index: dict[int, Any] = {}
        for direction in sorted({job.spec.direction for job in jobs}):
            picked = [i for i, job in enumerate(jobs) if job.spec.direction == direction]
            outcomes, stats = self.engine.run([jobs[i] for i in picked])
            by_index.update(zip(picked, outcomes))
            self.last_stats = stats
            for namespace, (_task, spec) in namespaces.items():
                if spec.direction == direction:
                    self.store.append_jsonl(namespace / "runs.jsonl", {"rank": self._rank, **stats.to_dict()})
            failed = sum(1 for o in outcomes if not o.ok)
            logger.info("cycle %s: %d chains, %d failed, stats %s", direction, len(outcomes), failed, stats.to_dict())
        return [by_index[i].to_chain(tasks[i]).to_json() for i in range(len(jobs))]

    def loglikelihood(self, requests):
        raise NotImplementedError("the cycle model only generates chains; it cannot score loglikelihood requests")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the cycle model does not support multi-round generation")
