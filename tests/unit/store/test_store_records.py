"""Records are part of the store's format (issue 34): a chain that lost its records in a store
that keeps them is unverified and recomputed, torn record lines are reported and rewritten by
the first repair with every field kept, and a merge copies chains, their records and the
store's own files only, listing what it left out."""

import json

from lmms_genbench.cli import main as cli
from lmms_genbench.engine import CycleEngine
from lmms_genbench.store import (RECORDS, STORE_FORMAT, ArtifactStore, append_record, check_chain, keeps_records,
                                 marker_lost, read_records, read_records_checked, sha256_file)

from tests.support.fakes import FakeDescriber, FakeGenerator
from tests.support.store_chains import complete_store, hop_bytes, jobs_of, spec_of




def test_a_new_store_is_marked_as_keeping_records(tmp_path):
    jobs, _ = complete_store(tmp_path)
    namespace = jobs[0].location.directory.parent
    assert keeps_records(namespace) and json.loads((namespace / STORE_FORMAT).read_text()) == {"records": 1}


def test_lost_records_and_an_edited_hop_are_caught_by_verify_and_recomputed_by_a_rerun(tmp_path, capsys):
    jobs, clean = complete_store(tmp_path)
    chain = jobs[1].location.directory
    (chain / RECORDS).unlink()
    chain.joinpath("001.txt").write_text("a description edited while its records were gone", encoding="utf-8")
    assert cli(["store", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{chain}: hop 0 has no record in a store that keeps records" in out and "unverified" in out
    assert "1 chains with refused hops" in out
    describer = FakeDescriber()
    outcomes, stats = CycleEngine(describer, FakeGenerator()).run(jobs)
    assert all(o.ok for o in outcomes) and stats.chains_repaired == 1 and stats.hops_computed == 4
    assert hop_bytes(jobs) == clean  # the clean run's hops, so its scores
    assert cli(["store", "verify", str(tmp_path)]) == 0


def test_a_namespace_that_lost_its_marker_while_its_chains_kept_records_is_still_a_records_store(tmp_path, capsys):
    """Issue 43: store.json deleted with one chain's hops.jsonl, then a hop edited: the other
    chains' records (written while the marker was there) show the store kept records, so the
    hop is refused as unverified (not trusted by decoding), verify says the marker was lost, and
    the rerun recomputes the chain and writes the marker again."""
    jobs, clean = complete_store(tmp_path)
    namespace = jobs[0].location.directory.parent
    chain = jobs[1].location.directory
    (namespace / STORE_FORMAT).unlink()
    (chain / RECORDS).unlink()
    chain.joinpath("001.txt").write_text("a description edited while its records were gone", encoding="utf-8")
    assert marker_lost(namespace) and not keeps_records(namespace)
    assert cli(["store", "verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{namespace}: its {STORE_FORMAT} marker was lost while its chains kept records" in out
    assert f"{chain}: hop 0 has no record in a store that keeps records" in out
    outcomes, stats = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    assert all(o.ok for o in outcomes) and stats.chains_repaired == 1 and stats.hops_computed == 4
    assert hop_bytes(jobs) == clean and keeps_records(namespace) and not marker_lost(namespace)
    assert cli(["store", "verify", str(tmp_path)]) == 0


def test_a_pre_records_store_is_decoded_once_then_marked_by_repair(tmp_path, capsys):
    jobs, clean = complete_store(tmp_path)
    namespace = jobs[0].location.directory.parent
    (namespace / STORE_FORMAT).unlink()
    for job in jobs:
        (job.location.directory / RECORDS).unlink()
    assert cli(["store", "verify", str(tmp_path)]) == 0  # decodable hops are trusted in this mode
    assert not keeps_records(namespace)
    assert cli(["store", "verify", str(tmp_path), "--repair"]) == 0
    assert keeps_records(namespace) and all(len(read_records(j.location.directory)) == 5 for j in jobs)


def test_a_torn_line_is_reported_and_the_first_repair_leaves_a_readable_file_with_every_field(tmp_path, capsys):
    jobs, _ = complete_store(tmp_path)
    chain = jobs[0].location.directory
    lines = (chain / RECORDS).read_text().splitlines()
    cut = {**json.loads(lines[2]), "cut": {"clip": [77, 3]}}  # a drawn hop's record with its cut
    lines[2] = json.dumps(cut, sort_keys=True)
    (chain / RECORDS).write_text("\n".join(lines[:4]) + "\n" + lines[4][: len(lines[4]) // 2])  # torn last line
    assert read_records_checked(chain)[1] == 1
    assert cli(["store", "verify", str(tmp_path)]) == 1
    assert f"{chain}: 1 unreadable line(s) in hops.jsonl" in capsys.readouterr().out
    assert cli(["store", "verify", str(tmp_path), "--repair"]) == 0
    records, unreadable = read_records_checked(chain)
    assert unreadable == 0 and records[2]["cut"] == {"clip": [77, 3]}
    assert (chain / RECORDS).read_text().endswith("\n")
    assert not chain.joinpath("004.png").exists()  # hop 4 lost its record with the torn line: recomputed
    outcomes, stats = CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
    assert stats.hops_computed == 1 and read_records_checked(chain)[1] == 0
    assert cli(["store", "verify", str(tmp_path)]) == 0


def test_an_append_after_a_torn_line_starts_on_a_fresh_line(tmp_path):
    folder = tmp_path / "ns" / "c"
    folder.mkdir(parents=True)
    (folder / RECORDS).write_text('{"hop": 0, "sha256": "ab')
    append_record(folder, 1, "cd", None)
    records, unreadable = read_records_checked(folder)
    assert unreadable == 1 and records[1]["sha256"] == "cd"


def test_an_empty_png_is_reported_as_an_empty_file(tmp_path):
    jobs, _ = complete_store(tmp_path)
    jobs[0].location.path(2, "image").write_bytes(b"")
    assert check_chain(jobs[0].location.directory, repair=False).problem == "hop 2: empty file (0 bytes)"


def test_merge_keeps_record_fields_marks_the_store_and_lists_files_it_left_out(tmp_path, capsys):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    made = {}
    for root, keys in ((a, [0, 1]), (b, [2])):
        store, spec = ArtifactStore(root), spec_of()
        jobs = made[root] = [j for k, j in enumerate(jobs_of(store, spec, 3)) if k in keys]
        CycleEngine(FakeDescriber(), FakeGenerator()).run(jobs)
        (jobs[0].location.directory.parent / "protocol.json").write_text('{"task": "t"}')
        (root / "results_2026-11-26.json").write_text('{"results": {"partial": 7}}')  # a shard's --output_path
    chain = made[a][0].location.directory
    lines = [json.loads(x) for x in (chain / RECORDS).read_text().splitlines()]
    lines[2]["cut"] = {"clip": [77, 3]}
    (chain / RECORDS).write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert cli(["store", "merge", str(a), str(b), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"left out (not the store's own file): {a / 'results_2026-11-26.json'}" in printed
    assert f"left out (not the store's own file): {b / 'results_2026-11-26.json'}" in printed
    assert "3 chains, 15 hops merged" in printed and "2 files left out in all" in printed
    merged = out / chain.relative_to(a)
    assert not list(out.glob("results_*.json")) and (merged.parent / "protocol.json").exists()
    assert keeps_records(merged.parent) and read_records(merged)[2]["cut"] == {"clip": [77, 3]}
    assert read_records(merged)[3]["input"] == sha256_file(merged / "002.png")
    assert cli(["store", "verify", str(out)]) == 0
