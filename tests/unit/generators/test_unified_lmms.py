"""``unified=lmms:<model type>``: one lmms-eval model type in both roles, switched per call.

Driven with a stand-in of bagel's interface (tests/support/bagel_standin.py); lmms-eval's real
``bagel`` class cannot run on this package's versions (the Bagel package needs flash-attn and
transformers 4; docs/support.md): BAGEL itself runs natively as ``unified=bagel``."""

from __future__ import annotations

import pytest
from PIL import Image

from tests.support import bagel_standin


@pytest.fixture(scope="module")
def model_type():
    return bagel_standin.register()


def test_one_instance_describes_and_draws_in_a_cycle(model_type, tmp_path):
    from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
    from lmms_genbench.generators.unified import build_unified, unified_concurrency

    model = build_unified(f"lmms:{model_type}", output_dir=str(tmp_path / "out"), cfg_text_scale=2.5)
    assert not unified_concurrency(f"lmms:{model_type}")
    bagel_standin.CALLS.clear()
    store = ArtifactStore(tmp_path / "store")
    spec = ChainSpec.from_request("Describe.", {"iterations": 2, "generate_prompt": "{description}"})
    ns = store.namespace(model.name, model.name, spec.protocol_id("t"))
    seeds = [Image.new("RGB", (8, 8), (i * 40, 1, 1)) for i in range(2)]
    jobs = [ChainJob(str(i), spec, store.chain(ns, str(i)), (lambda s=s: s)) for i, s in enumerate(seeds)]
    outcomes, stats = CycleEngine(model, model, describer_batch=2).run(jobs)
    assert all(o.ok for o in outcomes), [o.failure for o in outcomes]
    assert stats.describe_items == 4 and stats.generate_items == 4  # 2 chains x 2 iterations
    modes = {mode for mode, _ in bagel_standin.CALLS}
    assert modes == {"understanding", "generate"}
    # each role got its own mode's settings, the user's override where that mode has it
    assert all(p["cfg_text_scale"] == 2.5 for m, p in bagel_standin.CALLS if m == "generate")
    assert all("cfg_text_scale" not in p and p["understanding_output"] for m, p in bagel_standin.CALLS
               if m == "understanding")


def test_the_cycle_model_takes_it_from_the_model_args(model_type, tmp_path):
    from lmms_eval.models import get_model

    model = get_model("cycle").create_from_arg_string(
        f"unified=lmms:{model_type},unified.output_dir={tmp_path / 'out'},artifacts={tmp_path / 'store'}",
        {"batch_size": 1, "device": None})
    assert model.describer is model.generator and type(model.generator).__name__ == "LmmsUnified"
    assert model.generator.name.startswith(f"lmms-{model_type}-")


def test_a_class_that_cannot_switch_is_refused_with_the_decoupled_way(tmp_path):
    from lmms_genbench.generators.unified import build_unified
    from lmms_genbench.smoke.host_image import register_tiny_image_model

    name = register_tiny_image_model()
    with pytest.raises(ValueError, match=rf"cannot switch between answering and drawing.*generator=lmms:{name}"):
        build_unified(f"lmms:{name}", output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="drop unified.mode"):
        build_unified("lmms:genbench_tiny_bagel", mode="generate")


def test_lmms_evals_own_bagel_class_has_the_interface_unified_switches():
    """lmms-eval 0.7.3 registers ``bagel`` at a class path that does not import; after the repair
    its real class (BagelUMM, its module importable without the Bagel package) resolves and its
    module offers both modes. The class itself was not built (it needs Bagel and the weights)."""
    from lmms_eval.models import get_model

    from lmms_genbench.generators.lmms_backend import repair_registration
    from lmms_genbench.generators.unified.lmms import _modes

    repair_registration("bagel")
    cls = get_model("bagel")
    assert cls.__name__ == "BagelUMM"
    assert _modes(cls) == ("understanding", "generate")


def test_a_load_failure_names_the_unified_role_and_its_arguments(tmp_path):
    """What the user typed is unified.pretrained, so the one line says so (it said generator.)."""
    from lmms_genbench.core.errors import ActionableError
    from lmms_genbench.generators.unified import build_unified

    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(ActionableError) as err:
        build_unified("lmms:bagel", pretrained=str(missing))
    assert f"the unified model bagel did not load: its weights unified.pretrained={missing} do not exist" in str(err.value)
    assert "generator." not in str(err.value)
