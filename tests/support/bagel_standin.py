"""A stand-in with the interface of lmms-eval 0.7.3's ``bagel`` model type: one class whose
``mode`` (fixed at construction in bagel, switched by ``unified=lmms:``) decides whether
``generate_until`` answers text about the request's images or draws (``{"text", "images"}``),
with per-mode settings in a module-level ``BASE_PARAMS``. Registered as an lmms-eval model type
by :func:`register`. Not bagel: no network, seeded noise pictures, templated answers."""

from __future__ import annotations

import hashlib
import json
import os
import uuid

from lmms_genbench.smoke.host_image import lazy_model_class, register_model_type

MODEL_TYPE = "genbench_tiny_bagel"

BASE_PARAMS = {
    "generate": dict(cfg_text_scale=4.0, num_timesteps=50, do_sample=False),
    "understanding": dict(max_think_token_n=1000, do_sample=False, understanding_output=True),
}

#: (mode, inference_params) of every call, for the tests
CALLS: list[tuple[str, dict]] = []


def _model_class():
    from lmms_eval.api.model import lmms

    class TinyBagel(lmms):
        def __init__(self, mode: str = "understanding", output_dir: str = "./logs/tiny_bagel",
                     cfg_text_scale: float | None = None, do_sample: bool | None = None, **kwargs) -> None:
            super().__init__()
            if mode not in BASE_PARAMS:
                raise ValueError(f"Invalid mode '{mode}'")
            self.mode = mode
            self.inference_params = dict(BASE_PARAMS[mode])
            if cfg_text_scale is not None:
                self.inference_params["cfg_text_scale"] = float(cfg_text_scale)
            if do_sample is not None:
                self.inference_params["do_sample"] = bool(do_sample)
            if mode == "generate":  # as bagel: the output folder exists only for a drawing instance
                self.output_dir = os.path.join(output_dir, uuid.uuid4().hex[:8])
                os.makedirs(self.output_dir, exist_ok=True)

        def generate_until(self, requests):
            import numpy as np
            from PIL import Image

            out = []
            for request in requests:
                context, _kwargs, doc_to_visual, doc_id, task, split = request.args
                CALLS.append((self.mode, dict(self.inference_params)))
                if self.mode == "understanding":
                    visuals = doc_to_visual(self.task_dict[task][split][doc_id]) or []
                    colours = len({p for v in visuals for p in v.convert("RGB").getdata()})
                    out.append(f"a picture of {colours} colours in a small room")
                    continue
                digest = hashlib.sha256(context.encode()).digest()
                pixels = np.random.default_rng(int.from_bytes(digest[:8], "little")).integers(
                    1, 256, (32, 32, 3), dtype=np.uint8)
                path = os.path.join(self.output_dir, f"{task}_{doc_id}_0.png")
                Image.fromarray(pixels).save(path)
                out.append(json.dumps({"text": "", "images": [path]}))
            return out

        def loglikelihood(self, requests):
            raise NotImplementedError

        def generate_until_multi_round(self, requests):
            raise NotImplementedError

    return TinyBagel


__getattr__ = lazy_model_class(__name__, "TinyBagel", _model_class)


def register() -> str:
    return register_model_type(MODEL_TYPE, f"{__name__}.TinyBagel")
