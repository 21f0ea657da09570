"""One parse: ``--model_args`` and ``--tasks`` read once into a RunCommand that lists every
problem of the arguments (a wrong value is one problem; the rest is still read), and the
models a command names checked against the registries' name lists, with the nearest name."""

import sys


from lmms_genbench.command import lmms_eval_arguments, name_problems, read_command
from lmms_genbench.command.cycle import DESCRIBER_BATCH, read_cycle_args


def test_every_wrong_cycle_argument_is_one_problem_and_the_rest_is_still_read():
    command = read_command("cycle", {"describer": "llava_hf", "generator": "smoke", "describer_batch": 0,
                                     "shard": "5/2", "colour": "red", "stop_after_hop": -1})
    causes = "\n".join(p.cause for p in command.problems)
    assert len(command.problems) == 4, causes
    assert "unknown model_args colour=red" in causes and "describer_batch must be an integer >= 1, got 0" in causes
    assert "shard must be i/n" in causes and "stop_after_hop must be an integer >= 0" in causes
    assert command.cycle.describer == "llava_hf" and command.cycle.describer_batch == DESCRIBER_BATCH
    assert [(r.kind, r.name) for r in command.roles] == [("describer", "llava_hf"), ("generator", "smoke")]


def test_the_defaults_live_in_the_parse_alone():
    command = read_command("cycle", {"preset": "smoke", "batch_size": None, "device": None})
    assert command.problems == () and command.cycle.describer_batch == DESCRIBER_BATCH
    args, problems = read_cycle_args({"describer": "llava_hf", "generator": "smoke", "describer_batch": "x"})
    assert [p.cause for p in problems] == ["--model cycle: model_args describer_batch must be an integer >= 1, got 'x'"]
    assert args.describer_batch == DESCRIBER_BATCH


def test_unknown_models_are_named_with_the_nearest_known_name():
    command = read_command("cycle", {"describer": "qwen25_vl", "generator": "difusers"})
    lines = [p.cause for p in name_problems(command)]
    assert lines == ["--model cycle: no lmms-eval model qwen25_vl for the describer (did you mean qwen2_5_vl?)",
                     "--model cycle: no generator difusers (did you mean diffusers?)"]
    unified = read_command("cycle", {"unified": "jnus"})
    assert [p.cause for p in name_problems(unified)] == ["--model cycle: no unified model jnus (did you mean janus?)"]
    assert name_problems(read_command("cycle", {"preset": "smoke"})) == []


def test_naming_an_unknown_model_logs_nothing(capfd):
    name_problems(read_command("cycle", {"describer": "no_such_vlm", "generator": "smoke"}))
    out, err = capfd.readouterr()
    assert "llava_onevision" not in out + err and "ERROR" not in out + err


def test_t2i_lists_every_problem_too():
    command = read_command("t2i", {"generator": "smoke", "num_images_per_prompt": 0, "seed": "x", "size": 3})
    causes = "\n".join(p.cause for p in command.problems)
    assert len(command.problems) == 3, causes
    assert "unknown model_args size=3" in causes and "num_images_per_prompt must be an integer >= 1" in causes
    assert "seed must be an integer" in causes


def test_the_tasks_come_from_lmms_evals_own_parser(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/lmms-eval", "--model", "cycle", "--tasks", "mmeception, sdp_nocaps",
                                      "--output_path", "/tmp/out", "--limit", "2"])
    assert lmms_eval_arguments() == (["mmeception", "sdp_nocaps"], "/tmp/out", [], 2.0)
    monkeypatch.setattr(sys, "argv", ["pytest", "--model", "cycle"])
    assert lmms_eval_arguments() is None  # not an lmms-eval command: a model built from Python
