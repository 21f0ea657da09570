"""One reading of the run, through the front door (issue 42): ``lmms-genbench check`` lists every
problem of a broken command at once, with no lmms-eval log noise; a pipeline that does not draw
from text is one line, exit 1, at the check and at the run; a store names what made it (a
tampered identity is refused); a store keyed before settings were normalised is adopted with
nothing recomputed; a store that holds every hop runs without the GPU its command names.
Tiny random-weight pipelines only (smoke/pipelines.py); the in-process checks:
tests/unit/command, tests/unit/preflight/test_preflight_parse.py, tests/unit/store/test_identity.py."""

from __future__ import annotations

import json
import re
import time

from lmms_genbench.core.keys import generator_name

from tests.support.lmms_eval_runs import BIN, nonblank_lines, results_file, run
from tests.support.pipeline_families import family_model_args

BROKEN = ("describer=qwen25_vl,generator=diffusers,generator.pretrained=stabilityai/sdxl-turbo,"
          "generator.num_inference_step=4,describer_batch=0")


def _lmms_eval(model_args, tmp_path, out="out", tasks="mmeception_smoke", **env):
    return run([str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", model_args, "--tasks", tasks,
                "--limit", "2", "--output_path", str(tmp_path / out)], tmp_path, log=f"{out}.log", **env)


def _generator_identities(art):
    """The identity files of generator folders (``.features/`` keeps the scorers' own)."""
    return [p for p in art.glob("*/*/identity.json") if not p.parent.parent.name.startswith(".")]


def _runs(art):
    """Every runs.jsonl record under ``art``."""
    return [json.loads(line) for path in sorted(art.rglob("runs.jsonl")) for line in path.read_text().splitlines()]


def test_check_lists_every_problem_of_the_broken_command_without_noise(tmp_path):
    start = time.monotonic()
    proc = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", BROKEN,
                "--tasks", "mmeception,sdp_nocap", "--output_path", "/proc/x"], tmp_path, timeout=120,
               CUDA_VISIBLE_DEVICES="", LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"))
    seconds = time.monotonic() - start
    assert proc.returncode == 1, proc.stderr[-3000:]
    listed = "\n".join(line for line in nonblank_lines(proc.stderr) if re.match(r"\s+\d+\. ", line))
    for expected in ("no lmms-eval model qwen25_vl for the describer (did you mean qwen2_5_vl?)",
                     "no task sdp_nocap (did you mean sdp_nocaps?)", "describer_batch must be an integer >= 1, got 0",
                     "lmms-lab-encoder/MME", "CUDA is asked for", "--output_path /proc/x cannot be written"):
        assert expected in listed, (expected, proc.stderr[-3000:])
    assert len(listed.splitlines()) == 6, listed
    assert "ERROR" not in proc.stdout + proc.stderr and "llava_onevision" not in proc.stdout + proc.stderr
    assert seconds < 60, seconds
    alone = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", "preset=smoke",
                 "--tasks", "sdp_nocap"], tmp_path, timeout=120, LMMS_GENBENCH_ARTIFACTS=str(tmp_path / "art"))
    assert alone.returncode == 1
    assert nonblank_lines(alone.stderr)[-1].startswith("lmms-genbench check: error: no task sdp_nocap (did you mean")


def test_an_img2img_folder_is_one_line_at_the_check_and_at_the_run(tmp_path):
    refiner = tmp_path / "sdxl-refiner"  # the SDXL refiner's model_index.json names its img2img class
    refiner.mkdir()
    (refiner / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionXLImg2ImgPipeline",
                                                          "_diffusers_version": "0.19.0"}))
    args = (f"preset=smoke,generator=diffusers,generator.pretrained={refiner},generator.device=cpu,"
            f"generator.strength=0.5,artifacts={tmp_path / 'art'}")
    check = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", args,
                 "--tasks", "mmeception_smoke"], tmp_path, timeout=120)
    assert check.returncode == 1, check.stderr[-2000:]
    assert "StableDiffusionXLImg2ImgPipeline, which is not a text-to-image pipeline" in nonblank_lines(check.stderr)[-1]
    for preflight in ("1", "0"):  # the preflight's line, or the model's own plan's
        proc = _lmms_eval(args, tmp_path, out=f"out{preflight}", LMMS_GENBENCH_PREFLIGHT=preflight)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert "not a text-to-image pipeline" in nonblank_lines(proc.stderr)[-1]
        assert not list((tmp_path / f"out{preflight}").rglob("*_results.json"))


