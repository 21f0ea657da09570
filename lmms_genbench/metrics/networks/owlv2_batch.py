"""OWLv2's pre- and post-processing on batched tensors, for :class:`~.owlv2.OWLv2Detector`.

:class:`OWLv2Pixels` turns a batch of RGB pictures into ``pixel_values`` as the model's own image
processor does, but once per batch of same-size pictures and on the detector's device:

* the NumPy/SciPy processor (``Owlv2ImageProcessorPil``, what the tiny test OWLv2 uses): rescale,
  pad to a square at the bottom/right, Gaussian anti-aliasing (``ndimage.gaussian_filter``,
  ``mirror``, radius ``int(4 sigma + 0.5)``), linear ``ndimage.zoom`` (``grid_mode``, ``mirror``),
  clip to the input's range, normalise. Reproduced here with SciPy's float64 operations in SciPy's
  order (the symmetric ``correlate1d``, the zoom's tap sum) and its float32 roundings between
  passes, so the pixels are bit-identical (tests/unit/metrics/networks/test_owlv2_batch.py, many sizes and seeds);
* the torch processor (``Owlv2ImageProcessor``, what ``from_pretrained`` gives): already batched
  per shape; it is called with the detector's device, so it resizes there.

Any other processor, or one with steps switched off, is called as before.

:func:`decode_detections` scores, scales, clips, floors and de-duplicates (greedy NMS, exactly
torchvision's arithmetic) every picture's boxes for every query at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["OWLv2Pixels", "decode_detections"]


def _mirror(index: Any, n: int) -> Any:
    """SciPy's ``mirror`` boundary (d c b | a b c d | c b a) for indices of an axis of ``n``."""
    if n == 1:
        return index * 0
    period = 2 * (n - 1)
    index = index.remainder(period)
    return (index >= n) * (period - index) + (index < n) * index


