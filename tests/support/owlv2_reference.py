"""The OWLv2 detector's pre- and post-processing as they were before batching them
(issue 24): the image processor called on PIL pictures, and one class at a time through
torchvision's NMS. Kept as the reference the batched path must reproduce."""

from __future__ import annotations

from lmms_genbench.metrics.functional.geneval import Detection


def reference_pixels(processor, pictures):
    """``pixel_values`` as the processor makes them from PIL pictures."""
    return processor(images=list(pictures), return_tensors="pt")["pixel_values"]


def reference_postprocess(logits, pred_boxes, size, names, *, score_floor, nms_iou):
    """One picture: CPU float64 logits (boxes x queries) and boxes (boxes x 4, cx cy w h)."""
    import torch
    from torchvision.ops import nms

    width, height = size
    cx, cy, w, h = pred_boxes.unbind(-1)
    side = float(max(width, height))
    boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=-1) * side
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, width)
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, height)
    inside = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    result = {}
    for q, cls in enumerate(names):
        scores = torch.sigmoid(logits[:, q])
        idx = torch.nonzero((scores > score_floor) & inside).flatten()
        if nms_iou < 1.0 and len(idx):
            idx = idx[nms(boxes[idx], scores[idx], nms_iou)]
        idx = idx[torch.argsort(scores[idx], descending=True, stable=True)]
        result[cls] = [Detection(tuple(boxes[i].tolist()), float(scores[i])) for i in idx.tolist()]
    return result


def reference_detect_batch(detector, pictures, classes):
    """``OWLv2Detector.detect_batch`` with the reference pre- and post-processing."""
    import torch

    names = [list(dict.fromkeys(c)) for c in classes]
    queries = [[detector.query_template.format_map({"class": c}) for c in n] for n in names]
    model = detector.model
    with torch.inference_mode():
        detector._embed_queries([q for qs in queries for q in qs])
        pixels = reference_pixels(detector.processor, pictures)
        feature_map, _ = model.image_embedder(pixel_values=pixels)
        b, h, w, d = feature_map.shape
        feats = feature_map.reshape(b, h * w, d)
        width = max(len(qs) for qs in queries)
        emb = torch.zeros((b, width, next(iter(detector._query_embeds.values())).shape[-1]))
        mask = torch.zeros((b, width), dtype=torch.bool)
        for i, qs in enumerate(queries):
            emb[i, : len(qs)] = torch.stack([detector._query_embeds[q] for q in qs])
            mask[i, : len(qs)] = True
        logits, _ = model.class_predictor(feats, emb, mask)
        boxes = model.box_predictor(feats, feature_map)
    logits, boxes = logits.double(), boxes.double()
    return [
        reference_postprocess(logits[i, :, : len(n)], boxes[i], pic.size, n,
                              score_floor=detector.score_floor, nms_iou=detector.nms_iou)
        for i, (pic, n) in enumerate(zip(pictures, names))
    ]
