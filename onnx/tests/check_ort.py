#!/usr/bin/env python3
"""Check a rewritten ONNX model (int8-quantised or fp16) against its float original
with ONNX Runtime (CPU execution provider). Run by the Rust tests of infaas-onnx
(onnx/tests/rewrites.rs); usable by hand too:

    python3 onnx/tests/check_ort.py --mode quant \
        --reference onnx/tests/fixtures/mlp.onnx --candidate /tmp/mlp.int8.onnx \
        --input onnx/tests/fixtures/mlp_input.npy --expected onnx/tests/fixtures/mlp_expected.npy \
        --max-abs-err 0.1 --min-argmax-agree 0.9 --require-op DynamicQuantizeMatMul

Checks, failing with exit code 1 and a message:
  * onnx.checker accepts the candidate and its IR version is one ORT 1.31 reads (<= 13);
  * --require-op / --forbid-op: op types present / absent in the candidate's main graph;
  * the reference model reproduces the fixture's expected output (the fixture is sane);
  * the candidate loads and runs in ORT (with graph optimisations off and on) and its
    output --output (default: the first float output) is within --max-abs-err of the
    expected one, with argmax (last axis) agreement >= --min-argmax-agree;
  * optionally the --label-output agrees with --expected-label on >= --min-label-agree;
  * --mode fp16: the candidate's initializers that were float are float16 and the graph
    inputs/outputs are still float32. If ORT has no CPU kernel for some float16 node
    (NOT_IMPLEMENTED), the run is skipped with a notice after the checker passed.
Prints one line `CHECK_ORT {json}` with the measured numbers (errors, agreement, size
ratio, mean latency of reference and candidate).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

MAX_ORT_IR_VERSION = 13  # ONNX Runtime 1.31


def fail(msg):
    print(f"check_ort: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def session(path, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run(sess, x):
    feeds = {sess.get_inputs()[0].name: x}
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def latency_ms(sess, x, repeats=50):
    run(sess, x)
    start = time.perf_counter()
    for _ in range(repeats):
        run(sess, x)
    return (time.perf_counter() - start) / repeats * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["quant", "fp16"], required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--expected", required=True)
    ap.add_argument("--output", default=None)
    ap.add_argument("--max-abs-err", type=float, default=None)
    ap.add_argument("--min-argmax-agree", type=float, default=None)
    ap.add_argument("--label-output", default=None)
    ap.add_argument("--expected-label", default=None)
    ap.add_argument("--min-label-agree", type=float, default=None)
    ap.add_argument("--require-op", action="append", default=[])
    ap.add_argument("--forbid-op", action="append", default=[])
    args = ap.parse_args()

    cand = onnx.load(args.candidate)
    try:
        onnx.checker.check_model(cand, full_check=True)
    except Exception as e:  # noqa: BLE001
        fail(f"onnx.checker rejects {args.candidate}: {e}")
    if cand.ir_version > MAX_ORT_IR_VERSION:
        fail(f"ir_version {cand.ir_version} > {MAX_ORT_IR_VERSION}")
    ops = {n.op_type for n in cand.graph.node}
    for op in args.require_op:
        if op not in ops:
            fail(f"op {op} not in candidate (ops: {sorted(ops)})")
    for op in args.forbid_op:
        if op in ops:
            fail(f"op {op} still in candidate")

    if args.mode == "fp16":
        for t in cand.graph.initializer:
            if t.data_type == onnx.TensorProto.FLOAT:
                fail(f"initializer {t.name} is still float32")
        ref_model = onnx.load(args.reference)
        ref_types = {
            v.name: v.type.tensor_type.elem_type for v in list(ref_model.graph.input) + list(ref_model.graph.output)
        }
        for vi in list(cand.graph.input) + list(cand.graph.output):
            et = vi.type.tensor_type.elem_type
            if ref_types.get(vi.name) != et:
                fail(f"graph input/output {vi.name} changed type {ref_types.get(vi.name)} -> {et}")

    x = np.load(args.input)
    expected = np.load(args.expected)

    ref = session(args.reference, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    ref_out = run(ref, x)
    out_name = args.output or next(
        o.name for o in ref.get_outputs() if o.type == "tensor(float)"
    )
    ref_err = float(np.abs(ref_out[out_name] - expected).max())
    if ref_err > 1e-4:
        fail(f"reference model does not reproduce the fixture (max abs err {ref_err})")

    summary = {
        "mode": args.mode,
        "candidate": os.path.basename(args.candidate),
        "size_ratio": os.path.getsize(args.candidate) / os.path.getsize(args.reference),
        "ops": sorted(ops),
    }
    outs = {}
    for level_name, level in [
        ("disable_all", ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
        ("enable_all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
    ]:
        try:
            sess = session(args.candidate, level)
        except Exception as e:  # noqa: BLE001
            if args.mode == "fp16" and "NOT_IMPLEMENTED" in str(e):
                print(f"check_ort: NOTICE: ORT CPU lacks a float16 kernel, run skipped: {e}")
                summary["skipped_run"] = str(e)
                print("CHECK_ORT " + json.dumps(summary))
                return
            fail(f"ORT cannot load the candidate ({level_name}): {e}")
        out = run(sess, x)
        for o in ref.get_outputs():
            if o.name not in out:
                fail(f"candidate lacks output {o.name}")
            if out[o.name].shape != ref_out[o.name].shape:
                fail(f"output {o.name} shape {out[o.name].shape} != {ref_out[o.name].shape}")
            if out[o.name].dtype != ref_out[o.name].dtype:
                fail(f"output {o.name} dtype {out[o.name].dtype} != {ref_out[o.name].dtype}")
        outs[level_name] = (sess, out)

    sess, out = outs["enable_all"]
    y = out[out_name]
    max_err = float(np.abs(y - expected).max())
    agree = float(np.mean(np.argmax(y, axis=-1) == np.argmax(expected, axis=-1)))
    unopt_err = float(np.abs(outs["disable_all"][1][out_name] - expected).max())
    summary.update(
        {
            "output": out_name,
            "max_abs_err": max_err,
            "max_abs_err_unoptimized": unopt_err,
            "expected_abs_max": float(np.abs(expected).max()),
            "argmax_agree": agree,
        }
    )
    if args.label_output:
        labels = out[args.label_output]
        exp_labels = np.load(args.expected_label)
        summary["label_agree"] = float(np.mean(labels == exp_labels))
    summary["ref_latency_ms"] = latency_ms(ref, x)
    summary["cand_latency_ms"] = latency_ms(sess, x)
    print("CHECK_ORT " + json.dumps(summary))

    if args.max_abs_err is not None and max(max_err, unopt_err) > args.max_abs_err:
        fail(f"max abs error {max(max_err, unopt_err)} > {args.max_abs_err}")
    if args.min_argmax_agree is not None and agree < args.min_argmax_agree:
        fail(f"argmax agreement {agree} < {args.min_argmax_agree}")
    if args.min_label_agree is not None and summary.get("label_agree", 0.0) < args.min_label_agree:
        fail(f"label agreement {summary.get('label_agree')} < {args.min_label_agree}")


if __name__ == "__main__":
    main()
