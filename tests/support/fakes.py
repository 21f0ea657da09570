"""Deterministic stand-ins for a describer and a generator, counting calls, and a cycle
model built on them."""

from __future__ import annotations

import numpy as np
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from PIL import Image

from lmms_genbench.engine import ArtifactStore, CycleEngine
from lmms_genbench.generators import GenerationFailure
from lmms_genbench.models.cycle import CycleModel


class FakeDescriber:
    name = "fake-describer"

    def __init__(self, replies=None):
        self.calls: list[int] = []  # batch size of each call
        self.replies = replies or {}  # mean colour -> forced reply

    def describe(self, images, prompt, gen_kwargs):
        self.calls.append(len(images))
        out = []
        for img in images:
            # the median ignores the generator's one marker pixel
            colour = tuple(int(c) for c in np.median(np.asarray(img).reshape(-1, 3), axis=0))
            out.append(self.replies.get(colour, f"a square of colour {colour[0]} {colour[1]} {colour[2]}"))
        return out


class FakeGenerator:
    name = "fake-generator"

    def __init__(self, batch_size=4, fail_on=(), interrupt_on_call=None, blank_on=()):
        self.batch_size = batch_size
        self.blank_on = blank_on  # prompts drawn as one flat colour, like a safety filter
        self.calls: list[int] = []
        self.fail_on = fail_on
        self.interrupt_on_call = interrupt_on_call

    def generate(self, prompts, seeds):
        self.calls.append(len(prompts))
        if self.interrupt_on_call is not None and len(self.calls) == self.interrupt_on_call:
            raise KeyboardInterrupt("simulated interrupt")
        out = []
        for prompt in prompts:
            if any(word in prompt for word in self.fail_on):
                out.append(GenerationFailure("backend refused this prompt"))
                continue
            numbers = [int(tok) for tok in prompt.split() if tok.isdigit()][-3:]
            colour = tuple(min(255, n + 10) for n in numbers) if len(numbers) == 3 else (0, 0, 0)
            image = Image.new("RGB", (8, 8), colour)
            if not any(word in prompt for word in self.blank_on):
                # one contrasting pixel: a real drawing is never a single colour
                image.putpixel((0, 0), tuple(255 - c for c in colour))
            out.append(image)
        return out


def cycle_model(tmp_path):
    """A cycle model with the fake describer and generator, storing under ``tmp_path``."""
    model = CycleModel.__new__(CycleModel)  # skip building real networks
    lmms.__init__(model)
    model.store = ArtifactStore(tmp_path)
    model.describer, model.generator = FakeDescriber(), FakeGenerator()
    model.engine = CycleEngine(model.describer, model.generator)
    model.last_stats = None
    return model


def cycle_request(doc_id, gen_kwargs):
    """An lmms-eval request of task ``sdp`` for doc ``doc_id``."""
    args = ("Describe the image.", gen_kwargs, lambda doc: [doc["image"]], doc_id, "sdp", "test")
    return Instance("generate_until", args, 0, {"task": "sdp", "doc_id": doc_id, "repeats": 1})