class OWLv2Pixels:
    """Batched ``pixel_values`` for an OWLv2 image processor (see the module docstring)."""

    def __init__(self, image_processor: Any) -> None:
        self.ip = image_processor
        kind = type(image_processor).__name__
        module = type(image_processor).__module__
        steps = all(getattr(image_processor, k, False) for k in ("do_resize", "do_pad", "do_rescale", "do_normalize"))
        size = getattr(image_processor, "size", None)
        size = (getattr(size, "height", None), getattr(size, "width", None)) if not isinstance(size, dict) else (
            size.get("height"), size.get("width"))
        self.size = size
        if not steps or None in size:
            self.kind = "processor"
        elif kind == "Owlv2ImageProcessorPil" or module.endswith("image_processing_pil_owlv2"):
            self.kind = "scipy"
        elif kind == "Owlv2ImageProcessor" and getattr(image_processor, "backend", "") == "torchvision":
            self.kind = "torch"
        else:
            self.kind = "processor"
        self._axes: dict[tuple[Any, ...], Any] = {}
        self._norm: Any = None

    # ------------------------------------------------------------------ public
    def __call__(self, pictures: Sequence[Any], device: str) -> Any:
        """``pixel_values`` (N x 3 x H x W, float32, on ``device``) of RGB PIL ``pictures``."""
        import numpy as np
        import torch

        if self.kind == "processor":
            return self.ip(images=list(pictures), return_tensors="pt")["pixel_values"].to(device)
        if self.kind == "torch":  # batches by size itself; resizes on the device it is given
            return self.ip(images=list(pictures), return_tensors="pt", device=device)["pixel_values"]
        arrays = [np.asarray(p, dtype=np.uint8) for p in pictures]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.shape, []).append(i)
        if len(groups) == 1:  # the usual batch: one size
            return self._scipy(torch.from_numpy(np.stack(arrays)).to(device))
        out = None
        for shape, members in groups.items():
            pixels = self._scipy(torch.from_numpy(np.stack([arrays[i] for i in members])).to(device))
            if out is None:
                out = torch.empty((len(arrays), *pixels.shape[1:]), dtype=pixels.dtype, device=pixels.device)
            out[members] = pixels
        return out


    # ------------------------------------------------------------------ the SciPy processor, on tensors
    def _kernel(self, n_in: int, n_out: int, device: Any) -> tuple[Any, ...] | None:
        """SciPy's anti-aliasing Gaussian for one axis, cached per size: (radius, weights from the
        centre out, as ``ndimage._gaussian_kernel1d`` makes them in NumPy), or None where SciPy
        skips the axis (sigma 0) or its radius is 0 (a weight of exactly 1)."""
        import numpy as np
        import torch

        key = ("gauss", n_in, n_out, str(device))
        if key not in self._axes:
            sigma = (n_in / n_out - 1) / 2
            radius = int(4.0 * sigma + 0.5)
            op = None
            if sigma > 1e-15 and radius > 0:
                offsets = np.arange(-radius, radius + 1)
                phi = np.exp(-0.5 / (sigma * sigma) * offsets**2)
                phi = phi / phi.sum()
                # SciPy's ``mirror`` boundary, for a radius ``reflect`` padding cannot take
                index = _mirror(torch.arange(-radius, n_in + radius), n_in).to(device)
                op = (radius, phi[radius:].tolist(), index)
            self._axes[key] = op
        return self._axes[key]

    @staticmethod
    def _correlate(xp: Any, dim: int, op: tuple[Any, ...], n: int) -> Any:
        """SciPy's ``correlate1d`` with a symmetric kernel along ``dim`` of the float64, already
        mirror-padded ``xp``, in its order: centre x w0, then += (left_k + right_k) x w_k from the
        outermost k in (the same float64 operations, so the float32 results agree bit for bit)."""
        radius, weights, _ = op
        out = xp.narrow(dim, radius, n) * weights[0]
        for k in range(radius, 0, -1):
            pair = xp.narrow(dim, radius - k, n) + xp.narrow(dim, radius + k, n)
            pair *= weights[k]
            out += pair
        return out

    def _taps(self, n_in: int, n_out: int, device: Any) -> tuple[Any, ...] | None:
        """One axis of the linear zoom (``zoom(order=1, grid_mode=True, mode='mirror')``), cached per
        size: two taps per output (an index, or a strided slice for an integer factor) and their
        weights; None from a size to itself (weights 1 and 0)."""
        import torch

        if n_in == n_out:
            return None
        key = ("zoom", n_in, n_out, str(device))
        if key not in self._axes:
            coord = (torch.arange(n_out, dtype=torch.float64) + 0.5) * (n_in / n_out) - 0.5
            start = torch.floor(coord)
            t = coord - start
            start = start.long()
            taps = []
            for index in (_mirror(start, n_in), _mirror(start + 1, n_in)):
                step = index[1:] - index[:-1] if n_out > 1 else torch.ones(1, dtype=torch.long)
                # an integer factor reads every k-th row: a strided view instead of a gather
                taps.append(slice(int(index[0]), int(index[-1]) + 1, int(step[0]))
                            if bool((step == step[0]).all()) and int(step[0]) > 0 else index.to(device))
            self._axes[key] = (*taps, (1.0 - t).to(device), t.to(device))
        return self._axes[key]

    def _zoom(self, x: Any, side: int, out_h: int, out_w: int) -> Any:
        """The linear zoom of N x C x side x side float64 ``x`` in SciPy's order: per output, the sum
        over its taps, H's first, of (value x H weight) x W weight."""
        rows = []
        taps = self._taps(side, out_h, x.device)
        if taps is None:
            rows = [x]
        else:
            for index, weight in ((taps[0], taps[2]), (taps[1], taps[3])):
                rows.append(self._take(x, 2, index) * weight.view(1, 1, -1, 1))
        taps = self._taps(side, out_w, x.device)
        if taps is None:
            return rows[0] if len(rows) == 1 else rows[0] + rows[1]
        out = None
        for r in rows:
            for index, weight in ((taps[0], taps[2]), (taps[1], taps[3])):
                term = self._take(r, 3, index) * weight.view(1, 1, 1, -1)
                out = term if out is None else out.add_(term)
        return out

    @staticmethod
    def _take(x: Any, dim: int, index: Any) -> Any:
        if isinstance(index, slice):
            return x[(slice(None),) * dim + (index,)]
        return x.index_select(dim, index)

    def _scipy(self, batch: Any) -> Any:
        """N x H x W x C uint8 -> N x C x H x W float32, as the SciPy processor makes it; every pass
        runs on N x C x H x W, where H and W are views' strides apart (no transposes)."""
        import numpy as np
        import torch

        ip = self.ip
        n, h, w, c = batch.shape
        side = max(h, w)
        out_h, out_w = self.size
        if side != h or side != w:  # bottom/right zeros: zero bytes rescale to zero
            batch = torch.nn.functional.pad(batch, (0, 0, 0, side - w, 0, side - h))
        # rescale as NumPy does: float64 product, float32 result
        x = (batch.permute(0, 3, 1, 2).contiguous().double() * float(ip.rescale_factor)).float()
        if self._norm is None or self._norm[0].device != x.device:
            self._norm = tuple(torch.as_tensor(np.asarray(v, dtype=np.float32), device=x.device).view(1, -1, 1, 1)
                               for v in (ip.image_mean, ip.image_std))
        mean, std = self._norm
        if side == out_h and side == out_w:  # nothing to resample: the clip to the input's range is a no-op
            return (x - mean) / std
        lo = x.amin(dim=(1, 2, 3), keepdim=True)
        hi = x.amax(dim=(1, 2, 3), keepdim=True)
        ops = (self._kernel(side, out_h, x.device), self._kernel(side, out_w, x.device))
        x = x.double()
        pad = [op[0] if op else 0 for op in ops]  # each axis' radius, 0 where it has no pass
        if max(pad) < side:  # SciPy's ``mirror`` is torch's ``reflect`` while the radius is shorter
            x = torch.nn.functional.pad(x, (pad[1], pad[1], pad[0], pad[0]), mode="reflect")
        else:
            for dim, op in zip((2, 3), ops):
                x = x if op is None else x.index_select(dim, op[2])
        for dim, op in zip((2, 3), ops):
            if op is not None:  # each pass stored in float32, as SciPy stores it
                x = self._correlate(x, dim, op, side).float().double()
        x = self._zoom(x, side, out_h, out_w)
        x = torch.clamp(x.float(), lo, hi)
        return (x - mean) / std


