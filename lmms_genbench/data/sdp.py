"""Data of the semantic drift tasks: Nocaps+Docci400 and GenEval's prompts.

Nocaps+Docci400, the semantic drift paper's 400 image-caption pairs, joined as the
authors' ``prepare_dataset.py`` (mollahsabbir/Semantic-Drift-in-Unified-Models) does:

* the pair list is ``mollahsabbir/nd400`` (split ``validation``), of which it reads
  ``source`` and ``image_id`` (a string);
* ``source == "docci"``: the row of ``google/docci`` (config ``docci``, split ``test``)
  whose ``example_id`` is ``image_id``; caption = ``description``;
* any other ``source``: the row of ``HuggingFaceM4/NoCaps`` (split ``validation``) whose
  ``image_file_name`` (e.g. ``0013ea2087020901.jpg``) is ``image_id``; caption = the
  first of ``annotations_captions``. NoCaps' own ``image_id`` is a running integer
  and is never the key.

Both originals are loading scripts, so each is read from the hub's Parquet export
(:mod:`lmms_genbench.data.hub`); NoCaps falls back to ``lmms-lab/NoCaps``, a Parquet
copy with the same eleven columns (its dataset card). The authors skip a pair that does
not join without a word; :func:`join_nd400` raises naming every missing id, or with
``allow_missing`` logs them and goes on. None of these datasets was loaded from here
(no hub access): the tests read schema-true local copies (tests/support/hub_fixtures.py).
:func:`resample_nd400` draws another such list with a seed.

GenEval (djghosh13/geneval, MIT): ``prompts/evaluation_metadata.jsonl``, 553 entries
``{tag, include, exclude?, prompt}``. It is read from a file (:func:`load_geneval_docs`),
which :func:`fetch_geneval_metadata` downloads; the paper's long rewritten prompts
(GenEval-R) can replace the short ones line by line.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hub import PARQUET_EXPORT, HubCopy, HubTable, load_table
from ..core.args import check_int

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairSource:
    """Where one nd400 source's rows live, the column the pair ids match and the caption column."""

    table: HubTable
    key: str
    caption: str


# google/docci docci.py: configs docci (default: image, example_id, description) and
# docci_aar (image, example_id); the authors read the default config's test split.
# not-lain/docci is no fallback: a third-party lmms-eval task README (docci_test) lists its
# columns as image, question, answer, so no example_id to join on.
DOCCI = PairSource(
    HubTable((HubCopy("google/docci", "docci", PARQUET_EXPORT),), "test", ("image", "example_id", "description")),
    key="example_id", caption="description",
)
# HuggingFaceM4/NoCaps (script NoCaps.py, one config) and lmms-lab/NoCaps (its card): the
# same eleven columns, image_id int32 running from 0 next to image_file_name "<open_images_id>.jpg"
NOCAPS = PairSource(
    HubTable(
        (HubCopy("HuggingFaceM4/NoCaps", "default", PARQUET_EXPORT), HubCopy("lmms-lab/NoCaps", "default")),
        "validation", ("image", "image_file_name", "annotations_captions"),
    ),
    key="image_file_name", caption="annotations_captions",
)
SOURCES: dict[str, PairSource] = {"docci": DOCCI, "nocaps": NOCAPS}
#: nd400 ``source`` values as we expect them; any other value is read as NoCaps, with a warning
SOURCE_NAMES = tuple(SOURCES)


class MissingPairsError(ValueError):
    """Pairs of the list that are not in their source dataset; ``missing`` maps source -> ids."""

    def __init__(self, message: str, missing: Mapping[str, list[str]]):
        super().__init__(message)
        self.missing = dict(missing)


def source_of(value: Any) -> str:
    """The source an nd400 ``source`` value names: "docci" for "docci" (any case), else "nocaps".

    The authors compare ``source == "docci"`` and send every other row to NoCaps; lower-casing
    first differs only for values such as "DOCCI", which their code would look up in NoCaps.
    """
    return "docci" if str(value).strip().lower() == "docci" else "nocaps"


def _caption(value: Any) -> str:
    # NoCaps keeps ten reference captions per image: the authors use the first
    if isinstance(value, (list, tuple)):
        return str(value[0]) if value else ""
    return str(value or "")


def _warn_unexpected_sources(pairs: list[Mapping[str, Any]]) -> None:
    odd = Counter(str(r["source"]) for r in pairs if str(r["source"]) not in SOURCE_NAMES)
    if odd:
        logger.warning(
            "nd400 source values %s are neither %s: read as %s, as the authors' prepare_dataset.py "
            "routes every value but 'docci' to NoCaps",
            dict(odd), " nor ".join(repr(n) for n in SOURCE_NAMES),
            {v: source_of(v) for v in odd},
        )


