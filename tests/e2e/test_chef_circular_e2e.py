"""MMBench circular groups in a ChEF recipe through the real ``lmms-eval`` command: the run reports
``acc_circular`` (the rules in-process: tests/unit/chef/test_chef_circular.py)."""

import json
from pathlib import Path

import datasets
import pytest

from lmms_genbench.chef import results as scoring

from tests.support.mmbench_circular import FEATURES, TASKS, mmbench_circular_rows

ICL_YAML = """\
include: {base}
task: chef_icl_mmbench_fixture
dataset_path: parquet
dataset_kwargs: {{data_files: {{dev: {parquet}}}}}
test_split: dev
lmms_eval_specific_kwargs:
  default:
    scenario: {{preset: mmbench}}
    desideratum: in_context_learning
    inferencer: ppl
    seed: 0
    variants:
    - {{name: zero_shot}}
    - name: topk_text_1
      ice: {{retriever: topk_text, shots: 1}}
    - name: topk_image_1
      ice: {{retriever: topk_image, shots: 1}}
generation_kwargs: {{max_new_tokens: 4, cot_max_new_tokens: 4, until: []}}
metric_list:
"""


def test_a_grouped_recipe_through_lmms_eval_reports_circular_accuracy(tmp_path):
    """The MMBench fixture as the hub serves it (Parquet), an ICL recipe on the mmbench
    preset, the chef model around the tiny llava: the group survives the model's echo."""
    import shutil

    from tests.support.lmms_eval_runs import BIN, response, results_file
    from tests.support.lmms_eval_runs import run as run_offline
    from tests.support.lmms_eval_runs import samples

    parquet = tmp_path / "dev.parquet"
    datasets.Dataset.from_list(mmbench_circular_rows(), features=FEATURES).to_parquet(str(parquet))
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name in ("_chef_base.yaml", "utils.py"):
        shutil.copy(TASKS / name, folder / name)
    names = scoring.metric_names({"desideratum": "in_context_learning", "group": "0"},
                                 ["zero_shot", "topk_text_1", "topk_image_1"])
    yaml_text = ICL_YAML.format(base="_chef_base.yaml", parquet=parquet) + "".join(
        f"  - {{metric: {n}, aggregation: !function utils.aggregate, higher_is_better: true}}\n" for n in names)
    (folder / "chef_icl_mmbench_fixture.yaml").write_text(yaml_text)
    out = tmp_path / "out"
    proc = run_offline([str(BIN / "lmms-eval"), "--model", "chef", "--model_args", "preset=smoke",
                        "--tasks", "chef_icl_mmbench_fixture", "--include_path", str(folder),
                        "--output_path", str(out), "--log_samples"], tmp_path)
    assert glob_results(out), proc.stderr[-4000:]
    m = results_file(out)[1]["results"]["chef_icl_mmbench_fixture"]
    m = {k.split(",")[0]: v for k, v in m.items() if "," in k and "stderr" not in k}
    assert m["n_docs"] == 13 and m["n_failed"] == 0 and m["n_groups"] == 4
    responses = [json.loads(response(s)) for s in samples(out, "chef_icl_mmbench_fixture")]
    groups = [r["group"] for r in responses]
    assert sorted(map(int, groups)) == sorted(r["index"] % 1_000_000 for r in mmbench_circular_rows())
    right = {}
    for group, r in zip(groups, responses):
        right[group] = right.get(group, True) and r["variants"][0]["pred"] == r["variants"][0]["gold"]
    assert m["acc_circular"] == pytest.approx(sum(right.values()) / 4)
    # acc: ChEF's vanilla accuracy on the original questions (index < 1e6); acc_per_copy: every copy
    hit = [r["variants"][0]["pred"] == r["variants"][0]["gold"] for r in responses]
    orig = [h for h, r in zip(hit, responses) if r["scoring"]["original"]]
    assert len(orig) == 4 and m["acc"] == pytest.approx(sum(orig) / 4)
    assert m["acc_per_copy"] == pytest.approx(sum(hit) / 13)


def glob_results(out):
    return list(Path(out).glob("**/*_results.json"))
