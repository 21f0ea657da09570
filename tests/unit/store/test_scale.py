"""Sliced jobs (model_args shard=i/n) and the exact store merge (lmms-genbench store merge)."""

import json
from collections import Counter

import pytest
from PIL import Image

from lmms_genbench.cli import main
from lmms_genbench.core.errors import ActionableError
from lmms_genbench.engine import Chain
from lmms_genbench.store import MergeConflict, merge_stores
from lmms_genbench.store import RECORDS, append_record, read_records, sha256_file, verify_store
from lmms_genbench.command.cycle import in_shard
from lmms_genbench.command.cycle import shard_arg

from tests.support.fakes import cycle_model as _model
from tests.support.fakes import cycle_request as _request


# -- shard=i/n -------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [("0/1", (0, 1)), ("1/4", (1, 4)), (" 3 / 4 ", (3, 4)), (None, None)])
def test_shard_argument_reads_i_of_n(value, expected):
    assert shard_arg(value) == expected


@pytest.mark.parametrize("value", ["4/4", "1", "a/b", "-1/2", "0/0", "1/2/3", "0.5/2"])
def test_a_wrong_shard_argument_names_the_argument_the_form_and_the_value(value):
    with pytest.raises(ActionableError) as err:
        shard_arg(value)
    message = str(err.value)
    assert "model_args shard" in message and "0 <= i < n" in message and repr(value) in message
    assert "shard=<i>/<n>" in message


def test_the_model_refuses_a_wrong_shard_before_it_loads_anything():
    from lmms_genbench.models.cycle import CycleModel

    with pytest.raises(ActionableError, match=r"model_args shard must be i/n .* got '2/2'"):
        CycleModel(describer="no-such-model", generator="no-such-generator", shard="2/2")


def test_every_chain_is_in_exactly_one_shard_whatever_the_order():
    keys = [f"doc-{i}" for i in range(300)]
    for n in (1, 2, 3, 7):
        owners = {k: [i for i in range(n) if in_shard(k, (i, n))] for k in keys}
        assert all(len(v) == 1 for v in owners.values())
        sizes = Counter(v[0] for v in owners.values())
        assert all(sizes[i] > 300 / n / 2 for i in range(n))  # no empty or starved shard
    # by key, not position: the same key lands in the same shard in any list
    assert [in_shard(k, (1, 3)) for k in reversed(keys)] == [in_shard(k, (1, 3)) for k in keys][::-1]
    # pinned: a change of the hash would move chains between the jobs of a running array
    assert [k for k in keys[:10] if in_shard(k, (0, 2))] == _PINNED_SHARD_0


_PINNED_SHARD_0 = ["doc-0", "doc-2", "doc-9"]  # sha256 of the key, first 8 bytes big-endian, mod n


def test_a_shard_job_computes_only_its_chains_and_answers_the_others_as_shard_failures(tmp_path):
    image = Image.new("RGB", (8, 8), (10, 20, 30))
    docs = [{"chain_id": f"c{i}", "image": image} for i in range(8)]
    gen_kwargs = {"iterations": 1, "generate_prompt": "{description}"}
    answered = {}
    for i in range(2):
        model = _model(tmp_path)
        model.shard = (i, 2)
        model.task_dict = {"sdp": {"test": docs}}
        from lmms_genbench.models import cycle as cycle_module

        logged = []
        real = cycle_module.eval_logger
        cycle_module.eval_logger = type("Log", (), {"info": staticmethod(logged.append),
                                                     "warning": staticmethod(real.warning)})
        try:
            chains = [Chain.from_json(r) for r in model.generate_until([_request(d, dict(gen_kwargs)) for d in range(8)])]
        finally:
            cycle_module.eval_logger = real
        mine = [c for c in chains if c.ok]
        # the log line counts the other shards' docs as failed, as the results file's n_failed does
        (line,) = [m for m in logged if m.startswith("cycle sdp (rank")]
        assert f"repaired, {8 - len(mine)} failed ({8 - len(mine)}x in other jobs' shards (shard= {i}/2))" in line
        assert {c.chain_id for c in mine} == {d["chain_id"] for d in docs if in_shard(d["chain_id"], (i, 2))}
        assert model.last_stats.chains == len(mine)  # the engine never saw the others
        for other in (c for c in chains if not c.ok):
            assert other.failure.stage == "shard" and other.hops == 0
            assert f"not in this job's shard {i}/2" in other.failure.reason
            assert i == 1 or not other.location.directory.exists()  # job 1 shares job 0's store
        answered[i] = {c.chain_id for c in mine}
        record = json.loads((tmp_path.glob("*/*/*/runs.jsonl").__next__()).read_text().splitlines()[-1])
        assert record["shard"] == f"{i}/2" and record["chains"] == len(mine) and record["failed"] == 0
        assert record["outside_shard"] == 8 - len(mine)
    assert answered[0].isdisjoint(answered[1]) and answered[0] | answered[1] == {d["chain_id"] for d in docs}
    # a run without shard over the same store computes nothing
    model = _model(tmp_path)
    model.task_dict = {"sdp": {"test": docs}}
    chains = [Chain.from_json(r) for r in model.generate_until([_request(d, dict(gen_kwargs)) for d in range(8)])]
    assert all(c.ok for c in chains) and model.last_stats.hops_reused == 8 * 3


