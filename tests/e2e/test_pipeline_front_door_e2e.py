"""Pipeline settings as users give them, through the real ``lmms-eval`` command and for the
families the default suite leaves out (the quick families in-process:
tests/unit/generators/test_pipeline_front_door.py)."""

from __future__ import annotations

import pytest
import yaml

from lmms_genbench.generators.diffusers_backend import DiffusersGenerator

from tests.support.lmms_eval_runs import BIN, results_file, run
from tests.support.pipeline_families import QUICK, SETTINGS, check_setting_reaches_the_pipeline, family_model_args


@pytest.mark.parametrize("family", [f for f in sorted(SETTINGS) if f not in QUICK])
def test_a_setting_from_the_model_args_reaches_the_pipeline_and_the_key(family, tmp_path):
    check_setting_reaches_the_pipeline(family, tmp_path)


def test_settings_run_cycles_through_the_lmms_eval_command(tmp_path):
    """SD3 max_sequence_length=512, FLUX true_cfg_scale=2, PixArt-Sigma and Sana without
    resolution binning: one ``lmms-eval --config`` call, a scored chain each, and the store
    keyed by a name that holds the setting."""
    runs = {"sd3": "generator.max_sequence_length=512", "flux": "generator.true_cfg_scale=2",
            "pixart_sigma": "generator.use_resolution_binning=false", "sana": "generator.use_resolution_binning=false"}
    art = tmp_path / "art"
    configs = [{"model": "cycle", "model_args": f"{family_model_args(family, extra)},artifacts={art}",
                "tasks": "mmeception_smoke", "limit": 1, "output_path": str(tmp_path / "out" / family)}
               for family, extra in runs.items()]
    config = tmp_path / "runs.yaml"
    config.write_text(yaml.safe_dump(configs))
    proc = run([str(BIN / "lmms-eval"), "--config", str(config)], tmp_path, cwd=tmp_path, timeout=1200)
    log = proc.stdout + proc.stderr
    for family, extra in runs.items():
        metrics = results_file(tmp_path / "out" / family)[1]["results"]["mmeception_smoke"]
        assert metrics["n_scored,none"] == 1 and metrics["n_failed,none"] == 0, (family, log[-3000:])
        name, value = extra.split("=")
        args = dict(pair.split("=", 1) for pair in family_model_args(family).split(",") if pair.startswith("generator."))
        kwargs = {k[len("generator."):]: v for k, v in args.items()}
        with_setting = DiffusersGenerator.plan(**kwargs, **{name[len("generator."):]: value}).name
        without = DiffusersGenerator.plan(**kwargs).name
        assert with_setting != without
        stored = {p.name for p in art.glob("*/*") if p.is_dir()}
        assert with_setting in stored, (family, stored)
    # the budget line reaches lmms-eval's own log at INFO, our counting adds no transformers warning
    assert "StableDiffusion3Pipeline reads" in log and "512 tokens with text_encoder_3:T5EncoderModel" in log
    assert "Token indices sequence length" not in log


def test_a_pipeline_that_cannot_draw_stops_before_any_description(tmp_path):
    """SD3 refuses max_sequence_length above 512 only when it draws: the probe drawing at load
    ends the run in one line, exit 1, with nothing described."""
    art = tmp_path / "art"
    proc = run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args",
                f"{family_model_args('sd3', 'generator.max_sequence_length=1000')},artifacts={art}",
                "--tasks", "mmeception_smoke", "--limit", "2", "--output_path", str(tmp_path / "out")],
               tmp_path, cwd=tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert err[-1].startswith("lmms-genbench: error: the generator diffusers loaded with generator.pretrained=")
    assert "but did not draw its probe picture" in err[-1] and "max_sequence_length" in err[-1]
    assert "preset=smoke" not in err[-1].split("Fix:")[1]  # never suggest what the command already has
    described = [p for p in art.rglob("*.txt")]
    assert described == []  # no describe call ran: each would have stored its text
    assert not list((tmp_path / "out").rglob("*_results.json"))
