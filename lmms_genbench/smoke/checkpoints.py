"""The cache of tiny smoke checkpoints: builder keys, atomic builds, seeded weights.

Every smoke builder (:mod:`.llava`, :mod:`.qwen2_vl`, :mod:`.janus`, :mod:`.describers`,
:mod:`.pipelines`) writes its folder through :func:`build_atomically` and finds it again
with :func:`cached`. A folder is complete when its marker names the builder key, seed
and model it was asked for; the key hashes the builder's sources, so a changed builder
never reuses a folder (nor, since the key is in the folder's name, the artifact-store
chains drawn by an older network).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Callable

__all__ = ["MARKER", "build_atomically", "builder_key", "cache_root", "cached", "init_and_save", "is_complete"]

#: written last into a finished build; its presence with the right key means "complete"
MARKER = "genbench_smoke.json"


def builder_key(*sources: Path) -> str:
    """Identify a builder: a hash of this module, ``sources`` and transformers' version.

    A builder passes every file that decides what it writes (its own module, the
    word list, ...), so any change to how a checkpoint is made yields a new key and
    cached builds made by an older builder are rebuilt instead of silently reused.
    """
    import transformers

    digest = hashlib.sha256()
    for source in (Path(__file__), *sources):
        digest.update(source.read_bytes())
    digest.update(transformers.__version__.encode())
    return digest.hexdigest()[:16]


def is_complete(path: Path, seed: int, model: str, key: str) -> bool:
    """True when ``path`` holds a finished ``model`` build of builder ``key`` and ``seed``."""
    try:
        marker = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    # markers of the first builds name no model: they were all LLaVA
    return marker.get("key") == key and marker.get("seed") == seed and marker.get("model", "llava") == model


def init_and_save(
    folder: Path, model_cls, config, processor, seed: int, banned_ids, generation: dict | None = None, **token_ids
) -> None:
    """Seeded random weights that never stop early, saved with their processor.

    ``generation`` replaces the default text safeguards of the saved generation
    config (suppressed specials, no repeated bigrams), e.g. for a model whose
    image mode must not see them.
    """
    import torch
    from transformers import GenerationConfig

    # fork_rng: seed the weights without disturbing the caller's global RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).eval()
        with torch.no_grad():
            # Zero logit rows for banned tokens: a random model would otherwise emit EOS
            # early (empty text) or image tokens (breaking the image-token bookkeeping).
            model.lm_head.weight[banned_ids] = 0.0
    if generation is None:
        # lmms-eval passes only sampling/length kwargs, so these stay in force: never
        # end early or emit specials, and avoid the loops greedy random models fall into.
        generation = {"suppress_tokens": banned_ids, "no_repeat_ngram_size": 2}
    model.generation_config = GenerationConfig(**token_ids, **generation)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def build_atomically(dest: Path, seed: int, model: str, write: Callable[[Path, int], None], key: str) -> Path:
    """Run ``write(folder, seed)`` into a temporary sibling of ``dest``, then move it into place.

    Args:
        dest: absolute destination folder; its parent is created if missing.
        seed: passed to ``write`` and recorded in the completion marker.
        model: which checkpoint this is (``"llava"``, ``"qwen2_vl"``, ...); recorded in
            the marker so one kind's folder is never taken for another.
        write: the checkpoint writer, ``write(folder: Path, seed: int) -> None``.
        key: the builder key recorded in the marker (:func:`builder_key`).

    The marker is written last, and ``os.replace`` is atomic, so readers never see
    a half-written folder. If a concurrent builder finishes first with the same
    builder key, seed and model, its (identical) folder is kept and ours
    discarded. An older or different build at ``dest`` is moved aside and deleted.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.building-", dir=dest.parent))
    try:
        # mkdtemp makes it owner-only; a shared cache should stay readable.
        tmp.chmod(0o755)
        write(tmp, seed)
        marker = {"key": key, "seed": seed, "model": model, "builder": write.__module__}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2), encoding="utf-8")
        for _ in range(10):
            try:
                # Atomic; succeeds if dest is absent or an empty folder.
                os.replace(tmp, dest)
                return dest
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if is_complete(dest, seed, model, key):
                return dest  # another process won the race with an identical build
            # Stale or foreign content: rename it away (atomic) before deleting it.
            trash = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex}")
            try:
                os.rename(dest, trash)
            except FileNotFoundError:
                continue  # someone else moved it already; retry the replace
            shutil.rmtree(trash, ignore_errors=True)
        raise RuntimeError(f"could not move the tiny {model} build into place at {dest}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # no-op after a successful replace


def cache_root(cache_dir: str | os.PathLike | None) -> Path:
    """``cache_dir``, else ``$LMMS_GENBENCH_CACHE``, else ``~/.cache/lmms_genbench``."""
    if cache_dir is None:
        cache_dir = (
            os.environ.get("LMMS_GENBENCH_CACHE")
            or Path.home() / ".cache" / "lmms_genbench"
        )
    return Path(cache_dir).expanduser()


def cached(cache_dir: str | os.PathLike | None, name: str, seed: int, model: str, key: str,
           build: Callable[[Path], Path]) -> Path:
    """The folder ``<root>/smoke/<name>`` (root: :func:`cache_root`) when it holds a finished
    ``model`` build of ``seed`` and ``key``; else what ``build(folder)`` returns, which builds it
    there. Safe to call from several processes at once (e.g. ranks of ``accelerate launch``)."""
    dest = cache_root(cache_dir) / "smoke" / name
    if is_complete(dest, seed, model, key):
        return dest.absolute()
    return build(dest)
