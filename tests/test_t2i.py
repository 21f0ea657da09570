import json

from lmms_eval.api.instance import Instance

from lmms_genbench.generators import GenerationFailure
from lmms_genbench.models.t2i import TextToImageModel


def _request(prompt, doc_id, task="geneval"):
    return Instance("generate_until", (prompt, {}, None, doc_id, task, "test"), 0,
                    {"task": task, "doc_id": doc_id, "repeats": 1})


def test_t2i_answers_in_the_hosts_text_to_image_format_and_reports_failures(tmp_path):
    model = TextToImageModel(generator="smoke", output_dir=str(tmp_path), num_images_per_prompt=2,
                             **{"generator.size": 32, "generator.batch_size": 3})
    out = [json.loads(o) for o in model.generate_until([_request("a red apple", 0), _request("   ", 1), _request("a blue car", 2)])]
    folder = tmp_path / "geneval"
    # lmms-eval 0.7.3's generation tasks read answer["images"] (WISE: the first path)
    assert out[0] == {"text": "", "images": [str(folder / "0000_s0.png"), str(folder / "0000_s1.png")]}
    assert out[2]["images"] == [str(folder / "0002_s0.png"), str(folder / "0002_s1.png")]
    assert out[1] == {"text": "", "images": [], "status": "failed", "reason": "empty prompt", "doc_id": 1}
    assert sorted(p.name for p in folder.iterdir()) == ["0000_s0.png", "0000_s1.png", "0002_s0.png", "0002_s1.png"]
    stamp = (folder / "0000_s0.png").stat().st_mtime_ns
    assert json.loads(model.generate_until([_request("a red apple", 0)])[0]) == out[0]  # stored images are reused
    assert (folder / "0000_s0.png").stat().st_mtime_ns == stamp


def test_t2i_paths_are_absolute_and_a_failed_image_fails_its_doc_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = TextToImageModel(generator="smoke", output_dir="rel", **{"generator.size": 32})
    real = model.generator.generate
    monkeypatch.setattr(model.generator, "generate", lambda prompts, seeds: [
        GenerationFailure("refused") if p == "bad" else img for p, img in zip(prompts, real(prompts, seeds))])
    ok, bad = (json.loads(o) for o in model.generate_until([_request("fine", 0, "WISE"), _request("bad", 1, "WISE")]))
    assert ok == {"text": "", "images": [str(tmp_path / "rel" / "WISE" / "0000_s0.png")]}
    assert bad == {"text": "", "images": [], "status": "failed", "reason": "refused", "doc_id": 1}