# ---------------------------------------------------------------------- decoding
# On the host, in NumPy: after the batch's one transfer these are small arrays, where NumPy's
# per-call cost is a fraction of torch's; the arithmetic (IEEE float64, same operations in the
# same order) is that of the per-class torch code it replaces.
def _greedy_nms(boxes: Any, scores: Any, groups: Any, iou: float) -> Any:
    """Keep-mask of greedy NMS within each group, every group at once; the IoU arithmetic is
    torchvision's CPU kernel's (``inter / (area_i + area_j - inter) > iou`` suppresses)."""
    import numpy as np

    order = np.lexsort((-scores, groups))  # by group, then most confident first (ties: index)
    g = groups[order]
    counts = np.bincount(g)
    counts = counts[counts > 0]
    m, k = len(counts), int(counts.max())
    starts = np.cumsum(counts) - counts
    rank = np.arange(len(order)) - np.repeat(starts, counts)
    slot = np.repeat(np.arange(m), counts)
    b = np.zeros((m, k, 4))
    b[slot, rank] = boxes[order]
    valid = np.zeros((m, k), dtype=bool)
    valid[slot, rank] = True
    x1, y1, x2, y2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    area = (x2 - x1) * (y2 - y1)
    w = np.maximum(np.minimum(x2[:, :, None], x2[:, None, :]) - np.maximum(x1[:, :, None], x1[:, None, :]), 0)
    h = np.maximum(np.minimum(y2[:, :, None], y2[:, None, :]) - np.maximum(y1[:, :, None], y1[:, None, :]), 0)
    inter = w * h
    with np.errstate(invalid="ignore", divide="ignore"):  # padding slots: 0 / 0, never read
        over = inter / (area[:, :, None] + area[:, None, :] - inter) > iou
    alive = valid
    for i in range(k - 1):
        # box i, if still alive, suppresses every later box of its group it overlaps
        alive[:, i + 1 :] &= ~(over[:, i, i + 1 :] & alive[:, i : i + 1])
    keep = np.zeros(len(order), dtype=bool)
    keep[order] = alive[slot, rank]
    return keep


