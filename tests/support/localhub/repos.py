"""TEST SCAFFOLDING: the repositories the local hub serves, under the real ids users type.

Every model here has tiny random weights (``lmms_genbench.smoke``'s builders) and every
dataset synthetic rows (``tests.support.hub_fixtures``, schema-true per DATASET_SCHEMAS.md); they
stand in for the real repositories so that the download, loading and joining code runs.
Nothing they produce is a claim about the real models or datasets.

:func:`add_all` builds (cached under ``root``) and registers them on a
:class:`~tests.support.localhub.server.LocalHubServer`; :data:`MODELS` maps each id to its builder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from .server import LocalHubServer

# ---------------------------------------------------------------- models: id -> builder(folder)
# builders take (smoke cache root or None for the default, this hub's own folder) and return the
# folder to serve; the smoke ones cache by builder key, so a session reuses the smoke run's builds


def _smoke_llava(cache: Path | None, root: Path) -> Path:
    from lmms_genbench.smoke.llava import tiny_llava_path

    return tiny_llava_path(cache)


def _smoke_describer(checkpoint: str) -> Callable[[Path], Path]:
    def build(cache: Path | None, root: Path) -> Path:
        from lmms_genbench.smoke.describers import tiny_describer_path

        return tiny_describer_path(checkpoint, cache)

    return build


def _smoke_janus(cache: Path | None, root: Path) -> Path:
    from lmms_genbench.smoke.janus import tiny_janus_path

    return tiny_janus_path(cache)


def _smoke_family(family: str) -> Callable[[Path], Path]:
    def build(cache: Path | None, root: Path) -> Path:
        from lmms_genbench.smoke.pipelines import tiny_family_path

        return tiny_family_path(family, cache)

    return build


def _parity(*parts: str) -> Callable[[Path], Path]:
    """A committed parity checkpoint (tests/support/data/parity/), served as it is: the authors' layout."""

    def build(cache: Path | None, root: Path) -> Path:
        return Path(__file__).resolve().parents[1] / "data" / "parity" / Path(*parts)

    return build


def _saved(name: str, write: Callable[[Path], None]) -> Callable[[Path], Path]:
    """A folder ``<root>/models/<name>`` written once by ``write`` (a marker says it is done)."""

    def build(cache: Path | None, root: Path) -> Path:
        folder = root / "models" / name
        if not (folder / ".done").exists():
            folder.mkdir(parents=True, exist_ok=True)
            write(folder)
            (folder / ".done").write_text("1")
        return folder

    return build


def _write_vit(folder: Path) -> None:
    from lmms_genbench.smoke.vision import tiny_vit

    vit = tiny_vit(0)
    vit.model.save_pretrained(folder)
    vit.processor.save_pretrained(folder)


def _write_dino(folder: Path) -> None:
    """The tiny ViT tower at DINO's geometry (224 px, patch 16, as facebook/dino-vitb16's
    config.json on the Hub states; ViTModel as its model card loads it): the DINO scorer feeds
    224 x 224 crops as the authors' transform does, whatever the processor says."""
    from transformers import ViTConfig, ViTModel

    from lmms_genbench.smoke.vision import TINY_TOWER, seeded, tiny_vit

    config = ViTConfig(**{**TINY_TOWER, "image_size": 224, "patch_size": 16}, intermediate_size=37)
    seeded(0, lambda: ViTModel(config)).eval().save_pretrained(folder)
    tiny_vit(0).processor.save_pretrained(folder)


def _write_clip(folder: Path) -> None:
    from lmms_genbench.smoke.vision import tiny_clip

    clip = tiny_clip(0)
    clip.model.save_pretrained(folder)
    clip.image_processor.save_pretrained(folder)
    clip.tokenizer.save_pretrained(folder)


def _write_sentence(folder: Path) -> None:
    """A 2-layer BERT behind sentence-transformers' mean pooling, over a small word vocabulary."""
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6 moved the modules (the old import warns)
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:
        from sentence_transformers import models
    from transformers import BertConfig, BertModel, BertTokenizer

    from lmms_genbench.smoke.vision import seeded

    bert = folder / "_bert"
    bert.mkdir(exist_ok=True)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz0123456789.,"]
    words += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    (bert / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    BertTokenizer(str(bert / "vocab.txt"), model_max_length=128).save_pretrained(bert)
    config = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=128)
    seeded(0, lambda: BertModel(config)).save_pretrained(bert)
    encoder = models.Transformer(str(bert), max_seq_length=128)
    model = SentenceTransformer(modules=[encoder, models.Pooling(32, pooling_mode="mean")], device="cpu")
    model.save(str(folder))
    for f in bert.iterdir():
        f.unlink()
    bert.rmdir()


