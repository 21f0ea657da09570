"""The store never scores what it should not: failed answers are never stored, every hop is
verified against its recorded hash and input before it is reused, refused hops (and all
later ones) are moved aside and recomputed, one run computes a chain at a time, SIGTERM
drains queued writes, and stale temporary files are swept."""

import json
import os
import signal
import threading
import time

import pytest

from lmms_genbench.cli import main as cli
from lmms_genbench.core.secrets import scrub
from lmms_genbench.engine import ArtifactStore, CycleEngine
from lmms_genbench.store import RECORDS, STORE_FORMAT, check_chain, failure_marker

from tests.support.fakes import FakeDescriber, FakeGenerator
from tests.support.store_chains import complete_store, hop_bytes, jobs_of, spec_of

SENTINEL = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Error code: 500 - {'error': 'upstream down'}"


class Sentinel(FakeDescriber):
    """lmms-eval's openai class against an endpoint that always answers 500."""

    def describe(self, images, prompt, gen_kwargs):
        self.calls.append(len(images))
        return [SENTINEL + f" key={os.environ.get('OPENAI_API_KEY', '')}"] * len(images)


# -- outputs are checked before they are stored -----------------------------------------


@pytest.mark.parametrize("text", [SENTINEL, "[LMMS_EVAL_BUDGET_EXCEEDED]", "[GENERATION_FAILED] boom",
                                  "[SAFETY_BLOCKED:HARM_CATEGORY]"])
def test_every_lmms_eval_failure_marker_is_recognised(text):
    assert failure_marker(text) and not failure_marker("A photo of " + text)


def test_a_failing_describer_fails_every_doc_stores_nothing_and_a_rerun_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    store, spec = ArtifactStore(tmp_path), spec_of()
    jobs = jobs_of(store, spec)
    outcomes, stats = CycleEngine(Sentinel(), FakeGenerator()).run(jobs)
    assert [o.failure.stage for o in outcomes] == ["describe"] * 3
    assert all("upstream down" in o.failure.reason for o in outcomes)  # the endpoint's reason
    assert not list(tmp_path.rglob("001.txt"))  # no failure text stored as a description
    assert all("sk-test" not in o.failure.reason and "***" in o.failure.reason for o in outcomes)
    assert not any(b"sk-test" in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())

    describer = FakeDescriber()  # the endpoint is healthy again
    again, _ = CycleEngine(describer, FakeGenerator()).run(jobs)
    assert all(o.ok for o in again) and describer.calls == [3, 3]


def test_empty_and_whitespace_descriptions_are_failures_not_prompts(tmp_path):
    store, spec = ArtifactStore(tmp_path), spec_of(iterations=1)
    jobs = jobs_of(store, spec, 2)
    colour = lambda k: (20 * k, 100, 200)  # noqa: E731
    describer = FakeDescriber(replies={colour(0): "", colour(1): " \n\t "})
    outcomes, _ = CycleEngine(describer, FakeGenerator()).run(jobs)
    assert all(o.failure.reason == "empty description" for o in outcomes)
    assert not list(tmp_path.rglob("001.txt"))


def test_secrets_are_masked_by_value_and_by_shape(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "s3cr3t-value-123")
    text = scrub("401 for s3cr3t-value-123, Bearer abcdefghijk, hf_ABCDEFGHIJKL and sk-proj-abcdefghijkl")
    assert "s3cr3t" not in text and "abcdefghijk" not in text and "hf_ABC" not in text and "sk-proj" not in text


# -- a verified store ------------------------------------------------------------------


