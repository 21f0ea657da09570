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
    assert {h.when for h in TABLE} == {"start-up", "import", "run"}
    assert all(re.fullmatch(r"[\w. ]+", h.target) for h in TABLE)