#: model id -> builder; the ids docs/running.md, docs/scale.md, docs/models.md, the README and
#: examples/ name, and the networks the real tasks' scorers load by hub id
MODELS: dict[str, Callable[[Path], Path]] = {
    "llava-hf/llava-1.5-7b-hf": _smoke_llava,
    "Qwen/Qwen2.5-VL-7B-Instruct": _smoke_describer("qwen2_5_vl"),
    "deepseek-community/Janus-Pro-7B": _smoke_janus,
    # the tiny checkpoint DeepSeek's own code built in deepseek-ai/Janus-1.3B's layout
    "deepseek-ai/Janus-1.3B": _parity("janus13/Janus-1.3B"),
    # the tiny checkpoint DeepSeek's own code built at a Janus-Pro-like geometry, with Janus-Pro's processor files
    "deepseek-ai/Janus-Pro-7B": _parity("janus_pro7b/Janus-Pro-tiny"),
    # Show-o's three repositories (configs/showo_demo_512x512.yaml), as the authors' code wrote them
    "showlab/show-o-512x512": _parity("showo/show-o-512x512"),
    "showlab/magvitv2": _parity("showo/magvitv2"),
    "microsoft/phi-1_5": _parity("showo/phi-1_5"),
    # VILA-U as the authors' code wrote it (config.json, llm/, vision_tower/, mm_projector/)
    "mit-han-lab/vila-u-7b-256": _parity("vila_u/vila-u-7b-256"),
    # BLIP3-o 4B as the authors' code wrote it
    "BLIP3o/BLIP3o-Model-4B": _parity("blip3o", "BLIP3o-Model-4B"),
    # the tiny random BAGEL in the published layout
    "ByteDance-Seed/BAGEL-7B-MoT": _parity("bagel", "BAGEL-7B-MoT-tiny"),
    "black-forest-labs/FLUX.1-schnell": _smoke_family("flux"),
    "stabilityai/stable-diffusion-3.5-medium": _smoke_family("sd3"),
    "stabilityai/stable-diffusion-3.5-large": _smoke_family("sd3"),
    "stabilityai/sdxl-turbo": _smoke_family("sdxl"),
    "stabilityai/stable-diffusion-xl-base-1.0": _smoke_family("sdxl"),
    # scorers: GenCeption's ViT (paper preset), MCD's CLIP, DINO and sentence encoder
    "google/vit-base-patch16-224-in21k": _saved("vit", _write_vit),
    "facebook/dino-vitb16": _saved("dino", _write_dino),
    "openai/clip-vit-base-patch32": _saved("clip", _write_clip),
    "sentence-transformers/all-mpnet-base-v2": _saved("sentence", _write_sentence),
}
#: the models the headline command (mmeception + sdp_nocaps) needs: the rest are built on demand
HEADLINE_MODELS = ("Qwen/Qwen2.5-VL-7B-Instruct", "black-forest-labs/FLUX.1-schnell",
                   "google/vit-base-patch16-224-in21k", "facebook/dino-vitb16", "openai/clip-vit-base-patch32",
                   "sentence-transformers/all-mpnet-base-v2")
#: datasets whose real repos are gated (terms to accept): the token ACCEPTED has accepted them
GATED = {"lmms-lab-encoder/MME"}


def add_models(hub: LocalHubServer, root: str | os.PathLike | None = None, ids=None,
               smoke_cache: str | os.PathLike | None = None) -> dict[str, Path]:
    """Build and serve the models ``ids`` (None: all of :data:`MODELS`): the smoke ones cached
    under ``smoke_cache`` (None: ``$LMMS_GENBENCH_CACHE`` or ``~/.cache/lmms_genbench``, as the
    smoke preset), the others under ``root`` (None: the one :func:`add_all` used), e.g.
    ``add_models(local_hub, ids=["llava-hf/llava-1.5-7b-hf"])`` in a test."""
    root = Path(root if root is not None else hub.build_root)
    hub.build_root = root
    cache = Path(smoke_cache) if smoke_cache is not None else None
    out = {}
    for repo_id in (MODELS if ids is None else ids):
        if repo_id in MODELS:
            out[repo_id] = MODELS[repo_id](cache, root)
        else:
            raise KeyError(f"no builder for {repo_id!r}; known: {sorted(MODELS)}")
        hub.add(repo_id, out[repo_id])
    return out