def _missing_message(missing: Mapping[str, list[str]], used: Mapping[str, HubCopy], total: int,
                     sources: Mapping[str, PairSource]) -> str:
    parts = []
    for name, ids in missing.items():
        spec = sources[name]
        parts.append(f"{name} ({len(ids)}, matched on {spec.key!r} of split {spec.table.split!r} of {used[name]}): {ids}")
    message = f"{sum(map(len, missing.values()))} of {total} nd400 pairs are not in their source dataset: " + "; ".join(parts)
    if any(i.isdigit() for i in missing.get("nocaps", [])):
        message += (
            ". NoCaps pairs are keyed by file name such as '0013ea2087020901.jpg' (image_file_name), "
            "not by NoCaps' integer image_id; a list from an older `lmms-genbench sdp resample` holds "
            "integers: draw it again"
        )
    return message


def join_nd400(
    pairs: Iterable[Mapping[str, Any]],
    load: Callable[..., Any] | None = None,
    sources: Mapping[str, PairSource] = SOURCES,
    allow_missing: bool = False,
) -> list[dict[str, Any]]:
    """Rows ``{pair_id, source, caption, image}`` for each listed pair that joins, in list order.

    Args:
        pairs: the nd400 rows (``source``, ``image_id``); see :func:`source_of`.
        load: ``datasets.load_dataset`` (injectable for tests).
        sources: where each source lives and which columns hold the key and the caption.
        allow_missing: log the pairs that do not join (count and ids) and return the rest,
            instead of raising.

    Raises:
        MissingPairsError: some pair's id is not in its source, naming every such id, the
            source, the column matched and the copy read; a silently shorter benchmark
            would not be Nocaps+Docci400. Raised with ``allow_missing`` too when no pair joins.
    """
    pairs = list(pairs)
    _warn_unexpected_sources(pairs)
    routed = [(source_of(r["source"]), str(r["image_id"])) for r in pairs]
    found: dict[tuple[str, str], dict[str, Any]] = {}
    used: dict[str, HubCopy] = {}
    for name, spec in sources.items():
        wanted = {ident for source, ident in routed if source == name}
        if not wanted:
            continue
        table, used[name] = load_table(spec.table, load)
        keep = [i for i, key in enumerate(table[spec.key]) if str(key) in wanted]
        for row in table.select(keep):
            found[(name, str(row[spec.key]))] = {"caption": _caption(row[spec.caption]), "image": row["image"]}
    rows: list[dict[str, Any]] = []
    missing: dict[str, list[str]] = {}
    for key in routed:
        if key in found:
            rows.append({"pair_id": f"{key[0]}/{key[1]}", "source": key[0], **found[key]})
        else:
            missing.setdefault(key[0], []).append(key[1])
    if missing:
        message = _missing_message(missing, used, len(pairs), sources)
        if not allow_missing or not rows:
            raise MissingPairsError(message, missing)
        logger.warning("%s; running on the %d pairs that join", message, len(rows))
    return rows


def load_pair_list(path: str | os.PathLike) -> list[dict[str, str]]:
    """A pair list as JSON lines ``{"source": "docci"|"nocaps", "image_id": ...}``
    (what :func:`resample_nd400` writes); raises ValueError naming the bad line."""
    rows = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append({"source": str(row["source"]).lower(), "image_id": str(row["image_id"])})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{path} line {number}: expected {{\"source\", \"image_id\"}}, got {line[:80]!r} ({exc})"
            ) from None
    if not rows:
        raise ValueError(f"{path} lists no pairs")
    return rows


def resample_nd400(
    seed: int,
    per_source: int = 200,
    load: Callable[..., Any] | None = None,
    sources: Mapping[str, PairSource] = SOURCES,
) -> list[dict[str, str]]:
    """Draw ``per_source`` DOCCI and ``per_source`` NoCaps ids without replacement.

    The ids are each source's join key (DOCCI ``example_id``, NoCaps ``image_file_name``),
    sorted before drawing with ``numpy.random.default_rng(seed)``, so a seed gives the same
    list whatever order the hub serves rows in. Rows come back in ``sources`` order (DOCCI
    first), each source in draw order, as ``{"source", "image_id"}``. The authors' own draw
    is not documented beyond "randomly sample 200"; theirs is ``mollahsabbir/nd400``.
    """
    import numpy as np

    check_int("seed", seed)
    check_int("per_source", per_source, minimum=1)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, str]] = []
    for name, spec in sources.items():
        table, copy = load_table(spec.table, load)
        ids = sorted({str(i) for i in table[spec.key]})
        if len(ids) < per_source:
            raise ValueError(f"{name} ({copy}) has {len(ids)} distinct {spec.key}, fewer than per_source={per_source}")
        picked = rng.choice(len(ids), size=per_source, replace=False)
        rows += [{"source": name, "image_id": ids[i]} for i in picked]
    return rows


