"""Merge artifact stores by content hash: the stores of independent jobs (a SLURM array with
``shard=i/n``, per-node stores of a multi-node run) become one store to score.

Every source chain is verified first (:func:`~lmms_genbench.store.verify.check_chain`, without
repairing the source): only its trusted hops are merged, and the hops it refuses are listed as
left out. A hop stored in several sources must have the same sha256 everywhere; the first hop
where two sources differ is a conflict, named by chain, hop and both hashes, and a merge with
any conflict writes nothing. Each merged chain gets a fresh ``hops.jsonl`` (each hop's hash and
its input's), and the written store is verified again before the merge reports success.

Each merged record keeps every field of its source record (``cut`` of a drawn hop), and every
namespace written gets the store's format marker (its chains keep records).

Besides chains only the store's own files are merged: ``runs.jsonl`` lines are joined (each
distinct line once, in source order) and ``protocol.json`` must be byte-identical wherever it
occurs; ``identity.json`` (store/identity.py) is kept from the first store that has it (each
names the same folder, so the same drawing). Everything else is left out and listed (:attr:`MergeReport.files_left_out`): scorer
reports (``*report*.json``, a scoring run over the merged store rewrites them), results files
of shard jobs whose ``--output_path`` was the store, anything else put there by hand. Chain
locks, quarantined hops and temporary files are never copied.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.keys import atomic_write
from .locks import LOCK_NAME
from .verify import QUARANTINE, RECORDS, STORE_FORMAT, check_chain, chain_folders, hop_files, mark_records

__all__ = ["MergeConflict", "MergeReport", "merge_stores"]

RUNS = "runs.jsonl"
#: files of the store itself that a merge copies (``runs.jsonl`` is joined, the marker rewritten)
OWN_FILES = ("protocol.json", "identity.json")


@dataclass(frozen=True)
class Conflict:
    """One place where two sources disagree: a chain's hop, or a file."""

    path: str  # the chain folder (or file) relative to the store root
    hop: int | None
    first: tuple[str, str]  # (source, sha256)
    second: tuple[str, str]

    def __str__(self) -> str:
        where = f"chain {self.path} hop {self.hop}" if self.hop is not None else f"file {self.path}"
        return (f"{where}: sha256 {self.first[1][:16]}… in {self.first[0]} but {self.second[1][:16]}… "
                f"in {self.second[0]}")


