"""lmms_genbench.hooks: the declared table, what the docs show, and each hook's scope and undo.
What is in place during a real run is held in test_hooks_builtin_tasks.py (--e2e)."""

import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from lmms_genbench.hooks import TABLE, Hook, changed
from lmms_genbench.hooks.run import Run, current, scope
from lmms_genbench.hooks.scope import is_our_task, model_type, our_tasks
from lmms_genbench.hooks.signals import handling
from lmms_genbench.hooks.wrap import is_wrapped, unwrap_method, wrap_method

from tests.support.lmms_eval_runs import PTH_LINE, ROOT

HEAVY = ("torch", "transformers", "diffusers", "numpy", "lmms_eval.tasks", "lmms_eval.evaluator",
         "lmms_genbench.engine", "lmms_genbench.models")


def test_the_docs_show_the_declared_table():
    text = (ROOT / "docs" / "plugin.md").read_text()
    rows = text.split("<!-- hook-table -->", 1)[1].strip().split("\n\n", 1)[0].splitlines()[2:]
    shown = [Hook(*(cell.strip() for cell in row.strip("|").split(" | "))) for row in rows]
    assert shown == list(TABLE)


def _import_models(hide_plugin):
    """The modules loaded after ``import lmms_eval.models`` in a child process that ran the wheel's
    start-up line (as a wheel install does; hidden with the entry point: as if not installed)."""
    hide = ("import tests.support.builtin_tasks_run as r; r._hide_our_entry_point(); r._hide_our_startup_line()\n"
            if hide_plugin else "")
    code = PTH_LINE + "\n" + hide + ("import sys, lmms_eval.models as m\n"
                                      "print(sorted(sys.modules))\n"
                                      "print(sorted(n for n in ('cycle', 't2i', 'chef') if n in m.AVAILABLE_SIMPLE_MODELS))\n")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    modules, listed = out.stdout.strip().splitlines()[-2:]
    return set(eval(modules)), eval(listed)


def test_listing_models_imports_nothing_heavy():
    """The start-up line and ``import lmms_eval.models`` (every listing) load our entry point and
    four stdlib-only modules; nothing heavy, as without the plugin."""
    with_plugin, listed = _import_models(False)
    without, _ = _import_models(True)
    assert listed == ["chef", "cycle", "t2i"]
    assert not [m for m in with_plugin if m.split(".")[0] in HEAVY or m in HEAVY or m.startswith(HEAVY)]
    ours = {m for m in with_plugin if m.startswith("lmms_genbench")}
    assert ours == {"lmms_genbench", "lmms_genbench.plugin", "lmms_genbench.hooks", "lmms_genbench.hooks.scope",
                    "lmms_genbench.hooks.startup"}
    assert with_plugin - without <= {"lmms_genbench.plugin"}  # nothing of anyone else


def test_a_method_is_wrapped_once_and_unwrapped_to_what_it_was():
    class Base:
        def f(self):
            return "base"

    class Owner(Base):
        def g(self):
            return "g"

    hooked = lambda original: lambda self: "hooked " + original(self)
    for name, plain in (("f", "base"), ("g", "g")):
        assert wrap_method(Owner, name, hooked) and wrap_method(Owner, name, hooked)
        assert getattr(Owner(), name)() == f"hooked {plain}" and is_wrapped(Owner, name)
        assert unwrap_method(Owner, name) and not unwrap_method(Owner, name)
        assert getattr(Owner(), name)() == plain and not is_wrapped(Owner, name)
    assert "f" not in Owner.__dict__  # the inherited method is inherited again
    assert not wrap_method(Owner, "missing", hooked)


