"""Scoring reads no image back where the engine held it (issue 24, item 1): the writer holds
each image it stores under its file's sha256 and the scorers' loader hands out a copy; a file
changed since is decoded; memory stays bounded; the scores are those of decoding the files."""

import hashlib

import pytest
from PIL import Image

from lmms_genbench.store import held
from lmms_genbench.store import encode_png
from lmms_genbench.metrics.scorers.genception import GenCeptionScorer

from tests.support.fakes import cycle_model as _model
from tests.support.fakes import cycle_request as _request


@pytest.fixture
def opens(monkeypatch):
    """Every image file PIL opens, by any path in this process (the engine's, the scorer's)."""
    seen = []
    real = Image.open

    def counting(fp, *args, **kwargs):
        seen.append(fp)
        return real(fp, *args, **kwargs)

    monkeypatch.setattr(Image, "open", counting)
    held.clear()
    yield seen
    held.clear()


def _draw_and_score(tmp_path, n=4):
    model = _model(tmp_path)
    model.engine.progress = False
    images = [Image.new("RGB", (16, 16), (30 * i, 100, 200)) for i in range(n)]
    model.task_dict = {"sdp": {"test": [{"chain_id": f"c{i}", "image": im} for i, im in enumerate(images)]}}
    gen_kwargs = {"iterations": 2, "generate_prompt": "{description}", "scorer": {"fid_features": "none"}}
    answers = model.generate_until([_request(i, dict(gen_kwargs)) for i in range(n)])
    docs = [{"chain_id": f"c{i}", "category": "x"} for i in range(n)]

    def score():
        scorer = GenCeptionScorer()
        items = [scorer.process_results(doc, [a]) for doc, a in zip(docs, answers)]
        return [scorer.aggregate([item[m] for item in items]) for m in ("gc@2", "s@1", "s@2")]

    return score


def test_scoring_after_drawing_decodes_no_stored_image(tmp_path, opens, offline):
    score = _draw_and_score(tmp_path)
    opens.clear()
    from_memory = score()
    assert opens == [] and held.counts() == {"decoded": 0, "held": 4 * 3}  # seed and two redraws per chain

    held.clear()  # another process: every image decoded from its file, the same scores
    assert score() == from_memory and len(opens) == 4 * 3 and held.counts()["decoded"] == 4 * 3


def test_a_file_changed_after_it_was_written_is_decoded(tmp_path, opens):
    image = Image.new("RGB", (8, 8), (1, 2, 3))
    path = tmp_path / "000.png"
    blob = encode_png(image)
    path.write_bytes(blob)
    held.hold(hashlib.sha256(blob).hexdigest(), image)
    copy = held.load_rgb(path)
    assert copy.tobytes() == image.tobytes() and copy is not image and opens == []
    Image.new("RGB", (8, 8), (9, 9, 9)).save(path)
    assert held.load_rgb(path).getpixel((0, 0)) == (9, 9, 9) and len(opens) == 1


def test_held_images_are_bounded_by_bytes(monkeypatch, opens):
    monkeypatch.setattr(held, "HELD_BYTES", 3 * 8 * 8 * 3)  # three 8 px RGB images
    for i in range(5):
        held.hold(f"sha{i}", Image.new("RGB", (8, 8), (i, i, i)))
    assert list(held.held().images) == ["sha2", "sha3", "sha4"] and held.held().size == held.HELD_BYTES
    held.hold("big", Image.new("RGB", (64, 64)))  # larger than the bound: not held
    assert "big" not in held.held().images
