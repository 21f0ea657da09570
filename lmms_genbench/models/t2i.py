"""lmms-eval model type ``t2i``: any generator backend serving text-to-image tasks.

Answers in lmms-eval 0.7.3's text-to-image format, the JSON object its generation
tasks parse (WISE, imgedit, gedit_bench, kris_bench, ...; see the README of its
``tasks/WISE``): ``{"text": "", "images": ["/abs/<output_dir>/<task>/<doc:04d>_s<k>.png", ...]}``,
one path per image of the doc (``num_images_per_prompt``), in seed order. The
files keep the layout of lmms-eval's own ``wan2_1_t2i``. A doc that could not be
drawn answers in the same shape with the images that were written (usually none)
plus ``"status": "failed"``, the ``reason`` and the ``doc_id``. lmms-eval's tasks would
score it as a missing image (WISE: 0); :mod:`lmms_genbench.hooks.host_failures` makes its values
N/A instead, leaves it out of the task's numbers and counts it in ``n_failed``; the reason
stays in the samples file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmms_eval.api.model import lmms
from lmms_eval.utils import eval_logger  # the host's logger: what it shows by default

from .. import preflight
from ..command import T2I_OFFLINE_HINT
from .cycle_roles import load_planned
from ..engine.cycle import chunked
from ..core.errors import from_exception
from ..core.keys import atomic_write
from ..store import ArtifactStore
from ..generators import GenerationFailure, GeneratorConfigError, build_generator_or_explain, config_failure
from ..core.model_args import optional_int

#: the way out of a generator that did not load, named in its error line


class TextToImageModel(lmms):
    """Args: ``generator`` (backend name) with ``generator.<arg>=...``; ``output_dir``
    (default: the artifact store root + ``/t2i``); ``num_images_per_prompt``;
    ``seed`` (image k of doc d uses seed + k, as upstream)."""

    def __init__(self, **model_args: Any) -> None:
        super().__init__()
        # read once (command/), checked before the generator loads (preflight/): it takes what was read
        self.command = preflight.start_run("t2i", model_args)
        top, (role,) = self.command.top, self.command.roles
        self.num_images_per_prompt = optional_int("num_images_per_prompt", top.get("num_images_per_prompt")) or 1
        self.seed = optional_int("seed", top.get("seed")) or 0
        # absolute: tasks open the returned paths from whatever directory they run in
        output_dir = top.get("output_dir")
        self.output_dir = (Path(output_dir).expanduser() if output_dir else ArtifactStore().root / "t2i").resolve()
        self.generator_label = role.name
        # the same one line as --model cycle's generator; what the preflight planned loads as it checked it
        otherwise = T2I_OFFLINE_HINT if self.generator_label != "smoke" else ""
        if role.plan is not None and role.plan.load is not None:
            self.generator = load_planned(role.plan.load, self.generator_label, role.args, otherwise)
        else:
            self.generator = build_generator_or_explain(self.generator_label, role.args, otherwise)
        self._drawn_any = False  # a first batch that fails whole stops the run

    def generate_until(self, requests) -> list[str]:
        paths: list[list[Path]] = [[] for _ in requests]
        failed: dict[int, str] = {}
        work = []  # (request index, prompt, seed, path)
        for i, request in enumerate(requests):
            context, _gen_kwargs, _visual, doc_id, task, _split = request.args
            folder = self.output_dir / str(task).replace("/", "_")
            prompt = str(context).strip()
            if not prompt:
                failed[i] = "empty prompt"
                continue
            paths[i] = [folder / f"{int(doc_id):04d}_s{k}.png" for k in range(self.num_images_per_prompt)]
            work += [(i, prompt, self.seed + k, path) for k, path in enumerate(paths[i]) if not path.is_file()]
        for chunk in chunked(work, max(1, self.generator.batch_size)):
            try:
                images = self.generator.generate([w[1] for w in chunk], [w[2] for w in chunk])
            except GeneratorConfigError as exc:  # every prompt would fail alike: stop with one line
                raise config_failure(exc, self.generator_label) from exc
            if not self._drawn_any and images and all(isinstance(im, GenerationFailure) for im in images):
                # a task would score each missing image as 0 (WISE does): stop instead of reporting that
                raise config_failure(GeneratorConfigError(
                    f"every prompt of the first batch failed ({len(images)} of {len(images)}), the first with "
                    f"{images[0].reason}",
                    "fix what that reason names (usually a generator.<arg> value), then rerun"), self.generator_label)
            self._drawn_any = True
            for (i, _prompt, _seed, path), image in zip(chunk, images):
                if isinstance(image, GenerationFailure):
                    failed.setdefault(i, image.reason)
                else:
                    self._save(path, image)
        if failed:
            first = next(iter(failed.values()))
            eval_logger.warning(
                f"t2i: {len(failed)} of {len(requests)} prompts have no image (first reason: {first}); the "
                "task's numbers leave them out (N/A, counted in n_failed); the samples file holds every reason")
        results = []
        for i, request in enumerate(requests):
            answer: dict[str, Any] = {"text": "", "images": [str(p) for p in paths[i] if p.is_file()]}
            if i in failed:
                answer.update(status="failed", reason=failed[i], doc_id=request.args[3])
            results.append(json.dumps(answer))
        return results

    def _save(self, path: Path, image: Any) -> None:
        try:
            atomic_write(path, lambda fh: image.convert("RGB").save(fh, format="PNG"))
        except OSError as exc:  # disk full, read-only: one line, not a traceback and exit 0
            raise from_exception(exc, f"--model t2i cannot write its images to {self.output_dir}",
                                 "pass --model_args output_dir=<a writable folder with space>, then rerun "
                                 "(images already written are reused)") from exc

    def loglikelihood(self, requests):
        raise NotImplementedError("the t2i model only generates images")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the t2i model does not support multi-round generation")
