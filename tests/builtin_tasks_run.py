"""One run of lmms-eval 0.7.3's own ``mme``, ``pope`` and ``ocrbench`` on hand-made docs with a
fake model, in this process: ``python -m tests.builtin_tasks_run with|without OUT_DIR``.

``without`` hides this package's ``lmms_eval.models`` entry point before lmms-eval is imported,
as if the package were not installed; ``with`` leaves it. The fake model (not one of ours)
answers plain text, empty text and the record ``--model t2i`` writes for a failed drawing.
The docs follow /work/shared/DATASET_SCHEMAS.md and the fields each task's utils.py reads;
they are written as a local copy laid out like the hub's (``data/test-*`` Parquet), and each
task is the built-in YAML included as is, with ``dataset_path`` pointing at that copy.
"""

import json
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
    import importlib.metadata as metadata

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


class _Answers:
    """Built lazily: lmms-eval's model base class is imported after the entry point is hidden."""

    @staticmethod
    def model():
        from lmms_eval.api.model import lmms

        class FakeModel(lmms):  # a built-in-style model: not one of ours
            def generate_until(self, requests):
                return [DOCS[r.args[4].removesuffix("_fixture")][r.args[3]][1] for r in requests]

            def loglikelihood(self, requests):
                raise NotImplementedError

            def generate_until_multi_round(self, requests):
                raise NotImplementedError

        return FakeModel()


def main(mode: str, out: Path) -> None:
    if mode == "without":
        _hide_our_entry_point()
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.tasks import TaskManager

    tasks = write_tasks(out)
    results = simple_evaluate(model=_Answers.model(), tasks=[f"{n}_fixture" for n in DOCS], bootstrap_iters=0,
                              task_manager=TaskManager("WARNING", include_path=str(tasks)), log_samples=True)
    from lmms_genbench.hooks import changed

    kept = {"results": results["results"], "samples": results["samples"], "hooks": sorted(changed()),
            "ours_loaded": sorted(m for m in sys.modules if m.startswith("lmms_genbench"))}
    (out / "run.json").write_text(json.dumps(kept, default=repr, sort_keys=True, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
