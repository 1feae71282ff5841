#!/usr/bin/env python3
"""Builds the zoo's two models of real architectures, with validation sets (deterministic).

No deep-learning framework and no download: the graphs are written with `onnx.helper`, the
weights are numpy arrays drawn from fixed seeds, and the inputs are generated here.

- `cifar-resnet.onnx`: a CIFAR-style ResNet-20, widened (stem Conv 3x3 3->48, three stages of
  three basic blocks at 48/64/64 channels, strides 1/2/2; each block Conv 3x3 + BatchNormalization
  + Relu, Conv 3x3 + BatchNormalization, residual Add (identity, or a strided 1x1 Conv +
  BatchNormalization projection where the shape changes), Relu), GlobalAveragePool, Flatten,
  Gemm. Input `image` float32 [N, 3, 32, 32], output `logits` float32 [N, 10]. He-initialised
  convolutions; the BatchNormalization running statistics are those of the convolution
  outputs on sample images (as after training), so activations neither explode nor vanish.
- `cifar-val.npz` (np.savez_compressed): `x` float32 [256, 3, 32, 32] (smooth random
  pictures: colour gradients, soft ellipses, rectangles, blobs and stripes, 8-bit pixels
  normalised per channel like CIFAR), `y` int64 [256].
- `text-encoder.onnx`: a two-layer BERT-like transformer encoder (hidden 128, 4 heads, FFN 512
  with Erf GELU, post-LayerNorm, vocabulary 2048, sequence length 128: the shape of BERT-tiny),
  token + position embeddings, additive attention mask (1 - mask) * -10000, masked mean
  pooling, Gemm. Inputs `input_ids` int64 [N, 128] and `attention_mask` int64 [N, 128],
  output `logits` float32 [N, 4].
- `text-val.npz` (np.savez_compressed): `x.input_ids` int64 [256, 128], `x.attention_mask`
  int64 [256, 128] (sentences of 6..128 tokens from a Zipf-like mixture of topics,
  [CLS]=1 ... [SEP]=2, then padding: mask 0, id 0), `y` int64 [256].

The weights are random, so the classes are the models' own: each classifier is fitted on the
pooled features of separate sample inputs (centred, whitened, one prototype per class from a
balanced k-means, scaled), and `y` is the FP32 model's argmax, so the FP32 files score
exactly 1.0 and any variant that changes answers scores below.

Also writes the marked section "Models of real architectures" of OUT_DIR/README.md (sizes,
timings measured here with onnxruntime on one thread); the rest of that file belongs to
scripts/make_zoo.py, which keeps this section when it rewrites the file.

Usage:  python3 scripts/make_real_zoo.py [OUT_DIR]        (default: zoo/ of this repository)
        add --no-timing to skip the timing runs (the README section then keeps old figures)
Needs:  numpy, onnx, onnxruntime (1.31.1 for the figures in the README).
"""

from __future__ import annotations

import os
import re
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 9
OPSET = 17
SEED = 20261127

# ---- CNN ----
IMG = 32
WIDTHS = (48, 64, 64)
BLOCKS_PER_STAGE = 3
N_CLASSES_IMG = 10
N_VAL_IMG = 256
N_CALIB_IMG = 512  # sample images for BN statistics (first 128) and the classifier
# ---- transformer ----
SEQ = 128
VOCAB = 2048
HIDDEN = 128
HEADS = 4
FFN = 512
LAYERS = 2
N_CLASSES_TXT = 4
N_VAL_TXT = 256
N_CALIB_TXT = 1024
MIN_LEN = 6
PAD, CLS, SEP = 0, 1, 2

MAX_NEW_BYTES = 8 * 1000 * 1000
BEGIN_MARK = "<!-- BEGIN real-architecture models: written by scripts/make_real_zoo.py -->"
END_MARK = "<!-- END real-architecture models -->"


# ============================================================================ helpers


def finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    model.producer_name = "infaas-make-real-zoo"
    model.producer_version = "1"
    onnx.checker.check_model(model, full_check=True)
    return model


def session(model, threads: int = 1) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])


def run_batched(sess: ort.InferenceSession, feeds: dict, out: str, batch: int = 64):
    n = len(next(iter(feeds.values())))
    parts = []
    for i in range(0, n, batch):
        parts.append(sess.run([out], {k: v[i:i + batch] for k, v in feeds.items()})[0])
    return np.concatenate(parts)


