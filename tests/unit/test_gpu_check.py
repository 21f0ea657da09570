"""benchmarks/gpu_check.py, the prepared GPU check: it refuses in one line without CUDA, and its
Janus builder (real sizes swapped for the tiny checkpoint's here) gives a model that describes
and draws, so the script works the day a GPU is lent (it has not run on one here)."""

import subprocess
import sys

from PIL import Image

from tests.support.scripts import ROOT, load_script


def _module():
    return load_script("benchmarks/gpu_check.py", "gpu_check")


def test_it_refuses_in_one_line_without_cuda():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")], capture_output=True, text=True,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "needs a CUDA GPU" in proc.stderr


def test_every_unified_model_has_a_builder():
    from lmms_genbench.generators.unified import unified_names

    assert set(unified_names()) <= {name.split("_")[0] if name.startswith("janus") else name
                                    for name in _module().BUILDERS}


def test_the_janus_builder_describes_and_draws(monkeypatch):
    from transformers import AutoConfig

    from lmms_genbench.generators.unified import janus_deepseek

    from lmms_genbench.generators.unified import build_unified

    gpu_check = _module()
    folder = gpu_check.PARITY / "janus13" / "Janus-1.3B"
    # the tiny checkpoint's own sizes stand in for the published ones
    config = build_unified("janus", pretrained=str(folder), device="cpu", dtype="float32").model.config
    monkeypatch.setattr(janus_deepseek, "real_config", lambda: AutoConfig.for_model(**config.to_dict()))
    model = gpu_check.janus_1_3b("cpu", "float32")
    texts = model.describe([Image.new("RGB", (64, 48), (9, 90, 200))], "Describe.", {"max_new_tokens": 3})
    images = model.generate(["a red bus"], [0])
    assert isinstance(texts[0], str) and isinstance(images[0], Image.Image)
    assert images[0].size == (model.image_size, model.image_size)
