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


def test_t2i_stops_with_one_line_when_the_first_batch_fails_whole(tmp_path, monkeypatch):
    """WISE scores a doc without an image as 0: a generator that draws nothing must stop the
    run (exit 1, the exception named) instead of reporting zeros."""
    import pytest

    from lmms_genbench.core.errors import ActionableError

    model = TextToImageModel(generator="smoke", output_dir=str(tmp_path), **{"generator.size": 32})
    monkeypatch.setattr(model.generator, "generate", lambda prompts, seeds: [
        GenerationFailure("pipeline raised ValueError: `height` and `width` have to be divisible by 16")] * len(prompts))
    with pytest.raises(ActionableError) as caught:
        model.generate_until([_request("a", 0, "WISE"), _request("b", 1, "WISE")])
    line = str(caught.value)
    assert "\n" not in line and "every prompt of the first batch failed (2 of 2)" in line
    assert "ValueError: `height` and `width` have to be divisible by 16" in line and "Fix:" in line


def test_t2i_warns_how_many_prompts_have_no_image(tmp_path, monkeypatch):
    from lmms_eval.utils import eval_logger

    model = TextToImageModel(generator="smoke", output_dir=str(tmp_path), **{"generator.size": 32})
    real = model.generator.generate
    monkeypatch.setattr(model.generator, "generate", lambda prompts, seeds: [
        GenerationFailure("refused") if p == "bad" else img for p, img in zip(prompts, real(prompts, seeds))])
    seen = []
    handle = eval_logger.add(lambda message: seen.append(str(message)), level="WARNING")
    try:
        model.generate_until([_request("fine", 0, "WISE"), _request("bad", 1, "WISE")])
    finally:
        eval_logger.remove(handle)
    assert any("1 of 2 prompts have no image (first reason: refused)" in m for m in seen)