# -- store merge ----------------------------------------------------------------------


def _chain(root, rel, texts):
    """A text chain folder ``root/rel`` with verified hops (as the engine's writer leaves it)."""
    folder = root / rel
    folder.mkdir(parents=True, exist_ok=True)
    prev = None
    for hop, text in enumerate(texts):
        path = folder / f"{hop:03d}.txt"
        path.write_text(text)
        sha = sha256_file(path)
        append_record(folder, hop, sha, prev)
        prev = sha
    return folder


NS = "describer/generator/protocol"


def test_merge_joins_disjoint_and_overlapping_chains_and_keeps_them_verified(tmp_path):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _chain(a, f"{NS}/x", ["x0", "x1", "x2"])
    _chain(a, f"{NS}/both", ["b0", "b1"])  # b holds the same chain, longer
    _chain(b, f"{NS}/both", ["b0", "b1", "b2", "b3"])
    _chain(b, f"{NS}/y", ["y0", "y1"])
    for store, run in ((a, {"rank": 0, "shard": "0/2"}), (b, {"rank": 0, "shard": "1/2"})):
        (store / NS / "protocol.json").write_text('{"task": "t"}')
        (store / NS / "runs.jsonl").write_text(json.dumps(run) + "\n")
        (store / NS / "report.json").write_text("{}")
        (store / NS / "x" if store == a else store / NS / "y").joinpath(".lock").write_text("")
    report = merge_stores([a, b], out)
    assert (report.chains, report.hops, report.hops_shared) == (3, 9, 2)
    assert sorted(p.name for p in (out / NS / "both").iterdir()) == ["000.txt", "001.txt", "002.txt", "003.txt", RECORDS]
    assert (out / NS / "both" / "003.txt").read_text() == "b3"
    assert [json.loads(line)["shard"] for line in (out / NS / "runs.jsonl").read_text().splitlines()] == ["0/2", "1/2"]
    assert (out / NS / "protocol.json").read_text() == '{"task": "t"}'
    assert not (out / NS / "report.json").exists() and report.reports_left_out == 2
    assert not list(out.rglob(".lock"))
    checks = dict(verify_store(out))
    assert len(checks) == 3 and all(c.problem is None and c.unrecorded == 0 for c in checks.values())
    assert read_records(out / NS / "both")[3]["input"] == sha256_file(out / NS / "both" / "002.txt")


def test_merge_refuses_conflicting_hops_by_chain_hop_and_both_hashes_and_writes_nothing(tmp_path, capsys):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _chain(a, f"{NS}/same", ["s0", "s1"])
    _chain(b, f"{NS}/same", ["s0", "s1"])
    _chain(a, f"{NS}/z", ["z0", "z1", "z2"])
    _chain(b, f"{NS}/z", ["z0", "other", "z2"])
    with pytest.raises(MergeConflict) as err:
        merge_stores([a, b], out)
    (conflict,) = err.value.conflicts
    sha_a, sha_b = sha256_file(a / NS / "z" / "001.txt"), sha256_file(b / NS / "z" / "001.txt")
    assert (conflict.path, conflict.hop) == (f"{NS}/z", 1)
    assert conflict.first == (str(a), sha_a) and conflict.second == (str(b), sha_b)
    assert f"chain {NS}/z hop 1" in str(conflict) and sha_a[:16] in str(conflict) and sha_b[:16] in str(conflict)
    assert not out.exists()
    # the command: every conflict on stdout, one error line naming the first, exit 1
    assert main(["store", "merge", str(a), str(b), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert f"conflict: chain {NS}/z hop 1" in captured.out
    (line,) = captured.err.strip().splitlines()
    assert "1 chain(s) or file(s) differ" in line and "nothing was written" in line and "Fix:" in line
    assert not out.exists()


def test_merge_leaves_out_refused_hops_and_names_them(tmp_path, capsys):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _chain(a, f"{NS}/e", ["e0", "e1", "e2"])
    (a / NS / "e" / "001.txt").write_text("edited after it was written")
    _chain(b, f"{NS}/f", ["f0"])
    assert main(["store", "merge", str(a), str(b), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"left out (not verified): {a}: {NS}/e: hop 1 changed since it was written" in printed
    assert sorted(p.name for p in (out / NS / "e").iterdir()) == ["000.txt", RECORDS]  # hop 1 and 2 recomputed later
    assert "2 chains, 2 hops merged" in printed


def test_merge_refuses_differing_files_and_a_non_empty_output(tmp_path, capsys):
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for store, task in ((a, "t1"), (b, "t2")):
        _chain(store, f"{NS}/k", ["k0"])
        (store / NS / "protocol.json").write_text(json.dumps({"task": task}))
    with pytest.raises(MergeConflict) as err:
        merge_stores([a, b], out)
    assert str(err.value.conflicts[0]).startswith(f"file {NS}/protocol.json: sha256 ")
    out.mkdir()
    (out / "keep.txt").write_text("x")
    assert main(["store", "merge", str(a), "-o", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["store", "merge", str(tmp_path / "missing"), "-o", str(tmp_path / "d")]) == 2
