"""The upstream pull request applied to lmms-eval's own source and run there, with this
package's hooks off (issue 35): the registry's lmms-eval package (the installed copy, from the
lock) is copied into a temporary tree, ``lmms-genbench upstream export`` writes the pull request
into it, and ``lmms-eval`` from that tree (tests/support/upstream_run.py: our entry point hidden, no
hook in place) runs mmeception_smoke and sdp_smoke in one call and two ChEF smoke tasks in
another. Their scores must equal the plugin's, run the same way (and the pins, within their
float-noise allowance). The written Python passes lmms-eval's black and isort, and
the tests the export adds to their ``test/`` tree pass there."""

import math
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.host_lint import host_lint
from tests.support.lmms_eval_runs import BIN, PTH_LINE, results_file, run
from tests.support.score_pins import DRIFT_REL, EXACT_REL, mismatches, pins


ROOT = Path(__file__).resolve().parents[2]
CYCLE_TASKS = ("mmeception_smoke", "sdp_smoke")
CHEF_TASKS = ("chef_hallucination_smoke", "chef_calibration_smoke")
# lmms-eval's per-sample statistics of the score_key metric, known only once the chains are
# scored: our calculate_aggregate_metric hook provides them; without it they are N/A (docs/plugin.md)
HOOK_ONLY = {f"{m}_stderr_{kind}" for m in ("gc@3", "mcd_avg") for kind in ("clt", "clustered")}


def _upstream(tree, tmp, log, *args, **env):
    # the wheel's start-up line runs first, as in every process of a wheel install (CI's): its hooks must stay off too
    start = (f"{PTH_LINE}\nimport runpy, sys\nsys.argv = ['upstream_run', *{[str(tree), *args]!r}]\n"
             "runpy.run_module('tests.support.upstream_run', run_name='__main__')")
    proc = run([sys.executable, "-c", start], tmp, log=log, PYTHONPATH=str(ROOT), **env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "hooks in place after the run: []" in proc.stdout
    return proc


def _both(tree, tmp, name, args):
    """The results of ``lmms-eval ARGS`` from the exported tree, hooks off, and through the
    plugin (one call each: a run with other tasks beside it may round differently), each with a
    store of its own (neither resumes the other's chains)."""
    _upstream(tree, tmp, f"{name}.log", "lmms-eval", *args, "--output_path", str(tmp / name), LMMS_GENBENCH_ARTIFACTS=str(tmp / f"{name}_art"))
    proc = run([str(BIN / "lmms-eval"), *args, "--output_path", str(tmp / f"{name}_plugin")], tmp, log=f"{name}_plugin.log", LMMS_GENBENCH_ARTIFACTS=str(tmp / f"{name}_plugin_art"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return results_file(tmp / name)[1], results_file(tmp / f"{name}_plugin")[1]


def _metrics(results, task):
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "," in k}


def test_the_export_runs_in_lmms_evals_source_and_scores_as_the_plugin(tmp_path):
    import lmms_eval

    tree = tmp_path / "lmms-eval"
    shutil.copytree(Path(lmms_eval.__file__).parent, tree / "lmms_eval", ignore=shutil.ignore_patterns("__pycache__"))
    export = subprocess.run([str(BIN / "lmms-genbench"), "upstream", "export", str(tree)], capture_output=True, text=True, check=False)
    assert export.returncode == 0, export.stderr
    written = [line.split()[-1] for line in export.stdout.splitlines()[:-1]]
    assert host_lint([tree / p for p in written if p.endswith(".py")], tree) == []  # the registry edit included

    _upstream(tree, tmp_path, "tests.log", "pytest", str(tree / "test" / "eval" / "test_genbench_tasks.py"), "-q", "-m", "not slow", "-p", "no:cacheprovider")

    cycle = ["--model", "cycle", "--model_args", "preset=smoke", "--tasks", ",".join(CYCLE_TASKS)]
    upstream, plugin = _both(tree, tmp_path, "cycle", cycle)
    for task in CYCLE_TASKS:
        ours, theirs = _metrics(upstream, task), _metrics(plugin, task)
        assert set(ours) == set(theirs), task
        for key, value in ours.items():
            if key in HOOK_ONLY:
                assert value == "N/A" and isinstance(theirs[key], float), (task, key)
            elif isinstance(value, float):
                assert math.isclose(value, theirs[key], rel_tol=EXACT_REL, abs_tol=1e-12), (task, key, value, theirs[key])
            else:
                assert value == theirs[key], (task, key, value, theirs[key])
    headline = {t: {k: v for k, v in _metrics(upstream, t).items() if "stderr" not in k} for t in CYCLE_TASKS}
    # the pins come from the shared smoke run (all cycle tasks in one call); these runs differ from it in
    # how the tasks batch, by up to 2.5e-5 relative on the pins' own machine: the drift allowance
    assert mismatches(headline, {t: pins()[t] for t in CYCLE_TASKS}, DRIFT_REL) == []

    upstream, plugin = _both(tree, tmp_path, "chef", ["--model", "chef", "--model_args", "preset=smoke,judge=inner", "--tasks", ",".join(CHEF_TASKS)])
    for task in CHEF_TASKS:
        assert _metrics(upstream, task) == _metrics(plugin, task), task
        assert _metrics(upstream, task)["n_docs"] == 6 and _metrics(upstream, task)["n_failed"] == 0
