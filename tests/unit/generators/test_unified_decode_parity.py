"""Each unified port decodes text exactly as its authors' pinned transformers decodes it.

transformers 4.x applies ``clean_up_tokenization_spaces`` (no space before ``.``, ``,``, ``'s``, ...)
wherever the tokenizer config asks, or where the config says nothing and that version's default
for the tokenizer class is on; transformers 5 skips it for byte-level BPE tokenizers. The ids of
texts with spaces before punctuation and what the authors' tokenizer call returned on them in
their environment are recorded in tests/support/data/parity/<port>/authors_decode.json (the
READMEs there say how); here each port's own decoding path decodes the same ids.
"""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

PARITY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity"


def _cases(port: str) -> list[dict]:
    record = json.loads((PARITY / port / "authors_decode.json").read_text(encoding="utf-8"))
    assert record["cases"] and any(" ." in c["text"] or " ," in c["text"] for c in record["cases"])
    return record["cases"]


def _tokenizer_folder(port: str, sub: str, keyed: bool, tmp_path: Path) -> Path:
    """The parity folder, or (``keyed`` False) its copy without the clean-up key."""
    folder = PARITY / port / sub
    return folder if keyed else _without_key(folder, tmp_path / port)


def _expected(case: dict, keyed: bool) -> str:
    return case["decoded" if keyed else "decoded_without_config_key"]


