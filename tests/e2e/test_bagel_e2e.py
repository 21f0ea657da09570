"""docs/models.md's BAGEL command through the front door: ``unified=bagel`` with the real id
``ByteDance-Seed/BAGEL-7B-MoT``, served by the local test hub from the tiny random checkpoint in
the published layout (tests/support/data/parity/bagel), on ``sdp_nocaps``.

TEST SCAFFOLDING: tiny random weights, so this checks the plumbing (the id, the published files,
loading, describing, drawing, scoring), never BAGEL's behaviour; its outputs are checked against the
authors' code in tests/unit/generators/test_bagel_parity.py. What a CPU run adds: a small
``unified.image_size`` and few ``unified.num_timesteps``.
"""

import numpy as np
import pytest
from PIL import Image

from tests.support.lmms_eval_runs import nonblank_lines
from tests.support.unified_runs import check_unified, run_unified, served


def test_the_unified_bagel_command_on_a_cpu(local_hub, tmp_path):
    args = ("unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.num_timesteps=3")
    # 3 docs scored, all four mappings a cosine: run_unified's checks
    _, requests = run_unified(local_hub, tmp_path, args, ["ByteDance-Seed/BAGEL-7B-MoT"])
    fetched = {path.rsplit("/", 1)[-1]
               for path in served(requests, "/ByteDance-Seed/BAGEL-7B-MoT/resolve/", statuses=(200, 302))}
    assert {"ema.safetensors", "ae.safetensors", "llm_config.json", "vit_config.json"} <= fetched, fetched


def test_a_batch_of_four_stores_what_one_at_a_time_stores(local_hub, tmp_path):
    """``unified.batch_size=4`` (describing and drawing in batches) against batch 1: the same texts,
    and the same images to one level (float rounding at a uint8 boundary)."""
    args = ("unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.num_timesteps=3,unified.batch_size=")
    stores = {}
    for size in (1, 4):
        (tmp_path / str(size)).mkdir()
        run_unified(local_hub, tmp_path / str(size), f"{args}{size}", ["ByteDance-Seed/BAGEL-7B-MoT"])
        root = tmp_path / str(size) / "artifacts"
        stores[size] = {p.relative_to(root): p for p in root.rglob("*") if p.suffix in (".txt", ".png")}
    assert stores[1].keys() == stores[4].keys() and any(p.suffix == ".png" for p in stores[1]), sorted(stores[1])
    for name, one in stores[1].items():
        four = stores[4][name]
        if name.suffix == ".txt":
            assert one.read_text() == four.read_text(), name
        else:
            a, b = (np.asarray(Image.open(p).convert("RGB")).astype(int) for p in (one, four))
            assert a.shape == b.shape and np.abs(a - b).max() <= 1, name


@pytest.mark.parametrize("repo, ok", [("ByteDance-Seed/BAGEL-7B-MoT", True), ("deepseek-community/Janus-Pro-7B", False)],
                         ids=["bagel", "not-bagel"])
def test_check_knows_the_files_a_bagel_id_needs(local_hub, tmp_path, repo, ok):
    """``lmms-genbench check`` asks the hub for ema.safetensors: BAGEL's id passes, a repository
    without it (Janus's) is named, before any weight loads."""
    from tests.support.localhub.repos import add_models

    add_models(local_hub, ids=[repo])
    args = f"unified=bagel,unified.pretrained={repo},unified.device=cpu,artifacts={tmp_path / 'art'}"
    proc = check_unified(local_hub, tmp_path, args)
    last = nonblank_lines(proc.stderr)[-1]
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert last == "lmms-genbench check: ok: nothing missing for --model cycle --tasks sdp_nocaps", last
    else:
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert f"{repo} has no ema.safetensors" in proc.stderr, proc.stderr[-3000:]
    assert not list((tmp_path / "hf").rglob("*.safetensors"))  # nothing downloaded


def test_a_preset_runs_through_the_front_door_and_names_the_store_by_its_values(local_hub, tmp_path):
    """``unified.preset=app`` (docs/models.md): the run draws with app.py's settings and its store
    folder is the one the same values typed out name (the preset itself is no part of the name)."""
    from lmms_genbench.generators.unified import plan_unified

    args = ("unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.num_timesteps=3,unified.preset=app")
    run_unified(local_hub, tmp_path, args, ["ByteDance-Seed/BAGEL-7B-MoT"], limit=2)  # both directions
    explicit = plan_unified("bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT", "device": "cpu", "dtype": "float32",
                                      "image_size": 32, "num_timesteps": 3, "cfg_img_scale": 1.5, "max_new_tokens": 512})
    stored = [p.name for p in (tmp_path / "artifacts").rglob("*") if p.is_dir()]
    assert any(explicit.name.split("-")[-1] in name for name in stored), (explicit.name, stored)
