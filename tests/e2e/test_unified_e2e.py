"""A unified model (a tiny random Janus) in both roles through the real ``lmms-genbench sdp`` /
``lmms-eval`` command on ``sdp_smoke`` (the interface and the adapter in-process:
tests/unit/generators/test_unified.py)."""

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

BIN = Path(sys.executable).parent


def test_cli_sdp_smoke_with_tiny_janus(tmp_path, tiny_janus):
    out, art = tmp_path / "out", tmp_path / "art"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_CACHE=str(tmp_path / "hf_datasets"), OMP_NUM_THREADS="1")
    model_args = f"unified=janus,unified.pretrained={tiny_janus},unified.device=cpu,unified.dtype=float32,artifacts={art}"
    proc = subprocess.run(
        [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", model_args,
         "--tasks", "sdp_smoke", "--output_path", str(out)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = glob.glob(str(out / "**" / "*_results.json"), recursive=True)
    assert len(files) == 1, proc.stderr[-3000:]
    metrics = {k.split(",")[0]: v for k, v in json.loads(Path(files[0]).read_text())["results"]["sdp_smoke"].items()
               if "," in k}
    assert metrics["n_scored"] == 18 and metrics["n_failed"] == 0  # 9 pairs x 2 directions
    for mapping in ("text->text", "text->image", "image->image", "image->text"):
        assert -1.0 <= metrics[f"mcd_{mapping}"] <= 1.0
    assert "mcd_avg" in metrics
    # one model, one name, in both roles of the store's namespace
    manifests = list(art.rglob("protocol.json"))
    assert len(manifests) == 2  # text-first and image-first protocols
    manifest = json.loads(manifests[0].read_text())
    assert manifest["describer"] == manifest["generator"] and manifest["describer"].startswith("janus-tiny-janus-")
    images = list(art.rglob("*.png"))
    drawn = [p for p in images if p.name != "000.png"]  # hop 0 of an image-first chain is the photo
    assert drawn and all(Image.open(p).size == (32, 32) for p in drawn)
