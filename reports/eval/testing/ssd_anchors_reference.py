#!/usr/bin/env python3
"""A second implementation of the eval decoder "ssd_anchors", for tests.

MediaPipe SsdAnchorsCalculator's anchors (in float32, as it computes them),
each candidate row's box decoded against its anchor, greedy NMS per class
(score order, ties to the lower anchor; IoU above the threshold drops),
the best max_detections of all classes, boxes scaled to the image.

stdin:  {"anchors": {SsdAnchorsCalculator options}, "box_format": "yxhw"|"xywh",
         "scales": [y, x, h, w], "box_size": "linear"|"exponential",
         "score_threshold", "iou_threshold", "max_detections", "class_offset",
         "category_ids": [...], "sizes": [[width, height], ...],
         "sets": [[[class, score, v0, v1, v2, v3, anchor], ...], ...]}
stdout: {"anchors": N, "detections": [[image, category, x0, y0, x1, y1, score], ...]}
"""
import json
import math
import sys

import numpy as np


def layer_scale(o, index, count):
    lo, hi = np.float32(o["min_scale"]), np.float32(o["max_scale"])
    if count == 1:
        return (lo + hi) * np.float32(0.5)
    return np.float32(lo + (hi - lo) * index / np.float32(count - 1))


def anchors(o):
    strides = o["strides"]
    layers = o["num_layers"]
    ratios_in = [np.float32(r) for r in o["aspect_ratios"]]
    interp = np.float32(o.get("interpolated_scale_aspect_ratio", 1.0))
    out = []
    layer = 0
    while layer < layers:
        scales, ratios = [], []
        end = layer
        while end < layers and strides[end] == strides[layer]:
            s = layer_scale(o, end, len(strides))
            if end == 0 and o.get("reduce_boxes_in_lowest_layer", False):
                ratios += [np.float32(1), np.float32(2), np.float32(0.5)]
                scales += [np.float32(0.1), s, s]
            else:
                ratios += ratios_in
                scales += [s] * len(ratios_in)
                if interp > 0:
                    last = end == len(strides) - 1
                    nxt = np.float32(1) if last else layer_scale(o, end + 1, len(strides))
                    scales.append(np.sqrt(s * nxt))
                    ratios.append(interp)
            end += 1
        if "feature_map_height" in o:
            rows, cols = o["feature_map_height"][layer], o["feature_map_width"][layer]
        else:
            rows = math.ceil(o["input_size_height"] / strides[layer])
            cols = math.ceil(o["input_size_width"] / strides[layer])
        for y in range(rows):
            for x in range(cols):
                for s, r in zip(scales, ratios):
                    cy = np.float32((y + o.get("anchor_offset_y", 0.5)) / rows)
                    cx = np.float32((x + o.get("anchor_offset_x", 0.5)) / cols)
                    if o.get("fixed_anchor_size", False):
                        h = w = 1.0
                    else:
                        h, w = s / np.sqrt(r), s * np.sqrt(r)
                    out.append((float(cy), float(cx), float(h), float(w)))
        layer = end
    return out


def iou(a, b):
    ih = min(a[2], b[2]) - max(a[0], b[0])
    iw = min(a[3], b[3]) - max(a[1], b[1])
    if ih <= 0 or iw <= 0:
        return 0.0
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def decode(req, grid, rows):
    sy, sx, sh, sw = req["scales"]
    kept_all = []
    by_class = {}
    for cls, score, v0, v1, v2, v3, a in rows:
        if score < req["score_threshold"]:
            continue
        ay, ax, ah, aw = grid[a]
        if req["box_format"] == "yxhw":
            ty, tx, th, tw = v0, v1, v2, v3
        else:
            tx, ty, tw, th = v0, v1, v2, v3
        cy, cx = ty / sy * ah + ay, tx / sx * aw + ax
        if req["box_size"] == "exponential":
            h, w = math.exp(th / sh) * ah, math.exp(tw / sw) * aw
        else:
            h, w = th / sh * ah, tw / sw * aw
        box = (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)
        by_class.setdefault(cls, []).append((score, a, box))
    for cls, boxes in by_class.items():
        boxes.sort(key=lambda b: (-b[0], b[1]))
        kept = []
        for b in boxes:
            if all(iou(k[2], b[2]) <= req["iou_threshold"] for k in kept):
                kept.append(b)
        kept_all += [(b[0], b[1], cls, b[2]) for b in kept]
    kept_all.sort(key=lambda b: (-b[0], b[1], b[2]))
    return kept_all[: req["max_detections"]]


def main():
    req = json.load(sys.stdin)
    grid = anchors(req["anchors"])
    out = []
    for image, rows in enumerate(req["sets"]):
        width, height = req["sizes"][image]
        for score, _, cls, (y0, x0, y1, x1) in decode(req, grid, rows):
            c = cls - req["class_offset"]
            if c < 0 or c >= len(req["category_ids"]) or req["category_ids"][c] < 0:
                continue
            out.append([image, req["category_ids"][c], min(x0, x1) * width, min(y0, y1) * height,
                        max(x0, x1) * width, max(y0, y1) * height, score])
    json.dump({"anchors": len(grid), "detections": out}, sys.stdout)


if __name__ == "__main__":
    main()