def test_a_store_names_what_made_it_and_refuses_a_tampered_identity(tmp_path):
    """max_sequence_length=512.0 (a float as typed) draws as 512, and the generator's folder says so."""
    art = tmp_path / "art"
    args = f"{family_model_args('sd3', 'generator.max_sequence_length=512.0')},artifacts={art}"
    proc = _lmms_eval(args, tmp_path)
    metrics = results_file(tmp_path / "out")[1]["results"]["mmeception_smoke"]
    assert metrics["n_scored,none"] == 2 and metrics["n_failed,none"] == 0, proc.stderr[-3000:]
    (identity,) = _generator_identities(art)
    record = json.loads(identity.read_text())
    assert record["settings"]["call"] == {"max_sequence_length": 512}
    from lmms_genbench.smoke.pipelines import tiny_family_path

    assert record["pipeline"] == "StableDiffusion3Pipeline" and record["pretrained"] == str(tiny_family_path("sd3"))
    assert generator_name(record["prefix"], record["label"], record["settings"]) == identity.parent.name
    show = run([str(BIN / "lmms-genbench"), "store", "show", str(art)], tmp_path, timeout=120)
    assert show.returncode == 0 and '"max_sequence_length": 512' in show.stdout and record["pretrained"] in show.stdout
    record["settings"]["call"]["max_sequence_length"] = 256  # edited by hand: it no longer hashes to its folder
    identity.write_text(json.dumps(record))
    again = _lmms_eval(args, tmp_path, out="again")
    assert again.returncode == 1, again.stderr[-3000:]
    last = nonblank_lines(again.stderr)[-1]
    assert last.startswith("lmms-genbench: error: the store's identity file") and str(identity) in last
    assert not list((tmp_path / "again").rglob("*_results.json"))
    assert run([str(BIN / "lmms-genbench"), "store", "show", str(art)], tmp_path, timeout=120).returncode == 1


def test_a_store_keyed_before_normalisation_is_adopted_with_nothing_recomputed(tmp_path):
    """FLUX true_cfg_scale=1 is its default: keyed as if absent now, keyed as 1.0 before."""
    art = tmp_path / "art"
    args = f"{family_model_args('flux', 'generator.true_cfg_scale=1')},artifacts={art}"
    first = _lmms_eval(args, tmp_path, out="first")
    assert results_file(tmp_path / "first")[1]["results"]["mmeception_smoke"]["n_scored,none"] == 2, first.stderr[-3000:]
    (folder,) = [p.parent for p in _generator_identities(art)]
    record = json.loads((folder / "identity.json").read_text())
    assert "call" not in record["settings"]  # the default keys as if absent
    legacy = generator_name("diffusers", record["label"], {**record["settings"], "call": {"true_cfg_scale": 1.0}})
    (folder / "identity.json").unlink()  # a store written before identities, under the earlier key
    folder.rename(folder.parent / legacy)
    computed = sum(r["hops_computed"] for r in _runs(art))
    second = _lmms_eval(args, tmp_path, out="second")
    metrics = results_file(tmp_path / "second")[1]["results"]["mmeception_smoke"]
    assert metrics["n_scored,none"] == 2, second.stderr[-3000:]
    assert folder.is_dir() and not (folder.parent / legacy).exists()  # adopted under its new name
    records = _runs(art)
    assert sum(r["hops_computed"] for r in records) == computed and records[-1]["hops_computed"] == 0
    assert records[-1]["hops_reused"] > 0 and (folder / "identity.json").is_file()


def test_a_store_that_holds_every_hop_runs_without_the_gpu_its_command_names(tmp_path):
    art = tmp_path / "art"
    first = _lmms_eval(f"preset=smoke,artifacts={art}", tmp_path, out="first")
    assert results_file(tmp_path / "first")[1]["results"]["mmeception_smoke"]["n_scored,none"] == 2, first.stderr[-3000:]
    on_gpu = f"preset=smoke,artifacts={art},describer.device=cuda,describer.device_map=cuda"  # no CUDA here
    check = run([str(BIN / "lmms-genbench"), "check", "--model", "cycle", "--model_args", on_gpu,
                 "--tasks", "mmeception_smoke"], tmp_path, timeout=120, CUDA_VISIBLE_DEVICES="")
    assert check.returncode == 0, check.stderr[-2000:]
    assert [line for line in nonblank_lines(check.stderr) if "holds every hop of mmeception_smoke" in line]
    again = _lmms_eval(on_gpu, tmp_path, out="again", CUDA_VISIBLE_DEVICES="")
    assert again.returncode == 0 and "holds every hop" in again.stderr, again.stderr[-3000:]
    assert results_file(tmp_path / "again")[1]["results"]["mmeception_smoke"]["n_scored,none"] == 2
    assert _runs(art)[-1]["hops_computed"] == 0
