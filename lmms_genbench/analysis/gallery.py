"""The report's chain gallery: each chain as cards of thumbnails and folded texts.

A card is one run's chain of one doc: seed -> description -> image -> ..., each step
with its similarity to the seed where the scorer's report lists it per chain
(``doc_scores``); nothing is computed here, so the report loads no network. Images
become small WebP thumbnails, each distinct image once (keyed by its bytes: a seed
shared by several runs is stored once in the page), made on a few threads.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import printable
from ..store import Chain
from .results import finite_or_none

__all__ = ["Card", "DocScores", "Step", "Thumbnails", "build_cards", "doc_order"]

#: characters of a hop's text kept in the page; the rest is named, with the file to read
MAX_TEXT_CHARS = 4000
#: doc_scores columns that give a chain's group, in the order they are tried
GROUP_COLUMNS = ("category", "source", "tag")
# per-step similarity columns: GenCeption's "s@t", MCD's "s_<mapping>@g"
_STEP_COLUMN = re.compile(r"^s(?:_.+)?@(\d+)$")


class Thumbnails:
    """Distinct images as small WebP (else JPEG) data URIs, referenced by id.

    Args:
        px: the longest side of a thumbnail (images are never enlarged).
        quality: the encoder's quality (0-100).
    """

    def __init__(self, px: int = 128, quality: int = 70) -> None:
        from PIL import features

        self.px, self.quality = int(px), int(quality)
        # WebP: about 40% smaller than JPEG at the same look (every current browser reads it)
        self._format = "WEBP" if features.check("webp") else "JPEG"
        self.uris: dict[str, str] = {}  # id -> data URI
        self.sizes: dict[str, tuple[int, int]] = {}
        self._by_path: dict[Path, tuple[str | None, str | None]] = {}

    def add_all(self, paths: Iterable[Path]) -> None:
        """Make the thumbnails of ``paths`` (decoding and resizing release the GIL)."""
        todo = sorted({p for p in paths if p not in self._by_path})
        workers = max(1, min(4, os.cpu_count() or 1))
        with ThreadPoolExecutor(workers) as pool:
            for path, made in zip(todo, pool.map(self._make, todo)):
                self._by_path[path] = made

    def get(self, path: Path) -> tuple[str | None, str | None]:
        """``(id, None)`` for a readable image, ``(None, why)`` otherwise."""
        if path not in self._by_path:
            self.add_all([path])
        return self._by_path[path]

    def _make(self, path: Path) -> tuple[str | None, str | None]:
        from PIL import Image, UnidentifiedImageError

        try:
            blob = path.read_bytes()
        except OSError as exc:
            return None, f"cannot read {path.name} ({exc.strerror or exc})"
        key = hashlib.sha1(blob).hexdigest()[:12]
        if key in self.uris:
            return key, None
        try:
            with Image.open(io.BytesIO(blob)) as img:
                img.draft("RGB", (self.px, self.px))  # JPEG sources decode at a reduced size
                img = img.convert("RGB")
                img.thumbnail((self.px, self.px), Image.Resampling.BICUBIC, reducing_gap=2.0)
                out = io.BytesIO()
                img.save(out, format=self._format, quality=self.quality)
                size = img.size
        except (OSError, UnidentifiedImageError, ValueError) as exc:
            return None, f"{path.name} is not a readable image ({exc})"
        self.uris[key] = f"data:image/{self._format.lower()};base64," + base64.b64encode(out.getvalue()).decode("ascii")
        self.sizes[key] = size
        return key, None


class DocScores:
    """A store report's ``doc_scores`` (``chain_ids`` and ``columns``) as rows by chain id."""

    def __init__(self, report: Mapping[str, Any] | None) -> None:
        block = (report or {}).get("doc_scores") or {}
        ids = block.get("chain_ids") if isinstance(block, Mapping) else None
        columns = block.get("columns") if isinstance(block, Mapping) else None
        self.rows: dict[str, dict[str, Any]] = {}
        self.iterations = 0
        if not isinstance(ids, list) or not isinstance(columns, Mapping):
            return
        for i, chain_id in enumerate(ids):
            self.rows[str(chain_id)] = {
                str(name): values[i] for name, values in columns.items()
                if isinstance(values, list) and i < len(values)
            }
        # GenCeption counts steps in iterations (a description and an image each: s@t is
        # hop 2t); the drift scorers count generations, one per hop
        summary = report.get("summary") if isinstance(report.get("summary"), Mapping) else report
        iterations = summary.get("iterations")
        self.iterations = iterations if isinstance(iterations, int) and not isinstance(iterations, bool) else 0

    def row(self, chain_id: str) -> dict[str, Any]:
        return self.rows.get(chain_id, {})

    def similarity(self, chain: Chain, hop: int) -> float | None:
        """The chain's similarity to its input at ``hop``, from its per-step columns
        (``s@t``: GenCeption's t-th iteration; ``s_<mapping>@g``: generation g)."""
        row = self.row(chain.chain_id)
        per_step = 1
        if self.iterations:
            if chain.length % self.iterations:
                return None
            per_step = chain.length // self.iterations
        if not row or hop % per_step:
            return None
        step = hop // per_step
        for name, value in row.items():
            match = _STEP_COLUMN.match(name)
            if match and int(match.group(1)) == step and finite_or_none(value) is not None:
                return float(value)
        return None


