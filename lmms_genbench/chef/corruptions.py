"""Deterministic input corruptions for ChEF's robustness desideratum.

ChEF's precomputed corrupted sets can no longer be downloaded, so these are
regenerated on the fly. Every corruption draws from a ``numpy.random.Generator``
made by :func:`doc_rng` from ``(seed, doc key, corruption name)``: the same seed
and document always give the same corrupted input, on any machine and in any
process or order.

Image corruptions follow Hendrycks & Dietterich (2019), severities 1–5, one per
family, synthesised with numpy and PIL only: ``gaussian_noise`` (noise),
``gaussian_blur`` (blur), ``fog`` (weather: multi-octave value noise),
``jpeg`` and ``pixelate`` (digital). Text corruptions follow Chen et al. (2023b)
at three levels: ``char`` (typo: insert, delete, swap or replace one letter in a
share of words), ``word`` (delete, duplicate or swap neighbouring words; both
edit ``max(1, round(10·severity % of the words))`` positions) and
``sentence`` (append an unrelated sentence from a fixed pool; the paper's
back-translation and style transfer need a model and are left out). Option
shuffling permutes the options and moves the gold index with them.
"""

from __future__ import annotations

import io
import string
import zlib
from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image, ImageFilter

from ..core.registry import lookup

__all__ = [
    "IMAGE_CORRUPTIONS",
    "TEXT_CORRUPTIONS",
    "corrupt_image",
    "corrupt_text",
    "doc_rng",
    "shuffle_options",
]

SEVERITIES = (1, 2, 3, 4, 5)


def doc_rng(seed: int, key: str, salt: str = "") -> np.random.Generator:
    """A generator fixed by ``seed`` and the document key (CRC32, not Python's salted hash)."""
    return np.random.default_rng([int(seed), zlib.crc32(f"{key}\x00{salt}".encode())])


def _check_severity(severity: int) -> int:
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
    return severity


def _rgb(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), dtype=np.float64) / 255.0


def _to_image(x: np.ndarray) -> Image.Image:
    return Image.fromarray((np.clip(x, 0, 1) * 255).round().astype(np.uint8))


def gaussian_noise(image: Image.Image, severity: int, rng: np.random.Generator) -> Image.Image:
    sigma = (0.08, 0.12, 0.18, 0.26, 0.38)[severity - 1]
    x = _rgb(image)
    return _to_image(x + rng.normal(0.0, sigma, size=x.shape))


def gaussian_blur(image: Image.Image, severity: int, rng: np.random.Generator) -> Image.Image:
    radius = (1, 2, 3, 4, 6)[severity - 1] * max(image.size) / 224  # scale to the image
    return image.convert("RGB").filter(ImageFilter.GaussianBlur(radius))


def _value_noise(h: int, w: int, rng: np.random.Generator, octaves: int = 5, decay: float = 0.6) -> np.ndarray:
    # sum of bilinearly upsampled random grids, coarse to fine: a cheap plasma fractal
    total = np.zeros((h, w))
    amp = 1.0
    for o in range(octaves):
        cells = 2 ** (o + 1)
        grid = rng.random((cells + 1, cells + 1))
        up = Image.fromarray((grid * 255).astype(np.uint8)).resize((w, h), Image.BILINEAR)
        total += amp * np.asarray(up, dtype=np.float64) / 255.0
        amp *= decay
    total -= total.min()
    return total / max(total.max(), 1e-12)


def fog(image: Image.Image, severity: int, rng: np.random.Generator) -> Image.Image:
    strength = (0.3, 0.45, 0.6, 0.75, 0.9)[severity - 1]
    x = _rgb(image)
    haze = _value_noise(x.shape[0], x.shape[1], rng)[..., None]
    peak = x.max()
    return _to_image((x + strength * haze) * peak / (peak + strength))


def jpeg(image: Image.Image, severity: int, rng: np.random.Generator) -> Image.Image:
    quality = (25, 18, 15, 10, 7)[severity - 1]
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    out = Image.open(buf)
    out.load()
    return out


