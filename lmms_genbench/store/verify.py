"""The verified store: every hop's content hash and the hash of the input it was computed from.

Each chain folder holds ``hops.jsonl``: one line per stored hop, appended by the writer right
after the hop's file, ``{"hop", "sha256", "input"}`` (``input``: the sha256 of hop - 1 as
stored when this hop was written; None for hop 0). A hop is trusted only when its file's hash
equals its line's and its input is the previous hop as stored now. A hop with no line (a store
written before these lines existed, or a write cut between the file and its line) is trusted
once it decodes (a PNG that loads, a UTF-8 text that is not empty and not a failure marker),
and its line is then added.

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
_SUFFIX = {"image": "png", "text": "txt"}

__all__ = [
    "RECORDS", "QUARANTINE", "ChainCheck", "append_record", "check_chain", "hop_files", "sha256_file",
    "text_cut_summary",
]


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def append_record(directory: Path, hop: int, sha: str, input_sha: str | None, note: dict | None = None) -> None:
    """Record hop ``hop``'s hash; one short line in append mode (a torn last line is ignored).
    ``note``: extra fields, such as ``cut`` of a drawn hop (:func:`text_cut_summary`)."""
    line = json.dumps({**(note or {}), "hop": hop, "sha256": sha, "input": input_sha}, sort_keys=True) + "\n"
    with open(directory / RECORDS, "a", encoding="utf-8") as fh:
        fh.write(line)


def read_records(directory: Path) -> dict[int, dict[str, Any]]:
    """The last record of each hop; unreadable lines are skipped."""
    records: dict[int, dict[str, Any]] = {}
    try:
        lines = (directory / RECORDS).read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return records
    for line in lines:
        try:
            rec = json.loads(line)
            records[int(rec["hop"])] = rec
        except (ValueError, KeyError, TypeError):
            continue
    return records


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

    @property
    def needs_repair(self) -> bool:
        return self.problem is not None or self.unrecorded > 0


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
    records = read_records(directory)
    check = ChainCheck(valid=0)
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
                prev = records.get(1, {}).get("input")
                hop = 1
                continue
            break
        if expected is not None and path.suffix != f".{_SUFFIX[expected]}":
            check.problem = f"hop {hop} is a {path.suffix[1:]} file where the chain has a {expected}"
            break
        try:
            sha = sha256_file(path)
        except OSError as exc:
            check.problem = f"hop {hop} unreadable ({exc.strerror or exc})"
            break
        rec = records.get(hop)
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
            if repair:
                try:
                    append_record(directory, hop, sha, prev)
                    records[hop] = {"hop": hop, "sha256": sha, "input": prev}
                    check.recorded += 1
                except OSError:  # a read-only store: trusted for this run, recorded by a writable one
                    pass
        check.hashes.append(sha)
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
        kept = [records[h] for h in sorted(records) if h < check.valid]
        blob = "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept).encode("utf-8")
        atomic_write(directory / RECORDS, lambda fh: fh.write(blob))
        check.quarantine = target
    except OSError:
        # a read-only store: nothing moves; the caller still trusts only the first `valid` hops
        pass


def chain_folders(root: Path):
    """Every chain folder under ``root``: a folder holding hop files or hop records."""
    root = Path(root)
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d != QUARANTINE]
        if RECORDS in files or any(f[:3].isdigit() and f[3:] in (".png", ".txt") for f in files):
            yield Path(directory)


def verify_store(root: Path, repair: bool = False):
    """``(folder, ChainCheck or None)`` for every chain under ``root``; None: another run holds
    the chain now (not checked). ``repair`` moves refused hops aside and records unrecorded ones."""
    from .locks import ChainLocks

    locks = ChainLocks()
    for folder in sorted(chain_folders(root)):
        held = locks.try_acquire(folder) if repair else True
        if held is False:
            yield folder, None
            continue
        try:
            yield folder, check_chain(folder, None, None, repair=repair)
        finally:
            locks.release(folder)


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
