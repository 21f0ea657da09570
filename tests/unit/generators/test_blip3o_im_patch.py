"""The authors' load-time ``<im_patch>`` resize, measured: on a checkpoint whose tokenizer lacks it (the
published one: 151,668 rows), the authors' builder.py adds the token and ``resize_token_embeddings``
appends one randomly initialised row; the port keeps the checkpoint's rows. Recorded with the authors'
code on the tiny parity checkpoint cut to 151,668 rows: tests/support/data/parity/blip3o/
authors_im_patch.json (README.md there says how).

Effect: every other logit, the greedy ids and the drawn pixels are unchanged; the authors' logits have
one more entry (0.0004 here, far below the top logit 11.79), which greedy text could pick only if it won.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from lmms_genbench.generators.unified import build_unified
from tests.support.blip3o_inputs import describe_inputs
from tests.support.threads import single_thread

DATA = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "blip3o"
AUTHORS = json.loads((DATA / "authors_im_patch.json").read_text(encoding="utf-8"))
ROWS = 151668  # Qwen2.5's 151,665 tokens + train.py's [IMG], [/IMG], <image>
LOGIT_ATOL = 1e-4  # float32 on both sides, as test_blip3o_parity.py


def _without_im_patch(folder: Path) -> Path:
    """The tiny checkpoint as published: no ``<im_patch>`` in the tokenizer, 151,668 embedding rows."""
    source = DATA / "BLIP3o-Model-4B"
    folder.mkdir()
    for name in ("vocab.json", "merges.txt", "generation_config.json", "diffusion-decoder"):
        os.symlink(source / name, folder / name)
    for name in ("added_tokens.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json", "config.json"):
        data = json.loads((source / name).read_text(encoding="utf-8"))
        if name == "added_tokens.json":
            data.pop("<im_patch>")
        elif name == "tokenizer_config.json":
            data["added_tokens_decoder"].pop(str(ROWS))
            data["additional_special_tokens"] = [t for t in data.get("additional_special_tokens", []) if t != "<im_patch>"]
        elif name == "special_tokens_map.json":
            data["additional_special_tokens"] = [t for t in data.get("additional_special_tokens", [])
                                                 if (t if isinstance(t, str) else t["content"]) != "<im_patch>"]
        elif name == "tokenizer.json":
            data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<im_patch>"]
        else:
            data["vocab_size"] = ROWS
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
    weights = safetensors_torch.load_file(source / "model.safetensors")
    weights["model.embed_tokens.weight"] = weights["model.embed_tokens.weight"][:ROWS].clone()
    safetensors_torch.save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_the_resize_changes_no_logit_and_no_greedy_id_beyond_its_own_row(tmp_path):
    assert (AUTHORS["rows_before_resize"], AUTHORS["rows_after_resize"]) == (ROWS, ROWS + 1)
    with single_thread():
        model = build_unified("blip3o", pretrained=str(_without_im_patch(tmp_path / "BLIP3o-Model-4B")),
                              processor=str(DATA / "Qwen2.5-VL-7B-Instruct"), device="cpu", dtype="float32")
    assert model.tokenizer.convert_tokens_to_ids("<im_patch>") in (None, model.tokenizer.unk_token_id)
    inputs = describe_inputs(model)
    assert inputs.input_ids[0].tolist() == AUTHORS["input_ids"]
    with single_thread(), torch.inference_mode():
        logits = model.lm(**inputs).logits[0, -1]
        out = model.lm.generate(**inputs, max_new_tokens=len(AUTHORS["greedy_ids"]), do_sample=False)
    assert logits.shape[0] == ROWS  # the authors': ROWS + 1, the extra row's logit recorded apart
    np.testing.assert_allclose(logits[AUTHORS["logits_ids"]].numpy(), AUTHORS["logits"], atol=LOGIT_ATOL, rtol=0)
    assert torch.topk(logits, 5).indices.tolist() == AUTHORS["top5"]
    assert out[0, inputs.input_ids.shape[1]:].tolist() == AUTHORS["greedy_ids"]
    assert AUTHORS["extra_row_logit"][0] < AUTHORS["top5_values"][0]  # their extra row never won here
