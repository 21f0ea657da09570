import json

from lmms_eval.api.instance import Instance

from lmms_genbench.models.t2i import TextToImageModel


def _request(prompt, doc_id):
    return Instance("generate_until", (prompt, {}, None, doc_id, "geneval", "test"), 0,
                    {"task": "geneval", "doc_id": doc_id, "repeats": 1})


def test_t2i_writes_upstream_layout_and_reports_failures(tmp_path):
    model = TextToImageModel(generator="smoke", output_dir=str(tmp_path), num_images_per_prompt=2,
                             **{"generator.size": 32, "generator.batch_size": 3})
    out = model.generate_until([_request("a red apple", 0), _request("   ", 1), _request("a blue car", 2)])
    folder = tmp_path / "geneval"
    assert out[0] == out[2] == str(folder)
    assert json.loads(out[1]) == {"status": "failed", "reason": "empty prompt", "doc_id": 1}
    assert sorted(p.name for p in folder.iterdir()) == ["0000_s0.png", "0000_s1.png", "0002_s0.png", "0002_s1.png"]
    stamp = (folder / "0000_s0.png").stat().st_mtime_ns
    model.generate_until([_request("a red apple", 0)])  # stored images are reused
    assert (folder / "0000_s0.png").stat().st_mtime_ns == stamp
