"""The package's shape: layers point one way, and each task's YAML and scorer agree."""

import re
from pathlib import Path

import pytest
from lmms_eval.utils import load_yaml_config

from lmms_genbench.store import Chain

from tests.support import import_graph

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "lmms_genbench" / "tasks"
# every task whose docs are chains of the cycle model
CYCLE_TASKS = sorted(
    p for p in TASKS.glob("*/*.yaml")
    if p.parent.name in ("mmeception", "sdp") and not p.name.startswith("_")
)


def test_the_import_graph_has_no_cycle():
    assert import_graph.cycles() == []


def test_no_private_name_is_imported_from_another_package():
    assert import_graph.private_imports_across_packages() == []


def test_the_core_layer_imports_nothing_else_from_the_package():
    graph = import_graph.imports(module_level_only=False)
    core = {m: sorted(t for t, _ in edges if not t.startswith("lmms_genbench.core"))
            for m, edges in graph.items() if m.startswith("lmms_genbench.core")}
    assert all(not targets for targets in core.values()), core


def test_the_store_imports_only_the_core():
    graph = import_graph.imports(module_level_only=False)
    outside = {m: sorted(t for t, _ in edges if not t.startswith(("lmms_genbench.core", "lmms_genbench.store")))
               for m, edges in graph.items() if m.startswith("lmms_genbench.store")}
    assert all(not targets for targets in outside.values()), outside


def test_scorers_analysis_and_cli_never_import_the_engine():
    """They read chains through ``store/``; running a protocol is the engine's and the models'."""
    graph = import_graph.imports(module_level_only=False)
    readers = ("lmms_genbench.metrics.scorers", "lmms_genbench.analysis", "lmms_genbench.cli")
    found = {m: sorted(t for t, _ in edges if t.startswith("lmms_genbench.engine"))
             for m, edges in graph.items() if m.startswith(readers)}
    assert {m: t for m, t in found.items() if t} == {}


def test_process_wide_state_lives_in_the_state_module_alone():
    """Data leaves a scorer in what it returns, never through a module-level dict or a
    thread-local (no HOST_SCORES, no _VERDICTS); what must outlive a call is a named, documented
    slot of ``core/state.py`` (reset() empties them all: tests/unit/core/test_state.py)."""
    assert import_graph.mutable_state() == {"lmms_genbench.core.state": {"_VALUES"}}


@pytest.mark.parametrize("source, names", [
    ("_SEEN = {}\ndef f(k):\n    _SEEN[k] = 1\n", {"_SEEN"}),  # a container the module changes
    ("_SEEN = set()\ndef f(k):\n    _SEEN.add(k)\n", {"_SEEN"}),
    ("_LOCAL = threading.local()\ndef f():\n    _LOCAL.verdicts = []\n", {"_LOCAL"}),
    ("_X = None\ndef f():\n    global _X\n    _X = 1\n", {"_X"}),  # rebound with global
    ("_NETWORKS = ModelCache()\n", {"_NETWORKS"}),  # a cache object
    ("@functools.lru_cache(maxsize=1)\ndef f():\n    return 1\n", {"f"}),  # memoized functions and methods
    ("@cache\ndef f():\n    return 1\n", {"f"}),
    ("class A:\n    @lru_cache\n    def m(self):\n        return 1\n", {"m"}),
    ("NAMES = {'a': 1}\nTABLE = [1, 2]\n", set()),  # constants, never changed
    ("def f():\n    seen = {}\n    seen[1] = 2\n", set()),  # a call's own dict
])
def test_the_state_check_sees_each_kind_of_process_wide_state(source, names):
    assert import_graph.module_state(source) == names


# test modules that still import another's helpers: owned by work in progress when the rule came
TEST_IMPORTS_LEFT: set[tuple[str, str]] = set()


def test_no_test_module_imports_another():
    """Shared test helpers live in tests/support/ (fakes.py, chains.py, prepare_checks.py, ...)
    or conftest.py, never in a test module another one imports (relatively or as tests.x.test_y)."""
    import ast

    found = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found |= {(path.stem, n) for n in names if any(part.startswith("test_") for part in n.split("."))}
    assert found <= TEST_IMPORTS_LEFT, sorted(found - TEST_IMPORTS_LEFT)


def test_planning_and_the_wave_runner_are_handed_a_policy_not_the_engine():
    import inspect

    from lmms_genbench.engine.planning import plan, resume
    from lmms_genbench.engine.waves import WaveRunner

    for function in (plan, resume, WaveRunner.__init__):
        params = list(inspect.signature(function).parameters)
        assert "engine" not in params and "policy" in params, (function.__qualname__, params)
    for module in ("planning", "waves", "steps"):
        assert "self.engine" not in (TASKS.parent / "engine" / f"{module}.py").read_text()


def test_functional_metrics_import_no_network_and_no_scorer():
    graph = import_graph.imports(module_level_only=False)
    for module, edges in graph.items():
        if module.startswith("lmms_genbench.metrics.functional"):
            assert not [t for t, _ in edges if ".networks" in t or ".scorers" in t], module


