"""Time and size of the store's lossless PNG encoding at zlib levels 0..9 (issue 24).

Encodes 512 px images (package photos, resized: natural pictures, as a generator's are;
and one of uniform noise, the worst case) at each level, median of ``--repeats``, and
decodes each once to check it is lossless. Prints one row per level.

    python benchmarks/png_levels.py [--side 512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import numpy as np
from PIL import Image


def images(side: int) -> dict[str, Image.Image]:
    from lmms_genbench.data.photos import load_package_photo

    out = {name: load_package_photo(name).convert("RGB").resize((side, side), Image.Resampling.BICUBIC)
           for name in ("skimage/astronaut", "skimage/coffee", "skimage/chelsea")}
    out["noise"] = Image.fromarray(np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    pictures = images(args.side)
    print(f"{'level':>5} " + " ".join(f"{n.split('/')[-1]:>18}" for n in pictures) + "   (ms encode / KiB)")
    for level in range(10):
        cells = []
        for image in pictures.values():
            times = []
            for _ in range(args.repeats):
                out = io.BytesIO()
                t0 = time.perf_counter()
                image.save(out, format="PNG", compress_level=level)
                times.append(time.perf_counter() - t0)
            blob = out.getvalue()
            assert Image.open(io.BytesIO(blob)).convert("RGB").tobytes() == image.tobytes()  # lossless
            cells.append(f"{1000 * statistics.median(times):8.1f} / {len(blob) / 1024:6.0f}")
        print(f"{level:>5} " + " ".join(f"{c:>18}" for c in cells))


if __name__ == "__main__":
    main()
