"""The chain contract: what the cycle model answers for one doc, and what every
scorer reads.

A :class:`Chain` says where the doc's chain lives in the artifact store
(``namespace``/``folder``), how long the task asked it to be (``length`` hops),
how many hops are stored (``hops``, gap-free from hop 0), its direction, its
status and failure, and the task's scorer settings. Texts and images stay in
the store: the JSON is a few hundred bytes whatever the chain holds, so
lmms-eval's per-doc logs and memory stay small.

Hop ``h`` of a chain is an image or a text by its direction (image-first:
I0 -> T1 -> I2 ...); its file is ``<namespace>/<folder>/<h:03d>.{png,txt}``
(:class:`lmms_genbench.store.ChainLocation`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .layout import ChainLocation
from ..core.args import check_int

Direction = Literal["image_first", "text_first"]
Kind = Literal["image", "text"]
DIRECTIONS: tuple[Direction, ...] = ("image_first", "text_first")

#: version of the JSON below; a reader refuses other versions by name
CHAIN_FORMAT = 1


class NotAChainError(ValueError):
    """A response that is not a chain (another model type answered the request)."""


def hop_kind(direction: str, hop: int) -> Kind:
    """``"image"`` or ``"text"``: chains alternate modalities from their first hop."""
    first_is_image = direction == "image_first"
    return "image" if (hop % 2 == 0) == first_is_image else "text"


@dataclass(frozen=True)
class ChainFailure:
    """Why a chain stopped: the hop it stopped at, the stage and a reason."""

    hop: int
    stage: str  # "seed" | "describe" | "generate" | "incomplete"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"hop": self.hop, "stage": self.stage, "reason": self.reason}

    def __str__(self) -> str:
        # reports count failures by the text before the first ":"
        return f"{self.stage} failed at hop {self.hop}: {self.reason}"


@dataclass(frozen=True)
class Chain:
    """One doc's chain as the engine left it.

    Args:
        chain_id: the doc's key (its ``chain_id``, ``question_id`` or ``id`` field).
        direction: ``image_first`` or ``text_first``.
        length: hops the task asks for (``2 * iterations`` or ``generations``).
        hops: hops stored, gap-free from hop 0 (so ``hops - 1`` generations).
        namespace: the store folder of the task's chains (describer/generator/protocol).
        folder: this chain's folder inside ``namespace``.
        task: the lmms-eval task that asked for it.
        failure: why it stopped, or None for a complete chain.
        scorer: the task's scorer settings (``generation_kwargs.scorer``).
    """

    chain_id: str
    direction: Direction
    length: int
    hops: int
    namespace: str
    folder: str
    task: str = ""
    failure: ChainFailure | None = None
    scorer: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        for name in ("length", "hops"):
            check_int(name, getattr(self, name), minimum=0)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def status(self) -> str:
        return "ok" if self.ok else "failed"

    @property
    def location(self) -> ChainLocation:
        return ChainLocation(Path(self.namespace) / self.folder)

    def kind(self, hop: int) -> Kind:
        return hop_kind(self.direction, hop)

    def path(self, hop: int) -> Path:
        """The file of stored hop ``hop``."""
        return self.location.path(hop, self.kind(hop))

    def to_json(self) -> str:
        return json.dumps(
            {
                "chain": CHAIN_FORMAT,
                "chain_id": self.chain_id,
                "task": self.task,
                "direction": self.direction,
                "length": self.length,
                "hops": self.hops,
                "status": self.status,
                "failure": None if self.failure is None else self.failure.to_dict(),
                "namespace": self.namespace,
                "folder": self.folder,
                "scorer": dict(self.scorer),
            },
            ensure_ascii=False,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: Any) -> Chain:
        """Parse :meth:`to_json`'s output.

        Raises:
            NotAChainError: ``text`` is not a chain of this format (for example the
                answer of a plain describer run on a cycle task); the message says why.
        """
        try:
            data = json.loads(text)
        except (TypeError, ValueError):
            shown = text if not isinstance(text, str) else (text[:60] + "…" if len(text) > 60 else text)
            raise NotAChainError(f"response is not a chain: {shown!r}") from None
        if not isinstance(data, dict) or data.get("chain") != CHAIN_FORMAT:
            found = data.get("chain") if isinstance(data, dict) else type(data).__name__
            raise NotAChainError(f"response is not a chain of format {CHAIN_FORMAT} (found {found!r})")
        try:
            failure = data.get("failure")
            return cls(
                chain_id=str(data["chain_id"]),
                direction=data["direction"],
                length=data["length"],
                hops=data["hops"],
                namespace=str(data["namespace"]),
                folder=str(data["folder"]),
                task=str(data.get("task") or ""),
                failure=None if failure is None else ChainFailure(int(failure["hop"]), str(failure["stage"]), str(failure["reason"])),
                scorer=dict(data.get("scorer") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NotAChainError(f"malformed chain: {type(exc).__name__}: {exc}") from None