@pytest.mark.parametrize("damage, hop", [
    ("empty", 4), ("garbage", 4), ("truncate", 2),  # images: the last hop, a middle one
    ("edit", 1), ("empty", 3), ("utf8", 1), ("delete", 2),  # texts, and a deleted middle image
])
def test_a_damaged_hop_and_every_later_one_are_moved_aside_and_recomputed(tmp_path, damage, hop):
    jobs, clean = complete_store(tmp_path)
    path = jobs[1].location.path(hop, "image" if hop % 2 == 0 else "text")
    data = path.read_bytes()
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"\x89PNG not really")
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "edit":
        path.write_text("an edited description", encoding="utf-8")
    elif damage == "utf8":
        path.write_bytes(b"\xff\xfe broken")
    else:
        path.unlink()

    describer, generator = FakeDescriber(), FakeGenerator()
    outcomes, stats = CycleEngine(describer, generator).run(jobs)
    assert all(o.ok for o in outcomes)
    assert hop_bytes(jobs) == clean  # recomputed exactly what was damaged
    moved = list((jobs[1].location.directory / "quarantine").rglob("[0-9][0-9][0-9].*"))
    assert sorted(p.name for p in moved) == [f"{h:03d}.{'png' if h % 2 == 0 else 'txt'}"
                                              for h in range(hop, 5) if not (damage == "delete" and h == hop)]
    assert stats.hops_computed == 5 - hop and stats.chains_repaired == 1
    assert all(check_chain(j.location.directory).problem is None for j in jobs)


def test_a_hop_drawn_from_another_input_is_refused(tmp_path):
    """Two runs raced and hop 2 was drawn from a description other than the stored hop 1."""
    jobs, clean = complete_store(tmp_path)
    text = jobs[0].location.path(1, "text")
    text.write_text("another description that a second run wrote", encoding="utf-8")
    records = jobs[0].location.directory / RECORDS
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    import hashlib

    lines.append({"hop": 1, "sha256": hashlib.sha256(text.read_bytes()).hexdigest(), "input": lines[0]["sha256"]})
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    check = check_chain(jobs[0].location.directory, repair=False)
    assert check.valid == 2 and "computed from another hop 1" in check.problem


def test_a_store_written_before_records_is_verified_by_decoding_and_recorded_once(tmp_path):
    jobs, clean = complete_store(tmp_path)
    for job in jobs:
        (job.location.directory / RECORDS).unlink()
    (jobs[0].location.directory.parent / STORE_FORMAT).unlink()  # a store from before records
    jobs[2].location.path(3, "text").write_bytes(b"")  # and one bad legacy hop
    describer = FakeDescriber()
    outcomes, stats = CycleEngine(describer, FakeGenerator()).run(jobs)
    assert all(o.ok for o in outcomes) and describer.calls == [1] and hop_bytes(jobs) == clean
    assert all(len((j.location.directory / RECORDS).read_text().splitlines()) == 5 for j in jobs)
    assert all(check_chain(j.location.directory, repair=False).unrecorded == 0 for j in jobs)


