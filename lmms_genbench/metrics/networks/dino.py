"""DINO image embeddings on the Semantic Drift authors' pixels: the ViT CLS read-out
(:mod:`.vit`) on ``facebook/dino-vitb16`` (equal to timm's pooled CLS of
``vit_base_patch16_224.dino`` used by the Semantic Drift code), fed by
:class:`CenterCropPreprocessor` (resize the short side to 256, bilinear; centre crop 224;
ImageNet mean and std) rather than the checkpoint's own image processor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .common import to_rgb_images
from .vit import ViTCLSEncoder
from ...core.args import check_int

__all__ = ["DEFAULT_DINO", "IMAGENET_MEAN", "IMAGENET_STD", "CenterCropPreprocessor", "DINOEncoder"]

DEFAULT_DINO = "facebook/dino-vitb16"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class CenterCropPreprocessor:
    """torchvision's ``Compose([Resize(resize), CenterCrop(crop), ToTensor(),
    Normalize(mean, std)])`` on PIL images, as an image processor (``processor(images=...,
    return_tensors="pt")["pixel_values"]``).

    It is the Semantic Drift authors' DINO transform (``semantic-drift/mcd-sdr.py``,
    ``DINOWrapper``): the short side resized to 256 with PIL's bilinear filter (torchvision's
    default; their code names no interpolation, so not timm's bicubic / crop_pct 0.9 of
    ``vit_base_patch16_224.dino``), the long side to ``int(256 * long / short)``, the centre
    224 x 224 cut out (offsets rounded as torchvision rounds them), then ``/ 255`` and the
    ImageNet mean and std, in float32. Written out here, with the same arithmetic, so that
    scoring does not depend on torchvision's transforms; a test checks it equals them.

    Args:
        resize: the short side after resizing, in pixels.
        crop: the side of the centre square, in pixels, at most ``resize``.
        mean, std: per channel (RGB), applied after scaling to [0, 1].
    """

    def __init__(
        self,
        resize: int = 256,
        crop: int = 224,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ) -> None:
        for name, value in (("resize", resize), ("crop", crop)):
            check_int(name, value, minimum=1, what="a positive integer (pixels)")
        if crop > resize:
            raise ValueError(f"crop must be at most resize ({resize}), got {crop}")
        for name, value in (("mean", mean), ("std", std)):
            if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 3:
                raise ValueError(f"{name} must be three numbers (R, G, B), got {value!r}")
        if any(not v > 0 for v in std):
            raise ValueError(f"std must be three positive numbers, got {std!r}")
        self.resize, self.crop = resize, crop
        self.mean, self.std = tuple(float(v) for v in mean), tuple(float(v) for v in std)

    def _resized(self, image: Any) -> Any:
        from PIL import Image

        width, height = image.size
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(self.resize * long / short)
        size = (self.resize, new_long) if width <= height else (new_long, self.resize)
        return image if size == image.size else image.resize(size, Image.BILINEAR)

    def _cropped(self, image: Any) -> Any:
        width, height = image.size
        # Python's round (half to even), as torchvision's CenterCrop
        top = int(round((height - self.crop) / 2.0))
        left = int(round((width - self.crop) / 2.0))
        return image.crop((left, top, left + self.crop, top + self.crop))

    def __call__(self, images: Sequence[Any], return_tensors: str = "pt") -> dict[str, Any]:
        import numpy as np
        import torch

        if return_tensors != "pt":
            raise ValueError(f"return_tensors must be 'pt', got {return_tensors!r}")
        pixels = []
        for image in to_rgb_images(images, "images"):
            array = np.array(self._cropped(self._resized(image)), dtype=np.uint8)
            pixels.append(torch.from_numpy(array).permute(2, 0, 1).to(torch.float32).div(255))
        mean = torch.tensor(self.mean, dtype=torch.float32).view(1, 3, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32).view(1, 3, 1, 1)
        return {"pixel_values": (torch.stack(pixels) - mean) / std}

    def __repr__(self) -> str:
        return f"CenterCropPreprocessor(resize={self.resize}, crop={self.crop}, mean={self.mean}, std={self.std})"


class DINOEncoder(ViTCLSEncoder):
    """DINO ViT-B/16 (``facebook/dino-vitb16``): CLS token of ``last_hidden_state``, on the
    Semantic Drift authors' pixels (:class:`CenterCropPreprocessor`: short side 256
    bilinear, centre crop 224, ImageNet normalisation), not the checkpoint's own image
    processor (which squashes the whole picture to 224 x 224). Pass ``processor`` to
    use another."""

    default_model = DEFAULT_DINO
    default_processor = CenterCropPreprocessor
