"""A ChEF row that cannot be rendered (here one option only, a gold index out of range) fails
alone, counted in n_failed with its reason, through the real ``lmms-eval`` command on a user's
own recipe folder; before, the first such row stopped the whole task (lmms-eval builds every
request up front). A recipe wrong for every doc still stops the run."""

import json
import shutil
from pathlib import Path

import lmms_genbench.tasks.chef as chef_tasks
from tests.support.lmms_eval_runs import BIN, response, results_file, samples
from tests.support.lmms_eval_runs import run as run_offline

CHEF = Path(chef_tasks.__file__).resolve().parent
RECIPE = """include: _chef_base.yaml
task: chef_user_rows
dataset_path: json
dataset_kwargs: {{data_files: {{test: {data}}}}}
test_split: test
lmms_eval_specific_kwargs:
  default:
    scenario: {{question: question, options: choices, answer: answer, answer_type: index, photo: photo, key: id}}
    desideratum: accuracy
    inferencer: {inferencer}
generation_kwargs: {{max_new_tokens: 4, until: []}}
metric_list:
  - {{metric: acc, aggregation: !function utils.aggregate, higher_is_better: true}}
  - {{metric: n_docs, aggregation: !function utils.aggregate, higher_is_better: false}}
  - {{metric: n_failed, aggregation: !function utils.aggregate, higher_is_better: false}}
"""


def _folder(tmp, inferencer):
    tasks = tmp / "recipes"
    tasks.mkdir()
    for name in ("_chef_base.yaml", "utils.py"):
        shutil.copy(CHEF / name, tasks / name)
    rows = [json.loads(line) for line in (CHEF / "smoke_mc.jsonl").read_text().splitlines()[:3]]
    rows[1]["choices"] = rows[1]["choices"][:1]  # one option: not a ChEF question
    rows[2]["answer"] = 9  # gold out of range
    (tasks / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tasks / "chef_user_rows.yaml").write_text(RECIPE.format(data=tasks / "rows.jsonl", inferencer=inferencer))
    return tasks


def _run(tmp, inferencer):
    out = tmp / "out"
    proc = run_offline([str(BIN / "lmms-eval"), "--model", "chef", "--model_args", "preset=smoke",
                        "--tasks", "chef_user_rows", "--include_path", str(_folder(tmp, inferencer)),
                        "--output_path", str(out), "--log_samples"], tmp)
    return proc, out


def test_rows_that_cannot_be_rendered_fail_alone(tmp_path):
    proc, out = _run(tmp_path, "direct")
    _, results = results_file(out)
    got = results["results"]["chef_user_rows"]
    assert got["n_docs,none"] == 3 and got["n_failed,none"] == 2, (got, proc.stderr[-3000:])
    assert got["acc,none"] in (0.0, 1.0)  # the one good row, scored
    reasons = [json.loads(response(s)).get("error") for s in samples(out, "chef_user_rows")]
    assert sum("at least two options" in (r or "") for r in reasons) == 1
    assert sum("out of range" in (r or "") for r in reasons) == 1


def test_a_recipe_wrong_for_every_doc_stops_the_task(tmp_path):
    proc, out = _run(tmp_path, "beam")
    assert not list(out.rglob("*_results.json")) or "chef_user_rows" not in results_file(out)[1]["results"]
    assert "recipe inferencer must be one of" in proc.stdout + proc.stderr
