"""Hand-made chains in the artifact store's real layout, for scorer tests, and a mean-colour
image encoder to score them with, and a finished run of them (:func:`write_run`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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


def genception_chain(tmp_path, category, chain_id, colours, status="ok", iterations=3):
    """A GenCeption chain: seed and redraws of the given colours, descriptions between."""
    from lmms_genbench.metrics.scorers.genception import GENCEPTION

    items = []
    for t, colour in enumerate(colours):
        items.append(Image.new("RGB", (32, 32), colour))
        if t < len(colours) - 1:
            items.append("d")
    failure = None if status == "ok" else (1, "describe", "empty description")
    chain = write_chain(tmp_path, chain_id, "image_first", items, length=2 * iterations, failure=failure)
    return record(GENCEPTION, chain, category=category)


class MeanColourEncoder:
    """Embedding = mean RGB + 1: identical images have similarity 1."""

    def encode(self, images):
        import torch

        return torch.tensor(np.stack([np.asarray(i, dtype=np.float64).mean((0, 1)) + 1.0 for i in images]))


#: the timestamp of the results files :func:`write_run` writes
DATE = "20261123_174051"


def store_report(gc=0.8):
    """A GenCeption store report in the shape with intervals, estimators and doc_scores."""
    return {
        "summary": {"gc@2": gc, "s@1": 0.8, "s@2": 0.8, "iterations": 2},
        "categories": {"cats": {"gc@2": 0.81, "n_scored": 1}, "dogs": {"gc@2": 0.79, "n_scored": 1}},
        "scorer": {"name": "genception", "key": "k1"},
        "intervals": {
            "gc@2": {"low": 0.7, "high": 0.9, "stderr": 0.05, "n": 2, "level": 0.95, "method": "bootstrap"},
            "gc_fid@2": {"low": None, "high": None, "reason": "FID has no per-doc estimator"},
        },
        "estimators": {"gc@2": {"kind": "mean", "column": "gc"}},
        "doc_scores": {"chain_ids": ["a", "b"],
                       "columns": {"gc": [0.81, 0.79], "s@1": [0.9, 0.7], "s@2": [0.72, 0.88],
                                   "category": ["cats", "dogs"]}},
        "failed_docs": [{"chain_id": "c", "reason": "incomplete: 3 of 4 hops"},
                        {"chain_id": "z", "reason": "seed image unreadable"}],
        "failed_docs_total": 2,
    }


def write_run(root, name, *, report=None, model_args="preset=smoke", gc=0.8, texts=("a red cup", "a cup"),
              ids=("a", "b", "c")):
    """One run of task ``t``: chains a, b (complete) and c (failed), its results file,
    samples file and store report (``ids``: the chains' ids, e.g. file names). ``report=False``
    leaves the report of today's stores (no intervals, estimators or doc_scores)."""
    root = Path(root)
    a, b, c = ids
    chains = [
        write_chain(root, a, "image_first", [(200, 0, 0), texts[0], (190, 10, 0), texts[1], (180, 20, 0)], namespace=name),
        write_chain(root, b, "image_first", [(0, 0, 200), "blue", (0, 10, 190), "blue sky", (0, 20, 180)], namespace=name),
        write_chain(root, c, "image_first", [(0, 200, 0), "green", (0, 190, 0)], namespace=name, length=4,
                    failure=(3, "generate", "generator refused the prompt")),
    ]
    out = root / f"out-{name}"
    out.mkdir()
    scores = {"gc@2": gc, "gc_fid@2": 12.5, "extra": 0.25, "s@1": 0.8, "s@2": 0.8, "n_scored": 2, "n_failed": 1,
              "gc@2_cats": 0.81}
    results = {
        "results": {"t": {"alias": "t", **{f"{k},none": v for k, v in scores.items()}, "extra_stderr,none": 0.1,
                          "gc@2_stderr,none": "N/A"}},
        "higher_is_better": {"t": {"gc@2": True, "gc_fid@2": False, "extra": True}},
        "config": {"model": "cycle", "model_args": model_args},
    }
    (out / f"{DATE}_results.json").write_text(json.dumps(results))
    with open(out / f"{DATE}_samples_t.jsonl", "w") as fh:
        fh.writelines(json.dumps({"doc_id": i, "filtered_resps": [chain.to_json()]}) + "\n" for i, chain in enumerate(chains))
    if report is not False:
        body = report or store_report(gc)
    else:
        body = {k: v for k, v in store_report(gc).items() if k not in ("intervals", "estimators", "doc_scores")}
    (Path(chains[0].namespace) / "report.json").write_text(json.dumps(body))
    return out / f"{DATE}_results.json"