GENEVAL_URL = "https://raw.githubusercontent.com/djghosh13/geneval/main/prompts/evaluation_metadata.jsonl"
#: tag counts of GenEval's evaluation_metadata.jsonl (553 prompts)
GENEVAL_TAG_COUNTS = {
    "single_object": 80, "two_object": 99, "counting": 80, "colors": 94, "position": 100, "color_attr": 100,
}


def _read_prompts(path: str | os.PathLike) -> list[str]:
    """Prompts one per line: ``.txt`` lines, or JSON lines with a ``prompt`` field."""
    lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    if str(path).endswith(".txt"):
        return [ln.strip() for ln in lines]
    prompts = []
    for number, line in enumerate(lines, 1):
        try:
            prompts.append(str(json.loads(line)["prompt"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} line {number}: expected a JSON object with 'prompt' ({exc})") from None
    return prompts


def load_geneval_docs(
    metadata_path: str | os.PathLike,
    prompts_path: str | os.PathLike | None = None,
    warn_if_not_geneval: bool = True,
) -> list[dict[str, Any]]:
    """GenEval entries as text-first chain docs ``{chain_id, prompt, tag, metadata}``.

    Args:
        metadata_path: GenEval's ``evaluation_metadata.jsonl`` (or any file in its format).
        prompts_path: optional rewritten prompts (e.g. GenEval-R), one per metadata line in
            the same order (``.txt`` lines or JSON lines with ``prompt``); they start the
            chains, while every image is still judged against the metadata.

    ``metadata`` is kept as a JSON string: GenEval's ``position`` pairs mix a string and
    an int, which an Arrow column cannot hold. Raises ValueError naming the file and line
    for unreadable or invalid entries, or a prompt count that does not match.
    """
    from ..metrics.functional.geneval import validate_metadata

    docs = []
    lines = Path(metadata_path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            validate_metadata(entry)
            prompt = str(entry["prompt"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{metadata_path} line {number}: not a GenEval entry: {exc}") from None
        docs.append(
            {
                "chain_id": f"geneval/{len(docs):05d}",
                "prompt": prompt,
                "tag": entry["tag"],
                "metadata": json.dumps(entry, sort_keys=True),
            }
        )
    if not docs:
        raise ValueError(f"{metadata_path} holds no GenEval entries")
    if prompts_path:
        prompts = _read_prompts(prompts_path)
        if len(prompts) != len(docs):
            raise ValueError(
                f"{prompts_path} has {len(prompts)} prompts for {len(docs)} GenEval entries in "
                f"{metadata_path}; rewritten prompts must match the metadata line by line"
            )
        for doc, prompt in zip(docs, prompts):
            doc["prompt"] = prompt
    counts = Counter(d["tag"] for d in docs)
    if warn_if_not_geneval and dict(counts) != GENEVAL_TAG_COUNTS:
        logger.warning(
            "%s is not GenEval's 553-prompt set (tags %s); scores are not comparable to GenEval's",
            metadata_path, dict(counts),
        )
    return docs


def fetch_geneval_metadata(target: str | os.PathLike, url: str = GENEVAL_URL, transport: Any = None) -> Path:
    """Download GenEval's evaluation_metadata.jsonl to ``target`` (atomically) and check it
    parses with 553 entries and GenEval's tag counts. ``transport``: an httpx transport
    (tests)."""
    import httpx

    from ..core.keys import atomic_write

    with httpx.Client(transport=transport, follow_redirects=True, timeout=60) as client:
        response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered HTTP {response.status_code}")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".download")
    tmp.write_bytes(response.content)
    try:
        docs = load_geneval_docs(tmp, warn_if_not_geneval=False)
        counts = dict(Counter(d["tag"] for d in docs))
        if counts != GENEVAL_TAG_COUNTS:
            raise ValueError(f"downloaded file has tags {counts}, expected {GENEVAL_TAG_COUNTS}")
        atomic_write(target, lambda fh: fh.write(response.content))
    finally:
        tmp.unlink(missing_ok=True)
    return target


def default_geneval_path() -> Path:
    """Where ``lmms-genbench sdp fetch-geneval`` puts the metadata by default."""
    root = os.environ.get("LMMS_GENBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "lmms_genbench")
    return Path(root) / "geneval" / "evaluation_metadata.jsonl"