@dataclass
class Step:
    """One stored hop as the page shows it."""

    hop: int
    kind: str  # "image" | "text"
    label: str
    href: str  # the stored file, for opening it at full size
    thumb: str | None = None  # Thumbnails id
    size: tuple[int, int] = (0, 0)  # shown width and height
    text: str | None = None
    cut: int = 0  # characters of the text left out of the page
    similarity: float | None = None
    missing: str | None = None  # why the file could not be shown


@dataclass
class Card:
    """One run's chain of one doc."""

    run: int
    task: str
    doc_id: str
    chain_id: str
    status: str
    steps: list[Step]
    failure: str | None = None
    group: str | None = None
    score: float | None = None
    score_name: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def _read_text(path: Path) -> tuple[str | None, int, str | None]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, 0, f"cannot read {path.name} ({exc.strerror or exc})"
    text = printable(text)  # NUL, ESC[..m, U+202E shown as escapes on the page, never raw
    if len(text) > MAX_TEXT_CHARS:
        return text[:MAX_TEXT_CHARS], len(text) - MAX_TEXT_CHARS, None
    return text, 0, None


def _score_column(report: Mapping[str, Any] | None, headline: Sequence[str]) -> str | None:
    """The per-chain column behind the first headline metric that has one."""
    estimators = (report or {}).get("estimators") or {}
    for metric in headline:
        spec = estimators.get(metric)
        if isinstance(spec, Mapping) and isinstance(spec.get("column"), str):
            return spec["column"]
    return None


def build_cards(
    run_index: int,
    task: str,
    chains: Mapping[str, Chain],
    report: Mapping[str, Any] | None,
    headline: Sequence[str],
    thumbs: Thumbnails,
) -> list[Card]:
    """Cards for one task of one run, in doc order.

    Args:
        run_index: the run's position in the report.
        chains: doc id -> chain (:attr:`TaskRun.chains`).
        report: the store report whose ``doc_scores`` give per-chain values, if any.
        headline: the task's headline metrics (the first with a per-chain column scores
            each card).
        thumbs: where the images' thumbnails go.
    """
    scores = DocScores(report)
    score_name = _score_column(report, headline)
    ordered = sorted(chains.items(), key=lambda kv: (doc_order(kv[0]), kv[1].chain_id))
    thumbs.add_all(
        chain.path(h) for _, chain in ordered for h in range(chain.hops) if chain.kind(h) == "image"
    )
    cards = []
    for doc_id, chain in ordered:
        row = scores.row(chain.chain_id)
        steps = []
        for hop in range(chain.hops):
            kind, path = chain.kind(hop), chain.path(hop)
            step = Step(hop=hop, kind=kind, label="seed" if hop == 0 else f"{kind} {hop}",
                        href=path.resolve().as_uri(), similarity=scores.similarity(chain, hop) if hop else None)
            if kind == "image":
                step.thumb, step.missing = thumbs.get(path)
                if step.thumb:
                    step.size = _shown_size(thumbs.sizes[step.thumb], thumbs.px)
            else:
                step.text, step.cut, step.missing = _read_text(path)
            steps.append(step)
        group = next((str(row[c]) for c in GROUP_COLUMNS if row.get(c) not in (None, "")), None)
        cards.append(Card(
            run=run_index, task=task, doc_id=doc_id, chain_id=chain.chain_id, status=chain.status,
            steps=steps, failure=None if chain.failure is None else str(chain.failure), group=group,
            score=finite_or_none(row.get(score_name)) if score_name else None, score_name=score_name,
            fields={k: v for k, v in row.items() if not _STEP_COLUMN.match(k) and k != score_name
                    and k not in GROUP_COLUMNS},
        ))
    return cards


def _shown_size(size: tuple[int, int], px: int) -> tuple[int, int]:
    """The thumbnail's size on the page: its longest side ``px``, so that small drawings
    (a 64-pixel smoke generator) line up with large ones; the browser scales them."""
    scale = px / max(size)
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def doc_order(doc_id: str) -> tuple[int, str]:
    """Sort key of lmms-eval's doc ids: numbers in numeric order, then any other id."""
    return (int(doc_id), "") if doc_id.isdigit() else (1 << 62, doc_id)
