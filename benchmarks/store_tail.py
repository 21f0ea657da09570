"""The writer's tail and the scorer's read-back, before and after issue 24 (item 1).

On ``--n`` images of ``--side`` px (package photos, mirrored and shifted), median of
``--repeats`` interleaved repeats:

* write, before: PNG-encode into the file, then read the file back to hash it;
  after: encode and hash the bytes on a 2-thread pool, write the bytes in order;
* read, before: decode every stored PNG (what the scorer did); after: read the bytes,
  hash them, hand out a copy of the held image (``store.held``).

    python benchmarks/store_tail.py [--n 32] [--side 512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from PIL import Image, ImageOps


def pictures(n: int, side: int) -> list[Image.Image]:
    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo

    base = [load_package_photo(pid).convert("RGB").resize((side, side)) for pid, _ in PACKAGE_PHOTOS]
    out = []
    for i in range(n):
        img = base[i % len(base)]
        img = ImageOps.mirror(img) if (i // len(base)) % 2 else img
        out.append(img.rotate(i % 7, fillcolor=(i, i, i)))
    return out


def write_before(images, folder: Path) -> list[str]:
    from lmms_genbench.core.keys import atomic_write
    from lmms_genbench.store import sha256_file

    shas = []
    for i, image in enumerate(images):
        path = folder / f"{i:03d}.png"
        atomic_write(path, lambda fh: image.save(fh, format="PNG", compress_level=1))
        shas.append(sha256_file(path))
    return shas


def write_after(images, folder: Path) -> list[str]:
    from lmms_genbench.core.keys import atomic_write
    from lmms_genbench.store import held
    from lmms_genbench.store import encode_png

    def encode(image):
        blob = encode_png(image)
        return blob, hashlib.sha256(blob).hexdigest()

    shas = []
    with ThreadPoolExecutor(2) as pool:
        for i, (image, future) in enumerate([(im, pool.submit(encode, im)) for im in images]):
            blob, sha = future.result()
            atomic_write(folder / f"{i:03d}.png", lambda fh: fh.write(blob))
            held.hold(sha, image)
            shas.append(sha)
    return shas


def read_before(folder: Path, n: int):
    out = []
    for i in range(n):
        with Image.open(folder / f"{i:03d}.png") as img:
            out.append(img.convert("RGB"))
    return out


def read_after(folder: Path, n: int):
    from lmms_genbench.store import held

    return [held.load_rgb(folder / f"{i:03d}.png") for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--side", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from lmms_genbench.store import held

    images = pictures(args.n, args.side)
    times: dict[str, list[float]] = {k: [] for k in ("write before", "write after", "read before", "read after")}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            held.clear()
            a, b = Path(tmp) / f"a{r}", Path(tmp) / f"b{r}"
            a.mkdir(), b.mkdir()
            t0 = time.perf_counter(); before = write_before(images, a); times["write before"].append(time.perf_counter() - t0)
            t0 = time.perf_counter(); after = write_after(images, b); times["write after"].append(time.perf_counter() - t0)
            assert before == after  # the same files, the same recorded hashes
            t0 = time.perf_counter(); decoded = read_before(b, args.n); times["read before"].append(time.perf_counter() - t0)
            t0 = time.perf_counter(); kept = read_after(b, args.n); times["read after"].append(time.perf_counter() - t0)
            assert [x.tobytes() for x in decoded] == [x.tobytes() for x in kept]
            assert held.counts()["decoded"] == 0
    print(f"{args.n} images of {args.side} px, median of {args.repeats} (min-max), seconds:")
    for name, values in times.items():
        print(f"  {name:<13} {statistics.median(values):7.3f}  ({min(values):.3f}-{max(values):.3f})")


if __name__ == "__main__":
    main()
