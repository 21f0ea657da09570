"""Janus-Pro in DeepSeek's own layout, output for output against DeepSeek's code, prompted as Janus-Pro.

tests/support/data/parity/janus_pro7b/Janus-Pro-tiny is a tiny random-weight checkpoint that
DeepSeek's own classes (github.com/deepseek-ai/Janus at 1daa72f) built at a Janus-Pro-like geometry,
with Janus-Pro's published processor files (its special_tokens_map.json lists ``<|User|>`` and
``<|Assistant|>``); expected.json is what their code output on it with the README's Janus-Pro
prompts (how: the README there). Each test loads it as a user names it
(``unified=janus,unified.pretrained=<folder>``); the last ones go through the run's own planning
and start check (``--model cycle``) for a Pro folder, a Janus-1.3B folder renamed as Pro, and a
folder that cannot say which it is.
"""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from lmms_genbench.generators.unified import build_unified  # noqa: E402
from tests.support.janus_records import assert_prompts_and_pixels, assert_understanding_logits
from tests.support.threads import single_thread  # noqa: E402

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity"
ROOT = PARITY / "janus_pro7b"
FOLDER = ROOT / "Janus-Pro-tiny"
EXPECTED = json.loads((ROOT / "expected.json").read_text(encoding="utf-8"))
LOGITS_ATOL = 1e-4  # float32 on the CPU, as test_janus13_parity.py; measured: 0
PIXEL_LEVELS = 1  # float32 pixels quantised to 8 bits (issue 53); measured: 0
PRO, JANUS = ("<|User|>", "<|Assistant|>"), ("User", "Assistant")


@pytest.fixture(scope="module")
def pro():
    with single_thread():
        yield build_unified("janus", pretrained=str(FOLDER), device="cpu", dtype="float32")


def test_the_roles_and_prompts_are_deepseeks_janus_pro_format(pro):
    chat = pro._chat
    assert chat.roles == PRO  # read from special_tokens_map.json, not from the folder's name
    assert (pro.image_size, pro.image_tokens) == (48, 36)  # its 48 px tower in 8 px patches; 6x6 codes
    # the role tokens tokenizer.json lacks are added as LlamaTokenizerFast adds them (ids 374..381)
    assert all(chat.tokenizer.token_to_id(t) == i for t, i in EXPECTED["special_token_ids"].items())
    assert_prompts_and_pixels(pro, EXPECTED, ROOT / "image.png")


def test_understanding_logits_match(pro):
    with single_thread():
        assert_understanding_logits(pro, EXPECTED, ROOT / "image.png", EXPECTED["understanding_logits_first_image_row"],
                                    LOGITS_ATOL)


def test_greedy_description_matches(pro, monkeypatch):
    """DeepSeek's greedy answer: a pad token, seven words, EOS (before the 12-token limit); the ids
    are those describe() itself generated (what it hands to decoding)."""
    rows = []
    decode = pro.decode_texts
    monkeypatch.setattr(pro, "decode_texts", lambda ids: rows.extend(ids) or decode(ids))
    with single_thread():
        texts = pro.describe([Image.open(ROOT / "image.png")], EXPECTED["question"],
                             {"max_new_tokens": 12, "temperature": 0})
    assert texts == [EXPECTED["description_text"]]
    assert rows == [EXPECTED["description_token_ids"]]


@pytest.mark.parametrize("run", ["sampled", "sampled_seed7", "greedy"])
def test_drawing_matches_codes_and_pixels(pro, run, monkeypatch):
    """As test_janus13_parity.py: DeepSeek's generate() at temperature 1 after torch.manual_seed(seed)
    (ours: image_temperature 1, that seed), and at 1e-6 (ours: image_temperature 0)."""
    expected = EXPECTED["generation"][run]
    codes_seen = []
    decode = pro.model.decode_image_tokens
    monkeypatch.setattr(pro.model, "decode_image_tokens", lambda codes: codes_seen.append(codes) or decode(codes))
    monkeypatch.setattr(pro, "image_temperature", 0.0 if run == "greedy" else 1.0)
    with single_thread():
        image = pro.generate([EXPECTED["generation_prompt"]], [expected["seed"]])[0]
    assert codes_seen[0][0].tolist() == expected["image_codes"]  # integer codes: exact on any CPU
    assert image.size == (48, 48)
    pixels = np.asarray(image).reshape(-1).astype(int)
    assert np.abs(pixels - np.asarray(expected["pixels_uint8"])).max() <= PIXEL_LEVELS


# -- the front door: the run's planning and start check -------------------------------------

def _linked(src: Path, dst: Path, drop: str = "") -> Path:
    """A tree of links to ``src``'s files, without ``drop``."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(drop) if drop else None,
                    copy_function=lambda a, b: os.symlink(os.path.abspath(a), b))
    return dst


def _cycle_roles(folder: Path, **extra) -> tuple[str, str]:
    """The roles of the unified model a ``--model cycle`` run plans and loads for ``folder``."""
    from lmms_genbench.models.cycle import CycleModel

    args = {"unified": "janus", "unified.pretrained": str(folder), "unified.device": "cpu", "unified.dtype": "float32",
            **{f"unified.{k}": v for k, v in extra.items()}}
    with single_thread():
        return CycleModel(**args).generator.load()._chat.roles


def _start_problems(folder: Path, **extra) -> list[str]:
    from lmms_genbench.command import read_command
    from lmms_genbench.preflight import check_run

    args = {"unified": "janus", "unified.pretrained": str(folder), "unified.device": "cpu", "unified.dtype": "float32",
            **{f"unified.{k}": v for k, v in extra.items()}}
    return [f"{p.cause} {p.fix}" for p in check_run(read_command("cycle", args))]


def test_a_run_prompts_each_folder_with_the_roles_its_files_name(tmp_path):
    """A Pro folder gets <|User|>/<|Assistant|>; a Janus-1.3B folder renamed Janus-Pro-7B keeps
    User/Assistant (before: roles by name, so it got Pro's); unified.chat_format overrides."""
    assert _cycle_roles(FOLDER) == PRO
    renamed = _linked(PARITY / "janus13" / "Janus-1.3B", tmp_path / "Janus-Pro-7B")
    assert _start_problems(renamed) == []
    assert _cycle_roles(renamed) == JANUS
    assert _cycle_roles(renamed, chat_format="janus_pro") == PRO


def test_a_folder_that_cannot_say_its_roles_stops_the_run_at_start(tmp_path, tiny_janus):
    bare = _linked(FOLDER, tmp_path / "Janus-Pro-7B", drop="special_tokens_map.json")
    problems = _start_problems(bare)
    assert len(problems) == 1 and "has no special_tokens_map.json" in problems[0], problems
    assert "set unified.chat_format=janus (roles User/Assistant) or janus_pro" in problems[0]
    with pytest.raises(Exception, match="set unified.chat_format=janus") as err:  # the load says the same
        build_unified("janus", pretrained=str(bare), device="cpu", dtype="float32")
    assert "\n" not in str(err.value).strip()
    assert _start_problems(bare, chat_format="janus_pro") == []
    # a transformers-format folder's roles are its chat template's
    problems = _start_problems(Path(tiny_janus), chat_format="janus")
    assert len(problems) == 1 and "unified.chat_format: 'janus' applies to DeepSeek-format checkpoints" in problems[0]
    with pytest.raises(ValueError, match="chat_format: expected one of"):
        build_unified("janus", pretrained=str(FOLDER), device="cpu", dtype="float32", chat_format="pro")
