"""unified=bagel without weights: its arguments, its name, what ``lmms-genbench check`` asks the
Hub for, and the published size built on the meta device (outputs: test_bagel_parity.py)."""

import pytest

from lmms_genbench.core.args import ArgumentError
from lmms_genbench.generators.unified import plan_unified
from lmms_genbench.command import Role
from lmms_genbench.preflight.roles import weights_of


def test_the_plan_names_the_model_from_its_arguments_without_weights():
    plan = plan_unified("bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT", "device": "cpu"})
    assert plan.name.startswith("bagel-bytedance-seed-bagel-7b-mot-") and plan.batch_size == 1
    other = plan_unified("bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT", "device": "cpu", "cfg_text_scale": 6})
    assert other.name != plan.name  # a setting that changes the drawings changes the store's name


@pytest.mark.parametrize("args, named", [
    ({"image_size": 1000}, "image_size"),  # not a multiple of 16
    ({"image_size": 2048}, "image_size"),  # beyond the 64 x 64 latent grid
    ({"cfg_renorm_type": "local"}, "cfg_renorm_type"),
    ({"num_timesteps": 1}, "num_timesteps"),
    ({"steps": 4}, "steps"),  # not an argument
])
def test_the_plan_refuses_a_bad_argument_by_name(args, named):
    with pytest.raises(ArgumentError, match=named):
        plan_unified("bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT", "device": "cpu", **args})


def test_check_asks_the_hub_for_the_published_weights_file():
    role = Role("unified", "bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT"}, "unified.")
    assert weights_of(role) == ("unified.pretrained=ByteDance-Seed/BAGEL-7B-MoT", "ByteDance-Seed/BAGEL-7B-MoT",
                                None, "ema.safetensors")


def test_the_published_configuration_has_bagels_published_size():
    pytest.importorskip("torch")
    from lmms_genbench.generators.unified.bagel.checkpoint import real_configs
    from lmms_genbench.generators.unified.bagel.loading import build_empty

    network, vae = build_empty(*real_configs())
    lm = sum(p.numel() for p in network.language_model.parameters())
    und = sum(p.numel() for n, p in network.language_model.named_parameters() if "moe_gen" not in n)
    assert 14.0e9 < lm < 14.3e9  # "14B total parameters, 7B active" (the model card): the two experts
    assert 7.5e9 < und < 7.7e9  # one expert: Qwen2.5-7B's 7.6B
    assert 14.5e9 < sum(p.numel() for p in network.parameters()) < 14.7e9  # with SigLIP so400m (0.4B)
    assert len(network.vit_model.vision_model.encoder.layers) == 26  # 27 in vit_config.json, one dropped
    assert 83e6 < sum(p.numel() for p in vae.parameters()) < 85e6  # FLUX.1's autoencoder


def test_check_on_a_machine_without_cuda_names_the_default_device():
    from lmms_genbench.preflight.roles import device_problem

    role = Role("unified", "bagel", {"pretrained": "ByteDance-Seed/BAGEL-7B-MoT"}, "unified.")
    problem = device_problem([role], cuda_devices=0)
    assert problem is not None and "unified.device=cuda (its default)" in problem.cause
    assert "unified.device=cpu" in problem.fix


def test_a_folder_that_is_not_a_bagel_checkpoint_is_refused_by_what_it_lacks(tmp_path):
    import shutil
    from pathlib import Path

    from lmms_genbench.core.failures import GeneratorConfigError
    from lmms_genbench.generators.unified import build_unified

    tiny = Path(__file__).resolve().parents[2] / "support" / "data" / "parity" / "bagel" / "BAGEL-7B-MoT-tiny"
    folder = tmp_path / "not-bagel"
    shutil.copytree(tiny, folder)
    (folder / "ae.safetensors").unlink()
    with pytest.raises(GeneratorConfigError, match="is not a BAGEL checkpoint folder: it lacks ae.safetensors"):
        build_unified("bagel", pretrained=str(folder), device="cpu", dtype="float32")


def test_the_planner_starts_from_the_constructors_defaults():
    import inspect

    from lmms_genbench.generators.unified.bagel import BagelUnified

    signature = inspect.signature(BagelUnified.__init__).parameters
    assert {n: p.default for n, p in signature.items() if n != "self"} == BagelUnified._DEFAULTS