def _length(gen_kwargs):
    if "generations" in gen_kwargs:
        return int(gen_kwargs["generations"])
    return 2 * int(gen_kwargs.get("iterations", 3))


@pytest.mark.parametrize("path", CYCLE_TASKS, ids=lambda p: p.stem)
def test_metric_list_equals_what_process_results_reports(path, tmp_path):
    """The task's own process_results, given a chain of the task's length and scorer
    settings, returns exactly the metrics its YAML lists: YAML and scorer cannot drift."""
    config = load_yaml_config(str(path))
    kwargs = config["generation_kwargs"]
    direction = kwargs.get("direction") or "image_first"
    chain = Chain(chain_id="x", direction=direction, length=_length(kwargs), hops=0,
                  namespace=str(tmp_path), folder="x", task=config["task"], scorer=kwargs.get("scorer") or {})
    doc = {"chain_id": "x", "category": "scene", "source": "docci",
           "metadata": '{"tag": "single_object", "include": [{"class": "cat", "count": 1}]}'}
    returned = config["process_results"](doc, [chain.to_json()])
    listed = [m["metric"] for m in config["metric_list"]]
    assert len(listed) == len(set(listed))
    assert sorted(returned) == sorted(listed)
    aggregations = {m["aggregation"].__name__ for m in config["metric_list"]}
    assert len(aggregations) == 1, f"one aggregate per task, got {aggregations}"


def test_the_contributing_map_names_every_package_and_module():
    root = TASKS.parent
    text = (root.parent / "CONTRIBUTING.md").read_text()
    block = text.split("## Map", 1)[1].split("```")[1]
    named = set(re.findall(r"\b([a-z_]+)(?:/|\.py)", block)) - {"lmms_genbench"}
    present = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in root.glob("*.py") if p.name != "__init__.py"}
    present |= {p.name for p in (root / "metrics").iterdir() if (p / "__init__.py").exists()}
    assert present <= named, f"not in the map: {sorted(present - named)}"
    anywhere = {p.stem for p in root.rglob("*.py")} | {p.name for p in root.rglob("*") if p.is_dir()}
    assert named <= anywhere, f"in the map but not in the tree: {sorted(named - anywhere)}"


# what a vendored mmeception imports by name (generators/registry.py's table) besides its own graph
VENDOR_SEEDS = ["lmms_genbench.tasks.mmeception.utils", "lmms_genbench.models.cycle",
                "lmms_genbench.generators.diffusers_backend", "lmms_genbench.generators.openai_backend",
                "lmms_genbench.generators.smoke"]


def test_the_plugin_doc_lists_the_modules_a_vendored_mmeception_needs():
    text = (TASKS.parent.parent / "docs" / "plugin.md").read_text()
    block = text.split("<!-- vendored-mmeception -->", 1)[1].split("```")[1]
    listed = set()
    for line in block.strip().splitlines():
        folder, *files = line.split()
        listed |= {f"{'' if folder == './' else folder}{f}" for f in files}
    needed = set()
    for module in import_graph.closure(*VENDOR_SEEDS):
        parts = module.split(".")[1:]
        is_package = (TASKS.parent.joinpath(*parts) / "__init__.py").exists()
        needed.add("/".join(parts) + ("/__init__.py" if is_package else ".py"))
    assert listed == needed, {"listed only": sorted(listed - needed), "needed only": sorted(needed - listed)}


# what importing pure maths must not load: no engine, host, generator, model, scorer or network
HEAVY_PARTS = ("engine", "host", "generators", "models", "scorers", "networks", "smoke")


@pytest.mark.parametrize("module", ["lmms_genbench.metrics.functional",
                                    "lmms_genbench.metrics.functional.intervals",
                                    "lmms_genbench.metrics.functional.chef"])
def test_importing_functional_metrics_loads_no_engine_host_generator_scorer_or_network(module):
    """Package ``__init__``s re-export lazily (core/lazy.py): importing one maths module
    does not drag in the rest of the package through ``metrics/__init__.py``."""
    import subprocess
    import sys

    code = (f"import sys, {module}\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('lmms_genbench'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    heavy = [m for m in loaded if set(m.split(".")[1:]) & set(HEAVY_PARTS)]
    assert module in loaded
    assert heavy == [], heavy


def test_lazy_packages_still_export_their_public_names():
    import lmms_genbench.analysis as analysis
    import lmms_genbench.autobench as autobench
    import lmms_genbench.metrics as metrics

    for package in (metrics, autobench, analysis):
        assert [n for n in package.__all__ if getattr(package, n, None) is None] == []
    assert metrics.mean_cumulative_drift.__name__ == "mcd"
    assert metrics.DRIFT_MAPPINGS is __import__("lmms_genbench.metrics.functional.drift",
                                                fromlist=["MAPPINGS"]).MAPPINGS
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        metrics.nope
