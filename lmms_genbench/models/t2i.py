"""lmms-eval model type ``t2i``: any generator backend serving text-to-image tasks.

Follows the convention of lmms-eval's own text-to-image models (e.g.
``wan2_1_t2i``): images go to ``<output_dir>/<task>/<doc:04d>_s<k>.png`` and the
response is that folder, so upstream GenEval-style tasks can read it. A doc
that could not be drawn answers with a JSON failure record instead of a path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmms_eval.api.model import lmms

from ..engine.cycle import chunked
from ..core.keys import atomic_write
from ..engine.store import ArtifactStore
from ..generators import GenerationFailure, build_generator
from ..core.model_args import optional_int, split_prefixed


class TextToImageModel(lmms):
    """Args: ``generator`` (backend name) with ``generator.<arg>=...``; ``output_dir``
    (default: the artifact store root + ``/t2i``); ``num_images_per_prompt``;
    ``seed`` (image k of doc d uses seed + k, as upstream)."""

    def __init__(
        self,
        generator: str = "smoke",
        output_dir: str | None = None,
        num_images_per_prompt: int = 1,
        seed: int = 0,
        batch_size: Any = None,
        max_batch_size: Any = None,
        device: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        grouped, unknown = split_prefixed(kwargs, ("generator",))
        if unknown:
            raise ValueError(f"unknown model_args for t2i: {sorted(unknown)}; generator arguments take the prefix generator.")
        n = optional_int("num_images_per_prompt", num_images_per_prompt)
        if n is None or n < 1:
            raise ValueError(f"model_args num_images_per_prompt must be >= 1, got {num_images_per_prompt!r}")
        self.num_images_per_prompt = n
        self.seed = optional_int("seed", seed) or 0
        self.output_dir = Path(output_dir) if output_dir else ArtifactStore().root / "t2i"
        self.generator = build_generator(generator, **grouped["generator"])

    def generate_until(self, requests) -> list[str]:
        results: list[str] = [""] * len(requests)
        work = []  # (request index, prompt, seed, path)
        for i, request in enumerate(requests):
            context, _gen_kwargs, _visual, doc_id, task, _split = request.args
            folder = self.output_dir / str(task).replace("/", "_")
            prompt = str(context).strip()
            if not prompt:
                results[i] = json.dumps({"status": "failed", "reason": "empty prompt", "doc_id": doc_id})
                continue
            results[i] = str(folder)
            for k in range(self.num_images_per_prompt):
                path = folder / f"{int(doc_id):04d}_s{k}.png"
                if not path.is_file():
                    work.append((i, prompt, self.seed + k, path))
        failed: dict[int, str] = {}
        for chunk in chunked(work, max(1, self.generator.batch_size)):
            images = self.generator.generate([w[1] for w in chunk], [w[2] for w in chunk])
            for (i, _prompt, _seed, path), image in zip(chunk, images):
                if isinstance(image, GenerationFailure):
                    failed[i] = image.reason
                else:
                    atomic_write(path, lambda fh, img=image: img.convert("RGB").save(fh, format="PNG"))
        for i, reason in failed.items():
            results[i] = json.dumps({"status": "failed", "reason": reason, "doc_id": requests[i].args[3]})
        return results

    def loglikelihood(self, requests):
        raise NotImplementedError("the t2i model only generates images")

    def generate_until_multi_round(self, requests):
        raise NotImplementedError("the t2i model does not support multi-round generation")
