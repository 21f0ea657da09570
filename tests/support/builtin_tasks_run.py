"""One run of lmms-eval 0.7.3's own ``mme``, ``pope`` and ``ocrbench`` on hand-made docs with a
fake model, in this process: ``python -m tests.support.builtin_tasks_run with|without|t2i OUT_DIR``.

``without`` hides this package's ``lmms_eval.models`` entry point before lmms-eval is imported,
as if the package were not installed; ``with`` leaves it. The fake model (not one of ours)
answers plain text, empty text and the record ``--model t2i`` writes for a failed drawing.
``t2i`` gives the same answers from a subclass of our ``t2i`` model (no generator: a stand-in
that says what a smoke preset says), and records what :func:`lmms_genbench.hooks.changed`
finds in place during the run and after it, and what a loguru sink received.
The docs follow /work/shared/DATASET_SCHEMAS.md and the fields each task's utils.py reads;
they are written as a local copy laid out like the hub's (``data/test-*`` Parquet), and each
task is the built-in YAML included as is, with ``dataset_path`` pointing at that copy.
"""

import json
import os
import sys
from pathlib import Path

FAILED = json.dumps({"text": "", "images": [], "status": "failed", "reason": "refused"})

# (fields, the fake model's answer); the expected scores are worked out in test_hooks_builtin_tasks.py
DOCS = {
    "mme": [  # two rows per question_id and category (its aggregation asserts pairs)
        ({"question_id": "existence/1.png", "question": "Is there a cat? Please answer yes or no.",
          "answer": "Yes", "category": "existence"}, "Yes"),
        ({"question_id": "existence/1.png", "question": "Is there a dog? Please answer yes or no.",
          "answer": "No", "category": "existence"}, FAILED),
        ({"question_id": "code_reasoning/2.png", "question": "Does the code print 3? Please answer yes or no.",
          "answer": "Yes", "category": "code_reasoning"}, ""),
        ({"question_id": "code_reasoning/2.png", "question": "Does the code print 4? Please answer yes or no.",
          "answer": "No", "category": "code_reasoning"}, "No"),
    ],
    "pope": [
        ({"id": str(i), "question_id": str(i), "question": f"Is there a {obj} in the image?", "answer": gt,
          "image_source": f"COCO_val2014_{i:012d}", "category": "random"}, said)
        for i, (obj, gt, said) in enumerate([("cat", "yes", "yes"), ("dog", "no", "no"), ("car", "yes", ""),
                                              ("bus", "no", FAILED), ("cup", "no", "yes")])
    ],
    "ocrbench": [  # "failed" is in the failure record's text: OCRBench counts it right
        ({"dataset": "IIIT5K", "question": "what is written in the image?", "question_type": "Regular Text Recognition",
          "answer": [gt]}, said)
        for gt, said in [("hello", "hello"), ("abc", "ABC"), ("x", ""), ("failed", FAILED), ("zz", "no")]
    ],
}


def _hide_our_entry_point():
    from importlib import metadata

    everything = metadata.entry_points

    def entry_points(**select):
        found = everything()
        flat = [e for group in found.values() for e in group] if isinstance(found, dict) else list(found)
        kept = metadata.EntryPoints([e for e in flat if not e.value.startswith("lmms_genbench")])
        return kept.select(**select) if select else kept

    metadata.entry_points = entry_points


def write_tasks(root: Path) -> Path:
    import datasets
    import lmms_eval
    from PIL import Image

    builtin = Path(lmms_eval.__file__).parent / "tasks"
    tasks = root / "tasks"
    tasks.mkdir(parents=True)
    for name, rows in DOCS.items():
        copy = root / "hub" / name / "data"
        copy.mkdir(parents=True)
        columns = {key: [fields[key] for fields, _ in rows] for key in rows[0][0]}
        columns["image"] = [Image.new("RGB", (8, 8), (40 * i, 0, 0)) for i in range(len(rows))]
        features = datasets.Features({key: datasets.Sequence(datasets.Value("string")) if key == "answer" and name == "ocrbench"
                                      else datasets.Value("string") for key in rows[0][0]} | {"image": datasets.Image()})
        datasets.Dataset.from_dict(columns, features=features).to_parquet(str(copy / "test-00000-of-00001.parquet"))
        (tasks / f"{name}_fixture.yaml").write_text(
            f"include: {builtin / name / (name + '.yaml')}\ntask: {name}_fixture\ndataset_path: {copy.parent}\n")
    return tasks


SECRET_NAME, SECRET = "FIXTURE_API_KEY", "sk-fixture-0123456789abcdef"
SEEN: dict = {"during": set(), "logged": []}


def _answer(requests):
    from lmms_genbench.hooks import changed

    SEEN["during"] |= changed()
    from loguru import logger

    logger.warning(f"Attempt 4/5 failed with error: 401 {{'error': 'bad key Bearer {SECRET}'}}")
    return [DOCS[r.args[4].removesuffix("_fixture")][r.args[3]][1] for r in requests]


class _Answers:
    """Built lazily: lmms-eval's model base class is imported after the entry point is hidden."""

    @staticmethod
    def model(ours: bool):
        from lmms_eval.api.model import lmms

        if ours:
            from lmms_genbench.models.t2i import TextToImageModel

            class FakeT2I(TextToImageModel):  # --model t2i without its generator
                def __init__(self):
                    lmms.__init__(self)
                    self.scorer_preset = "smoke"

                def generate_until(self, requests):
                    return _answer(requests)

            return FakeT2I()

        class FakeModel(lmms):  # a built-in-style model: not one of ours
            def generate_until(self, requests):
                return [DOCS[r.args[4].removesuffix("_fixture")][r.args[3]][1] for r in requests]

            def loglikelihood(self, requests):
                raise NotImplementedError

            def generate_until_multi_round(self, requests):
                raise NotImplementedError

        return FakeModel()


def _hide_our_startup_line():
    """A wheel install's ``lmms_genbench.pth`` (CI installs the wheel) put its import watcher on
    ``sys.meta_path`` when Python started: take it off before lmms-eval is imported."""
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "lmms_genbench.hooks.startup"]


def main(mode: str, out: Path) -> None:
    if mode == "without":
        _hide_our_entry_point()
        _hide_our_startup_line()
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    tasks = write_tasks(out)
    os.environ[SECRET_NAME] = SECRET
    from loguru import logger

    logger.add(lambda message: SEEN["logged"].append(message.record["message"]), level="WARNING")
    results = simple_evaluate(model=_Answers.model(mode == "t2i"), tasks=[f"{n}_fixture" for n in DOCS],
                              bootstrap_iters=0, log_samples=True,
                              task_manager=TaskManager("WARNING", include_path=str(tasks)))
    from lmms_genbench.hooks import changed

    logger.warning(f"after the run: {SECRET}")
    kept = {"results": results["results"], "samples": results["samples"], "hooks": sorted(changed()),
            "during": sorted(SEEN["during"]), "logged": SEEN["logged"]}
    (out / "run.json").write_text(json.dumps(kept, default=repr, sort_keys=True, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