def _without_key(src: Path, dst: Path) -> Path:
    """The tokenizer folder with ``clean_up_tokenization_spaces`` removed from its config."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors", "diffusion-decoder"))
    config = json.loads((dst / "tokenizer_config.json").read_text())
    config.pop("clean_up_tokenization_spaces", None)
    (dst / "tokenizer_config.json").write_text(json.dumps(config))
    return dst


def test_the_cleanup_is_transformers_own():
    from transformers import PreTrainedTokenizerBase

    from lmms_genbench.generators.unified.common import authors_text

    text = "a cat . it 's red , isn 't it ? yes ! we 've ' q ' they 're I 'm"
    cleaned = PreTrainedTokenizerBase.clean_up_tokenization(None, text)
    assert authors_text(text, {"clean_up_tokenization_spaces": True}, default=False) == cleaned
    assert authors_text(text, {}, default=True) == cleaned
    assert authors_text(text, {"clean_up_tokenization_spaces": False}, default=True) == text


@pytest.mark.parametrize("keyed", [True, False])
def test_showo_decodes_as_transformers_4_41(tmp_path, keyed):
    from transformers import AutoTokenizer

    from lmms_genbench.generators.unified.showo.model import ShowoUnified

    folder = PARITY / "showo" / "phi-1_5"
    if not keyed:  # CodeGenTokenizer's default under 4.41.1 is on
        folder = _without_key(folder, tmp_path / "phi")
    model = ShowoUnified.__new__(ShowoUnified)
    model.vocab = SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(folder, padding_side="left"))
    for case in _cases("showo"):
        assert model.decode_text(case["ids"]) == case["decoded" if keyed else "decoded_without_config_key"]


@pytest.mark.parametrize("keyed", [True, False])
def test_janus_deepseek_decodes_as_transformers_4_48(tmp_path, keyed):
    from lmms_genbench.generators.unified.janus_deepseek import DeepSeekChat

    folder = PARITY / "janus13" / "Janus-1.3B"
    if not keyed:
        folder = _without_key(folder, tmp_path / "janus")
    chat = DeepSeekChat.read(str(folder))
    for case in _cases("janus13"):
        assert chat.decode(case["ids"]) == case["decoded" if keyed else "decoded_without_config_key"]


def test_janus_transformers_format_cleans_where_its_config_asks(tiny_janus):
    from transformers import AutoProcessor, PreTrainedTokenizerBase

    from lmms_genbench.generators.unified.janus import JanusUnified

    model = JanusUnified.__new__(JanusUnified)
    model._chat, model.processor = None, AutoProcessor.from_pretrained(tiny_janus)
    tokenizer = model.processor.tokenizer
    ids = tokenizer("a cat . it 's red", add_special_tokens=False).input_ids
    raw = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    tokenizer.init_kwargs["clean_up_tokenization_spaces"] = False
    assert model.decode_texts([ids]) == [raw]
    tokenizer.init_kwargs["clean_up_tokenization_spaces"] = True
    cleaned = PreTrainedTokenizerBase.clean_up_tokenization(None, raw)
    assert cleaned != raw and model.decode_texts([ids]) == [cleaned]


@pytest.mark.parametrize("keyed", [True, False])
def test_bagel_decodes_as_transformers_4_49(tmp_path, keyed):
    from transformers import AutoTokenizer

    from lmms_genbench.generators.unified.bagel.loading import special_ids
    from lmms_genbench.generators.unified.bagel.unified import BagelUnified

    model = BagelUnified.__new__(BagelUnified)
    model.tokenizer = AutoTokenizer.from_pretrained(_tokenizer_folder("bagel", "BAGEL-7B-MoT-tiny", keyed, tmp_path))
    model.special = special_ids(model.tokenizer)
    # as the inferencer's loop: generated ids end at <|im_end|>
    assert [model.decode_text([*c["ids"], model.special.eos]) for c in _cases("bagel")] == [
        _expected(c, keyed) for c in _cases("bagel")]


@pytest.mark.parametrize("keyed", [True, False])
def test_blip3o_decodes_as_transformers_4_51(tmp_path, keyed):
    from transformers import AutoTokenizer

    from lmms_genbench.generators.unified.blip3o.model import Blip3oUnified

    model = Blip3oUnified.__new__(Blip3oUnified)
    model.tokenizer = AutoTokenizer.from_pretrained(_tokenizer_folder("blip3o", "BLIP3o-Model-4B", keyed, tmp_path))
    cases = _cases("blip3o")
    assert model.decode_texts([c["ids"] for c in cases]) == [_expected(c, keyed) for c in cases]


@pytest.mark.parametrize("keyed", [True, False])
def test_vila_u_decodes_as_transformers_4_36(tmp_path, keyed):
    pytest.importorskip("sentencepiece")
    from lmms_genbench.generators.unified.vila_u.tokenizer import LlamaSlowTokenizer

    folder = PARITY / "vila_u" / "vila-u-7b-256" / "llm"
    if not keyed:
        folder = _without_key(folder, tmp_path / "llm")
    tokenizer = LlamaSlowTokenizer(folder)
    for case in _cases("vila_u"):
        assert tokenizer.decode(case["ids"]) == case["decoded" if keyed else "decoded_without_config_key"]


# -- Janus-Pro in DeepSeek's format: the roles DeepSeek's README gives it -----------------------

def test_janus_pro_in_deepseek_format_is_prompted_with_its_own_roles(tmp_path):
    """parity/janus13/pro_prompt_ids.json: DeepSeek's VLChatProcessor (1daa72f) on the tiny
    DeepSeek-format folder named Janus-Pro-7B, prompted as the README's Janus-Pro section. The
    folder's special_tokens_map.json is Janus-1.3B's (no <|User|>), so the roles come from
    unified.chat_format here (a Pro folder's own map names them: test_janus_pro_parity.py)."""
    from lmms_genbench.generators.unified.janus_chat import CHAT_FORMATS, DeepSeekChat, chat_roles

    assert chat_roles("any", {"additional_special_tokens": ["<|User|>", "<|Assistant|>"]}) == CHAT_FORMATS["janus_pro"]
    assert chat_roles("any", {"bos_token": "<s>"}) == CHAT_FORMATS["janus"] == ("User", "Assistant")
    record = json.loads((PARITY / "janus13" / "pro_prompt_ids.json").read_text(encoding="utf-8"))
    folder = tmp_path / "Janus-Pro-7B"
    shutil.copytree(PARITY / "janus13" / "Janus-1.3B", folder, ignore=shutil.ignore_patterns("*.safetensors"))
    assert DeepSeekChat.read(str(folder)).roles == ("User", "Assistant")  # by content, whatever the name
    chat = DeepSeekChat.read(str(folder), "janus_pro")
    assert chat.understanding_ids(record["understanding"]["question"]) == record["understanding"]["input_ids"]
    assert chat.generation_ids(record["generation"]["prompt"]) == record["generation"]["input_ids"]


def test_janus_transformers_format_pixels_truncate_as_its_postprocess():
    """transformers' JanusImageProcessor.postprocess clips then casts to uint8 (truncation), as
    DeepSeek's generation_inference.py does: 0.999 of a level stays below it."""
    torch = pytest.importorskip("torch")
    from lmms_genbench.generators.unified.janus import to_uint8

    levels = torch.tensor([10.999, 254.6, 0.4, 300.0]) / 255 * 2 - 1  # [-1, 1] (mean 0.5, std 0.5)
    pixels = levels.view(1, 1, 4, 1).expand(1, 1, 4, 3)
    assert to_uint8(torch, pixels, [0.5] * 3, [0.5] * 3)[0, 0, :, 0].tolist() == [10, 254, 0, 255]
