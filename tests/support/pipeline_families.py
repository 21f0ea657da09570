"""The eight tiny diffusers families (lmms_genbench/smoke/pipelines.py) as users give them in
``--model_args``, and the cycle model lmms-eval's evaluator makes from such a string."""

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator
from lmms_genbench.smoke.pipelines import tiny_family_path

from tests.support.tiny_pipelines import PipelineRecorder

# Kandinsky 3 sizes its latents for a scale-8 MoVQ in 64-px steps; the others draw 32 px
SIZES = {"kandinsky3": 64}
#: family -> (a setting its __call__ takes, the value as a command line gives it, as the call gets it)
SETTINGS = {
    "sd3": ("max_sequence_length", "512", 512),
    "flux": ("true_cfg_scale", "2", 2.0),
    "sdxl": ("guidance_rescale", "0.7", 0.7),
    "playground": ("guidance_rescale", "0.5", 0.5),
    "pixart_sigma": ("use_resolution_binning", "false", False),
    "sana": ("use_resolution_binning", "false", False),
    "lumina2": ("cfg_trunc_ratio", "0.5", 0.5),
}
#: in the default run (the rest with --e2e)
QUICK = ("sd3", "flux", "sana")


def family_model_args(family: str, extra: str = "") -> str:
    """The ``--model_args`` of the smoke cycle model drawing with ``family``, ``extra`` appended."""
    size = SIZES.get(family, 32)
    args = ("preset=smoke,generator=diffusers,"
            f"generator.pretrained={tiny_family_path(family)},generator.device=cpu,generator.dtype=float32,"
            f"generator.steps=1,generator.width={size},generator.height={size}")
    return f"{args},{extra}" if extra else args


def cycle_from_model_args(model_args: str, tmp_path):
    """The cycle model as lmms-eval's evaluator makes it from ``--model_args``."""
    from lmms_eval.models import get_model

    return get_model("cycle").create_from_arg_string(f"{model_args},artifacts={tmp_path}",
                                                     {"batch_size": 1, "device": None})


def check_setting_reaches_the_pipeline(family, tmp_path):
    """A setting of ``family``'s ``__call__`` given in ``--model_args`` reaches the key and the call."""
    name, given, value = SETTINGS[family]
    plain = cycle_from_model_args(family_model_args(family), tmp_path)
    model = cycle_from_model_args(family_model_args(family, f"generator.{name}={given}"), tmp_path)
    assert model.generator.name != plain.generator.name  # the key records the setting
    generator = model.generator.load()  # what the first drawing does: the weights load, the probe draws
    assert isinstance(generator, DiffusersGenerator) and generator.name == model.generator.name
    assert generator.call_settings[name] == value
    recorder = PipelineRecorder(generator.pipeline)
    generator.pipeline = recorder
    (image,) = generator.generate(["a red cat on a blue rug"], [0])
    assert recorder.calls[0][name] == value and image.size == (SIZES.get(family, 32),) * 2
