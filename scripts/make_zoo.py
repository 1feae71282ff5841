#!/usr/bin/env python3
"""Builds the infaas model zoo in zoo/ (deterministic: fixed seeds, fixed split).

Trains a family of real classifiers on scikit-learn's bundled digits dataset
(8x8 images, 10 classes; no download), exports them to ONNX with skl2onnx plus two
hand-built graphs, verifies every model with onnxruntime on the validation set and
writes the validation sets (NPZ), a test fixture for the Rust NPZ reader and
zoo/README.md (keeping, as they are, the sections between `<!-- BEGIN ... -->` and
`<!-- END ... -->` markers that other scripts write there, e.g. scripts/make_real_zoo.py's).

Usage:  python3 scripts/make_zoo.py [--out zoo]
Needs:  scikit-learn, skl2onnx, onnx, onnxruntime, numpy.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

SEED = 0
# ONNX Runtime 1.31 reads IR <= 13; keep a conservative IR and opsets it supports.
IR_VERSION = 9
MAIN_OPSET = 17
ML_OPSET = 3
TARGET_OPSET = {"": MAIN_OPSET, "ai.onnx.ml": ML_OPSET}
MAX_ZOO_BYTES = 10 * 1024 * 1024
MIN_ACC_GAP = 0.005


def load_data():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixels 0..16 -> [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.3, stratify=y, random_state=SEED)


def classifiers():
    """(file stem, estimator, architecture description); all seeded."""
    return [
        (
            "digits-logreg",
            LogisticRegression(C=1.0, max_iter=2000, random_state=SEED),
            "LogisticRegression (C=1.0, multinomial)",
        ),
        (
            "digits-mlp-s",
            # Deliberately small and under-trained so it differs from the others.
            MLPClassifier(hidden_layer_sizes=(16,), max_iter=80, random_state=SEED),
            "MLP 64-16-10 (ReLU), 80 epochs",
        ),
        (
            "digits-mlp-m",
            # Stopped early (70 epochs) so it stays below mlp-l.
            MLPClassifier(hidden_layer_sizes=(128,), max_iter=70, random_state=SEED),
            "MLP 64-128-10 (ReLU), 70 epochs",
        ),
        (
            "digits-mlp-l",
            MLPClassifier(
                hidden_layer_sizes=(512, 512), max_iter=300, alpha=0.3, random_state=SEED
            ),
            "MLP 64-512-512-10 (ReLU), L2 alpha 0.3",
        ),
        (
            "digits-forest",
            RandomForestClassifier(n_estimators=30, max_depth=8, random_state=SEED),
            "RandomForest (30 trees, max_depth 8)",
        ),
    ]


def finish(model: onnx.ModelProto, graph_name: str) -> onnx.ModelProto:
    """Pins the IR version, drops non-deterministic metadata and checks the graph."""
    model.ir_version = IR_VERSION
    model.graph.name = graph_name  # skl2onnx uses a random UUID
    model.producer_name = "infaas-make-zoo"
    model.producer_version = "1"
    model.doc_string = ""
    onnx.checker.check_model(model)
    return model


def export_sklearn(clf, stem: str) -> onnx.ModelProto:
    model = convert_sklearn(
        clf,
        initial_types=[("input", FloatTensorType([None, 64]))],
        options={id(clf): {"zipmap": False}},
        target_opset=TARGET_OPSET,
    )
    return finish(model, stem.replace("-", "_"))


def build_scores_model(mlp: MLPClassifier) -> onnx.ModelProto:
    """MatMul+Add+Relu+MatMul+Add from mlp-m's weights; input `pixels`, output `logits`."""
    assert mlp.activation == "relu" and len(mlp.coefs_) == 2
    w1, w2 = (w.astype(np.float32) for w in mlp.coefs_)
    b1, b2 = (b.astype(np.float32) for b in mlp.intercepts_)
    inits = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(b1, "b1"),
        numpy_helper.from_array(w2, "w2"),
        numpy_helper.from_array(b2, "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["pixels", "w1"], ["h_mm"], name="fc1_matmul"),
        helper.make_node("Add", ["h_mm", "b1"], ["h_pre"], name="fc1_add"),
        helper.make_node("Relu", ["h_pre"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "w2"], ["o_mm"], name="fc2_matmul"),
        helper.make_node("Add", ["o_mm", "b2"], ["logits"], name="fc2_add"),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp_scores_graph",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MAIN_OPSET)])
    return finish(model, graph.name)


def build_two_input_model(logreg: LogisticRegression) -> onnx.ModelProto:
    """Concat(left, right) then logreg's MatMul+Add; inputs `left`/`right`, output `scores`."""
    w = logreg.coef_.T.astype(np.float32)  # [64, 10]
    b = logreg.intercept_.astype(np.float32)  # [10]
    assert w.shape == (64, 10) and b.shape == (10,)
    nodes = [
        helper.make_node("Concat", ["left", "right"], ["pixels"], axis=1, name="concat"),
        helper.make_node("MatMul", ["pixels", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b"], ["scores"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_two_input_graph",
        [
            helper.make_tensor_value_info("left", TensorProto.FLOAT, ["N", 32]),
            helper.make_tensor_value_info("right", TensorProto.FLOAT, ["N", 32]),
        ],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", MAIN_OPSET)])
    return finish(model, graph.name)


def session(path: str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def ort_accuracy(path: str, feeds: dict[str, np.ndarray], y: np.ndarray) -> float:
    """Top-1 accuracy with onnxruntime: `label` output if present, else argmax of the scores."""
    sess = session(path)
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(None, feeds)))
    if "label" in outs:
        pred = np.asarray(outs["label"]).reshape(-1)
        # labels and probabilities must agree
        assert (np.argmax(outs["probabilities"], axis=1) == pred).mean() > 0.99, path
    else:
        (scores,) = outs.values()
        pred = np.argmax(scores, axis=1)
    return float((pred == y).mean())


def io_desc(path: str) -> tuple[str, str]:
    def fmt(vi) -> str:
        t = vi.type.tensor_type
        dims = [d.dim_param or str(d.dim_value) if (d.dim_param or d.dim_value) else "N"
                for d in t.shape.dim]
        dtype = TensorProto.DataType.Name(t.elem_type).lower()
        dtype = {"float": "float32"}.get(dtype, dtype)
        return f"`{vi.name}` {dtype} [{', '.join(dims)}]"

    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    ins = [fmt(i) for i in m.graph.input if i.name not in inits]
    outs = [fmt(o) for o in m.graph.output]
    return "<br>".join(ins), "<br>".join(outs)


def write_testdata(out_dir: str) -> None:
    """Fixture for the Rust NPZ reader tests (executors/src/npz.rs): exact values matter."""
    td = os.path.join(out_dir, "testdata")
    os.makedirs(td, exist_ok=True)
    np.savez_compressed(
        os.path.join(td, "compressed.npz"),
        f64=np.array([[1.5, -2.25, 3.0], [4.0, 5.5, -6.125]], dtype=np.float64),
        i32=np.array([7, -8, 2147483647, -2147483648], dtype=np.int32),
        flags=np.array([True, False, True], dtype=np.bool_),
        words=np.array(["hi", "hello", "", "héllo"], dtype="<U5"),
        fortran=np.asfortranarray(np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)),
    )
    # sanity: the fortran array really is stored with fortran_order True
    with np.load(os.path.join(td, "compressed.npz")) as z:
        assert z["fortran"].flags.f_contiguous and not z["fortran"].flags.c_contiguous


def dir_size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(repo, "zoo"))
    args = parser.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    np.random.seed(SEED)

    x_tr, x_va, y_tr, y_va = load_data()
    print(f"digits: train {len(y_tr)}, validation {len(y_va)}")

    rows = []  # (file, arch, inputs, outputs, accuracy)
    fitted = {}
    family_acc = {}
    for stem, clf, arch in classifiers():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(x_tr, y_tr)
        fitted[stem] = clf
        sk_acc = float((clf.predict(x_va) == y_va).mean())
        path = os.path.join(out, f"{stem}.onnx")
        onnx.save(export_sklearn(clf, stem), path)
        acc = ort_accuracy(path, {"input": x_va}, y_va)
        assert abs(acc - sk_acc) <= 0.01, f"{stem}: onnxruntime {acc} vs sklearn {sk_acc}"
        family_acc[stem] = acc
        rows.append((os.path.basename(path), arch, *io_desc(path), acc))
        print(f"{stem:22s} sklearn {sk_acc:.4f}  onnxruntime {acc:.4f}")

    stems = sorted(family_acc)
    for i, a in enumerate(stems):
        for b in stems[i + 1:]:
            gap = abs(family_acc[a] - family_acc[b])
            assert gap >= MIN_ACC_GAP, f"accuracies of {a} and {b} too close ({gap:.4f})"

    # hand-built: float scores, non-`input` input name
    mlp_m = fitted["digits-mlp-m"]
    path = os.path.join(out, "digits-mlp-scores.onnx")
    onnx.save(build_scores_model(mlp_m), path)
    sk_acc = float((mlp_m.predict(x_va) == y_va).mean())
    acc = ort_accuracy(path, {"pixels": x_va}, y_va)
    assert abs(acc - sk_acc) <= 0.01, f"mlp-scores: onnxruntime {acc} vs sklearn {sk_acc}"
    rows.append((os.path.basename(path), "MLP 64-128-10 as raw MatMul/Add/Relu "
                 "(mlp-m weights), argmax of logits", *io_desc(path), acc))
    print(f"{'digits-mlp-scores':22s} sklearn {sk_acc:.4f}  onnxruntime {acc:.4f}")

    # hand-built: two inputs
    logreg = fitted["digits-logreg"]
    path = os.path.join(out, "digits-two-input.onnx")
    onnx.save(build_two_input_model(logreg), path)
    left, right = np.ascontiguousarray(x_va[:, :32]), np.ascontiguousarray(x_va[:, 32:])
    sk_acc = float((logreg.predict(x_va) == y_va).mean())
    acc = ort_accuracy(path, {"left": left, "right": right}, y_va)
    assert abs(acc - sk_acc) <= 0.01, f"two-input: onnxruntime {acc} vs sklearn {sk_acc}"
    rows.append((os.path.basename(path), "Concat(left, right) + linear layer "
                 "(logreg weights), argmax of scores", *io_desc(path), acc))
    print(f"{'digits-two-input':22s} sklearn {sk_acc:.4f}  onnxruntime {acc:.4f}")

    # validation sets
    np.savez(os.path.join(out, "digits-val.npz"), x=x_va.astype(np.float32),
             y=y_va.astype(np.int64))
    np.savez(os.path.join(out, "digits-two-input-val.npz"),
             **{"x.left": left, "x.right": right, "y": y_va.astype(np.int64)})

    write_testdata(out)
    write_readme(out, rows, len(y_tr), len(y_va))

    size = dir_size(out)
    print(f"zoo size: {size} bytes ({size / 1024 / 1024:.2f} MiB)")
    assert size < MAX_ZOO_BYTES, f"zoo/ is {size} bytes, over the {MAX_ZOO_BYTES} limit"
    return 0


README_HEAD = """# Model zoo

Real classifiers for the scikit-learn *digits* dataset (8x8 grey images, 10 classes),
generated deterministically by `scripts/make_zoo.py` (do not edit this file by hand;
re-run `python3 scripts/make_zoo.py`). Inputs are the 64 pixels scaled to [0, 1]
(raw value / 16), row-major. Split: 70/30 stratified, `random_state=0`
({n_train} training / {n_val} validation images). ONNX IR version {ir}, opset {opset}
(`ai.onnx.ml` {ml}). Accuracy is top-1 on the validation set, measured with onnxruntime
{ort_version}.

| file | architecture | inputs | outputs | validation accuracy |
|------|--------------|--------|---------|---------------------|
"""

README_TAIL = """
Validation sets:

- `digits-val.npz`: `x` float32 [{n_val}, 64], `y` int64 [{n_val}] (for every model with a single 64-pixel input).
- `digits-two-input-val.npz`: `x.left` float32 [{n_val}, 32], `x.right` float32 [{n_val}, 32], `y` int64 [{n_val}] (for `digits-two-input.onnx`).
- `testdata/compressed.npz`: a `np.savez_compressed` fixture for the Rust NPZ reader tests (not a validation set).

## Building your own validation NPZ

A validation set is an `.npz` file with the model inputs and the expected labels `y`.
For a model with one input, store it under `x`; for several inputs, store each one
under `x.<input name>`:

```python
import numpy as np

# one input: X has shape [N, ...] matching the model input, y holds class indices
np.savez("val.npz", x=X.astype(np.float32), y=y.astype(np.int64))

# several inputs: one array per model input, keyed "x.<input name>"
np.savez("val.npz", **{{"x.left": L.astype(np.float32),
                        "x.right": R.astype(np.float32),
                        "y": y.astype(np.int64)}})
```

`np.savez_compressed` works too. Object (pickled) arrays are not supported; string
labels must be a fixed-width unicode array (`dtype="<U..."`).
"""


# Sections of zoo/README.md that other scripts write between such markers (e.g.
# scripts/make_real_zoo.py's "Models of real architectures"): kept as they are, in order,
# before the "Building your own validation NPZ" heading.
KEPT_SECTION = re.compile(r"<!-- BEGIN [^\n]*?-->\n.*?<!-- END [^\n]*?-->\n", re.S)
KEPT_ANCHOR = "## Building your own validation NPZ"


def write_readme(out: str, rows, n_train: int, n_val: int) -> None:
    path = os.path.join(out, "README.md")
    kept = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            kept = "".join(m.group(0) + "\n" for m in KEPT_SECTION.finditer(f.read()))
    text = README_HEAD.format(n_train=n_train, n_val=n_val, ir=IR_VERSION, opset=MAIN_OPSET,
                              ml=ML_OPSET, ort_version=ort.__version__)
    for file, arch, ins, outs, acc in rows:
        text += f"| `{file}` | {arch} | {ins} | {outs} | {acc:.4f} |\n"
    tail = README_TAIL.format(n_val=n_val)
    i = tail.index(KEPT_ANCHOR)
    text += tail[:i] + kept + tail[i:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
