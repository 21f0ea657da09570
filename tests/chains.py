"""Hand-made chains in the artifact store's real layout, for scorer tests."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from lmms_genbench.engine import ArtifactStore, Chain, ChainFailure
from lmms_genbench.store import hop_kind


def write_chain(root, chain_id, direction, items, *, length=None, failure=None, scorer=None, namespace="ns"):
    """Store ``items`` as hops 0, 1, ... of a chain and return the engine's answer for it.

    Image hops take an RGB tuple or a PIL image, text hops a string; the kind of each
    hop follows ``direction``. ``length`` (default: as many generations as items
    stored) is what the task asked for; ``failure`` is ``(hop, stage, reason)``.
    """
    store = ArtifactStore(root)
    location = store.chain(Path(root) / namespace, chain_id)
    for hop, item in enumerate(items):
        if hop_kind(direction, hop) == "image":
            image = item if isinstance(item, Image.Image) else Image.new("RGB", (8, 8), tuple(item))
            location.write_image(hop, image)
        else:
            assert isinstance(item, str), f"hop {hop} of a {direction} chain is a text, got {item!r}"
            location.write_text(hop, item)
    return Chain(
        chain_id=chain_id,
        direction=direction,
        length=len(items) - 1 if length is None else length,
        hops=len(items),
        namespace=str(location.directory.parent),
        folder=location.directory.name,
        task="test",
        failure=None if failure is None else ChainFailure(*failure),
        scorer=dict(scorer or {}),
    )


def record(scorer, chain, **doc):
    """The scorer's record of ``chain`` for a doc with fields ``doc``."""
    return scorer.record({"chain_id": chain.chain_id, **doc}, chain.to_json())
