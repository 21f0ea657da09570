"""A scripted examiner and a fake generator for the AutoBench tests. Valid outputs chosen by the
prompt's stage, optionally broken or failing on cue."""

from __future__ import annotations

import json
import re


class ScriptedExaminer:
    """Answers every AutoBench prompt with a well-formed output.

    Args:
        fail_after: raise RuntimeError on the call after this many (an interrupt).
        bad_qa_first: the first Q&A answer of every item is broken JSON (retried).
        no_answers: validation questions answered "no" (every image fails).
        duplicate_options: every Q&A has two equal options (always dropped).
    """

    name = "scripted-examiner"

    def __init__(self, fail_after=None, bad_qa_first=False, no_answers=False, duplicate_options=False,
                 deny=None):
        self.fail_after = fail_after
        self.bad_qa_first = bad_qa_first
        self.no_answers = no_answers
        self.duplicate_options = duplicate_options
        self.deny = deny  # validation questions containing this are answered "no"
        self.prompts: list[str] = []
        self.n_images: list[int] = []
        self.n_desc = 0

    def generate(self, prompt, images=(), gen_kwargs=None):
        if self.fail_after is not None and len(self.prompts) >= self.fail_after:
            raise RuntimeError("interrupted")
        self.prompts.append(prompt)
        self.n_images.append(len(images))
        if "fined-grained aspects that evaluate" in prompt:
            n = int(re.search(r"Come up with (\d+) general", prompt).group(1))
            m = int(re.search(r"Create (\d+) fined-grained", prompt).group(1))
            lines = ["Let's think step by step."]
            for g in range(n):
                lines.append(f"General Aspect: General {g}")
                for f in range(m):
                    lines += [f"Fined-grained Aspect: Fine {g}.{f}", f"Introduction: Intro of fine {g}.{f}."]
            return "\n".join(lines)
        if prompt.startswith("[System]\nYou are an advanced AI simulation assistant"):
            return "Aspect: x\nIntroduction: y\nGuidance: Put one object left of another."
        if "Topic word:" in prompt:
            self.n_desc += 1
            k = self.n_desc
            return (f"Aspect: x\nPrompt: A red cube number {k} to the left of a blue ball.\n"
                    f"Topic word: toys{k % 2}\nKey word: cube, ball{k}, red, blue")
        if "yes/no questions" in prompt:
            return json.dumps({"questions": [f"Is there a {x}?" for x in
                                             ("red cube", "blue ball", "table", "lamp", "window")]})
        if prompt.startswith("Look at the image"):
            if self.no_answers or (self.deny and self.deny in prompt):
                return "No, it is not."
            return "Yes."
        if '"reference_answer"' in prompt:
            if self.bad_qa_first and "[Note]" not in prompt:
                return '{"question": "Where is the cube?", "options": {"A": '
            opts = {"A": "left of the ball", "B": "right of the ball", "C": "on the ball", "D": "under the ball"}
            if self.duplicate_options:
                opts["D"] = "Left of the ball."
            return "```json\n" + json.dumps({"question": "Where is the cube?", "options": opts,
                                             "reference_answer": "A"}) + "\n```"
        raise AssertionError(f"unexpected prompt: {prompt[:80]}")


class FakeGenerator:
    """A drawing per prompt in a colour from its seed; counts calls."""

    batch_size = 1

    def __init__(self, name="fake-gen", fail=False):
        self.name = name
        self.fail = fail
        self.calls = 0

    def generate(self, prompts, seeds):
        from PIL import Image

        from lmms_genbench.core.failures import GenerationFailure

        self.calls += len(prompts)
        if self.fail:
            return [GenerationFailure("refused") for _ in prompts]
        return [Image.new("RGB", (16, 16), (s % 256, (s // 256) % 256, 7)) for s in seeds]
