"""Semantic Drift chains in the authors' folder layout: export ours, read theirs.

The layout (their README; ``semantic-drift/mcd-sdr.py`` and ``mgg.py`` read it)::

    <root>/text-first/gen-0.csv          filename,caption: the source captions (T0)
    <root>/text-first/gen-1/<stem>.png   the images drawn from them (I1)
    <root>/text-first/gen-2.csv          the descriptions of those (T2) ...
    <root>/image-first/gen-0/<stem>.png  the source images (I0)
    <root>/image-first/gen-1.csv         their descriptions (T1) ...

A row's ``filename`` names the pair in every generation: CSV rows are matched by it (their
code sorts each CSV by it and pairs rows by position), images are ``<stem>.png`` (their
``open_image`` strips ``.png``/``.jpg`` and tries ``.png`` first, then ``.jpg``). Generation 0
is the source data. CSVs are UTF-8 (their reader says latin1: a non-ASCII caption reads as
mojibake there, in their own ``prepare_dataset.py`` output too).

:func:`export_chains` writes complete chains only (a chain the layout cannot hold whole is left
out and counted); :func:`read_layout` checks a whole folder before anything is scored and names
the first file that is wrong (:class:`LayoutError`); :func:`import_layout` stores its chains as
ours, so the MCD scorer (MCD, SDR) reads them as any run's.
"""

from __future__ import annotations

import csv
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.keys import slug_key
from ..store import ArtifactStore, Chain, hop_kind

__all__ = ["COLUMNS", "FOLDERS", "ExportResult", "Layout", "LayoutError", "export_chains", "import_layout",
           "layout_filename", "read_layout"]

#: our chain direction -> the authors' folder
FOLDERS = {"text_first": "text-first", "image_first": "image-first"}
COLUMNS = ("filename", "caption")
_IMAGE_SUFFIXES = (".png", ".jpg")
_GEN = re.compile(r"^gen-(\d+)(\.csv)?$")


class LayoutError(ValueError):
    """A folder that is not the authors' layout; the message names the file."""


def layout_filename(pair_id: str) -> str:
    """A pair's ``filename`` in the layout: its id made one safe path component, ending in
    ``.png`` unless it names a ``.png``/``.jpg`` file already (NoCaps ids do, as theirs); a
    GenEval chain (``geneval/<line>``) is ``<line>.png``, the name their ``mgg.py`` opens."""
    geneval = re.fullmatch(r"geneval/(\d+)", pair_id)
    if geneval:
        return f"{int(geneval.group(1))}.png"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", pair_id).strip("._") or "pair"
    return name if name.lower().endswith(_IMAGE_SUFFIXES) else f"{name}.png"


def _stem(filename: str) -> str:
    """Their ``open_image``: the filename without ``.png``/``.jpg``."""
    return filename.replace(".png", "").replace(".jpg", "")


# --------------------------------------------------------------------------- export
@dataclass
class ExportResult:
    """What :func:`export_chains` wrote: per direction, the chains and generations."""

    root: Path
    chains: dict[str, int] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> chains


def _pair_id(chain: Chain) -> str:
    return chain.chain_id.split("#")[0]


def export_chains(chains: Iterable[Chain], out: Path) -> ExportResult:
    """Write ``chains`` (both directions of one task) in the authors' layout under ``out``.

    Each direction keeps its complete chains of the task's length; a failed or short chain
    is left out whole (counted in ``left_out``), so no generation misses a row.

    Raises:
        LayoutError: ``out`` exists and is not empty, two pairs share a filename, or no
            chain is complete."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise LayoutError(f"{out}: not empty; give a new folder to export into")
    result = ExportResult(out)
    by_direction: dict[str, list[Chain]] = {}
    for chain in chains:
        if not chain.ok or chain.hops < chain.length + 1:
            reason = "failed" if not chain.ok else "fewer generations than the task's"
            result.left_out[reason] = result.left_out.get(reason, 0) + 1
            continue
        by_direction.setdefault(chain.direction, []).append(chain)
    if not by_direction:
        raise LayoutError(f"no complete chain to export (left out: {result.left_out or 'none given'})")
    for direction, group in sorted(by_direction.items()):
        names: dict[str, Chain] = {}
        for chain in group:
            name = layout_filename(_pair_id(chain))
            if name in names:
                raise LayoutError(f"pairs {_pair_id(names[name])!r} and {_pair_id(chain)!r} both export as {name} "
                                  f"(a store folder with several tasks' chains? give the folder of one run's)")
            names[name] = chain
        G = min(c.length for c in group)
        _write_direction(out / FOLDERS[direction], direction, dict(sorted(names.items())), G)
        result.chains[direction] = len(names)
        result.generations[direction] = G
    return result


def _write_direction(root: Path, direction: str, chains: Mapping[str, Chain], G: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for g in range(G + 1):
        if hop_kind(direction, g) == "text":
            with open(root / f"gen-{g}.csv", "w", encoding="utf-8", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(COLUMNS)
                for name, chain in chains.items():
                    writer.writerow([name, chain.location.read_text(g)])
        else:
            folder = root / f"gen-{g}"
            folder.mkdir()
            for name, chain in chains.items():
                shutil.copyfile(chain.path(g), folder / f"{_stem(name)}.png")


# --------------------------------------------------------------------------- read
@dataclass(frozen=True)
class Layout:
    """A checked layout: per direction, its generations G and filename -> the files of
    generations 0..G (a caption for a text generation, an image path for an image one)."""

    root: Path
    chains: dict[str, dict[str, list[str]]]
    generations: dict[str, int]


def _generations(folder: Path, direction: str) -> int:
    """G of a direction's folder, every gen-0..G present with the kind its position needs."""
    found: dict[int, Path] = {}
    for path in folder.iterdir():
        match = _GEN.match(path.name)
        if match:
            found[int(match.group(1))] = path
    if not found:
        raise LayoutError(f"{folder}: no gen-<g> files or folders")
    G = max(found)
    for g in range(G + 1):
        text = hop_kind(direction, g) == "text"
        want = folder / (f"gen-{g}.csv" if text else f"gen-{g}")
        if g not in found or (want.is_file() if text else want.is_dir()) is False:
            raise LayoutError(f"{want}: missing (generations 0..{G} are in {folder}; a {'CSV' if text else 'folder of images'} is needed here)")
    if G < 1:
        raise LayoutError(f"{folder}: only generation 0; a chain needs at least gen-1")
    return G