def _nms_by_group(boxes: Any, scores: Any, groups: Any, iou: float) -> Any:
    """Keep-mask of greedy NMS within each group: all groups at once while their IoU
    matrices are small, else group by group through torchvision."""
    import numpy as np

    _, ids = np.unique(groups, return_inverse=True)
    sizes = np.bincount(ids)
    if len(sizes) * int(sizes.max()) ** 2 <= _DENSE_NMS_LIMIT:
        return _greedy_nms(boxes, scores, ids, iou)
    import torch
    from torchvision.ops import nms

    keep = np.zeros(len(groups), dtype=bool)
    for gid in range(len(sizes)):
        members = np.flatnonzero(ids == gid)
        kept = nms(torch.from_numpy(boxes[members]), torch.from_numpy(scores[members]), iou).numpy()
        keep[members[kept]] = True
    return keep


#: above this many IoU entries (groups x boxes x boxes) NMS runs group by group in torchvision
_DENSE_NMS_LIMIT = 4_000_000


def decode_detections(
    logits: Any, pred_boxes: Any, sizes: Sequence[tuple[int, int]], counts: Sequence[int],
    *, score_floor: float, nms_iou: float,
) -> list[list[tuple[list[tuple[float, float, float, float]], list[float]]]]:
    """Per picture, per query: (pixel boxes, scores), most confident first.

    Args:
        logits: B x boxes x queries CPU tensor (padded: picture i uses its first ``counts[i]``).
        pred_boxes: B x boxes x 4 CPU tensor, (cx, cy, w, h) relative to OWLv2's
            bottom/right-padded square.
        sizes: (width, height) per picture.
        score_floor, nms_iou: as :class:`~.detection.OWLv2Detector`'s.
    """
    import numpy as np
    import torch

    logits = logits.double()
    scores = np.empty(tuple(logits.shape))
    for q in range(logits.shape[-1]):
        # one query's column at a time, as before: torch's vectorised sigmoid on contiguous
        # memory can differ from its element-wise one in the last bit
        scores[..., q] = torch.sigmoid(logits[..., q]).numpy()
    pred = pred_boxes.double().numpy()
    wh = np.asarray(sizes, dtype=np.float64)  # B x 2
    side = wh.max(axis=1)[:, None, None]
    cx, cy, w, h = pred[..., 0], pred[..., 1], pred[..., 2], pred[..., 3]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1) * side
    limit = np.repeat(wh, 2, axis=1)[:, None, [0, 2, 1, 3]]  # width, height, width, height
    boxes = np.minimum(np.maximum(boxes, 0.0), limit)
    # a box with no area left lies wholly in the padding: nothing of the picture to detect
    inside = (boxes[..., 2] > boxes[..., 0]) & (boxes[..., 3] > boxes[..., 1])  # B x boxes
    n_q = scores.shape[-1]
    used = np.arange(n_q)[None, :] < np.asarray(counts)[:, None]  # B x queries
    keep = (scores > score_floor) & inside[:, :, None] & used[:, None, :]
    pic, box, query = np.nonzero(keep)
    kept_scores = scores[pic, box, query]
    kept_boxes = boxes[pic, box]
    group = pic * n_q + query
    if nms_iou < 1.0 and len(group):
        survive = _nms_by_group(kept_boxes, kept_scores, group, nms_iou)
        pic, query, group = pic[survive], query[survive], group[survive]
        kept_scores, kept_boxes = kept_scores[survive], kept_boxes[survive]
    order = np.lexsort((-kept_scores, group))
    out: list[list[tuple[list, list]]] = [[([], []) for _ in range(c)] for c in counts]
    for p, q, bx, s in zip(pic[order].tolist(), query[order].tolist(), kept_boxes[order].tolist(), kept_scores[order].tolist()):
        entry = out[p][q]
        entry[0].append(tuple(bx))
        entry[1].append(s)
    return out
