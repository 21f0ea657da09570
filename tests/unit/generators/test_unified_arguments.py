"""The unified models' argument tables (unified/arguments.py): each class's signature, docstring,
checks, plan and messages read its table; BAGEL's presets (``unified.preset``) and their sources;
docs/support.md's defaults rows rendered from the tables. No weights: seconds."""

import ast
import inspect
import sys
from pathlib import Path

import pytest

from lmms_genbench.core.args import ArgumentError
from lmms_genbench.core.registry import parameter_names
from lmms_genbench.generators.unified import UNIFIED_MODELS, plan_unified
from tests.support.scripts import ROOT, load_script

FAMILIES = ["showo", "janus", "vila_u", "blip3o", "bagel"]
#: a hub id for the classes without a default checkpoint; plans need no weights
NEEDED = {"pretrained": "owner/model", "device": "cpu"}
PRESETS = {"notebook": {}, "app": {"cfg_img_scale": 1.5, "max_new_tokens": 512},
           "lmms_eval": {"cfg_renorm_min": 1.0}, "inferencer": {"cfg_text_scale": 3.0, "cfg_img_scale": 1.5}}


def _table(family):
    return UNIFIED_MODELS.load(family).ARGUMENTS


@pytest.mark.parametrize("family", FAMILIES)
def test_the_signature_docstring_and_registry_read_the_table(family):
    cls, table = UNIFIED_MODELS.load(family), _table(family)
    shown = inspect.signature(cls).parameters
    assert list(shown) == table.names == parameter_names(cls)
    assert {n: p.default for n, p in shown.items()} == table.defaults
    assert cls.family == family == table.family
    doc = inspect.getdoc(cls)
    assert "Args: see" not in doc and "Args:" in doc
    assert [line.split(" (")[0].strip() for line in doc.split("Args:")[1].splitlines()
            if line.startswith("    ") and not line.startswith("        ") and " (" in line
            and not line.strip().startswith("preset ``")] == table.names
    plan = cls.plan(**NEEDED)
    assert plan.name == plan_unified(family, dict(NEEDED)).name
    explicit = {**table.defaults, **NEEDED}
    assert cls.plan(**explicit).name == plan.name  # every default given explicitly: the same model


@pytest.mark.parametrize("family", FAMILIES)
def test_every_argument_is_checked_with_a_message_that_names_it_and_what_came_in(family):
    for arg in _table(family).args:
        bad = {"choice": "nope", str: "", int: 0, float: -5.0}[arg.kind]
        if arg.kind is int and arg.minimum is not None and arg.minimum < 1:
            continue
        with pytest.raises(ArgumentError) as err:
            plan_unified(family, {**NEEDED, arg.name: bad})
        assert str(err.value).startswith(f"unified={family}: unified.{arg.name}: expected "), str(err.value)
        assert str(err.value).endswith(f"got {bad!r}"), str(err.value)


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unknown_argument_is_refused_naming_the_allowed_ones(family):
    names = _table(family).names
    with pytest.raises(ArgumentError) as err:
        plan_unified(family, {**NEEDED, "steps": 4})
    assert str(err.value) == (f"unified={family}: unknown argument(s) unified.steps; allowed: "
                              + ", ".join(f"unified.{n}" for n in names))
    with pytest.raises(ArgumentError, match=rf"unified.steps: not an argument of unified={family} \(allowed: "):
        UNIFIED_MODELS.load(family).plan(**NEEDED, steps=4)  # the class itself, without the registry


def _bagel(**args):
    from lmms_genbench.generators.unified.bagel import BagelUnified

    probe = BagelUnified.__new__(BagelUnified)
    probe._check(**NEEDED, **args)
    return probe


