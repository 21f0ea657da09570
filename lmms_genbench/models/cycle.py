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
import errno
import functools
import json
from collections import Counter
from typing import Any

from lmms_eval.api.model import lmms
from lmms_eval.utils import eval_logger  # the host's logger: what it shows at --verbosity INFO

from .. import preflight
from ..command.cycle import in_shard
from ..core import state
from ..core.errors import from_exception
from ..core.signals import interrupt_at
from ..engine import ArtifactStore, Chain, ChainFailure, ChainJob, ChainSpec, CycleEngine
from ..generators import GeneratorConfigError, config_failure
from ..store.identity import IDENTITY_FILE, adopt_folder, check_identity, same_run_elsewhere, write_identity
from .cycle_roles import build_describer, build_roles
from .throughput import log_engine_run

__all__ = ["CycleModel", "build_describer"]


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


class _ModelEngine(CycleEngine):
    """The engine as the model runs it: a generator that cannot work (no key, a 404 on
    the first request) ends the lmms-eval run with one line, not an Exception that
    lmms-eval prints before exiting 0."""

    def __init__(self, *args: Any, generator_label: str, arg_prefix: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generator_label, self.arg_prefix = generator_label, arg_prefix

    def run(self, jobs):
        try:
            return super().run(jobs)
        except GeneratorConfigError as exc:
            raise config_failure(exc, self.generator_label, self.arg_prefix) from exc


#: errno values of a store that cannot take a file, with what the line says
_NO_SPACE = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up"}
_READ_ONLY = {errno.EROFS: "it is on a read-only filesystem", errno.EACCES: "this user may not write there",
              errno.EPERM: "this user may not write there"}


def _write_identity(path, identity) -> None:
    write_identity(path.parent, identity)


def _say_weights_changed(folder, identity) -> None:
    """One line when ``folder`` is new because a checkpoint of the same model and arguments
    changed (weights edited in place, another revision): its stored work is not reused."""
    for other, changed in same_run_elsewhere(folder.parent, identity, folder.name):
        eval_logger.warning(f"lmms-genbench: the {identity.get('role', 'model')} {identity.get('model')} with the same "
                            f"arguments has other weights than its store folder {other} ({'; '.join(changed)}): "
                            f"its work there is not reused, this run stores under {folder.name}")


def _computed_nothing(record: Any) -> bool:
    """Whether a runs.jsonl record tells of a run that stored nothing new."""
    if not isinstance(record, dict):
        return False
    counts = [record[k] for k in ("hops_computed", "seeds_stored", "describe_items", "generate_items") if k in record]
    return bool(counts) and not any(counts)


def _write_or_explain(write, path, payload, root=None) -> None:
    """``write(path, payload)``, a store write of the model itself (``store.write_json`` of
    ``protocol.json``, ``store.append_jsonl`` of ``runs.jsonl``), made safe for a store
    that cannot be written.

    A whole file that exists is left as it is, so a finished store on a read-only disk
    still scores; so is a runs.jsonl record of a run that stored nothing there. Any other
    OSError (disk full, read-only, no permission) stops the run with one line naming the
    folder and the fix, before lmms-eval turns it into a traceback and exit status 0."""
    appends = getattr(write, "__name__", "") == "append_jsonl"
    optional = write is _write_identity  # what made a namespace: a read-only finished store still scores without it
    if not appends and path.exists():
        return
    try:
        write(path, payload)
    except OSError as exc:
        if exc.errno in _READ_ONLY and (optional or appends and _computed_nothing(payload)):
            what = "is not written" if optional else "gets no record of this run"
            eval_logger.warning(f"lmms-genbench: the store is read-only, so {path} {what} ({exc})")
            return
        root = root or getattr(getattr(write, "__self__", None), "root", path.parent)
        reason = _NO_SPACE.get(exc.errno) or _READ_ONLY.get(exc.errno)
        fix = ("free disk space there, or pass --model_args artifacts=<a folder on a disk with space>"
               if exc.errno in _NO_SPACE else
               "pass --model_args artifacts=<a writable folder> (or set LMMS_GENBENCH_ARTIFACTS)")
        raise from_exception(
            exc, f"the artifact store {root} cannot be written" + (f": {reason}" if reason else ""),  # exc names the file
            fix + "; then rerun the same command, it resumes from the files already stored",
        ) from exc


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
        shard: ``i/n``: compute only the chains whose key hashes to share ``i`` of
            ``n`` (independent jobs, e.g. a SLURM array, then one run without
            ``shard`` that scores the whole store). The other docs are answered
            as failed chains with stage ``shard`` and a reason saying so, never
            as scores (docs/scale.md).
        batch_size, max_batch_size, device: passed by lmms-eval to every model;
            ignored here (set ``describer.batch_size``/``generator.batch_size``).
    """

    #: "smoke" when a smoke preset built the model: its chains are scored offline too
    scorer_preset: str | None = None
    #: (i, n) of model_args shard=i/n: this job computes only its share of the chains
    shard: tuple[int, int] | None = None

    def __init__(self, **model_args: Any) -> None:
        super().__init__()
        # read once (command/), checked before any weight loads (preflight/): the roles take what was read
        self.command = preflight.start_run("cycle", model_args)
        args = self.command.cycle
        assert args is not None
        self.shard = args.shard

        from accelerate import Accelerator

        self.accelerator = Accelerator()
        self._rank = self.accelerator.process_index
        self._world_size = self.accelerator.num_processes
        self._device = self.accelerator.device

        self.store = ArtifactStore(self.command.top.get("artifacts"))
        interrupt_at("model")  # tests only: a signal while the roles load
        self.describer, self.generator, overlap = build_roles(self.command)
        self.engine = _ModelEngine(
            self.describer,
            self.generator,
            describer_batch=args.describer_batch,
            stop_after_hop=args.stop_after_hop,
            overlap=overlap,
            progress=self._rank == 0,  # one bar, as lmms-eval's own
            generator_label=args.unified or args.generator,
            arg_prefix="unified." if args.unified else "generator.",
        )
        self.scorer_preset = args.scorer_preset
        self.last_stats = None

    @property
    def device(self):
        return self._device

    def _spec(self, context: str, gen_kwargs_json: str, direction: str | None) -> ChainSpec:
        """The request's spec, read once per model and request shape (a task's requests share it)."""
        specs = self.__dict__.setdefault("_specs", {})
        key = (context, gen_kwargs_json, direction, self.scorer_preset)
        if key not in specs:
            if len(specs) >= 64:
                specs.clear()
            specs[key] = self._read_spec(context, gen_kwargs_json, direction)
        return specs[key]

    def _read_spec(self, context: str, gen_kwargs_json: str, direction: str | None) -> ChainSpec:
        gen_kwargs = json.loads(gen_kwargs_json)
        if self.scorer_preset and "max_new_tokens" in gen_kwargs:
            # random-weight describers: the paper's 512 tokens of noise prove no more than the smoke
            # task's few and take 15x longer (a folder task's first run); the store keys the cap
            gen_kwargs["max_new_tokens"] = min(int(gen_kwargs["max_new_tokens"]), _smoke_max_new_tokens())
        spec = ChainSpec.from_request(context, gen_kwargs, direction)
        if self.scorer_preset and "preset" not in spec.scorer:
            spec = dataclasses.replace(spec, scorer={"preset": self.scorer_preset, **spec.scorer})
        return spec

    def generate_until(self, requests) -> list[str]:
        jobs, tasks, namespaces, splits, skipped = [], [], {}, {}, {}
        # a store keyed before whole-file weight hashing, or before a role's weights were part of
        # its name, keeps its hops: its folder takes the new name
        adopt_folder(self.store.root, self.describer.name, getattr(self.describer, "legacy_names", ()))
        adopt_folder(self.store.root / self.describer.name, self.generator.name,
                     getattr(self.generator, "legacy_names", ()))
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
            if not in_shard(key, self.shard):
                skipped[len(jobs)] = _outside_shard(key, spec, location, task, self.shard)
            load = (functools.partial(_doc_error, doc_error) if doc_error is not None
                    else functools.partial(_load_seed, spec, docs, doc_id, doc_to_visual))
            jobs.append(ChainJob(key, spec, location, load))
            tasks.append(task)

        identities = {self.store.root / self.describer.name: getattr(self.describer, "identity", None) or {},
                      self.store.root / self.describer.name / self.generator.name:
                          getattr(self.generator, "identity", None) or {}}
        for folder, identity in identities.items():  # what made each namespace; a tampered one is refused
            if (folder / IDENTITY_FILE).exists():
                check_identity(folder)
            else:
                _say_weights_changed(folder, identity)
                _write_or_explain(_write_identity, folder / IDENTITY_FILE, identity, self.store.root)
        for namespace, (task, spec) in namespaces.items():
            _write_or_explain(  # written once: an existing manifest is left as it is
                self.store.write_json,
                namespace / "protocol.json",
                {"task": task, "describer": self.describer.name, "generator": self.generator.name, **spec.describe_settings()},
            )

        # one engine run per direction, so describing and drawing can overlap in each
        by_index: dict[int, Any] = {}
        outside = Counter(jobs[i].location.directory.parent for i in skipped)  # other jobs' docs, by namespace
        for direction in sorted({job.spec.direction for job in jobs}):
            picked = [i for i, job in enumerate(jobs) if job.spec.direction == direction and i not in skipped]
            outcomes, stats = self.engine.run([jobs[i] for i in picked])
            by_index.update(zip(picked, outcomes))
            self.last_stats = stats
            log_engine_run(stats)  # the results file's "throughput": this run's own seconds per hop
            for namespace, (task, spec) in namespaces.items():
                if spec.direction == direction:
                    mine = [o for o in outcomes if o.location.directory.parent == namespace]
                    self._record_run(namespace, task, mine, stats, outside.get(namespace, 0))
        return [skipped[i] if i in skipped else by_index[i].to_chain(tasks[i]).to_json() for i in range(len(jobs))]

    def _record_run(self, namespace, task: str, outcomes, stats, outside: int = 0) -> None:
        """One task's part of this run: a line in the store's ``runs.jsonl`` of its namespace and
        one at INFO through the host's logger. ``run`` holds the engine run's own figures, which
        tasks of the same direction share (their chains went through the same batches).
        ``outside``: docs of other shards, answered as failed chains: the results file counts them
        in n_failed, so the line counts them too."""
        unique = list({str(o.location.directory): o for o in outcomes}.values())
        reasons = Counter(_reason(o.failure) for o in unique if o.failure is not None)

        entry = {
            "rank": self._rank,
            "task": task,
            "chains": len(unique),
            "hops_reused": sum(o.reused for o in unique),
            "hops_computed": sum(o.described + o.drawn for o in unique),
            "describe_items": sum(o.described for o in unique),
            "generate_items": sum(o.drawn for o in unique),
            "chains_repaired": sum(1 for o in unique if o.repaired),
            "failed": sum(reasons.values()),
            **({"outside_shard": outside} if outside else {}),
            "failures": dict(reasons.most_common(5)),
            "run": stats.to_dict(),
            **({"shard": "/".join(map(str, self.shard))} if self.shard else {}),
        }
        _write_or_explain(self.store.append_jsonl, namespace / "runs.jsonl", entry)
        top = "; ".join(f"{n}x {r}" for r, n in reasons.most_common(3))
        if outside:  # the results file's n_failed counts these docs: so does the line
            top = "; ".join(filter(None, [top, f"{outside}x in other jobs' shards (shard= {entry['shard']})"]))
        eval_logger.info(
            f"cycle {task} (rank {self._rank}): {entry['chains']} chains, {entry['hops_reused']} hops reused, "
            f"{entry['hops_computed']} computed, {entry['chains_repaired']} repaired, "
            f"{entry['failed'] + outside} failed" + (f" ({top})" if top else "")
        )

    def loglikelihood(self, requests):
        raise NotImplementedError("the cycle model only generates chains; it cannot score loglikelihood requests")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the cycle model does not support multi-round generation")


def _smoke_max_new_tokens() -> int:
    """The smoke task's describer budget, read from its YAML (the one place that states it), once."""
    return state.remember("smoke describer max_new_tokens", _read_smoke_max_new_tokens)


def _read_smoke_max_new_tokens() -> int:
    from pathlib import Path

    from lmms_eval.utils import load_yaml_config

    path = Path(__file__).resolve().parent.parent / "tasks" / "mmeception" / "mmeception_smoke.yaml"
    return int(load_yaml_config(str(path), mode="simple")["generation_kwargs"]["max_new_tokens"])


def _outside_shard(key: str, spec: ChainSpec, location, task: str, shard: tuple[int, int]) -> str:
    """The answer for a doc another job of the array computes: a failed chain of stage
    ``shard`` that says so (counted apart by its reason, never a score)."""
    i, n = shard
    return Chain(
        chain_id=key, direction=spec.direction, length=spec.hops, hops=0,
        namespace=str(location.directory.parent), folder=location.directory.name, task=task,
        failure=ChainFailure(0, "shard", f"not in this job's shard {i}/{n}: the job with the doc's shard computes "
                             "it; score the task with one run without shard= over the whole store"),
        scorer=spec.scorer,
    ).to_json()


def _reason(failure) -> str:
    """A failure's stage and the first part of its reason: how runs.jsonl groups failures."""
    return f"{failure.stage}: {str(failure.reason).split(':')[0][:120]}"