def test_models_are_ours_by_class_and_tasks_by_where_their_functions_live():
    from lmms_genbench.models.t2i import TextToImageModel
    from lmms_genbench.tasks.autobench import utils

    class Sub(TextToImageModel):
        pass

    assert model_type(Sub.__new__(Sub)) == "t2i"
    class TextToImageModelLookalike:  # the same class name elsewhere is not ours
        pass

    TextToImageModelLookalike.__qualname__ = "TextToImageModel"
    assert model_type(SimpleNamespace()) is None and model_type(TextToImageModelLookalike()) is None
    ours = SimpleNamespace(config=SimpleNamespace(process_results=utils.process_results, task="autobench"))
    builtin = SimpleNamespace(config=SimpleNamespace(process_results=lambda doc, results: {}, task="pope"))
    assert is_our_task(ours) and not is_our_task(builtin) and not is_our_task(None)
    assert our_tasks({"autobench": ours, "group": {"pope": builtin}}) == ["autobench"]


def test_a_run_scope_puts_its_hooks_in_place_and_takes_them_all_off():
    import torch
    from loguru import logger

    before_threads, before_patcher, before = torch.get_num_threads(), logger._core.patcher, changed()
    seen = []
    sink = logger.add(lambda m: seen.append(m.record["message"]), level="WARNING")
    os.environ["HOOKS_TEST_TOKEN"] = "tok-0123456789"
    try:
        # our simple_evaluate wrapper puts the signal handler in place around the run (hooks/entry.py)
        with pytest.raises(RuntimeError), handling(), scope(Run("t2i", (), one_thread=True)) as run:
            assert current() is run and torch.get_num_threads() == 1
            with scope(Run("cycle")) as inner:  # nested: the outer run's hooks hold, and stay
                assert inner is run
            assert current() is run
            assert changed() - before == {h.target for h in TABLE if h.when == "run"}
            logger.warning("inside tok-0123456789")
            raise RuntimeError("a crash inside the run")
        logger.warning("outside tok-0123456789")
    finally:
        logger.remove(sink)
        del os.environ["HOOKS_TEST_TOKEN"]
    assert seen == ["inside ***", "outside tok-0123456789"]
    assert current() is None and changed() == before
    assert torch.get_num_threads() == before_threads and logger._core.patcher is before_patcher
    with scope(Run(None, ("autobench",))):  # our task with another model: scores only, no masking
        assert changed() - before == {"lmms_eval.evaluator_utils.TaskOutput.calculate_aggregate_metric",
                                      "logging.setLogRecordFactory"}


def test_our_log_lines_show_control_characters_and_bidi_overrides_as_escapes(caplog):
    """Issue 43: a file name holding ESC, BEL and U+202E in one of our log lines, during a run."""
    import logging

    name = "cat\x1b[31m\x07\u202egnp.exe<script>"
    log = logging.getLogger("lmms_genbench.data.photos")
    with caplog.at_level(logging.WARNING), scope(Run("cycle")):
        log.warning("skipping %s: not an image", name)
    assert caplog.records[-1].getMessage() == "skipping cat\\x1b[31m\\x07\\u202egnp.exe<script>: not an image"
    logging.getLogger("other").warning("raw %s", name)  # not ours, and after the run: untouched
    assert caplog.records[-1].getMessage() == f"raw {name}"


def test_the_table_names_each_lasting_change_once_and_its_lifetime():
    assert len({h.target for h in TABLE}) == len(TABLE)
    assert {h.when for h in TABLE} == {"start-up", "import", "run", "call"}
    assert all(re.fullmatch(r"[\w. ]+", h.target) for h in TABLE)


class _Bars:  # stands in for the tqdm an lmms-eval model's module imports
    def __init__(self, *args, disable=False, **kwargs):
        self.disable = disable


tqdm = _Bars  # this module stands in for the model's module: _quiet_bars swaps its tqdm for the call


class _SeeingLM:
    """A model whose class answers max(request, model), as lmms-eval 0.7.3's do; it records
    what hooks.changed() finds while it answers."""

    is_simple = True
    max_new_tokens = 64

    def __init__(self):
        self.task_dict, self.seen = {}, []

    def _select_max_new_tokens(self, requested):
        return max(requested, self.max_new_tokens)

    def generate_until(self, requests):
        self.seen.append(changed())
        self.bars_off = tqdm().disable
        assert self.max_new_tokens == 3 and self.task_dict  # the call's view
        return ["an answer" for _ in requests]