@pytest.mark.parametrize("preset, values", PRESETS.items())
def test_a_bagel_preset_sets_its_values_and_names_the_model_by_them_only(preset, values):
    model = _bagel(preset=preset)
    for name, value in {**_table("bagel").defaults, **values}.items():
        if name not in ("pretrained", "device", "dtype", "preset"):
            assert getattr(model, name) == value, name
    # the same values reached without the preset: the same model, the same store key
    assert plan_unified("bagel", {**NEEDED, "preset": preset}).name == plan_unified("bagel", {**NEEDED, **values}).name
    assert "preset" not in model.identity["settings"]


def test_each_preset_is_the_set_its_authors_outputs_were_recorded_with():
    """parity/bagel/expected_presets.json's ``presets`` (the settings the authors' outputs were
    recorded with; test_bagel_presets.py runs each ``unified.preset=<name>`` against them) is what
    ``unified.preset=<name>`` resolves to."""
    import json

    record = json.loads((ROOT / "tests" / "support" / "data" / "parity" / "bagel" / "expected_presets.json").read_text())
    assert sorted(record["presets"]) == sorted(PRESETS)
    for name, entry in record["presets"].items():
        assert plan_unified("bagel", {**NEEDED, "preset": name}).name == plan_unified(
            "bagel", {**NEEDED, **entry["arguments"]}).name, name


def test_explicit_arguments_override_the_presets_values():
    model = _bagel(preset="inferencer", cfg_img_scale=2.0)
    assert (model.cfg_text_scale, model.cfg_img_scale) == (3.0, 2.0)
    assert _bagel(preset="APP", max_new_tokens=64).max_new_tokens == 64  # case as lmms-eval may pass it
    assert _bagel(cfg_renorm_min=1.0).name == _bagel(preset="lmms_eval").name


def test_an_unknown_preset_names_the_allowed_ones():
    with pytest.raises(ArgumentError) as err:
        plan_unified("bagel", {**NEEDED, "preset": "demo"})
    assert str(err.value) == ("unified=bagel: unified.preset: expected one of 'notebook', 'app', 'lmms_eval', "
                              "'inferencer'; got 'demo'")
    with pytest.raises(ArgumentError, match="unknown argument"):
        plan_unified("showo", {"device": "cpu", "preset": "app"})  # only where the authors' sources disagree
    with pytest.raises(ArgumentError, match=r"unified.preset: expected one of 'inference', 'app'; got 'notebook'"):
        plan_unified("janus", {**NEEDED, "preset": "notebook"})


def test_janus_app_preset_samples_as_deepseeks_demo_and_keeps_the_old_names_without_it():
    app = plan_unified("janus", {**NEEDED, "preset": "app"})
    assert app.identity["settings"]["temperature"] == 0.1 and app.identity["settings"]["top_p"] == 0.95
    assert app.name == plan_unified("janus", {**NEEDED, "temperature": 0.1, "top_p": 0.95}).name
    plain = plan_unified("janus", dict(NEEDED))
    assert "top_p" not in plain.identity["settings"]  # none: not passed, and the name is the one it always was
    assert plain.name == plan_unified("janus", {**NEEDED, "preset": "inference", "top_p": "none"}).name
    with pytest.raises(ArgumentError, match=r"unified.top_p: expected a number in \(0, 1\]; got 0"):
        plan_unified("janus", {**NEEDED, "top_p": 0})


def test_janus_passes_the_presets_top_p_to_its_sampling(tiny_janus, monkeypatch):
    from PIL import Image

    from lmms_genbench.generators.unified import build_unified

    model = build_unified("janus", pretrained=tiny_janus, device="cpu", dtype="float32", preset="app")
    seen = {}

    def generate(**kwargs):
        seen.update(kwargs)
        return kwargs["input_ids"]

    monkeypatch.setattr(model.model, "generate", generate)
    model.describe([Image.new("RGB", (16, 16))], "Describe.", {"max_new_tokens": 2})
    assert (seen["do_sample"], seen["temperature"], seen["top_p"]) == (True, 0.1, 0.95)