def fit_head(feat: np.ndarray, n_classes: int, rng: np.random.Generator,
             logit_range: float = 12.0):
    """A linear classifier [d, C] + bias [C] over pooled features that spreads sample inputs
    over the classes with clear margins: centre, whiten the top principal components, take
    one prototype per class from a balanced k-means and score by (negative squared) distance
    to the prototypes, which is linear in the features. The logits are scaled so their
    typical per-row range is about `logit_range`."""
    feat = feat.astype(np.float64)
    mu = feat.mean(axis=0)
    z = feat - mu
    _, s, vt = np.linalg.svd(z, full_matrices=False)
    k = min(2 * n_classes, len(s))
    proj = vt[:k].T / (s[:k] / np.sqrt(len(z)))  # [d, k]: whitened principal components
    w_pc = z @ proj
    # balanced k-means (each cluster takes at most ceil(n / C) points, greedily by distance)
    cap = int(np.ceil(len(w_pc) / n_classes))
    cent = w_pc[rng.choice(len(w_pc), n_classes, replace=False)]
    for _ in range(50):
        d2 = ((w_pc[:, None, :] - cent[None]) ** 2).sum(-1)
        assign = np.full(len(w_pc), -1)
        counts = np.zeros(n_classes, dtype=int)
        for flat in np.argsort(d2, axis=None, kind="stable"):
            i, c = divmod(int(flat), n_classes)
            if assign[i] < 0 and counts[c] < cap:
                assign[i] = c
                counts[c] += 1
        new = np.stack([w_pc[assign == c].mean(0) for c in range(n_classes)])
        if np.allclose(new, cent):
            break
        cent = new
    # logits_c = 2 c.w - |c|^2 (the -|w|^2 term is common to all classes)
    w = proj @ (2 * cent.T)  # [d, C]
    b = -(cent ** 2).sum(1) - mu @ w
    # bias correction so the argmax on the samples is balanced
    for _ in range(200):
        logits = feat @ w + b
        hist = np.bincount(logits.argmax(1), minlength=n_classes)
        if hist.max() - hist.min() <= max(2, len(feat) // (10 * n_classes)):
            break
        b -= 0.05 * np.log((hist + 1) / (len(feat) / n_classes))
    logits = feat @ w + b
    scale = logit_range / np.median(logits.max(1) - logits.min(1))
    return (w * scale).astype(np.float32), (b * scale).astype(np.float32)


def margin_stats(logits: np.ndarray) -> tuple[float, float]:
    """(fraction of rows whose top-1 minus top-2 gap is below 5% of the row's logit range,
    median gap / range)."""
    srt = np.sort(logits, axis=1)
    gap = srt[:, -1] - srt[:, -2]
    rng_ = srt[:, -1] - srt[:, 0]
    rel = gap / rng_
    return float((rel < 0.05).mean()), float(np.median(rel))


def timing(model_bytes: bytes, make_feeds, runs: int = 200) -> dict:
    """Median seconds per call with onnxruntime: batch 1 and batch 8 on one thread (measured in
    interleaved rounds so that both share the machine's load), then batch 1 on two threads
    (apart: its idle pool thread spins for a while after each call and would slow the others).
    `runs` calls each (half for batch 8) after 20 warm-up calls. Also the 10th percentile
    (key + "_p10"), a hint of the speed on a quiet machine."""
    def measure(configs: dict, rounds: int) -> dict:
        sessions = {k: (session(model_bytes, threads), make_feeds(batch))
                    for k, (batch, threads, _) in configs.items()}
        for sess, feeds in sessions.values():
            for _ in range(20):
                sess.run(None, feeds)
        samples: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(rounds):
            for k, (sess, feeds) in sessions.items():
                for _ in range(configs[k][2] // rounds):
                    t0 = time.perf_counter()
                    sess.run(None, feeds)
                    samples[k].append(time.perf_counter() - t0)
        return samples

    samples = measure({"b1_t1": (1, 1, runs), "b8_t1": (8, 1, runs // 2)}, rounds=10)
    samples.update(measure({"b1_t2": (1, 2, runs)}, rounds=1))
    out = {"load": os.getloadavg()[0]}
    for k, v in samples.items():
        out[k] = float(np.median(v))
        out[k + "_p10"] = float(np.percentile(v, 10))
    return out


# ============================================================================ images


def make_images(n: int, rng: np.random.Generator) -> np.ndarray:
    """Smooth random pictures in [0, 1], uint8-quantised: [n, 3, 32, 32] float32."""
    yy, xx = np.meshgrid(np.linspace(0, 1, IMG), np.linspace(0, 1, IMG), indexing="ij")
    imgs = np.empty((n, 3, IMG, IMG), dtype=np.float64)
    for i in range(n):
        c0, c1 = rng.uniform(0, 1, 3), rng.uniform(0, 1, 3)
        th = rng.uniform(0, 2 * np.pi)
        t = np.cos(th) * xx + np.sin(th) * yy
        t = (t - t.min()) / (t.max() - t.min())
        img = c0[:, None, None] * (1 - t) + c1[:, None, None] * t
        for _ in range(rng.integers(1, 5)):
            kind = rng.integers(0, 4)
            col = rng.uniform(0, 1, 3)
            alpha = rng.uniform(0.6, 1.0)
            cx, cy = rng.uniform(0.1, 0.9, 2)
            a, b = rng.uniform(0.08, 0.4, 2)
            rot = rng.uniform(0, np.pi)
            u = np.cos(rot) * (xx - cx) + np.sin(rot) * (yy - cy)
            v = -np.sin(rot) * (xx - cx) + np.cos(rot) * (yy - cy)
            sharp = rng.uniform(15, 60)
            if kind == 0:  # soft ellipse
                m = 1 / (1 + np.exp(sharp * (np.sqrt((u / a) ** 2 + (v / b) ** 2) - 1) * min(a, b)))
            elif kind == 1:  # soft rotated rectangle
                d = np.maximum(np.abs(u) - a, np.abs(v) - b)
                m = 1 / (1 + np.exp(sharp * d))
            elif kind == 2:  # gaussian blob
                m = np.exp(-0.5 * ((u / a) ** 2 + (v / b) ** 2) * 4)
            else:  # stripes inside a soft disc
                f = rng.uniform(3, 9)
                m = 0.5 * (1 + np.sin(2 * np.pi * f * u)) / (
                    1 + np.exp(sharp * (np.sqrt(u ** 2 + v ** 2) - a)))
            m = alpha * np.clip(m, 0, 1)
            img = img * (1 - m) + col[:, None, None] * m
        # low-frequency shading and a little sensor noise
        fx, fy = rng.uniform(0.5, 2.5, 2)
        ph = rng.uniform(0, 2 * np.pi)
        img = img * (1 + 0.1 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph))
        img = img + rng.normal(0, 0.015, img.shape)
        imgs[i] = img
    return (np.round(np.clip(imgs, 0, 1) * 255) / 255).astype(np.float32)


# ============================================================================ CNN


def im2col_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """Conv2d (no bias) in numpy, float64; x [n, c, h, w], w [o, c, kh, kw]."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    out = np.einsum("ok,nkp->nop", w.reshape(o, -1), cols, optimize=True)
    return out.reshape(n, o, oh, ow)


class CnnBuilder:
    """Writes the ResNet graph and runs it in numpy on sample images at the same time, so each
    BatchNormalization gets the running statistics of its input (as after training)."""

    def __init__(self, rng: np.random.Generator, sample: np.ndarray):
        self.rng = rng
        self.nodes: list = []
        self.inits: list = []
        self.x = sample.astype(np.float64)
        self.scales: list[float] = []  # std of each block's output on the sample images

    def _init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def conv(self, name, src, x, cout, k, stride):
        cin = x.shape[1]
        w = self.rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k))
        w = w.astype(np.float32).astype(np.float64)
        self.nodes.append(helper.make_node(
            "Conv", [src, self._init(f"{name}.weight", w)], [f"{name}.out"], name=name,
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        return f"{name}.out", im2col_conv(x, w, stride, k // 2)

    def bn(self, name, src, x, gamma_range):
        c = x.shape[1]
        mean = x.mean(axis=(0, 2, 3))
        var = x.var(axis=(0, 2, 3))
        # running averages differ a little from any one batch's statistics
        mean = mean + self.rng.normal(0, 0.05, c) * np.sqrt(var)
        var = var * self.rng.uniform(0.9, 1.1, c)
        gamma = self.rng.uniform(*gamma_range, c)
        beta = self.rng.normal(0.0, 0.1, c)
        eps = 1e-5
        names = [self._init(f"{name}.{p}", a) for p, a in
                 [("scale", gamma), ("bias", beta), ("mean", mean), ("var", var)]]
        self.nodes.append(helper.make_node("BatchNormalization", [src, *names],
                                           [f"{name}.out"], name=name, epsilon=eps))
        g, b, m, v = (a.astype(np.float32).astype(np.float64)[None, :, None, None]
                      for a in (gamma, beta, mean, var))
        return f"{name}.out", (x - m) / np.sqrt(v + eps) * g + b

    def relu(self, name, src, x):
        self.nodes.append(helper.make_node("Relu", [src], [f"{name}.out"], name=name))
        return f"{name}.out", np.maximum(x, 0)

    def block(self, name, src, x, cout, stride):
        h, hx = self.conv(f"{name}.conv1", src, x, cout, 3, stride)
        h, hx = self.bn(f"{name}.bn1", h, hx, (0.6, 1.0))
        h, hx = self.relu(f"{name}.relu1", h, hx)
        h, hx = self.conv(f"{name}.conv2", h, hx, cout, 3, 1)
        h, hx = self.bn(f"{name}.bn2", h, hx, (0.2, 0.5))  # small last-BN gammas, as trained
        if stride != 1 or x.shape[1] != cout:
            s, sx = self.conv(f"{name}.shortcut.conv", src, x, cout, 1, stride)
            s, sx = self.bn(f"{name}.shortcut.bn", s, sx, (0.4, 0.8))
        else:
            s, sx = src, x
        self.nodes.append(helper.make_node("Add", [h, s], [f"{name}.add"], name=f"{name}.add"))
        out = self.relu(f"{name}.relu2", f"{name}.add", hx + sx)
        self.scales.append(float(out[1].std()))
        return out


def build_cnn(calib: np.ndarray, rng: np.random.Generator):
    """ResNet-20 graph; returns (model, pooled features of `calib`)."""
    bn_sample = calib[:128]
    cb = CnnBuilder(rng, bn_sample)
    h, x = cb.conv("stem.conv", "image", cb.x, WIDTHS[0], 3, 1)
    h, x = cb.bn("stem.bn", h, x, (0.6, 1.0))
    h, x = cb.relu("stem.relu", h, x)
    for si, width in enumerate(WIDTHS):
        for bi in range(BLOCKS_PER_STAGE):
            stride = 2 if (si > 0 and bi == 0) else 1
            h, x = cb.block(f"layer{si + 1}.{bi}", h, x, width, stride)
    cb.nodes.append(helper.make_node("GlobalAveragePool", [h], ["pool"], name="avgpool"))
    cb.nodes.append(helper.make_node("Flatten", ["pool"], ["features"], name="flatten", axis=1))
    feat_graph = helper.make_graph(
        cb.nodes, "cifar_resnet20_features",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, IMG, IMG])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", WIDTHS[-1]])],
        initializer=cb.inits)
    feat_model = finish(feat_graph)
    sess = session(feat_model)
    feats = run_batched(sess, {"image": calib}, "features")
    # the numpy forward pass and onnxruntime agree (same graph, same weights)
    ref = x.mean(axis=(2, 3))
    assert np.allclose(feats[:128], ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max()), \
        np.abs(feats[:128] - ref).max()
    print("  block output std: " + " ".join(f"{v:.2f}" for v in cb.scales))
    print(f"  pooled features: mean {feats.mean():.3f}, std over images per channel "
          f"{feats.std(0).mean():.3f}, dead channels {(feats.std(0) < 1e-6).sum()}")
    w, b = fit_head(feats, N_CLASSES_IMG, rng)
    nodes = cb.nodes + [helper.make_node(
        "Gemm", ["features", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1)]
    inits = cb.inits + [numpy_helper.from_array(np.ascontiguousarray(w.T), "fc.weight"),
                        numpy_helper.from_array(b, "fc.bias")]
    graph = helper.make_graph(
        nodes, "cifar_resnet20",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, IMG, IMG])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", N_CLASSES_IMG])],
        initializer=inits)
    return finish(graph)


# ============================================================================ transformer


def make_sentences(n: int, rng: np.random.Generator, topics: np.ndarray):
    """Token ids [n, SEQ] and mask [n, SEQ]: [CLS] words... [SEP] then padding (id 0, mask 0).
    Each sentence mixes one or two topics' Zipf-like word distributions with common words."""
    ids = np.zeros((n, SEQ), dtype=np.int64)
    mask = np.zeros((n, SEQ), dtype=np.int64)
    n_topics = len(topics)
    ranks = np.arange(1, VOCAB - 2)
    common = 1.0 / ranks ** 1.1
    common /= common.sum()
    for i in range(n):
        length = int(rng.integers(MIN_LEN, SEQ + 1)) if rng.random() < 0.8 \
            else int(rng.integers(MIN_LEN, SEQ // 4 + 1))
        t1, t2 = rng.choice(n_topics, 2, replace=False)
        mix = rng.uniform(0.5, 1.0)
        p = 0.4 * common + 0.6 * (mix * topics[t1] + (1 - mix) * topics[t2])
        words = rng.choice(ranks, size=length - 2, p=p / p.sum()) + 2  # ids 3..VOCAB-1
        ids[i, 0], ids[i, 1:length - 1], ids[i, length - 1] = CLS, words, SEP
        mask[i, :length] = 1
    return ids, mask


def make_topics(rng: np.random.Generator, n_topics: int = 12) -> np.ndarray:
    ranks = np.arange(1, VOCAB - 2)
    out = []
    for _ in range(n_topics):
        perm = rng.permutation(len(ranks))
        p = np.zeros(len(ranks))
        p[perm] = 1.0 / ranks ** 1.2  # a Zipf law over a topic-specific word order
        out.append(p / p.sum())
    return np.stack(out)


def build_text(rng: np.random.Generator, calib_ids, calib_mask):
    H, F, dh = HIDDEN, FFN, HIDDEN // HEADS
    nodes, inits = [], []

    def init(name, arr, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(arr, dtype=dtype), name))
        return name

    def node(op, ins, outs, name, **kw):
        nodes.append(helper.make_node(op, ins, outs, name=name, **kw))
        return outs[0]

    def dense(name, src, din, dout, std):
        w = node("MatMul", [src, init(f"{name}.weight", rng.normal(0, std, (din, dout)))],
                 [f"{name}.mm"], f"{name}.matmul")
        return node("Add", [w, init(f"{name}.bias", rng.normal(0, 0.02, dout))],
                    [f"{name}.out"], f"{name}.add")

    def layer_norm(name, src):
        return node("LayerNormalization",
                    [src, init(f"{name}.weight", rng.uniform(0.8, 1.2, H)),
                     init(f"{name}.bias", rng.normal(0, 0.05, H))],
                    [f"{name}.out"], name, axis=-1, epsilon=1e-12)

    # constants
    init("const.heads_shape", [0, 0, HEADS, dh], np.int64)
    init("const.hidden_shape", [0, 0, H], np.int64)
    init("const.axes_12", [1, 2], np.int64)
    init("const.axes_2", [2], np.int64)
    init("const.axes_1", [1], np.int64)
    init("const.one", 1.0)
    init("const.mask_value", -10000.0)
    init("const.sqrt_dh", np.sqrt(dh))
    init("const.sqrt2", np.sqrt(2.0))
    init("const.half", 0.5)
    init("const.min_count", 1.0)

    # embeddings
    tok = node("Gather", [init("embeddings.word", rng.normal(0, 1.0, (VOCAB, H))), "input_ids"],
               ["emb.tok"], "embeddings.gather", axis=0)
    pos = node("Add", [tok, init("embeddings.position", rng.normal(0, 0.5, (SEQ, H)))],
               ["emb.sum"], "embeddings.add_position")
    h = layer_norm("embeddings.ln", pos)

    # additive mask [N, 1, 1, S] and pooling mask [N, S, 1]
    # (the order of a PyTorch export of BERT: mask[:, None, None, :], cast, (1 - m) * -10000)
    m4 = node("Unsqueeze", ["attention_mask", "const.axes_12"], ["mask.4d"], "mask.unsqueeze")
    m4 = node("Cast", [m4], ["mask.4d.float"], "mask.cast", to=TensorProto.FLOAT)
    inv = node("Sub", ["const.one", m4], ["mask.inv"], "mask.invert")
    add_mask = node("Mul", [inv, "const.mask_value"], ["mask.add"], "mask.scale")
    maskf = node("Cast", ["attention_mask"], ["pool.mask.float"], "pool.cast",
                 to=TensorProto.FLOAT)

    for li in range(LAYERS):
        p = f"layer{li}"
        q = dense(f"{p}.attn.q", h, H, H, 1.6 / np.sqrt(H))
        k = dense(f"{p}.attn.k", h, H, H, 1.6 / np.sqrt(H))
        v = dense(f"{p}.attn.v", h, H, H, 1.0 / np.sqrt(H))
        q = node("Reshape", [q, "const.heads_shape"], [f"{p}.q.heads"], f"{p}.attn.q_reshape")
        k = node("Reshape", [k, "const.heads_shape"], [f"{p}.k.heads"], f"{p}.attn.k_reshape")
        v = node("Reshape", [v, "const.heads_shape"], [f"{p}.v.heads"], f"{p}.attn.v_reshape")
        q = node("Transpose", [q], [f"{p}.q.t"], f"{p}.attn.q_transpose", perm=[0, 2, 1, 3])
        k = node("Transpose", [k], [f"{p}.k.t"], f"{p}.attn.k_transpose", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], [f"{p}.v.t"], f"{p}.attn.v_transpose", perm=[0, 2, 1, 3])
        s = node("MatMul", [q, k], [f"{p}.scores"], f"{p}.attn.qk")
        s = node("Div", [s, "const.sqrt_dh"], [f"{p}.scores.scaled"], f"{p}.attn.scale")
        s = node("Add", [s, add_mask], [f"{p}.scores.masked"], f"{p}.attn.mask")
        a = node("Softmax", [s], [f"{p}.probs"], f"{p}.attn.softmax", axis=-1)
        c = node("MatMul", [a, v], [f"{p}.context"], f"{p}.attn.av")
        c = node("Transpose", [c], [f"{p}.context.t"], f"{p}.attn.context_transpose",
                 perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "const.hidden_shape"], [f"{p}.context.flat"],
                 f"{p}.attn.context_reshape")
        o = dense(f"{p}.attn.out", c, H, H, 1.0 / np.sqrt(H))
        r = node("Add", [o, h], [f"{p}.attn.residual"], f"{p}.attn.residual")
        h = layer_norm(f"{p}.attn.ln", r)
        f1 = dense(f"{p}.ffn.in", h, H, F, 1.0 / np.sqrt(H))
        # GELU(x) = 0.5 x (1 + erf(x / sqrt 2))
        g = node("Div", [f1, "const.sqrt2"], [f"{p}.gelu.div"], f"{p}.gelu.div")
        g = node("Erf", [g], [f"{p}.gelu.erf"], f"{p}.gelu.erf")
        g = node("Add", [g, "const.one"], [f"{p}.gelu.add"], f"{p}.gelu.add_one")
        g = node("Mul", [f1, g], [f"{p}.gelu.mul"], f"{p}.gelu.mul")
        g = node("Mul", [g, "const.half"], [f"{p}.gelu.out"], f"{p}.gelu.half")
        f2 = dense(f"{p}.ffn.out", g, F, H, 1.0 / np.sqrt(F))
        r = node("Add", [f2, h], [f"{p}.ffn.residual"], f"{p}.ffn.residual")
        h = layer_norm(f"{p}.ffn.ln", r)

    # masked mean pooling
    m3 = node("Unsqueeze", [maskf, "const.axes_2"], ["pool.mask3"], "pool.unsqueeze")
    hm = node("Mul", [h, m3], ["pool.masked"], "pool.mul")
    sm = node("ReduceSum", [hm, "const.axes_1"], ["pool.sum"], "pool.sum", keepdims=0)
    cnt = node("ReduceSum", [maskf, "const.axes_1"], ["pool.count"], "pool.count", keepdims=1)
    cnt = node("Max", [cnt, "const.min_count"], ["pool.count1"], "pool.count_at_least_1")
    node("Div", [sm, cnt], ["pooled"], "pool.mean")

    ins = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", SEQ]),
           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", SEQ])]
    feat_model = finish(helper.make_graph(
        nodes, "text_encoder_features", ins,
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["N", H])],
        initializer=inits))
    feats = run_batched(session(feat_model),
                        {"input_ids": calib_ids, "attention_mask": calib_mask}, "pooled")
    print(f"  pooled features: std over sentences per dim {feats.std(0).mean():.3f}")
    w, b = fit_head(feats, N_CLASSES_TXT, rng)
    node("Gemm", ["pooled", init("classifier.weight", np.ascontiguousarray(w.T)),
                  init("classifier.bias", b)], ["logits"], "classifier", transB=1)
    graph = helper.make_graph(
        nodes, "text_encoder", ins,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", N_CLASSES_TXT])],
        initializer=inits)
    return finish(graph)


# ============================================================================ checks


def check_model(path: str, feeds: dict, y: np.ndarray, n_classes: int) -> dict:
    """Loads the saved file, checks it, scores the validation set and returns statistics."""
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    sess = session(path)
    logits = run_batched(sess, feeds, "logits", batch=64)
    acc = float((logits.argmax(1) == y).mean())
    assert acc == 1.0, f"{path}: accuracy {acc}"
    single = np.array([sess.run(["logits"], {k: v[i:i + 1] for k, v in feeds.items()})[0][0]
                       for i in range(len(y))])
    assert (single.argmax(1) == y).all(), f"{path}: one row at a time changes labels"
    assert np.allclose(single, logits, rtol=1e-4, atol=1e-4 * np.abs(logits).max())
    full = sess.run(["logits"], feeds)[0]  # the whole set as one batch
    assert (full.argmax(1) == y).all(), f"{path}: one batch changes labels"
    small, med = margin_stats(logits)
    return {
        "accuracy": acc,
        "hist": np.bincount(y, minlength=n_classes).tolist(),
        "small_margin": small,
        "median_rel_margin": med,
        "logit_range": float(np.median(logits.max(1) - logits.min(1))),
    }


# ============================================================================ README


def fmt_size(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def readme_section(out: str, stats: dict) -> str:
    def size(f):
        return fmt_size(os.path.getsize(os.path.join(out, f)))

    c, t = stats["cifar-resnet.onnx"], stats["text-encoder.onnx"]

    load = max(c["load"], t["load"])
    if load > 1.2:
        load_note = (f"load average {load:.1f} from other work at the time, so a quiet machine\n"
                     "is somewhat faster and two threads gain little")
    else:
        load_note = f"otherwise quiet, load average {load:.1f}"

    def perf(s):
        tm = s["timing"]
        return (f"{tm['b1_t1'] * 1e3:.2f} ms/row | {8 / tm['b8_t1']:.0f} rows/s | "
                f"{1 / tm['b1_t2']:.0f} rows/s")

    return f"""{BEGIN_MARK}
## Models of real architectures

Two networks of real architectures with random (seeded) weights, built without a
deep-learning framework by `scripts/make_real_zoo.py`
(`python3 scripts/make_real_zoo.py [OUT_DIR]`, default `zoo/`; deterministic; this section is
rewritten by that script and kept by `scripts/make_zoo.py`). ONNX IR version {IR_VERSION}, opset {OPSET}. Their classes are the
models' own: each classifier is fitted on pooled features of separate sample inputs (centred,
whitened, one prototype per class from a balanced k-means) and the validation labels `y` are
the FP32 model's argmax, so the FP32 files score exactly 1.0 and any variant that changes
answers scores below it.

| file | architecture | inputs | outputs | validation accuracy |
|------|--------------|--------|---------|---------------------|
| `cifar-resnet.onnx` | ResNet-20 topology for CIFAR, widened: Conv 3x3 stem, 3 stages x 3 basic blocks at {WIDTHS[0]}/{WIDTHS[1]}/{WIDTHS[2]} channels (Conv+BatchNormalization+Relu, residual Add, strided 1x1-projection shortcuts), GlobalAveragePool, Flatten, Gemm; {c['params'] / 1e6:.2f} M parameters, {c['macs'] / 1e6:.0f} M multiply-adds a row | `image` float32 [N, 3, {IMG}, {IMG}] | `logits` float32 [N, {N_CLASSES_IMG}] | {c['accuracy']:.4f} |
| `text-encoder.onnx` | 2-layer BERT-like encoder: token (vocabulary {VOCAB}) + position embeddings, LayerNormalization; per layer {HEADS}-head self-attention (hidden {HIDDEN}, additive mask (1 - mask) * -10000), residual + LayerNormalization, FFN {HIDDEN}-{FFN}-{HIDDEN} with Erf GELU, residual + LayerNormalization; masked mean pooling, Gemm; {t['params'] / 1e6:.2f} M parameters | `input_ids` int64 [N, {SEQ}]<br>`attention_mask` int64 [N, {SEQ}] | `logits` float32 [N, {N_CLASSES_TXT}] | {t['accuracy']:.4f} |

Speed with onnxruntime {ort.__version__} (CPUExecutionProvider, default graph optimisation,
1 inter-op thread; median of {c['timing_runs']} calls after warm-up, at batch 8 half as many,
batch 1 and 8 interleaved in rounds; measured on the project's
{os.cpu_count()}-core machine,
{load_note}):

| file | size | batch 1, 1 thread | batch 8, 1 thread | batch 1, 2 threads |
|------|------|-------------------|-------------------|--------------------|
| cifar-resnet.onnx | {size('cifar-resnet.onnx')} | {perf(c)} |
| text-encoder.onnx | {size('text-encoder.onnx')} | {perf(t)} |

Validation sets (written with `np.savez_compressed`):

- `cifar-val.npz` ({size('cifar-val.npz')}): `x` float32 [{N_VAL_IMG}, 3, {IMG}, {IMG}], `y` int64 [{N_VAL_IMG}]. Smooth
  random pictures (colour gradients, soft ellipses, rectangles, blobs, stripes, shading, a
  little noise; no class structure), 8-bit pixels normalised per channel like CIFAR, with
  mean {c['norm_mean']} and std {c['norm_std']} (of sample images).
  Labels per class: {c['hist']}; {c['small_margin'] * 100:.1f}% of the rows have a
  top-1 vs top-2 logit gap below 5% of their logit range.
- `text-val.npz` ({size('text-val.npz')}): `x.input_ids` int64 [{N_VAL_TXT}, {SEQ}], `x.attention_mask` int64 [{N_VAL_TXT}, {SEQ}],
  `y` int64 [{N_VAL_TXT}]. Sentences of {MIN_LEN} to {SEQ} tokens (`[CLS]`=1, words 3..{VOCAB - 1} from Zipf-like
  topic mixtures, `[SEP]`=2) with mask 1, then padding: id 0, mask 0.
  Labels per class: {t['hist']}; {t['small_margin'] * 100:.1f}% of the rows have a
  top-1 vs top-2 logit gap below 5% of their logit range.
{END_MARK}
"""


def splice_section(text: str, section: str) -> str:
    """Replaces the marked section, or puts it before "## Building your own validation NPZ"
    (at the end if that heading is missing)."""
    pat = re.compile(re.escape(BEGIN_MARK) + r".*?" + re.escape(END_MARK) + r"\n?", re.S)
    if pat.search(text):
        return pat.sub(lambda _: section, text, count=1)
    anchor = "## Building your own validation NPZ"
    if anchor in text:
        i = text.index(anchor)
        return text[:i] + section + "\n" + text[i:]
    return text.rstrip("\n") + "\n\n" + section


def update_readme(out: str, section: str) -> None:
    path = os.path.join(out, "README.md")
    text = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Model zoo\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(splice_section(text, section))


# ============================================================================ main


def count_cnn_macs(model: onnx.ModelProto) -> int:
    """Multiply-adds of one row (Conv and Gemm), from the inferred shapes."""
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    sizes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    macs = 0
    for n in model.graph.node:
        if n.op_type == "Conv":
            _, _, oh, ow = dims[n.output[0]]
            macs += int(np.prod(sizes[n.input[1]])) * oh * ow
        elif n.op_type == "Gemm":
            macs += int(np.prod(sizes[n.input[1]]))
    return macs


def n_params(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(i.dims)) for i in model.graph.initializer if len(i.dims) > 0)


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    do_timing = "--no-timing" not in sys.argv[1:]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = args[0] if args else os.path.join(repo, "zoo")
    os.makedirs(out, exist_ok=True)
    stats = {}

    # ---------------- CNN
    print("cifar-resnet: generating images")
    rng = np.random.default_rng(SEED)
    calib_raw = make_images(N_CALIB_IMG, rng)
    val_raw = make_images(N_VAL_IMG, rng)
    mean = np.round(calib_raw.mean(axis=(0, 2, 3), dtype=np.float64), 4)
    std = np.round(calib_raw.std(axis=(0, 2, 3), dtype=np.float64), 4)

    def norm(a):
        return ((a - mean[None, :, None, None]) / std[None, :, None, None]).astype(np.float32)

    calib, val_x = norm(calib_raw), norm(val_raw)
    print("cifar-resnet: building")
    model = build_cnn(calib, np.random.default_rng(SEED + 1))
    path = os.path.join(out, "cifar-resnet.onnx")
    onnx.save(model, path)
    val_y = run_batched(session(path), {"image": val_x}, "logits").argmax(1).astype(np.int64)
    np.savez_compressed(os.path.join(out, "cifar-val.npz"), x=val_x, y=val_y)
    s = check_model(path, {"image": val_x}, val_y, N_CLASSES_IMG)
    s.update(params=n_params(model), macs=count_cnn_macs(model),
             norm_mean=mean.tolist(), norm_std=std.tolist())
    stats["cifar-resnet.onnx"] = s
    print(f"  x mean {val_x.mean((0, 2, 3)).round(3)}, std {val_x.std((0, 2, 3)).round(3)}")
    print(f"  {s}")

    # ---------------- transformer
    print("text-encoder: generating sentences")
    rng = np.random.default_rng(SEED + 2)
    topics = make_topics(rng)
    calib_ids, calib_mask = make_sentences(N_CALIB_TXT, rng, topics)
    val_ids, val_mask = make_sentences(N_VAL_TXT, rng, topics)
    print("text-encoder: building")
    model = build_text(np.random.default_rng(SEED + 3), calib_ids, calib_mask)
    path = os.path.join(out, "text-encoder.onnx")
    onnx.save(model, path)
    feeds = {"input_ids": val_ids, "attention_mask": val_mask}
    val_y = run_batched(session(path), feeds, "logits").argmax(1).astype(np.int64)
    np.savez_compressed(os.path.join(out, "text-val.npz"),
             **{"x.input_ids": val_ids, "x.attention_mask": val_mask, "y": val_y})
    s = check_model(path, feeds, val_y, N_CLASSES_TXT)
    s.update(params=n_params(model))
    stats["text-encoder.onnx"] = s
    print(f"  lengths: min {val_mask.sum(1).min()}, median {int(np.median(val_mask.sum(1)))}, "
          f"max {val_mask.sum(1).max()}")
    print(f"  {s}")

    new_files = ["cifar-resnet.onnx", "cifar-val.npz", "text-encoder.onnx", "text-val.npz"]
    total = sum(os.path.getsize(os.path.join(out, f)) for f in new_files)
    for f in new_files:
        print(f"  {f}: {os.path.getsize(os.path.join(out, f))} bytes")
    print(f"new files: {total} bytes")
    assert total < MAX_NEW_BYTES, f"{total} bytes, over {MAX_NEW_BYTES}"

    if not do_timing:
        print("--no-timing: README section left as it is")
        return 0
    runs = 200
    img1 = val_x[:8]
    t_ids, t_mask = val_ids[:8], val_mask[:8]
    for f, feeds_of in [
        ("cifar-resnet.onnx", lambda b: {"image": img1[:b]}),
        ("text-encoder.onnx", lambda b: {"input_ids": t_ids[:b], "attention_mask": t_mask[:b]}),
    ]:
        tm = timing(open(os.path.join(out, f), "rb").read(), feeds_of, runs)
        stats[f]["timing"] = tm
        stats[f]["load"] = tm.pop("load")
        stats[f]["timing_runs"] = runs
        print(f"{f}: batch 1 / 1 thread {tm['b1_t1'] * 1e3:.2f} ms/row "
              f"(p10 {tm['b1_t1_p10'] * 1e3:.2f}); batch 8 / 1 thread {8 / tm['b8_t1']:.0f} "
              f"rows/s (p10 {8 / tm['b8_t1_p10']:.0f}); batch 1 / 2 threads "
              f"{1 / tm['b1_t2']:.0f} rows/s (p10 {1 / tm['b1_t2_p10']:.0f}); "
              f"load average {stats[f]['load']:.2f}")
    update_readme(out, readme_section(out, stats))
    print(f"wrote {os.path.join(out, 'README.md')} (section between the markers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
