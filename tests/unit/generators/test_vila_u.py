"""unified=vila_u's pieces on their own: the sampler's draw, prompts, pixels, the tokenizer's model edit,
checkpoint reading and the errors users see (the authors' numbers: test_vila_u_parity.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentencepiece")

from PIL import Image  # noqa: E402

from lmms_genbench.core.failures import GeneratorConfigError  # noqa: E402
from lmms_genbench.generators.unified.registry import build_unified  # noqa: E402
from lmms_genbench.generators.unified.vila_u import checkpoint, depth, inputs  # noqa: E402
from lmms_genbench.generators.unified.vila_u.tokenizer import LlamaSlowTokenizer, without_dummy_prefix  # noqa: E402

TINY = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "vila_u" / "vila-u-7b-256"


@pytest.mark.parametrize("seed", [0, 1, 2024])
def test_draw_is_what_torch_multinomial_draws_from_the_same_generator_state(seed):
    probs = torch.softmax(torch.randn(1, 50, generator=torch.Generator().manual_seed(seed + 1)), dim=-1)
    torch.manual_seed(seed)
    expected = torch.multinomial(probs, 1).item()
    assert depth.draw(probs, [torch.Generator().manual_seed(seed)]).item() == expected


def test_filtered_probs_keeps_the_top_k_then_the_smallest_set_reaching_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert depth.filtered_probs(logits, 1.0, 2, None)[0].tolist() == pytest.approx([0.625, 0.375, 0, 0])
    # 0.5 < 0.7, 0.8 >= 0.7: the second code crosses top_p and stays
    assert depth.filtered_probs(logits, 1.0, None, 0.7)[0].tolist() == pytest.approx([0.625, 0.375, 0, 0])
    assert depth.filtered_probs(logits, 1.0, None, 0.4)[0].tolist() == pytest.approx([1, 0, 0, 0])


def test_the_conversation_is_vicuna_v1():
    assert inputs.conversation("a cat").endswith(" USER: a cat ASSISTANT:")
    assert inputs.conversation(" ", image_generation=True).endswith(" questions. USER:ASSISTANT: <im_start>")
    assert inputs.describe_prompt("What is it?").endswith(" USER: <image>\nWhat is it? ASSISTANT:")


def test_pad_squares_the_image_on_the_mean_colour_before_resizing():
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    pixels = inputs.pixel_array(image, 40, "pad")
    assert pixels.shape == (3, 40, 40)
    assert pixels[:, 0, 0].tolist() == pytest.approx([127 / 255 * 2 - 1] * 3, abs=1e-6)  # padding
    assert pixels[:, 20, 20].tolist() == pytest.approx([1, -1, -1])  # the image
    with pytest.raises(ValueError, match="image_aspect_ratio"):
        inputs.pixel_array(image, 40, "anyres")


def test_the_tokenizer_model_loses_its_dummy_prefix_and_nothing_else():
    import sentencepiece as spm

    raw = (TINY / "llm" / "tokenizer.model").read_bytes()
    plain, edited = spm.SentencePieceProcessor(), spm.SentencePieceProcessor()
    plain.LoadFromSerializedProto(raw)
    edited.LoadFromSerializedProto(without_dummy_prefix(raw))
    assert plain.GetPieceSize() == edited.GetPieceSize()
    assert plain.EncodeAsPieces("red cat")[0].startswith("\u2581")
    assert not edited.EncodeAsPieces("red cat")[0].startswith("\u2581")
    assert edited.EncodeAsPieces(" red cat") == plain.EncodeAsPieces("red cat")


def test_the_tokenizer_reads_added_tokens_and_round_trips_text():
    tok = LlamaSlowTokenizer(TINY / "llm")
    assert len(tok) == 404 and tok.piece_id("<im_start>") == 400
    ids = tok.encode("a red cat <im_start>")
    assert ids[0] == tok.bos_token_id and ids[-1] == 400
    assert tok.decode(ids) == "a red cat "


def test_a_missing_tensor_is_named():
    projector = checkpoint.Projector("mlp2x_gelu", 4, 8)
    with pytest.raises(KeyError, match="lacks 2 tensors, e.g. layers.2.bias"):
        checkpoint.fill(projector, {"layers.0.weight": torch.zeros(8, 4), "layers.0.bias": torch.zeros(8)}, "", "p")
    with pytest.raises(ValueError, match="mm_projector_type"):
        checkpoint.Projector("qformer", 4, 8)


def test_the_known_siglip_needs_no_download():
    config = checkpoint.siglip_vision_config(Path("/nonexistent"), "google/siglip-large-patch16-256")
    assert (config.hidden_size, config.image_size, config.patch_size) == (1024, 256, 16)


def test_a_folder_that_is_not_vila_u_is_a_config_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(GeneratorConfigError, match="unified.pretrained"):
        build_unified("vila_u", pretrained=str(tmp_path), device="cpu", dtype="float32")


def test_a_checkpoint_under_model_is_found(tmp_path):
    (tmp_path / "model").symlink_to(TINY, target_is_directory=True)
    assert checkpoint.resolve_folder(str(tmp_path)) == tmp_path / "model"
    assert checkpoint.resolve_folder(str(TINY)) == TINY


def test_the_published_size_builds_on_the_meta_device(monkeypatch):
    from lmms_genbench.generators.unified.vila_u import real

    monkeypatch.setitem(real.LLM, "num_hidden_layers", 1)  # 32 such layers: seconds more, same code
    counts = {name: sum(p.numel() for p in net.parameters()) for name, net in real.parts("meta", torch.bfloat16).items()}
    layer = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert counts["llm"] + 31 * layer == 6_738_448_384  # LLaMA-2-7B with 4 added tokens
    assert counts["tower"] + counts["depth"] + counts["projector"] < 1_000_000_000
    assert torch.get_default_dtype() == torch.float32
