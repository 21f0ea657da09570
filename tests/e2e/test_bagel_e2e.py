"""docs/models.md's BAGEL command through the front door: ``unified=bagel`` with the real id
``ByteDance-Seed/BAGEL-7B-MoT``, served by the local test hub from the tiny random checkpoint in
the published layout (tests/support/data/parity/bagel), on ``sdp_nocaps``.

TEST SCAFFOLDING: tiny random weights, so this checks the plumbing (the id, the published files,
loading, describing, drawing, scoring), never BAGEL's behaviour; its outputs are checked against the
authors' code in tests/unit/generators/test_bagel_parity.py. What a CPU run adds: a small
``unified.image_size`` and few ``unified.num_timesteps``.
"""

import pytest

from tests.support.lmms_eval_runs import nonblank_lines
from tests.support.unified_runs import assert_batches_store_alike, check_unified, run_unified, served


def test_the_unified_bagel_command_on_a_cpu_and_a_batch_of_four_stores_the_same(local_hub, tmp_path):
    """docs/models.md's command (3 docs scored, all four mappings a cosine: run_unified's checks), then
    ``unified.batch_size=4`` (describing and drawing in batches) against it: the same texts, and the
    same images to one level."""
    args = ("unified=bagel,unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT,unified.device=cpu,unified.dtype=float32,"
            "unified.image_size=32,unified.num_timesteps=3")
    for size in (1, 4):
        (tmp_path / str(size)).mkdir()
        _, requests = run_unified(local_hub, tmp_path / str(size), f"{args},unified.batch_size={size}",
                                  ["ByteDance-Seed/BAGEL-7B-MoT"])
        if size == 1:
            fetched = {path.rsplit("/", 1)[-1]
                       for path in served(requests, "/ByteDance-Seed/BAGEL-7B-MoT/resolve/", statuses=(200, 302))}
            assert {"ema.safetensors", "ae.safetensors", "llm_config.json", "vit_config.json"} <= fetched, fetched
    assert_batches_store_alike(tmp_path / "1", tmp_path / "4")


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
