"""SIGTERM ends a run in one line in every phase (issues 34, 43), through the real `lmms-eval`
command: while describing (an API describer stub on 127.0.0.1 signals the client on its second
request, before answering) and while scoring (``$LMMS_GENBENCH_INTERRUPT_AT=score``). Either
way: queued writes drained (the store verifies), one line on stderr, exit status 143, no
traceback; the rerun of the same command finishes and scores. With the store's writes slowed
(tests/support/slow_writes), one and two signals in each phase (start-up, describing, drawing,
scoring) keep the same hops, leave no temporary file and end in the same last line; a signal
during start-up writes nothing."""

import json
import os
import signal
import subprocess

import pytest

from tests.support.lmms_eval_runs import BIN, ROOT, offline_env, results_file
from tests.support.openai_stub import StubHandler, chat_completion, serve


LINE = "lmms-genbench: interrupted by SIGTERM; rerun the same command to resume"
KEY = "sk-stub-0123456789abcdefghij"


class _Describer(StubHandler):
    def answer(self, body):
        if self.server.victim and self.server.count == 2:
            os.kill(self.server.victim, signal.SIGTERM)  # mid-describing, deterministically
        return 200, chat_completion("stub", "a photo of a small object on a plain table")


def _cmd(art, out, model_args):
    return [str(BIN / "lmms-eval"), "--model", "cycle", "--model_args", f"{model_args},artifacts={art}",
            "--tasks", "mmeception_smoke", "--limit", "3", "--output_path", str(out)]


def _stopped(proc_out, proc_err, rc):
    assert rc == 128 + signal.SIGTERM, proc_err[-3000:]
    assert proc_err.strip().splitlines()[-1] == LINE and "Traceback" not in proc_err, proc_err[-3000:]


def _verify(tmp_path, art):
    proc = subprocess.run([str(BIN / "lmms-genbench"), "store", "verify", str(art)], capture_output=True,
                          text=True, env=offline_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stdout


def test_sigterm_while_describing_ends_in_one_line_and_the_rerun_scores(tmp_path):
    server = serve(_Describer)
    server.victim = None
    art = tmp_path / "art"
    args = "preset=smoke,describer=openai,describer.model_version=stub,describer.max_retries=1"
    env = offline_env(tmp_path, OPENAI_API_KEY=KEY, OPENAI_API_BASE=f"http://127.0.0.1:{server.server_port}/v1",
                      NO_PROXY="127.0.0.1,localhost")
    try:
        proc = subprocess.Popen(_cmd(art, tmp_path / "a", args), cwd=tmp_path, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        server.victim = proc.pid
        out, err = proc.communicate(timeout=900)
        (tmp_path / "describe.log").write_text(out + err)
        _stopped(out, err, proc.returncode)
        _verify(tmp_path, art)
        # issue 43: the describe call the signal came in finished, and each answer that came back is stored
        assert len(list(art.rglob("001.txt"))) == server.count == 3, server.count
        server.victim = None
        again = subprocess.run(_cmd(art, tmp_path / "b", args), cwd=tmp_path, env=env, text=True,
                               capture_output=True, timeout=900)
        metrics = results_file(tmp_path / "b")[1]["results"]["mmeception_smoke"]
        assert metrics["n_scored,none"] == 3, again.stderr[-3000:]
    finally:
        server.shutdown()


def test_sigterm_while_scoring_ends_in_one_line_and_the_rerun_scores(tmp_path):
    art = tmp_path / "art"
    proc = subprocess.run(_cmd(art, tmp_path / "a", "preset=smoke"), cwd=tmp_path, text=True, capture_output=True,
                          env=offline_env(tmp_path, LMMS_GENBENCH_INTERRUPT_AT="score"), timeout=900)
    (tmp_path / "score.log").write_text(proc.stdout + proc.stderr)
    _stopped(proc.stdout, proc.stderr, proc.returncode)
    _verify(tmp_path, art)  # every chain was stored before scoring began
    runs = [json.loads(x) for x in next(art.rglob("runs.jsonl")).read_text().splitlines()]
    assert runs[-1]["hops_computed"] == 3 * 6
    again = subprocess.run(_cmd(art, tmp_path / "b", "preset=smoke"), cwd=tmp_path, text=True, capture_output=True,
                           env=offline_env(tmp_path), timeout=900)
    metrics = results_file(tmp_path / "b")[1]["results"]["mmeception_smoke"]
    assert metrics["n_scored,none"] == 3, again.stderr[-3000:]


def _hop_files(art):
    return sorted(p.relative_to(art) for p in art.rglob("[0-9][0-9][0-9].*") if "quarantine" not in p.parts)


def _stopped_slowly(tmp_path, phase, name):
    """One run of mmeception_smoke stopped at ``phase`` by ``$LMMS_GENBENCH_INTERRUPT_AT``, every
    store write slowed by 0.3 s; its stderr, exit status and the hop files it kept."""
    art, out = tmp_path / f"art-{name}", tmp_path / f"out-{name}"
    paths = [str(ROOT / "tests" / "support" / "slow_writes"), os.environ.get("PYTHONPATH", "")]
    env = offline_env(tmp_path, LMMS_GENBENCH_INTERRUPT_AT=phase, GENBENCH_SLOW_WRITES_UNDER=str(art),
                      PYTHONPATH=os.pathsep.join(p for p in paths if p))
    proc = subprocess.run(_cmd(art, out, "preset=smoke"), cwd=tmp_path, text=True, capture_output=True, env=env,
                          timeout=900)
    (tmp_path / f"{name}.log").write_text(proc.stdout + proc.stderr)
    return proc, (_hop_files(art) if art.exists() else []), art, out


@pytest.mark.parametrize("phase", ["start", "describe", "draw", "score"])
def test_one_or_two_signals_in_any_phase_keep_every_queued_hop_and_end_in_the_line(tmp_path, phase):
    """Issue 43: a second signal while the slowed writes drain is ignored (it used to end the
    drain: hops lost, a .tmp left); describing, the answers of the call in flight are stored."""
    kept = {}
    for count, how in ((1, phase), (2, f"{phase}*2"), (2, f"{phase}*2:SIGINT")):
        proc, hops, art, out = _stopped_slowly(tmp_path, how, how.replace("*", "x").replace(":", "-"))
        signum = signal.SIGINT if how.endswith("SIGINT") else signal.SIGTERM
        assert proc.returncode == 128 + signum, (how, proc.stderr[-3000:])
        line = f"lmms-genbench: interrupted by {signum.name}; rerun the same command to resume"
        assert proc.stderr.splitlines()[-1] == line and "Traceback" not in proc.stderr, (how, proc.stderr[-3000:])
        assert proc.stderr.count(line) == 1
        assert not (art.exists() and list(art.rglob("*.tmp"))), how  # nothing half-written
        if phase == "start":
            assert hops == [] and not list(out.rglob("*_results.json")), (how, hops)  # nothing written
        else:
            assert hops, how
            _verify(tmp_path, art)
        kept[how] = hops
    assert len(set(map(tuple, kept.values()))) == 1, {k: len(v) for k, v in kept.items()}
    # 3 chains: the seeds; + the descriptions of the describe call in flight; + the drawing in
    # flight; every hop (seed and 6 generations each) stored before scoring
    assert len(kept[phase]) == {"start": 0, "describe": 6, "draw": 9, "score": 3 * 7}[phase], kept[phase]
