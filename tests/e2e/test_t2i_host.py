"""``--model t2i`` on a text-to-image task that ships with lmms-eval 0.7.3: WISE.

The task runs unchanged (its YAML is included as is, its utils.py scores) on a local
schema-true copy of its dataset (``tests/support/wise_fixture.py``). WISE scores each image
with an OpenAI-compatible judge; offline, the judge is a local stub server that answers
fixed scores and records what it was sent. So this proves the path from our answer to
WISE's ``process_results`` and its judge call, not any score; and that a doc ``t2i`` could
not draw (here an empty prompt) is N/A and counted, not scored 0 (``host_failures``).
"""

import base64
import json
from pathlib import Path

import pytest

from tests.support.lmms_eval_runs import BIN, response, results_file, run, samples
from tests.support.openai_stub import StubHandler, chat_completion, serve
from tests.support.wise_fixture import ROWS, write_wise_hub_copy


REPLY = "Consistency: 2\nRealism: 1\nAesthetic Quality: 0"
WISCORE = (0.7 * 2 + 0.2 * 1 + 0.1 * 0) / 2  # WISE's formula for REPLY


class _Judge(StubHandler):
    def answer(self, body):  # the chat-completions call of the openai client
        text, image = body["messages"][1]["content"]
        self.server.calls.append((text["text"], base64.b64decode(image["image_url"]["url"].split(",", 1)[1])))
        return 200, chat_completion(body["model"], REPLY)


@pytest.fixture
def judge():
    server = serve(_Judge)
    server.calls = []
    yield server
    server.shutdown()


def test_wise_scores_the_images_that_t2i_returns_and_a_failed_doc_is_na(tmp_path, judge):
    import lmms_eval.tasks

    builtin = Path(lmms_eval.tasks.__file__).parent / "WISE" / "WISE.yaml"
    rows = [*ROWS[:-1], (*ROWS[-1][:3], "   ", ROWS[-1][4])]  # chemistry's prompt is blank: t2i fails it
    failed_id = len(rows) - 1
    hub_copy = write_wise_hub_copy(tmp_path / "Yuwei-Niu_WISE", rows)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "wise_fixture.yaml").write_text(
        f"include: {builtin}\ntask: wise_fixture\ndataset_path: {hub_copy}\n")
    out, images = tmp_path / "out", tmp_path / "images"
    proc = run([str(BIN / "lmms-eval"), "--model", "t2i",
                "--model_args", f"generator=smoke,generator.size=32,output_dir={images}",
                "--tasks", "wise_fixture", "--include_path", str(tasks),
                "--output_path", str(out), "--log_samples"], tmp_path, timeout=900,
               WISE_API_KEY="offline-stub", WISE_BASE_URL=f"http://127.0.0.1:{judge.server_port}/v1",
               WISE_CALL_DELAY="0", NO_PROXY="127.0.0.1,localhost")
    _, results = results_file(out)
    scores = results["results"]["wise_fixture"]
    for metric in ("culture", "time", "space", "biology", "physics"):
        assert scores[f"WISE_{metric}_score,none"] == pytest.approx(WISCORE), (metric, proc.stderr[-3000:])
    # the failed doc is left out, not scored 0 (WISE alone: chemistry 0.0, overall lowered)
    assert scores["WISE_chemistry_score,none"] is None  # lmms-eval's table prints N/A
    assert scores["WISE_overall_wiscore,none"] == pytest.approx(WISCORE)
    assert scores["n_failed,none"] == 1

    logged = samples(out, "wise_fixture")
    assert len(logged) == len(rows)
    sent = {text: png for text, png in judge.calls}
    assert len(judge.calls) == len(rows) - 1  # nothing to judge for the failed doc
    for sample in logged:
        answer = json.loads(response(sample))  # what our model returned, as WISE parses it
        if sample["doc_id"] == failed_id:
            assert answer == {"text": "", "images": [], "status": "failed", "reason": "empty prompt",
                              "doc_id": failed_id}
            failure = {"score": None, "status": "failed", "reason": "empty prompt"}
            assert sample["WISE_overall_wiscore"] == sample["WISE_chemistry_score"] == failure
            continue
        assert answer == {"text": "", "images": [str(images / "wise_fixture" / f"{sample['doc_id']:04d}_s0.png")]}
        scored = sample["WISE_overall_wiscore"]  # what WISE's process_results made of it
        assert scored["status"] == "ok" and scored["image_path"] == answer["images"][0]
        assert scored["prompt_id"] == rows[sample["doc_id"]][0] and sample["input"] == rows[sample["doc_id"]][3]
        # the judge got that very file, with that doc's prompt
        prompt_text = next(t for t in sent if f'PROMPT: "{sample["input"]}"' in t)
        assert sent[prompt_text] == Path(answer["images"][0]).read_bytes()
