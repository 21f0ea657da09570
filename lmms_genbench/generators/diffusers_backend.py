"""Text-to-image with any Hugging Face ``diffusers`` pipeline.

``torch`` and ``diffusers`` are imported when a generator is built, not when
this module is imported, so listing backends stays cheap.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Sequence
from typing import Any

from ..core import state
from ..core.args import ArgumentError
from ..core.deps import require
from ..core.failures import GenerationFailure, ProbeFailure
from . import pipeline_rules as rules
from .base import GenerationResult
from .common import check_image, describe_error, log_info
from .diffusers_plan import DiffusersRequest, name_request, read_request
from .lazy import GeneratorPlan

logger = logging.getLogger(__name__)


class DiffusersGenerator:
    """Generate images with a ``diffusers`` text-to-image pipeline.

    Args:
        pretrained: Hub id or local folder for
            ``diffusers.AutoPipelineForText2Image.from_pretrained``. When
            ``pipeline`` is given nothing is loaded and ``pretrained`` only names
            that pipeline (in :attr:`name`); pass it so the cache key says
            which weights made the images.
        pipeline: An already-built pipeline, used as-is (it is not moved or
            cast; put it on ``device`` yourself). Any callable that takes
            ``prompt=[...]``, ``generator=[...]`` and returns an object with
            ``.images`` works, which is how tests inject fakes.
        dtype: Weight dtype when loading: ``auto`` picks bfloat16 on CUDA
            devices that support it, else float16 on CUDA/MPS, else float32.
            With ``pipeline`` it must be ``auto`` or that pipeline's dtype.
        device: torch device, e.g. ``cuda``, ``cuda:1``, ``mps`` or ``cpu``.
            Asking for an accelerator that is not there raises instead of
            silently running (very slowly) on the CPU.
        steps: ``num_inference_steps``; ``None`` keeps the pipeline's default.
        guidance: ``guidance_scale``; ``None`` keeps the pipeline's default.
        width: Image width in pixels (multiple of 8); ``None``: the default.
        height: Image height in pixels (multiple of 8); ``None``: the default.
        batch_size: Prompts per pipeline call.
        negative_prompt: Negative prompt applied to every prompt, or ``None``.
        revision: Hub revision (branch, tag or commit) of ``pretrained``; part of the key.
        offload: where the weights wait between uses (not part of the key: the pictures are the
            same): ``none`` keeps them on ``device``; ``model`` moves each component (text
            encoders, transformer, VAE) to the accelerator only while it runs (diffusers'
            ``enable_model_cpu_offload``); ``sequential`` streams layer by layer
            (``enable_sequential_cpu_offload``: least memory, slowest). Needs an accelerator device.
        **call_settings: any other argument the pipeline's ``__call__`` takes
            (``max_sequence_length``, ``true_cfg_scale``, ``use_resolution_binning``, ...),
            passed to every call and part of the key; a name it does not take is refused
            with the names it does. A setting the pipeline would ignore (FLUX's
            ``negative_prompt`` without ``true_cfg_scale > 1``) is dropped with one warning.

    Widths and heights must be multiples of the pipeline's VAE scale factor times its
    patch size (16 for SD3 and FLUX), checked when it loads. A local folder is keyed by
    what it holds (:func:`.weights.folder_identity`), not by its path.

    A pipeline this generator loads draws one probe picture at once (one step, one prompt, the
    run's size), so a pipeline that cannot draw stops the run before anything is described;
    an injected ``pipeline`` is not probed.

    Each prompt gets its own ``torch.Generator(device).manual_seed(seed)``, so
    its image depends on its own seed and not on its neighbours in the batch
    (up to the small numeric differences batching causes on GPUs).
    """

    def __init__(
        self,
        pretrained: str | None = None,
        pipeline: Any = None,
        dtype: str = "auto",
        device: str = "cuda",
        steps: int | None = None,
        guidance: float | None = None,
        width: int | None = None,
        height: int | None = None,
        batch_size: int = 4,
        negative_prompt: str | None = None,
        revision: str | None = None,
        offload: str = "none",
        **call_settings: Any,
    ) -> None:
        # naming (every argument checked, the pipeline's class read, no weights) is its own step:
        # a plan stops there (plan()) and loads what it named later (from_request()); here both at once
        self._load(read_request(pretrained, pipeline, dtype, device, steps, guidance, width, height, batch_size,
                                negative_prompt, revision, offload, **call_settings), pipeline)

    @classmethod
    def from_request(cls, request: DiffusersRequest) -> DiffusersGenerator:
        """The generator ``request`` names, its weights loaded (the request checked already)."""
        generator = cls.__new__(cls)
        generator._load(request, None)
        return generator

    def _load(self, request: DiffusersRequest, pipeline: Any) -> None:
        self.pretrained, self.device, self.revision = request.pretrained, request.device, request.revision
        self.steps, self.guidance, self.width, self.height = request.steps, request.guidance, request.width, request.height
        self.batch_size, self.offload, self.dtype = request.batch_size, request.offload, request.dtype
        self._torch = require("torch", "the diffusers generator")
        loaded = pipeline is None
        if loaded:
            pipeline = _load_pipeline(request.pretrained, request.dtype, request.device,  # type: ignore[arg-type]
                                      request.revision, request.offload)
            if request.pipeline_cls is None:  # a hub id not at hand before: its class is known now
                request = request.with_class(type(pipeline))
        cls = request.pipeline_cls
        assert cls is not None
        for setting, why in request.ignored.items():
            logger.warning("diffusers: generator.%s is ignored and left out of the artifact key: %s", setting, why)
        self.call_settings, self.negative_prompt = dict(request.call_settings), request.negative_prompt
        if hasattr(pipeline, "set_progress_bar_config"):
            # A tqdm bar per batch drowns the harness's own progress output.
            pipeline.set_progress_bar_config(disable=True)
        self.pipeline = pipeline
        self._check_sizes(pipeline)
        if rules.uses_resolution_binning(cls, self.call_settings):
            logger.warning(
                "diffusers: %s bins sizes: it draws at the aspect-ratio bin of its native resolution nearest to "
                "the requested size and resizes the result; generator.use_resolution_binning=false draws at "
                "the requested size itself", cls.__name__)
        budget = rules.text_budget(pipeline, self.call_settings)
        self._budget = budget
        #: text encoder -> the tokens of a prompt it reads (the rest is cut)
        self.text_budget = {encoder: tokens for encoder, (_m, _t, tokens) in budget.items()}
        self._warned_cut = False
        self._counted: dict[str, dict[str, int]] = {}  # prompt -> cuts counted in the last generate()
        if budget:
            log_info(logger, "diffusers: %s reads %s of each prompt; the tokens cut are recorded per hop",
                     cls.__name__, ", ".join(f"{t} tokens with {e} ({m})" for e, (m, _tok, t) in budget.items()))
        naming = name_request(request)
        #: what keys the store; names stores written by earlier versions gave the same drawing; the
        #: identity written beside the store's folder
        self.name, self.legacy_names, self.identity = naming.name, naming.legacy_names, naming.identity
        if loaded:
            self._probe()

    @classmethod
    def plan(cls, **kwargs: Any) -> GeneratorPlan | None:
        """This generator's artifact name without loading weights (``generators.lazy``), or None
        where the pipeline's class is not at hand (a hub id not downloaded yet: build it)."""
        if kwargs.get("pipeline") is not None or kwargs.get("pretrained") is None:
            return None  # an injected pipeline is loaded already; no pretrained: the constructor says why
        request = read_request(**kwargs)
        if request.pipeline_cls is None:
            return None
        naming = name_request(request)
        return GeneratorPlan(naming.name, request.batch_size, naming.legacy_names, identity=naming.identity,
                             load=functools.partial(cls.from_request, request))

    def _check_sizes(self, pipeline: Any) -> None:
        multiple = rules.size_multiple(pipeline)
        for arg, value in (("width", self.width), ("height", self.height)):
            if value is not None and value % multiple:
                low = value - value % multiple
                raise ArgumentError(
                    f"{arg}: {type(pipeline).__name__} draws sizes that are multiples of {multiple} pixels "
                    f"(VAE scale factor x patch size); got {value}, nearest {max(low, multiple)} or {low + multiple}"
                )

    def _probe(self) -> None:
        """One picture (one step, one prompt, the run's size) right after loading: a pipeline that
        cannot draw fails here, before any doc is described, with the pipeline's own error."""
        saved, self.steps = self.steps, 1
        try:
            (result,) = self._call(["a probe picture"], [0])
        except Exception as exc:
            self._free_accelerator_memory()
            raise ProbeFailure(f"the pipeline could not draw its probe picture (1 step, "
                               f"{self.width or 'default'}x{self.height or 'default'} px): "
                               f"{describe_error(exc)}") from exc
        finally:
            self.steps = saved
            self._counted = {}
        if isinstance(result, GenerationFailure):  # drawn, but refused (a safety filter): the run may go on
            logger.warning("diffusers: the probe picture drawn at load was refused: %s", result.reason)

    def text_cuts(self, prompts: Sequence[str]) -> list[dict[str, int]]:
        """Per prompt, the tokens each text encoder cuts (:attr:`text_budget`), as counted inside
        the pipeline's tokenizer calls of the last :meth:`generate`; a prompt it did not draw is
        tokenized here instead. ``{}`` when the pipeline's encoders are not known."""
        if not self._budget:
            return [{} for _ in prompts]
        missing = [p for p in prompts if p not in self._counted]  # not drawn (e.g. its call failed)
        if missing:
            with rules.truncation_filter(self.pipeline, True):
                tokenized = dict(zip(missing, rules.token_cuts(self._budget, missing)))
        cuts = [dict(self._counted[p]) if p in self._counted else tokenized[p] for p in prompts]
        if not self._warned_cut and any(any(c.values()) for c in cuts):
            self._warned_cut = True  # once, not per batch: the counts are recorded per hop
            logger.warning(
                "diffusers: prompts longer than a text encoder reads (%s tokens) are cut; each hop "
                "records the tokens cut per encoder, report.json sums them (text_budget)",
                ", ".join(f"{e}: {t}" for e, t in self.text_budget.items()))
        return cuts

    def __repr__(self) -> str:
        return f"DiffusersGenerator(name={self.name!r}, device={self.device!r})"

    def generate(
        self, prompts: Sequence[str], seeds: Sequence[int]
    ) -> list[GenerationResult]:
        """One image or :class:`GenerationFailure` per prompt, in order."""
        prompts, seeds = list(prompts), [int(s) for s in seeds]
        if len(prompts) != len(seeds):
            raise ValueError(
                f"generate: expected one seed per prompt; got {len(prompts)} "
                f"prompts and {len(seeds)} seeds"
            )
        results: list[GenerationResult] = []
        self._counted = {}
        for start in range(0, len(prompts), self.batch_size):
            stop = start + self.batch_size
            results.extend(self._generate_chunk(prompts[start:stop], seeds[start:stop]))
        return results

    def _generate_chunk(
        self, prompts: list[str], seeds: list[int]
    ) -> list[GenerationResult]:
        try:
            return self._call(prompts, seeds)
        except Exception as exc:  # noqa: BLE001 - any pipeline error is isolated
            if len(prompts) == 1:
                logger.warning("diffusers: prompt failed: %s", describe_error(exc))
                return [GenerationFailure(f"pipeline raised {describe_error(exc)}")]
            logger.warning(
                "diffusers: batch of %d failed (%s); retrying prompts one by one",
                len(prompts),
                describe_error(exc),
            )
            self._free_accelerator_memory()
        # Retrying singly pins the failure on the prompt that causes it (and
        # gets past an out-of-memory batch) instead of failing the whole chunk.
        results: list[GenerationResult] = []
        for prompt, seed in zip(prompts, seeds):
            results.extend(self._generate_chunk([prompt], [seed]))
        return results

    def _call(self, prompts: list[str], seeds: list[int]) -> list[GenerationResult]:
        torch = self._torch
        kwargs: dict[str, Any] = {
            "prompt": prompts,
            "generator": [torch.Generator(self.device).manual_seed(s) for s in seeds],
            "output_type": "pil",
        }
        optional = {
            "num_inference_steps": self.steps,
            "guidance_scale": self.guidance,
            "width": self.width,
            "height": self.height,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        kwargs.update(self.call_settings)
        if self.negative_prompt is not None:
            kwargs["negative_prompt"] = [self.negative_prompt] * len(prompts)

        with rules.truncation_filter(self.pipeline, bool(self._budget)), \
                rules.counted_tokenizers(self.pipeline, self._budget) as counted:
            output = self.pipeline(**kwargs)
        cuts = counted.cuts(len(prompts)) if self._budget else None
        if cuts is not None:
            self._counted.update(zip(prompts, cuts))
        images = output.images if hasattr(output, "images") else output[0]
        if len(images) != len(prompts):
            raise RuntimeError(
                f"pipeline returned {len(images)} images for {len(prompts)} prompts"
            )
        flags = getattr(output, "nsfw_content_detected", None) or [False] * len(images)
        return [check_image(image, bool(flag)) for image, flag in zip(images, flags)]

    def _free_accelerator_memory(self) -> None:
        # After an out-of-memory error the cached blocks would make the
        # single-prompt retries fail too.
        cuda = getattr(self._torch, "cuda", None)
        if cuda is not None and cuda.is_available():
            cuda.empty_cache()


def _dtype_argument() -> str:
    """``dtype`` where the installed diffusers reads it (``torch_dtype`` is deprecated there),
    else ``torch_dtype`` (read once per process)."""
    return state.remember("diffusers dtype argument", _read_dtype_argument)


def _read_dtype_argument() -> str:
    diffusers = require("diffusers", "the diffusers generator")
    try:
        source = inspect.getsource(diffusers.DiffusionPipeline.from_pretrained)
    except (OSError, TypeError):
        return "torch_dtype"
    return "dtype" if 'kwargs.pop("dtype"' in source else "torch_dtype"


def _load_pipeline(pretrained: str, dtype: str, device: str, revision: str | None = None,
                   offload: str = "none") -> Any:
    diffusers = require("diffusers", "the diffusers generator")
    torch = require("torch", "the diffusers generator")
    extra = {"revision": revision} if revision is not None else {}
    pipeline = diffusers.AutoPipelineForText2Image.from_pretrained(
        pretrained, **{_dtype_argument(): getattr(torch, dtype)}, **extra
    )
    if offload == "model":
        require("accelerate", "generator.offload")
        pipeline.enable_model_cpu_offload(device=device)
        return pipeline
    if offload == "sequential":
        require("accelerate", "generator.offload")
        pipeline.enable_sequential_cpu_offload(device=device)
        return pipeline
    return pipeline.to(device)
