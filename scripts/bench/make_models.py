#!/usr/bin/env python3
"""Builds the two small classifiers the serving benchmarks use, with validation sets.

- `bench-cnn.onnx`: a small convolutional classifier for 8x8 grey images (scikit-learn's
  digits): Conv 1->32 and 32->64 (3x3, pad 1, ReLU) + MaxPool 2x2 + Flatten + a linear layer
  trained on those features (multinomial logistic regression); input `image` float32 [N, 1, 8, 8],
  outputs `probabilities` float32 [N, 10] and `label` int64 [N].
- `bench-mlp.onnx`: an MLP 30-256-256-2 (ReLU) on scikit-learn's breast-cancer features
  (30 standardised features), exported with skl2onnx; input `input` float32 [N, 30].

Both are deterministic (fixed seeds). Usage: make_models.py OUT_DIR
Needs: scikit-learn, skl2onnx, onnx, onnxruntime, numpy.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

SEED = 0
IR_VERSION = 9


def conv_nodes(out: str) -> list:
    return [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], [out], axis=1),
    ]


def make(nodes, inits, outputs, path: str) -> None:
    graph = helper.make_graph(
        nodes,
        "bench_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        outputs,
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    onnx.save(model, path)


def build_cnn(out: str) -> None:
    """Two 3x3 convolutions (1->32->64 channels, random fixed filters) + ReLU + max-pool as
    features, and a linear layer trained on them: about 50 us a row at batch 1 on one core."""
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    y = d.target.astype(np.int64)
    xt, xv, yt, yv = train_test_split(x, y, test_size=0.3, stratify=y, random_state=SEED)
    rng = np.random.default_rng(SEED)
    inits = {
        "w1": rng.normal(0, 0.5, size=(32, 1, 3, 3)).astype(np.float32),
        "b1": rng.normal(0, 0.1, size=(32,)).astype(np.float32),
        "w2": rng.normal(0, 0.1, size=(64, 32, 3, 3)).astype(np.float32),
        "b2": rng.normal(0, 0.1, size=(64,)).astype(np.float32),
    }
    features = os.path.join(out, "bench-cnn-features.onnx")
    make(conv_nodes("f"), inits, [helper.make_tensor_value_info("f", TensorProto.FLOAT, ["N", 1024])], features)
    feat = ort.InferenceSession(features, providers=["CPUExecutionProvider"])
    ft = feat.run(None, {"image": xt})[0]
    os.unlink(features)
    scale = float(ft.std()) or 1.0
    clf = LogisticRegression(C=1.0, max_iter=3000, random_state=SEED)
    clf.fit(ft / scale, yt)
    inits["wl"] = (clf.coef_.T / scale).astype(np.float32)  # [1024, 10]
    inits["bl"] = clf.intercept_.astype(np.float32)
    nodes = conv_nodes("f") + [
        helper.make_node("Gemm", ["f", "wl", "bl"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0),
    ]
    path = os.path.join(out, "bench-cnn.onnx")
    make(
        nodes,
        inits,
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10]),
            helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
        ],
        path,
    )
    np.savez(os.path.join(out, "bench-cnn-val.npz"), x=xv, y=yv)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["label"], {"image": xv})[0]
    print(f"bench-cnn.onnx: validation accuracy {np.mean(got == yv):.4f}")


def build_mlp(out: str) -> None:
    d = load_breast_cancer()
    x = d.data.astype(np.float32)
    x = ((x - x.mean(axis=0)) / x.std(axis=0)).astype(np.float32)
    y = d.target.astype(np.int64)
    xt, xv, yt, yv = train_test_split(x, y, test_size=0.3, stratify=y, random_state=SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = MLPClassifier(hidden_layer_sizes=(256, 256), max_iter=200, random_state=SEED).fit(xt, yt)
    model = convert_sklearn(
        clf,
        initial_types=[("input", FloatTensorType([None, 30]))],
        options={id(clf): {"zipmap": False}},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    model.ir_version = IR_VERSION
    model.graph.name = "bench_mlp"
    path = os.path.join(out, "bench-mlp.onnx")
    onnx.save(model, path)
    np.savez(os.path.join(out, "bench-mlp-val.npz"), x=xv, y=yv)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["label"], {"input": xv})[0]
    print(f"bench-mlp.onnx: validation accuracy {np.mean(got == yv):.4f}")


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    build_cnn(out)
    build_mlp(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