def _revision_of(folder: str) -> str:
    return folder.replace("--", "/")  # hub_fixtures writes "refs/convert/parquet" as refs--convert--parquet


_PHOTOS: list = []


def photo_image(seed: int):
    """A 64 x 48 crop of one of the package photos (lmms_genbench.data.photos), chosen and placed
    by ``seed``: real-looking pixels for the synthetic rows, with no download."""
    import random

    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo

    if not _PHOTOS:
        _PHOTOS.extend(load_package_photo(chain_id).convert("RGB") for chain_id, _ in PACKAGE_PHOTOS)
    rng = random.Random(seed)
    photo = _PHOTOS[seed % len(_PHOTOS)]
    w, h = min(photo.width, 256), min(photo.height, 192)
    left, top = rng.randrange(photo.width - w + 1), rng.randrange(photo.height - h + 1)
    return photo.crop((left, top, left + w, top + h)).resize((64, 48))


def build_datasets(root: str | os.PathLike) -> Path:
    """Every task dataset (tests.support.hub_fixtures.build_hub: schema-true columns, synthetic rows,
    images cropped from the package photos), written once under ``root``."""
    from unittest import mock

    root = Path(root)
    if not (root / ".done").exists():
        from tests.support import hub_fixtures

        with mock.patch.object(hub_fixtures, "tiny_image", photo_image):
            hub_fixtures.build_hub(root)
        (root / ".done").write_text("1")
    return root


def add_datasets(hub: LocalHubServer, root: str | os.PathLike) -> list[str]:
    """Serve every dataset repo under ``root`` (``<owner>/<name>/<revision>/`` as build_hub writes)."""
    root = build_datasets(root)
    ids = []
    for owner in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for name in sorted(p for p in owner.iterdir() if p.is_dir()):
            revisions = [r for r in name.iterdir() if r.is_dir()]
            if not revisions or not any(f.is_file() for r in revisions for f in r.rglob("*")):
                continue
            repo_id = f"{owner.name}/{name.name}"
            for rev in revisions:
                hub.add(repo_id, rev, repo_type="dataset", revision=_revision_of(rev.name), gated=repo_id in GATED)
            if "main" not in {_revision_of(r.name) for r in revisions}:
                # a loading-script dataset: its main branch holds the script the parquet export came from
                main = name / "main"
                main.mkdir(exist_ok=True)
                (main / "README.md").write_text(
                    f"---\npretty_name: {name.name}\n---\nTEST SCAFFOLDING: a loading-script dataset; "
                    "read the Parquet export on revision refs/convert/parquet.\n", encoding="utf-8")
                (main / f"{name.name}.py").write_text("# the real repo's loading script (not run by datasets >= 4)\n")
                hub.add(repo_id, main, repo_type="dataset", revision="main", gated=repo_id in GATED)
            ids.append(repo_id)
    return ids


def add_all(hub: LocalHubServer, root: str | os.PathLike, models=HEADLINE_MODELS,
            smoke_cache: str | os.PathLike | None = None) -> LocalHubServer:
    """Serve ``models`` (default: what the headline command needs; None: all) and every dataset.

    ``root``: where the scorer networks (``models/``) and the tables (``datasets/``) are built
    once; the smoke checkpoints live in ``smoke_cache`` (see :func:`add_models`).
    """
    add_models(hub, root, models, smoke_cache)
    add_datasets(hub, Path(root) / "datasets")
    return hub


def manifest(hub: LocalHubServer) -> str:
    """What the hub serves, one line per repo and revision (for the shell entry point)."""
    lines = []
    for (repo_type, repo_id), repo in sorted(hub.repos.items()):
        for rev in repo.revisions.values():
            lines.append(f"{repo_type:7} {repo_id}@{rev.name} ({rev.sha[:8]}, {len(rev.files)} files)"
                         + (" gated" if repo.gated else ""))
    return "\n".join(lines)


def write_manifest(hub: LocalHubServer, path: str | os.PathLike) -> None:
    data = {f"{t}:{i}": {r.name: r.sha for r in repo.revisions.values()} for (t, i), repo in hub.repos.items()}
    Path(path).write_text(json.dumps(data, indent=1), encoding="utf-8")