def test_store_verify_reports_and_repair_quarantines(tmp_path, capsys):
    jobs, _ = complete_store(tmp_path)
    jobs[0].location.path(2, "image").write_bytes(b"")
    assert cli(["store", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{jobs[0].location.directory}: hop 2: empty file (0 bytes)" in out
    assert "3 chains, 12 hops verified, 1 chains with refused hops" in out
    assert jobs[0].location.path(2, "image").exists()  # reporting moves nothing
    assert cli(["store", "verify", str(tmp_path), "--repair"]) == 0
    assert not jobs[0].location.path(2, "image").exists() and not jobs[0].location.path(3, "text").exists()
    assert cli(["store", "verify", str(tmp_path)]) == 0


# -- one writer per chain -----------------------------------------------------------------


class Slow(FakeDescriber):
    def describe(self, images, prompt, gen_kwargs):
        time.sleep(0.2)
        return super().describe(images, prompt, gen_kwargs)


class Unseeded(FakeGenerator):
    """An image API: the same prompt and seed give another image each time."""

    count = 0

    def generate(self, prompts, seeds):
        images = super().generate(prompts, seeds)
        for image in images:
            Unseeded.count += 1
            image.putpixel((1, 1), (Unseeded.count % 256, 0, 0))
        return images


def test_two_runs_on_one_store_compute_each_chain_once(tmp_path):
    store, spec = ArtifactStore(tmp_path), spec_of()
    describers = [Slow(), Slow()]
    generators = [Unseeded(batch_size=1), Unseeded(batch_size=1)]
    results = [None, None]

    def run(i):
        results[i] = CycleEngine(describers[i], generators[i], describer_batch=1).run(jobs_of(store, spec, 4))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(r is not None and all(o.ok for o in r[0]) for r in results)
    # every hop computed once between the two runs; each reports the same complete chains
    assert sum(sum(d.calls) for d in describers) == 4 * 2 and sum(sum(g.calls) for g in generators) == 4 * 2
    assert sum(r[1].chains_waited for r in results) >= 1
    for outcome in results[0][0]:
        assert check_chain(outcome.location.directory, repair=False).problem is None


def test_a_lock_left_by_a_killed_process_blocks_nothing(tmp_path):
    import subprocess
    import sys

    jobs = jobs_of(ArtifactStore(tmp_path), spec_of(iterations=1), 1)
    folder = jobs[0].location.directory
    folder.mkdir(parents=True)
    code = (f"from filelock import FileLock; import os; l = FileLock({str(folder / '.lock')!r}); l.acquire(); "
            "print('held', flush=True); os.kill(os.getpid(), 9)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "held" and proc.returncode == -9
    outcomes, stats = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    assert outcomes[0].ok and stats.chains_waited == 0


# -- signals and leftovers ----------------------------------------------------------------


class TerminatedAfterFirst(FakeDescriber):
    def describe(self, images, prompt, gen_kwargs):
        out = super().describe(images, prompt, gen_kwargs)
        if len(self.calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # a second one: ignored
        return out


def test_sigterm_drains_queued_writes_and_the_rerun_finishes_the_same(tmp_path):
    """Under the one handler (hooks/signals.py, as lmms-eval runs of our models have it): a
    SIGTERM inside a describe call waits for its answers, which are stored; a second one while
    the writes drain is ignored; the handler is put back afterwards."""
    from lmms_genbench.hooks.signals import handling

    store, spec = ArtifactStore(tmp_path / "a"), spec_of()
    jobs = jobs_of(store, spec, 4)
    describer = TerminatedAfterFirst()
    with pytest.raises(KeyboardInterrupt), handling():
        CycleEngine(describer, FakeGenerator(batch_size=2), describer_batch=2, overlap=False).run(jobs)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is put back
    kept = hop_bytes(jobs)
    assert kept and all(check_chain(j.location.directory, repair=False).problem is None for j in jobs)
    # every answer of both describe calls, the one the signal came in included, was stored
    assert len([p for p in kept if p.suffix == ".txt"]) == sum(describer.calls) == 4
    outcomes, _ = CycleEngine(FakeDescriber(), FakeGenerator(batch_size=2), describer_batch=2).run(jobs)
    clean_jobs = jobs_of(ArtifactStore(tmp_path / "b"), spec, 4)
    CycleEngine(FakeDescriber(), FakeGenerator(batch_size=2), describer_batch=2).run(clean_jobs)
    assert [v for _, v in sorted(hop_bytes(jobs).items())] == [v for _, v in sorted(hop_bytes(clean_jobs).items())]


def test_a_run_sweeps_stale_temporary_files_of_the_chains_it_computes(tmp_path):
    store, spec = ArtifactStore(tmp_path), spec_of(iterations=1)
    jobs = jobs_of(store, spec, 1)
    jobs[0].location.directory.mkdir(parents=True)
    stale = jobs[0].location.directory / ".001.txt.abc123.tmp"
    stale.write_bytes(b"half a write")
    outcomes, _ = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    assert outcomes[0].ok and not stale.exists()
