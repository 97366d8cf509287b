#!/usr/bin/python3
"""A labelled classification set without a download, and a model trained on it.

scikit-learn's handwritten digits (1,797 8x8 images, values 0..16, 10
classes; Debian's python3-sklearn ships them) are split with a seeded
permutation into TRAIN training and the rest held-out images. A
64 -> 32 (ReLU) -> 10 perceptron is trained on the training part in numpy
(seeded initialisation, full-batch Adam, fixed epochs) and written with what
the test needs into OUT:

  weights.json    w1 [32][64], b1 [32], w2 [10][32], b2 [10] (float32 values,
                  FULLY_CONNECTED's [units][depth] layout), the input
                  preprocessing, and the int8 calibration ranges measured on
                  the training images (hidden_max: the largest ReLU output;
                  logits_min / logits_max)
  digits/         the held-out images as 8-bit grayscale PNGs, ImageNet-style:
                  digits/<label>/<n>.png (n: the image's place in the
                  held-out order, 3 digits), plus
    images.csv    "image,label" then one "<label>/<n>.png,<label>" per image,
                  paths relative to digits/
    labels.txt    the class names "0".."9", one a line; line i names output i
  predictions.csv "image,label,top1,margin,logit0..logit9": numpy's logits
                  for each held-out image (float64 arithmetic on the float32
                  weights and inputs), its top-1 and the gap between its two
                  largest logits

Preprocessing (the product's image input set, channels GRAY, "scale":
[1/255, 0]): a digit value v (0..16) is stored as the pixel
p = round(v * 255 / 16); the model's input is float32(gray(p) * (1/255) + 0)
with gray(p) = 0.299 p + 0.587 p + 0.114 p, computed in double exactly as
harness::ImageToTensor does, so both sides feed the model the same floats.

The run is deterministic for a given --seed (numpy's PCG64, one BLAS thread).
Usage: /usr/bin/python3 digits.py OUT [--seed N] [--train N] [--epochs N]
"""

import argparse
import importlib.util
import json
import os
import shutil
import struct
import sys
import zlib

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: one thread, same sums
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


HIDDEN = 32
CLASSES = 10
INPUT_SCALE = 1.0 / 255.0


