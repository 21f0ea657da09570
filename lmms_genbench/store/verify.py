"""The verified store: every hop's content hash and the hash of the input it was computed from.

Each chain folder holds ``hops.jsonl``: one line per stored hop, appended by the writer right
after the hop's file, ``{"hop", "sha256", "input"}`` (``input``: the sha256 of hop - 1 as
stored when this hop was written; None for hop 0). A hop is trusted only when its file's hash
equals its line's and its input is the previous hop as stored now.

Records are part of the store's format: a namespace (the chains' parent folder) whose chains all
have records holds :data:`STORE_FORMAT` (``{"records": 1}``), written with the first record of a
new namespace. There a hop with no line (a lost or deleted ``hops.jsonl``, a write cut between
the file and its line) is unverified and refused like an edited one. A namespace without the
marker was written before records existed: a hop with no line is trusted once it decodes (a PNG
that loads, a UTF-8 text that is not empty and not a failure marker) and its line is added; the
marker follows once every chain there is recorded (``store verify --repair`` records them all).
A namespace that lost its marker while its chains kept records (a record line written while the
marker was there holds ``"marked": true``) is treated as marked, and ``store verify`` says so
(issue 43).
That mode cannot tell a text edited while its records were missing (docs/outputs.md).

Records are appended on a fresh line; a torn or unreadable line is reported
(:attr:`ChainCheck.unreadable`) and the file rewritten without it by the first repair, every
field of the readable records kept.

The first hop that fails (missing, truncated, undecodable, edited, or drawn from another input)
and every later hop of the chain are moved aside to ``quarantine/<time>/`` in the chain's folder
with a note of the reason, never reused and never deleted; the engine recomputes them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.keys import atomic_write
from .failures import failure_marker

RECORDS = "hops.jsonl"
QUARANTINE = "quarantine"
#: the namespace's format marker: its chains keep records, so a hop without one is refused
STORE_FORMAT = "store.json"
_FORMAT_BLOB = b'{"records": 1}\n'
#: a record's field: written while the namespace had its marker (so a lost marker is seen)
_MARKED = "marked"
_SUFFIX = {"image": "png", "text": "txt"}

__all__ = [
    "RECORDS", "QUARANTINE", "STORE_FORMAT", "ChainCheck", "keeps_records", "mark_records", "lost_markers", "marker_lost", "records_kept", "append_record", "check_chain", "hop_files", "sha256_file",
    "text_cut_summary",
]


def sha256_file(path: str | os.PathLike) -> str:
    """The file's sha256, read in 1 MiB blocks (hops, and the files scoring keys features by)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def append_record(directory: Path, hop: int, sha: str, input_sha: str | None, note: dict | None = None,
                  mark: bool = True) -> None:
    """Record hop ``hop``'s hash; one short line in append mode, on a fresh line even after a torn
    one. ``note``: extra fields, such as ``cut`` of a drawn hop (:func:`text_cut_summary`).
    ``mark``: a chain's first record tries to mark its namespace (:func:`mark_records`)."""
    fields = {**(note or {}), "hop": hop, "sha256": sha, "input": input_sha}
    if keeps_records(directory.parent):  # the witness that outlives a lost marker (marker_lost)
        fields[_MARKED] = True
    line = json.dumps(fields, sort_keys=True) + "\n"
    with open(directory / RECORDS, "a+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        if end:
            fh.seek(end - 1)
            if fh.read(1) != b"\n":  # a torn last line: ours must not extend it
                line = "\n" + line
        fh.write(line.encode("utf-8"))
    if mark and not end:
        mark_records(directory.parent)


def keeps_records(namespace: Path) -> bool:
    """Whether ``namespace``'s chains keep records (its :data:`STORE_FORMAT` marker)."""
    return (Path(namespace) / STORE_FORMAT).is_file()


def marker_lost(namespace: Path, siblings: int = 16) -> bool:
    """Whether ``namespace`` lost its format marker while its chains kept records: no marker,
    but a chain's records hold a line written while the marker was there (``"marked"``; a
    namespace from before records never has one). Looks at the first ``siblings`` chains that
    have records: in a marked namespace every line after a chain's first has the field."""
    namespace = Path(namespace)
    if keeps_records(namespace):
        return False
    seen = 0
    try:
        entries = sorted(e.name for e in os.scandir(namespace) if e.is_dir() and e.name != QUARANTINE)
    except OSError:
        return False
    for name in entries:
        records, _ = read_records_checked(namespace / name)
        if not records:
            continue
        if any(r.get(_MARKED) for r in records.values()):
            return True
        seen += 1
        if seen >= siblings:
            break
    return False


def records_kept(namespace: Path) -> bool:
    """Whether ``namespace``'s chains keep records: its marker, or a lost one (:func:`marker_lost`)."""
    return keeps_records(namespace) or marker_lost(namespace)


def mark_records(namespace: Path) -> bool:
    """Write ``namespace``'s format marker when every chain folder in it has records (a new
    namespace, or an old one fully recorded). Returns whether the namespace is marked."""
    namespace = Path(namespace)
    if keeps_records(namespace):
        return True
    try:
        for entry in os.scandir(namespace):
            if entry.is_dir() and entry.name != QUARANTINE and not _is_recorded(Path(entry.path)):
                return False
        atomic_write(namespace / STORE_FORMAT, lambda fh: fh.write(_FORMAT_BLOB))
    except OSError:  # read-only: the namespace stays in the pre-records mode
        return False
    return True


def _is_recorded(folder: Path) -> bool:
    """A folder that is no chain, or a chain whose every hop file has a record."""
    files = hop_files(folder)
    if not files:
        return True
    records, _ = read_records_checked(folder)
    return all(h in records for h in files)


def read_records(directory: Path) -> dict[int, dict[str, Any]]:
    """The last record of each hop; unreadable lines are skipped."""
    return read_records_checked(directory)[0]


def read_records_checked(directory: Path) -> tuple[dict[int, dict[str, Any]], int]:
    """The last record of each hop, and how many non-empty lines could not be read."""
    records: dict[int, dict[str, Any]] = {}
    bad = 0
    try:
        lines = (directory / RECORDS).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return records, bad
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            records[int(rec["hop"])] = rec
        except (ValueError, KeyError, TypeError):
            bad += 1
    return records, bad


def _write_records(directory: Path, records: list[dict]) -> None:
    blob = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8")
    atomic_write(directory / RECORDS, lambda fh: fh.write(blob))


def hop_files(directory: Path) -> dict[int, Path]:
    """Every ``NNN.png`` / ``NNN.txt`` in ``directory`` by hop."""
    found: dict[int, Path] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return found
    for entry in entries:
        stem, _, suffix = entry.name.partition(".")
        if suffix in ("png", "txt") and stem.isdigit() and len(stem) == 3 and entry.is_file():
            found[int(stem)] = Path(entry.path)
    return found


def _decode_problem(path: Path, kind: str) -> str | None:
    """Why a stored hop without a record cannot be trusted, or None."""
    data = path.read_bytes()
    if not data:
        return "empty file (0 bytes)"
    if kind == "image":
        try:
            with Image.open(io.BytesIO(data)) as img:
                img.load()
        except Exception as exc:  # any decoder error: the file is not a whole image
            return f"not a decodable image ({type(exc).__name__})"
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
    if not text.strip():
        return "empty text"
    marker = failure_marker(text)
    if marker:
        return f"holds a failed request's text ({marker}), not a description"
    return None


@dataclass
class ChainCheck:
    """What verification found: ``valid`` hops 0..valid-1 are trusted, with their hashes."""

    valid: int
    hashes: list[str] = field(default_factory=list)
    problem: str | None = None  # why hop ``valid`` was refused, when it existed
    moved: list[str] = field(default_factory=list)  # files moved aside
    recorded: int = 0  # hops without a record that were checked by decoding and recorded
    unrecorded: int = 0  # hops without a record that decoded (recorded when repairing)
    seed_missing: bool = False  # hop 0 is absent and counted valid: the doc gives it again
    quarantine: Path | None = None
    unreadable: int = 0  # torn or unreadable lines in hops.jsonl (dropped when repairing)
    records: list[dict] = field(default_factory=list)  # the trusted hops' records, every field

    @property
    def needs_repair(self) -> bool:
        return self.problem is not None or self.unrecorded > 0 or self.unreadable > 0


def check_chain(
    directory: Path,
    kind: Callable[[int], str] | None = None,
    last_hop: int | None = None,
    repair: bool = True,
    missing_seed_ok: bool = False,
) -> ChainCheck:
    """Verify a chain folder hop by hop (see the module docstring).

    Args:
        directory: the chain's folder.
        kind: ``hop -> "image" | "text"`` (the chain's direction); None reads it from the files.
        last_hop: the last hop the caller cares about; later files are left alone.
        repair: move refused hops aside and record unrecorded ones; False only reports.
        missing_seed_ok: an absent hop 0 counts as valid (the engine restores it from the doc,
            byte for byte); hop 1's input is then checked by the next verification.
    """
    files = hop_files(directory)
    records, check_unreadable = read_records_checked(directory)
    check = ChainCheck(valid=0, unreadable=check_unreadable)
    if check_unreadable and repair:  # rewritten before any append: the first repair leaves a readable file
        try:
            _write_records(directory, [records[h] for h in sorted(records)])
        except OSError:
            pass
    strict = keeps_records(directory.parent)
    if not strict and any(h not in records for h in files):  # only then: looks at the siblings
        strict = marker_lost(directory.parent)
    prev: str | None = None
    hop = 0
    end = max(files, default=-1) if last_hop is None else last_hop
    while hop <= end:
        path = files.get(hop)
        expected = kind(hop) if kind else None
        if path is None:
            if hop == 0 and missing_seed_ok:
                check.seed_missing = True
                check.hashes.append("")
                check.records.append({})
                prev = records.get(1, {}).get("input")
                hop = 1
                continue
            break
        if expected is not None and path.suffix != f".{_SUFFIX[expected]}":
            check.problem = f"hop {hop} is a {path.suffix[1:]} file where the chain has a {expected}"
            break
        try:
            sha = sha256_file(path)
            empty = path.stat().st_size == 0
        except OSError as exc:
            check.problem = f"hop {hop} unreadable ({exc.strerror or exc})"
            break
        rec = records.get(hop)
        if empty:
            check.problem = f"hop {hop}: empty file (0 bytes)"
            break
        if rec is None and strict:
            check.problem = (f"hop {hop} has no record in a store that keeps records ({RECORDS} lost or "
                             "cut): unverified")
            break
        if rec is not None:
            if rec.get("sha256") != sha:
                check.problem = f"hop {hop} changed since it was written (hash mismatch)"
                break
            if hop > 0 and rec.get("input") != prev:
                check.problem = f"hop {hop} was computed from another hop {hop - 1} than the one stored"
                break
        else:
            problem = _decode_problem(path, "image" if path.suffix == ".png" else "text")
            if problem:
                check.problem = f"hop {hop}: {problem}"
                break
            check.unrecorded += 1
            rec = {"hop": hop, "sha256": sha, "input": prev}
            if repair:
                try:
                    append_record(directory, hop, sha, prev, mark=False)  # verify_store marks once
                    records[hop] = rec
                    check.recorded += 1
                except OSError:  # a read-only store: trusted for this run, recorded by a writable one
                    pass
        check.hashes.append(sha)
        check.records.append(dict(rec))
        prev = sha
        hop += 1
    check.valid = hop
    # hops past last_hop belong to longer runs of the same protocol: kept while all before are trusted
    later = [] if last_hop is not None and hop > last_hop else sorted(h for h in files if h >= hop)
    if later and check.problem is None:
        check.problem = f"hop {hop} is missing while later hops are stored"
    if later and repair:
        _quarantine(directory, [files[h] for h in later], check, records)
    return check


def _quarantine(directory: Path, paths: list[Path], check: ChainCheck, records: dict[int, dict]) -> None:
    """Move ``paths`` aside with a note of why, and keep only the trusted hops' records."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{os.getpid()}"
    target = directory / QUARANTINE / stamp
    try:
        target.mkdir(parents=True, exist_ok=True)
        for path in paths:
            os.replace(path, target / path.name)
            check.moved.append(path.name)
        (target / "reason.txt").write_text(f"{check.problem}\n", encoding="utf-8")
        _write_records(directory, [records[h] for h in sorted(records) if h < check.valid])
        check.quarantine = target
    except OSError:
        # a read-only store: nothing moves; the caller still trusts only the first `valid` hops
        pass


def chain_folders(root: Path):
    """Every chain folder under ``root``: a folder holding hop files or hop records."""
    root = Path(root)
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in (QUARANTINE, ".features")]  # features.FEATURES: no chains there
        if RECORDS in files or any(f[:3].isdigit() and f[3:] in (".png", ".txt") for f in files):
            yield Path(directory)


def lost_markers(root: Path) -> list[Path]:
    """The namespaces under ``root`` that lost their format marker while their chains kept
    records (:func:`marker_lost`), for ``store verify`` to say so before it checks them."""
    return [ns for ns in sorted({folder.parent for folder in chain_folders(root)}) if marker_lost(ns)]


def verify_store(root: Path, repair: bool = False):
    """``(folder, ChainCheck or None)`` for every chain under ``root``; None: another run holds
    the chain now (not checked). ``repair`` moves refused hops aside and records unrecorded ones."""
    from .locks import ChainLocks

    locks = ChainLocks()
    namespaces: set[Path] = set()
    for folder in sorted(chain_folders(root)):
        namespaces.add(folder.parent)
        held = locks.try_acquire(folder) if repair else True
        if held is False:
            yield folder, None
            continue
        try:
            yield folder, check_chain(folder, None, None, repair=repair)
        finally:
            locks.release(folder)
    if repair:  # a pre-records namespace now recorded throughout keeps records from here on
        for namespace in sorted(namespaces):
            mark_records(namespace)


def text_cut_summary(chains) -> dict[str, dict[str, Any]]:
    """How much of the drawn descriptions each text encoder read, over ``chains``
    (``(folder, hops stored)`` pairs): per encoder the descriptions counted, the share cut and
    the mean tokens cut (over all and over the cut ones). Reads the ``cut`` field of drawn hops'
    records (``{encoder: [tokens it reads, tokens cut]}``); stores written before it have none."""
    sums: dict[str, list[int]] = {}  # encoder -> [descriptions, cut ones, tokens cut, tokens read]
    for folder, hops in dict.fromkeys((str(f), int(h)) for f, h in chains):
        for hop, record in read_records(Path(folder)).items():
            cut = record.get("cut")
            if hop >= hops or not isinstance(cut, dict):
                continue
            for encoder, pair in cut.items():
                try:
                    reads, lost = int(pair[0]), int(pair[1])
                except (TypeError, ValueError, IndexError):
                    continue
                entry = sums.setdefault(str(encoder), [0, 0, 0, reads])
                entry[0] += 1
                entry[1] += lost > 0
                entry[2] += lost
    return {
        encoder: {
            "tokens_read": reads,
            "descriptions": n,
            "truncated": k,
            "share_truncated": k / n,
            "mean_tokens_cut": lost / n,
            "mean_tokens_cut_when_truncated": lost / k if k else 0.0,
        }
        for encoder, (n, k, lost, reads) in sorted(sums.items())
    }
