#!/usr/bin/env python3
"""A second implementation of the task metrics in reports/eval, in numpy, for
task_metrics_test.cc: COCO box mAP/AR (pycocotools' rules: area "all", no
crowd, max 100 detections per image and category, 101 recall points) and
segmentation mean IoU / pixel accuracy.

Reads JSON on stdin:
  {"images": N, "truth": [[image, category, x0, y0, x1, y1], ...],
   "detections": [[image, category, x0, y0, x1, y1, score], ...],
   "segmentation": {"classes": C, "truth": [[...pixels...], ...],
                    "predicted": [[...], ...]}}   (optional)
Writes {"map", "map50", "map75", "recall", "mean_iou", "pixel_accuracy"}.
"""
import json
import sys

import numpy as np


def iou_matrix(d, g):
    """IoU of every detection box (rows) with every truth box (columns)."""
    if len(d) == 0 or len(g) == 0:
        return np.zeros((len(d), len(g)))
    ix = np.minimum(d[:, None, 2], g[None, :, 2]) - np.maximum(d[:, None, 0], g[None, :, 0])
    iy = np.minimum(d[:, None, 3], g[None, :, 3]) - np.maximum(d[:, None, 1], g[None, :, 1])
    inter = np.where((ix > 0) & (iy > 0), ix * iy, 0.0)
    area_d = (d[:, 2] - d[:, 0]) * (d[:, 3] - d[:, 1])
    area_g = (g[:, 2] - g[:, 0]) * (g[:, 3] - g[:, 1])
    union = area_d[:, None] + area_g[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def coco(images, truth, dets, max_det=100):
    thresholds = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1)
    rec_points = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1)
    truth = np.asarray(truth, dtype=float).reshape(-1, 6)
    dets = np.asarray(dets, dtype=float).reshape(-1, 7)
    cats = sorted(set(truth[:, 1].astype(int).tolist()))
    aps = np.zeros((len(thresholds), len(cats)))
    recalls = np.zeros((len(thresholds), len(cats)))
    for k, cat in enumerate(cats):
        scores, matched, npig = [], [], 0
        for img in range(images):
            g = truth[(truth[:, 0] == img) & (truth[:, 1] == cat)][:, 2:6]
            dd = dets[(dets[:, 0] == img) & (dets[:, 1] == cat)]
            order = np.argsort(-dd[:, 6], kind="mergesort")[:max_det]
            dd = dd[order]
            ious = iou_matrix(dd[:, 2:6], g)
            m = np.zeros((len(thresholds), len(dd)), dtype=bool)
            for t, thr in enumerate(thresholds):
                taken = np.zeros(len(g), dtype=bool)
                for di in range(len(dd)):
                    best, pick = min(thr, 1 - 1e-10), -1
                    for gi in range(len(g)):
                        if taken[gi] or ious[di, gi] < best:
                            continue
                        best, pick = ious[di, gi], gi
                    if pick >= 0:
                        taken[pick] = True
                        m[t, di] = True
            npig += len(g)
            scores.append(dd[:, 6])
            matched.append(m)
        s = np.concatenate(scores)
        m = np.concatenate(matched, axis=1)
        order = np.argsort(-s, kind="mergesort")
        tps = np.cumsum(m[:, order], axis=1).astype(float)
        fps = np.cumsum(~m[:, order], axis=1).astype(float)
        for t in range(len(thresholds)):
            tp, fp = tps[t], fps[t]
            rc = tp / npig
            pr = tp / (fp + tp + np.spacing(1))
            recalls[t, k] = rc[-1] if len(tp) else 0
            pr = np.maximum.accumulate(pr[::-1])[::-1] if len(pr) else pr
            idx = np.searchsorted(rc, rec_points, side="left")
            q = np.array([pr[i] if i < len(pr) else 0.0 for i in idx])
            aps[t, k] = q.mean()
    return {"map": aps.mean(), "map50": aps[0].mean(), "map75": aps[5].mean(),
            "recall": recalls.mean()}


def segmentation(seg):
    classes = seg["classes"]
    conf = np.zeros((classes, classes), dtype=np.int64)
    correct = counted = 0
    for t, p in zip(seg["truth"], seg["predicted"]):
        t, p = np.asarray(t), np.asarray(p)
        conf += np.bincount(t * classes + p, minlength=classes * classes).reshape(classes, classes)
        correct += int((t == p).sum())
        counted += t.size
    inter = np.diag(conf)
    union = conf.sum(0) + conf.sum(1) - inter
    keep = union > 0
    return {"mean_iou": float((inter[keep] / union[keep]).mean()),
            "pixel_accuracy": correct / counted}


def main():
    req = json.load(sys.stdin)
    out = coco(req["images"], req["truth"], req["detections"])
    if "segmentation" in req:
        out.update(segmentation(req["segmentation"]))
    json.dump({k: float(v) for k, v in out.items()}, sys.stdout)


if __name__ == "__main__":
    main()