def load_digits_file():
    """(values [1797, 8, 8] int, labels [1797]) from scikit-learn's digits.csv.gz.

    The file is read directly (what sklearn.datasets.load_digits reads):
    importing scikit-learn takes seconds on a busy machine.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("digits.py: scikit-learn is missing: install python3-sklearn (scripts/setup.sh) "
                 "and run this script with /usr/bin/python3")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data", "digits.csv.gz")
    if not os.path.isfile(path):
        from sklearn.datasets import load_digits
        digits = load_digits()
        return digits.images.astype(np.int64), digits.target.astype(np.int64)
    table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1]


def write_png_gray(path, pixels):
    """Writes an 8-bit grayscale PNG (no filter, one IDAT) of a 2-D uint8 array."""
    height, width = pixels.shape

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + bytes(row) for row in pixels.astype(np.uint8))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit gray
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def model_inputs(pixels):
    """The float32 inputs the product makes of 8-bit gray pixels (see the module doc)."""
    p = pixels.reshape(len(pixels), -1).astype(np.float64)
    gray = 0.299 * p + 0.587 * p + 0.114 * p
    return (gray * INPUT_SCALE + 0.0).astype(np.float32)


def forward(x, w1, b1, w2, b2):
    hidden = np.maximum(x @ w1.T + b1, 0.0)
    return hidden, hidden @ w2.T + b2


def train(x, labels, rng, epochs):
    """Full-batch Adam on softmax cross-entropy (float64); returns float32 weights."""
    w1 = rng.normal(0.0, np.sqrt(2.0 / x.shape[1]), (HIDDEN, x.shape[1]))
    b1 = np.zeros(HIDDEN)
    w2 = rng.normal(0.0, np.sqrt(1.0 / HIDDEN), (CLASSES, HIDDEN))
    b2 = np.zeros(CLASSES)
    params = [w1, b1, w2, b2]
    m = [np.zeros_like(q) for q in params]
    v = [np.zeros_like(q) for q in params]
    onehot = np.eye(CLASSES)[labels]
    lr, beta1, beta2, eps, decay = 0.01, 0.9, 0.999, 1e-8, 1e-4
    x = x.astype(np.float64)
    for step in range(1, epochs + 1):
        hidden, logits = forward(x, *params)
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        d_logits = (e / e.sum(axis=1, keepdims=True) - onehot) / len(x)
        d_hidden = (d_logits @ w2) * (hidden > 0)
        grads = [d_hidden.T @ x + decay * w1, d_hidden.sum(axis=0),
                 d_logits.T @ hidden + decay * w2, d_logits.sum(axis=0)]
        for q, g, mq, vq in zip(params, grads, m, v):
            mq *= beta1
            mq += (1 - beta1) * g
            vq *= beta2
            vq += (1 - beta2) * g * g
            q -= lr * (mq / (1 - beta1 ** step)) / (np.sqrt(vq / (1 - beta2 ** step)) + eps)
    return [q.astype(np.float32) for q in params]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="output folder (created)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=1297, help="training images (rest held out)")
    parser.add_argument("--epochs", type=int, default=150)
    args = parser.parse_args()

    values, labels = load_digits_file()  # [1797, 8, 8] (0..16), [1797]
    if not 0 < args.train < len(values):
        sys.exit(f"digits.py: --train {args.train} must be between 1 and {len(values) - 1}")
    pixels = np.rint(values * 255.0 / 16.0).astype(np.uint8)  # what the PNGs hold
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(values))
    train_idx, test_idx = order[:args.train], order[args.train:]

    x = model_inputs(pixels)
    w1, b1, w2, b2 = train(x[train_idx], labels[train_idx], rng, args.epochs)
    f64 = [q.astype(np.float64) for q in (w1, b1, w2, b2)]
    train_hidden, train_logits = forward(x[train_idx].astype(np.float64), *f64)
    _, test_logits = forward(x[test_idx].astype(np.float64), *f64)

    os.makedirs(args.out, exist_ok=True)
    dataset = os.path.join(args.out, "digits")
    shutil.rmtree(dataset, ignore_errors=True)  # no image of a former run stays
    for c in range(CLASSES):
        os.makedirs(os.path.join(dataset, str(c)), exist_ok=True)
    with open(os.path.join(dataset, "labels.txt"), "w") as f:
        f.write("".join(f"{c}\n" for c in range(CLASSES)))
    list_rows, prediction_rows = ["image,label"], [
        "image,label,top1,margin," + ",".join(f"logit{c}" for c in range(CLASSES))]
    for n, (i, logits) in enumerate(zip(test_idx, test_logits)):
        name = f"{labels[i]}/{n:03d}.png"
        write_png_gray(os.path.join(dataset, name), pixels[i])
        list_rows.append(f"{name},{labels[i]}")
        top2 = np.sort(logits)[-2:]
        prediction_rows.append(f"{name},{labels[i]},{int(np.argmax(logits))},"
                               f"{top2[1] - top2[0]!r}," + ",".join(repr(float(v)) for v in logits))
    with open(os.path.join(dataset, "images.csv"), "w") as f:
        f.write("\n".join(list_rows) + "\n")
    with open(os.path.join(args.out, "predictions.csv"), "w") as f:
        f.write("\n".join(prediction_rows) + "\n")

    def accuracy(logits, idx):
        return float(np.mean(np.argmax(logits, axis=1) == labels[idx]))

    weights = {
        "seed": args.seed, "train_images": int(len(train_idx)), "epochs": args.epochs,
        "input": {"shape": [1, 8, 8, 1], "channels": "GRAY", "scale": INPUT_SCALE, "offset": 0.0},
        "w1": w1.tolist(), "b1": b1.tolist(), "w2": w2.tolist(), "b2": b2.tolist(),
        "calibration": {"hidden_max": float(train_hidden.max()),
                        "logits_min": float(train_logits.min()),
                        "logits_max": float(train_logits.max())},
        "train_top1": accuracy(train_logits, train_idx),
        "held_out_top1": accuracy(test_logits, test_idx),
    }
    with open(os.path.join(args.out, "weights.json"), "w") as f:
        json.dump(weights, f)
    print(f"digits.py: {len(train_idx)} training images, {len(test_idx)} held out; top-1 "
          f"train {weights['train_top1']:.4f}, held out {weights['held_out_top1']:.4f}")


if __name__ == "__main__":
    main()