def _read_csv(path: Path) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise LayoutError(f"{path}: unreadable ({exc})") from None
    if not rows:
        raise LayoutError(f"{path}: empty; expected the header {','.join(COLUMNS)} and one row per pair")
    if tuple(rows[0]) != COLUMNS:
        raise LayoutError(f"{path}: columns are {rows[0]}, expected {list(COLUMNS)}")
    out: dict[str, str] = {}
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise LayoutError(f"{path}: line {number} has {len(row)} fields, expected 2")
        if row[0] in out:
            raise LayoutError(f"{path}: filename {row[0]!r} appears twice")
        out[row[0]] = row[1]
    if not out:
        raise LayoutError(f"{path}: no rows under the header")
    return out


def _image(folder: Path, filename: str) -> str:
    for suffix in _IMAGE_SUFFIXES:
        path = folder / f"{_stem(filename)}{suffix}"
        if path.is_file():
            return str(path)
    raise LayoutError(f"{folder / (_stem(filename) + '.png')}: missing (the image of {filename!r})")


def read_layout(root: Path) -> Layout:
    """Check the whole folder and read it (captions read, images located, not decoded).

    Raises:
        LayoutError: naming the first file that is missing or wrong."""
    root = Path(root)
    if not root.is_dir():
        raise LayoutError(f"{root}: not a folder")
    present = {d: root / f for d, f in FOLDERS.items() if (root / f).is_dir()}
    if not present:
        raise LayoutError(f"{root}: neither {FOLDERS['text_first']}/ nor {FOLDERS['image_first']}/ is in it")
    chains: dict[str, dict[str, list[str]]] = {}
    generations: dict[str, int] = {}
    for direction, folder in sorted(present.items()):
        G = _generations(folder, direction)
        csvs = {g: _read_csv(folder / f"gen-{g}.csv") for g in range(G + 1) if hop_kind(direction, g) == "text"}
        first = min(csvs)  # their pair list: gen-0.csv (text-first) or gen-1.csv (image-first)
        names = sorted(csvs[first])
        for g, rows in csvs.items():
            if set(rows) != set(names):
                odd = sorted(set(rows) ^ set(names))[0]
                raise LayoutError(f"{folder / f'gen-{g}.csv'}: filename {odd!r} is in one of gen-{first}.csv and this file only")
        chains[direction] = {
            name: [csvs[g][name] if g in csvs else _image(folder / f"gen-{g}", name) for g in range(G + 1)]
            for name in names
        }
        generations[direction] = G
    return Layout(root, chains, generations)


# --------------------------------------------------------------------------- into our store
def import_layout(layout: Layout, store: ArtifactStore, scorer: Mapping[str, object], task: str = "sdp_layout") -> list[Chain]:
    """Store a checked layout's chains as ours (one namespace per direction, under
    ``layout/<folder>``) and return them; images are copied as they are (a PNG keeps its bytes,
    so its stored features are found again)."""
    chains = []
    for direction, pairs in sorted(layout.chains.items()):
        G = layout.generations[direction]
        namespace = store.namespace("layout", slug_key(str(layout.root.resolve())), f"{task}_{direction}")
        for name, items in pairs.items():
            chain_id = f"{_stem(name)}#{direction}"
            location = store.chain(namespace, chain_id)
            for g, item in enumerate(items):
                if hop_kind(direction, g) == "text":
                    location.write_text(g, item)
                elif item.endswith(".png"):
                    location.path(g, "image").parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(item, location.path(g, "image"))
                else:
                    from PIL import Image

                    with Image.open(item) as img:
                        location.write_image(g, img.convert("RGB"))
            chains.append(Chain(chain_id=chain_id, direction=direction, length=G, hops=G + 1,
                                namespace=str(namespace), folder=location.directory.name, task=task,
                                scorer=dict(scorer)))
    return chains


def chains_from_folders(folders: Sequence[Path]) -> list[Chain]:
    """Chains of a store's chain folders (for an export from a store with no results file):
    direction from hop 0's file, the pair from the folder's name, the length from the longest."""
    found = []
    for folder in folders:
        direction = "text_first" if (folder / "000.txt").is_file() else "image_first"
        hops = 0
        while (folder / f"{hops:03d}.{'txt' if hop_kind(direction, hops) == 'text' else 'png'}").is_file():
            hops += 1
        pair = re.sub(r"-[0-9a-f]{8}$", "", folder.name)
        pair = re.sub(rf"_{direction}$", "", pair)
        found.append(Chain(chain_id=f"{pair}#{direction}", direction=direction, length=0, hops=hops,
                           namespace=str(folder.parent), folder=folder.name))
    longest = max((c.hops for c in found), default=1) - 1
    return [Chain(c.chain_id, c.direction, longest, c.hops, c.namespace, c.folder) for c in found]