class MergeConflict(Exception):
    """Sources disagree; nothing was written. ``conflicts`` lists every disagreement."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(f"{len(conflicts)} conflicting hop(s) or file(s): {conflicts[0]}")


@dataclass
class MergeReport:
    chains: int = 0
    hops: int = 0  # hops in the merged store
    hops_shared: int = 0  # hops found in more than one source (same hash)
    files: int = 0  # the store's own files copied (protocol.json)
    runs_lines: int = 0
    reports_left_out: int = 0
    left_out: list[str] = field(default_factory=list)  # refused source hops: "<source>: <chain>: <problem>"
    files_left_out: list[str] = field(default_factory=list)  # "<source>/<file>": not the store's own


@dataclass
class _Hop:
    sha: str
    source: Path  # the file to copy


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_report(name: str) -> bool:
    return name.endswith(".json") and "report" in name


def _skipped(name: str) -> bool:
    # chain locks, temporary files of interrupted atomic writes
    return name == LOCK_NAME or name.startswith(".")


def merge_stores(sources: list[Path], target: Path) -> MergeReport:
    """Merge ``sources`` into the new (or empty) folder ``target``; see the module docstring.

    Raises:
        ValueError: a source is not a folder, or ``target`` is not empty (the message says which).
        MergeConflict: sources disagree on a hop or a file; ``target`` is left untouched.
    """
    sources = [Path(s) for s in sources]
    target = Path(target)
    for src in sources:
        if not src.is_dir():
            raise ValueError(f"source {src} is not a folder")
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"output {target} exists and is not empty")
    report = MergeReport()
    chains: dict[str, dict[int, _Hop]] = {}
    fields: dict[tuple[str, int], dict] = {}  # (chain, hop) -> its source record's fields
    owners: dict[tuple[str, int], str] = {}  # (chain, hop) -> the source that gave its hash
    files: dict[str, _Hop] = {}
    runs: dict[str, dict[str, None]] = {}
    conflicts: dict[str, Conflict] = {}  # first conflict per chain or file

    for src in sources:
        folders = set(chain_folders(src))
        for folder in sorted(folders):
            rel = folder.relative_to(src).as_posix()
            check = check_chain(folder, None, None, repair=False)
            if check.problem is not None:
                report.left_out.append(f"{src}: {rel}: {check.problem} (hops {check.valid}+ left out)")
            found = hop_files(folder)
            merged = chains.setdefault(rel, {})
            for hop, sha in enumerate(check.hashes):
                have = merged.get(hop)
                if have is None:
                    merged[hop] = _Hop(sha, found[hop])
                    owners[(rel, hop)] = str(src)
                    fields[(rel, hop)] = check.records[hop]
                elif have.sha != sha:
                    conflicts.setdefault(rel, Conflict(rel, hop, (owners[(rel, hop)], have.sha), (str(src), sha)))
                else:
                    report.hops_shared += 1
        for directory, subdirs, names in os.walk(src):
            here = Path(directory)
            subdirs[:] = [d for d in subdirs if d != QUARANTINE and not _skipped(d)]
            in_chain = here in folders
            for name in names:
                if _skipped(name) or (in_chain and (name == RECORDS or name[:3].isdigit() and name[3:] in (".png", ".txt"))):
                    continue
                rel = (here / name).relative_to(src).as_posix()
                if name == RUNS:
                    lines = runs.setdefault(rel, {})  # a dict: each line once, in order
                    lines.update((ln, None) for ln in (here / name).read_text(encoding="utf-8").splitlines()
                                 if ln.strip())
                    continue
                if name == STORE_FORMAT:
                    continue  # written for every merged namespace below
                if _is_report(name) or name not in OWN_FILES:
                    report.reports_left_out += _is_report(name)
                    report.files_left_out.append(str(here / name))
                    continue
                sha = _sha((here / name).read_bytes())
                have = files.get(rel)
                if have is None:
                    files[rel] = _Hop(sha, here / name)
                elif have.sha != sha and name != "identity.json":  # one per folder name: the first kept (jobs
                    # on other nodes may name a local checkpoint by another path, or batch otherwise)
                    conflicts.setdefault(rel, Conflict(rel, None, (str(have.source.parent), have.sha), (str(src), sha)))

    if conflicts:
        raise MergeConflict([conflicts[k] for k in sorted(conflicts)])

    for rel, hops in sorted(chains.items()):
        directory = target / rel
        directory.mkdir(parents=True, exist_ok=True)
        records, prev = [], None
        for hop in sorted(hops):
            if hop != len(records):  # trusted hops are gap-free from 0 in every source
                break
            item = hops[hop]
            _copy(item, directory / item.source.name)
            record = {**fields.get((rel, hop), {}), "hop": hop, "sha256": item.sha, "input": prev}
            records.append(json.dumps(record, sort_keys=True) + "\n")
            prev = item.sha
        blob = "".join(records).encode("utf-8")
        atomic_write(directory / RECORDS, lambda fh, blob=blob: fh.write(blob))
        report.chains += 1
        report.hops += len(records)
    for namespace in sorted({(target / rel).parent for rel in chains}):
        mark_records(namespace)
    for rel, item in sorted(files.items()):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        _copy(item, target / rel)
        report.files += 1
    for rel, lines in sorted(runs.items()):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        blob = "".join(ln + "\n" for ln in lines).encode("utf-8")
        atomic_write(target / rel, lambda fh, blob=blob: fh.write(blob))
        report.runs_lines += len(lines)

    for rel, hops in chains.items():  # the written store must verify as the sources did
        check = check_chain(target / rel, None, None, repair=False)
        if check.problem is not None or check.valid != len(hops):
            raise OSError(f"merged chain {target / rel} does not verify: {check.problem or check.valid}")
    return report


def _copy(item: _Hop, path: Path) -> None:
    """Copy ``item`` to ``path`` atomically, checking its bytes are the ones verified."""
    data = item.source.read_bytes()
    if _sha(data) != item.sha:
        raise OSError(f"{item.source} changed during the merge (its hash is no longer {item.sha[:16]}…)")
    atomic_write(path, lambda fh: fh.write(data))