def pixelate(image: Image.Image, severity: int, rng: np.random.Generator) -> Image.Image:
    factor = (0.6, 0.5, 0.4, 0.3, 0.25)[severity - 1]
    rgb = image.convert("RGB")
    w, h = rgb.size
    small = rgb.resize((max(1, int(w * factor)), max(1, int(h * factor))), Image.BOX)
    return small.resize((w, h), Image.NEAREST)


IMAGE_CORRUPTIONS: dict[str, Callable[[Image.Image, int, np.random.Generator], Image.Image]] = {
    "gaussian_noise": gaussian_noise,
    "gaussian_blur": gaussian_blur,
    "fog": fog,
    "jpeg": jpeg,
    "pixelate": pixelate,
}


def corrupt_image(image: Image.Image, name: str, severity: int, seed: int, key: str) -> Image.Image:
    """``image`` under corruption ``name`` at ``severity``, fixed by ``(seed, key)``."""
    return lookup(IMAGE_CORRUPTIONS, name, "image corruption")(image, _check_severity(severity), doc_rng(seed, key, name))


def _typo(word: str, rng: np.random.Generator) -> str:
    letters = string.ascii_lowercase
    op = int(rng.integers(4))
    i = int(rng.integers(len(word)))
    if op == 0:  # insert
        return word[:i] + letters[int(rng.integers(26))] + word[i:]
    if op == 1 and len(word) > 1:  # delete
        return word[:i] + word[i + 1:]
    if op == 2 and len(word) > 1:  # swap with the next letter
        i = min(i, len(word) - 2)
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    return word[:i] + letters[int(rng.integers(26))] + word[i + 1:]  # replace


def _n_edits(n: int, rate: float) -> int:
    # at least one edit, so a corrupted variant always differs from the clean one
    return min(n, max(1, round(rate * n)))


def _char(text: str, rate: float, rng: np.random.Generator) -> str:
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if any(c.isalpha() for c in w)]
    if not candidates:
        return text
    for i in sorted(rng.choice(candidates, size=_n_edits(len(candidates), rate), replace=False)):
        words[i] = _typo(words[i], rng)
    return " ".join(words)


def _word(text: str, rate: float, rng: np.random.Generator) -> str:
    words = text.split(" ")
    if len(words) < 2:
        return text
    picked = {int(i) for i in rng.choice(len(words), size=_n_edits(len(words), rate), replace=False)}
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if i in picked:
            op = int(rng.integers(3))
            if op == 0:  # delete
                i += 1
                continue
            if op == 1 or i + 1 == len(words):  # duplicate
                out += [w, w]
                i += 1
                continue
            out += [words[i + 1], w]  # swap with the next word
            i += 2
            continue
        out.append(w)
        i += 1
    return " ".join(out)


DISTRACTORS = (
    "The weather was pleasant that day.",
    "Many people enjoy reading books in their free time.",
    "Some birds migrate thousands of kilometres every year.",
    "Coffee is one of the most traded goods in the world.",
    "The museum opens at nine in the morning.",
    "Bicycles are a common way to travel in many cities.",
)


def _sentence(text: str, rate: float, rng: np.random.Generator) -> str:
    return f"{text.rstrip()} {DISTRACTORS[int(rng.integers(len(DISTRACTORS)))]}"


TEXT_CORRUPTIONS: dict[str, Callable[[str, float, np.random.Generator], str]] = {
    "char": _char,
    "word": _word,
    "sentence": _sentence,
}


def corrupt_text(text: str, level: str, severity: int, seed: int, key: str) -> str:
    """``text`` corrupted at ``level`` (char, word, sentence); severity s edits 10·s % of words (at least one)."""
    corrupt = lookup(TEXT_CORRUPTIONS, level, "text corruption level")
    rate = 0.1 * _check_severity(severity)
    return corrupt(text, rate, doc_rng(seed, key, level))


def shuffle_options(options: Sequence[str], gold: int, seed: int, key: str) -> tuple[list[str], int, list[int]]:
    """Options permuted by ``(seed, key)``; returns (options, new gold index, permutation).

    ``permutation[i]`` is the original index of the option now at position i.
    """
    if not 0 <= gold < len(options):
        raise ValueError(f"gold index {gold} is out of range for {len(options)} options")
    perm = [int(i) for i in doc_rng(seed, key, "shuffle").permutation(len(options))]
    return [options[i] for i in perm], perm.index(gold), perm