def test_from_parts_takes_the_preset_too():
    pytest.importorskip("torch")
    from lmms_genbench.generators.unified.bagel import BagelUnified
    from lmms_genbench.generators.unified.bagel.loading import SPECIAL_TOKENS

    class Tokenizer:  # what from_parts reads of one: the special tokens' ids
        def get_vocab(self):
            return {token: i for i, token in enumerate(SPECIAL_TOKENS)}

    model = BagelUnified.from_parts(None, None, Tokenizer(), device="cpu", preset="app")
    assert model.flow.image_scale == 1.5 and model.max_new_tokens == 512 and model.name.startswith("bagel-random-")
    assert BagelUnified.from_parts(None, None, Tokenizer(), device="cpu", cfg_img_scale=2.0).flow.image_scale == 2.0


def _literal(node):
    """A literal, where ``dict(key=...)`` calls count as literals."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict":
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)


def test_the_lmms_eval_preset_is_lmms_evals_own_generate_settings():
    """Its ``bagel_umm`` class (models/simple/bagel.py), read as text (importing it needs flash_attn)."""
    import lmms_eval

    path = Path(lmms_eval.__file__).parent / "models" / "simple" / "bagel.py"
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "BASE_PARAMS")
    base = _literal(node.value)
    generate, answer = base["generate"], base["understanding"]
    model = _bagel(preset="lmms_eval")
    assert list(model.cfg_interval) == generate["cfg_interval"]
    for name in ("cfg_text_scale", "cfg_img_scale", "timestep_shift", "num_timesteps", "cfg_renorm_min",
                 "cfg_renorm_type"):
        assert getattr(model, name) == generate[name], name
    assert model.max_new_tokens == answer["max_think_token_n"] and not answer["do_sample"]


def test_docs_support_defaults_rows_are_the_tables():
    script = load_script("scripts/support_table.py", "support_table")
    text = (ROOT / "docs" / "support.md").read_text()
    rendered = script.unified_defaults()
    assert rendered in text, ("docs/support.md's unified defaults differ from the "
                              "tables: run python scripts/support_table.py --unified")
    for family in FAMILIES:
        assert _table(family).defaults_cell() in rendered
    assert "`unified.preset`" in rendered and all(f"`{name}`" in rendered for name in PRESETS)


def test_the_models_doc_shows_the_bagel_presets():
    text = (ROOT / "docs" / "models.md").read_text()
    assert "unified.preset=app" in text
    assert all(f"`{name}`" in text for name in PRESETS)


@pytest.mark.skipif(sys.platform == "win32", reason="the installed console script")
def test_check_takes_a_bagel_preset_and_refuses_an_unknown_one_at_the_front_door(capsys, tmp_path):
    from lmms_eval.utils import simple_parse_args_string

    from lmms_genbench.cli import main
    from lmms_genbench.command import read_command

    tiny = ROOT / "tests" / "support" / "data" / "parity" / "bagel" / "BAGEL-7B-MoT-tiny"
    model_args = f"unified=bagel,unified.preset=app,unified.pretrained={tiny},unified.device=cpu"
    # the plan the run takes: the values the preset sets, and only those, name the model
    (role,) = read_command("cycle", simple_parse_args_string(model_args)).roles
    assert plan_unified(role.name, role.args).name == plan_unified(
        "bagel", {"pretrained": str(tiny), "device": "cpu", **PRESETS["app"]}).name
    common = ["check", "--model", "cycle", "--tasks", "sdp_smoke", "--output_path", str(tmp_path / "logs")]
    assert main([*common, "--model_args", model_args]) == 0, capsys.readouterr().err
    assert main([*common, "--model_args", model_args.replace("preset=app", "preset=demo")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert ("unified=bagel: unified.preset: expected one of 'notebook', 'app', 'lmms_eval', 'inferencer'; "
            "got 'demo'") in err and "Fix:" in err
