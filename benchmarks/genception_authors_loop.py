"""The GenCeption authors' evaluation loop, ported to time it against the cycle engine.

Source: https://github.com/EQTPartners/GenCeption (first published as
llcresearch/GenCeption; MIT): ``genception/experiment.py`` (``test_sample``,
``image_embedding``, ``generate_xt`` and ``main``'s loop over the image files) and
``genception/evaluation.py`` (``gc_score``, ``integrated_decay_area``). Written
from reading that code, not copied from it.

What their loop does, and this port does, one seed image file at a time:

1. skip the image when its result pickle exists (their resume, per image);
2. embed the seed: open the file, convert to RGB, encode that one image;
3. T times: open the current image file and convert it to RGB, describe it (one
   image per call), draw one image from the generation prompt, save it to a file,
   embed it from that file (one image), take the cosine similarity to the seed's
   embedding, and pickle every list so far (their checkpoint after each step);
4. afterwards read every pickle and compute GC@T = sum t*s(t) / sum t per image,
   then the plain mean over images.

Swapped so that both arms of the benchmark run the same networks on the same
inputs: their DALL-E 3 call (``generate_xt``) is the benchmark's generator at
batch 1 with the engine's per-hop seed, their LLaVA ``processor`` + ``generate``
call is the same lmms-eval describer object at batch 1, their ViT is the same
encoder object at batch 1, and sklearn's cosine is numpy's. Left out: their
``nltk`` word count in a log line after each step (it would only add time).
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Callable

import numpy as np
from PIL import Image


def _open_rgb(path: str) -> Image.Image:
    # their encode_image_os / image_embedding: Image.open(path).convert("RGB")
    return Image.open(path).convert("RGB")


def test_sample(
    seed_image: str,
    n_iteration: int,
    output_folder: str,
    describe: Callable[[Image.Image], str],
    draw: Callable[[str, int], Image.Image],
    embed: Callable[[Image.Image], list[float]],
) -> None:
    """One seed image through ``n_iteration`` describe/draw steps (their ``test_sample``).

    ``draw(description, t)`` returns the step's image; ``embed(image)`` its embedding.
    """
    name = os.path.basename(seed_image)
    file_name, file_extension = name.rsplit(".", 1)
    pkl_file = os.path.join(output_folder, f"{file_name}_result.pkl")
    if os.path.exists(pkl_file):
        return
    descriptions, images = [], []
    embeddings = [embed(_open_rgb(seed_image))]
    similarities = [1.0]
    current = seed_image
    for i in range(n_iteration):
        description = describe(_open_rgb(current))
        descriptions.append(description)
        new_image = os.path.join(output_folder, f"{file_name}_{i}.{file_extension}")
        draw(description, i + 1).save(new_image)
        images.append(new_image)
        embeddings.append(embed(_open_rgb(new_image)))
        a, b = np.asarray(embeddings[0]), np.asarray(embeddings[-1])
        similarities.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
        with open(pkl_file, "wb") as fh:
            pickle.dump({"descriptions": descriptions, "images": images,
                         "image_embeddings": embeddings, "cosine_similarities": similarities}, fh)
        current = new_image


def integrated_decay_area(scores: list[float]) -> float:
    total = sum((i + 1) * s for i, s in enumerate(scores))
    most = sum(range(1, len(scores) + 1))
    return total / most if most else 0.0


def gc_score(folder: str, n_iter: int) -> float:
    """Their ``gc_score``: GC@T of every pickle with at least ``n_iter`` similarities."""
    scores = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".pkl"):
            continue
        with open(os.path.join(folder, name), "rb") as fh:
            sims = pickle.load(fh)["cosine_similarities"]
        if len(sims) >= n_iter:  # their check counts the seed's 1.0 (REFERENCE_NOTES: a defect)
            scores.append(integrated_decay_area(sims[1:][:n_iter]))
    return float(np.mean(scores))


def run(seed_files: list[str], n_iteration: int, output_folder: str, describe, draw_for, embed) -> float:
    """Their ``main`` loop over the image files, then ``gc_score``.

    ``draw_for(seed_file)`` gives that image's ``draw(description, t)``."""
    os.makedirs(output_folder, exist_ok=True)
    for seed_file in seed_files:
        test_sample(seed_file, n_iteration, output_folder, describe, draw_for(seed_file), embed)
    return gc_score(output_folder, n_iteration)


def embedder(encoder: Any) -> Callable[[Image.Image], list[float]]:
    """Their ``image_embedding`` on one image with ``encoder`` (the CLS row, as a list)."""
    return lambda image: encoder.encode([image])[0].tolist()