class _VllmChat(_SeeingLM):
    is_simple = False

    def _resolve_sampling_params(self, kwargs):
        return kwargs


_VllmChat.__name__ = _VllmChat.__qualname__ = "VLLM"
_VllmChat.__module__ = "lmms_eval.models.chat.vllm"  # host picks the PIL path by this name


def _call_targets(*names):
    from lmms_genbench.hooks.call import TARGETS

    return {TARGETS[n] for n in names}


def test_each_call_scoped_change_is_in_place_during_its_call_only():
    """The table's "call" rows (hooks/call.py): found by changed() while their call runs, and
    gone after it, what they changed as it was."""
    from PIL import Image, ImageFile

    from lmms_genbench import host
    from lmms_genbench.engine import images
    from lmms_genbench.generators.pipeline_rules import counted_tokenizers, truncation_filter

    before = changed()
    assert not {h.target for h in TABLE if h.when == "call"} & before
    lm = _SeeingLM()
    assert host.generate(lm, [("Describe.", {"max_new_tokens": 3}, [])], quiet=True) == ["an answer"]
    assert lm.seen[0] - before == _call_targets("silent_tqdm", "task_dict", "max_new_tokens") and lm.bars_off
    chat = _VllmChat()
    host.generate(chat, [("Describe.", {"max_new_tokens": 3}, [Image.new("RGB", (4, 4))])])
    assert chat.seen[0] - before == _call_targets("task_dict", "max_new_tokens", "make_one_request")
    assert not chat.bars_off
    assert "make_one_request" not in vars(chat) and chat.max_new_tokens == 64 and chat.task_dict == {}
    assert tqdm is _Bars

    flag = ImageFile.LOAD_TRUNCATED_IMAGES
    with images._strict_decoding():
        assert changed() - before == _call_targets("strict_image_decoding") and not ImageFile.LOAD_TRUNCATED_IMAGES
    assert ImageFile.LOAD_TRUNCATED_IMAGES == flag

    class Pipeline:
        def __init__(self):
            self.tokenizer = "a tokenizer"

    pipeline = Pipeline()
    with truncation_filter(pipeline, True), counted_tokenizers(pipeline, {"text_encoder:CLIPTextModel": 77}):
        assert changed() - before == _call_targets("log_filter", "tokenizers")
        assert pipeline.tokenizer != "a tokenizer"
    assert vars(pipeline) == {"tokenizer": "a tokenizer"} and changed() == before


#: what changing another library's objects looks like in our source: allowed in hooks/ only
_PATCHES = re.compile(r"\.addFilter\(|LOAD_TRUNCATED_IMAGES\s*=|signal\.signal\(|setLogRecordFactory\(|"
                      r"\.tqdm\s*=|\.patcher\s*=|set_num_threads\(|object\.__setattr__\((?!self\b|det\b)|"
                      r"\blm\.\w+\s*=[^=]|\bmodule\.\w+\s*=[^=]")
#: not a change to the host: a unified model we built, switched between the two modes its class
#: defines (``mode``, ``inference_params``: its own settings, as lmms-eval's BASE_PARAMS name them)
_ALLOWED = ("lmms_genbench/generators/unified/lmms.py: self.lm.mode, self.lm.inference_params = mode, dict(params)",)


def test_no_module_outside_hooks_changes_another_librarys_objects():
    """Issue 42, item 4: every change to the host, for the process or one call, is made from
    hooks/ and declared in its table."""
    found = []
    for path in sorted((ROOT / "lmms_genbench").rglob("*.py")):
        if "hooks" in path.relative_to(ROOT / "lmms_genbench").parts[:1]:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _PATCHES.search(line.split("#", 1)[0]) and f"{path.relative_to(ROOT)}: {line.strip()}" not in _ALLOWED:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
