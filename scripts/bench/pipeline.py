#!/usr/bin/env python3
"""A pipeline on the real server, as a user would run it: the release binary on embedded
defaults, three zoo models in three applications, a 3-model-node pipeline with one switch
(`triage`: a cheap MLP on every query, the large MLP on the queries it is unsure of, a
logistic regression beside them, merged by `first` then `mean`), a warm-up at the steady rate
(so the switch's branch probability and the request overhead are measured), a plan on that
rate applied, then `infaas loadgen --pipeline` at the same rate. Reports SLO attainment and the
planner's predicted p99 against the p99 the server measured (and the client's).

Usage: pipeline.py --binary B [--rate 100] [--duration 60] [--slo-ms 10] [--runs 1]
Called by scripts/bench/pipeline.sh, which builds the binary first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from serving import Server, http  # noqa: E402

ZOO = os.path.join(ROOT, "zoo")
MODELS = (("digits-mlp-s", "small"), ("digits-mlp-l", "large"), ("digits-logreg", "linear"))


def pipeline(slo_ms: float) -> dict:
    return {
        "name": "triage",
        "description": "cheap MLP on every query, large MLP when it is unsure, logistic regression beside",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
        "nodes": [
            {"name": "cheap", "app": "small", "inputs": {"input": "image"}},
            {"name": "expert", "model": "digits-mlp-l", "inputs": {"input": "image"},
             "when": {"source": "cheap.probabilities", "top_probability_below": 0.9}},
            {"name": "linear", "app": "linear", "inputs": {"input": "image"}},
            {"name": "best", "combine": "first", "from": ["expert.probabilities", "cheap.probabilities"]},
            {"name": "answer", "combine": "mean", "from": ["best.output", "linear.probabilities"]},
        ],
        "outputs": {"probabilities": "answer.output"},
        "slo": {"latency_ms": slo_ms, "percentile": 99},
    }


def loadgen(binary: str, server: Server, rate: float, duration: float, slo_ms: float) -> dict:
    out = subprocess.run(
        [binary, "--server", server.base, "--api-key", server.key, "loadgen", "--pipeline", "triage",
         "--input", "image", "--rate", str(rate), "--duration", str(duration), "--latency-ms", str(slo_ms),
         "--npz", os.path.join(ZOO, "digits-val.npz"), "--json"],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def run(binary: str, args: argparse.Namespace) -> dict:
    models = tempfile.mkdtemp(prefix="infaas-pipeline-models-")
    for name, _ in MODELS:
        os.symlink(os.path.join(ZOO, f"{name}.onnx"), os.path.join(models, f"{name}.onnx"))
        os.symlink(os.path.join(ZOO, "digits-val.npz"), os.path.join(models, f"{name}-val.npz"))
    server = Server(binary, models, [])
    try:
        for name, app in MODELS:
            server.register(name, app)
        s, b = http("POST", server.base + "/v1/pipelines", json.dumps(pipeline(args.slo_ms)).encode(),
                    {**server.auth, "content-type": "application/json"})
        assert s == 201, b
        warm = loadgen(binary, server, args.rate, args.warmup, args.slo_ms)
        s, b = http("POST", server.base + "/v1/pipelines/triage/plan",
                    json.dumps({"generate": f"poisson:rate={args.rate},duration=600", "apply": True}).encode(),
                    {**server.auth, "content-type": "application/json"})
        assert s == 200, b
        plan = json.loads(b)
        steady = loadgen(binary, server, args.rate, args.duration, args.slo_ms)
        return {"warmup": warm, "plan": plan, "steady": steady}
    finally:
        server.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--rate", type=float, default=100.0)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--warmup", type=float, default=20.0)
    p.add_argument("--slo-ms", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--json", help="write every run's figures here")
    args = p.parse_args()
    results = []
    for r in range(args.runs):
        res = run(args.binary, args)
        results.append(res)
        plan, steady = res["plan"], res["steady"]
        predicted = plan["predicted_p99_ms"]
        measured = steady.get("server_p99_ms") or float("nan")
        print(f"run {r + 1}: {args.rate:.0f} q/s for {args.duration:.0f} s, SLO p99 <= {args.slo_ms} ms")
        for n in plan["nodes"]:
            print(f"  plan  {n['name']:<8} {n['variant']:<34} x{n['replicas']}  reach {n['reach']:.2f}"
                  f"  predicted node p99 {n['predicted_p99_ms']:.3f} ms")
        for note in plan.get("notes", []):
            print(f"  note  {note}")
        print(f"  attainment {steady['slo_attainment'] * 100:.2f}% of {steady['sent']} queries"
              f" (errors {steady['errors']})")
        print(f"  p99 predicted {predicted:.3f} ms, measured by the server {measured:.3f} ms"
              f" (ratio {predicted / measured:.2f}); client p99 {steady['p99_ms']:.3f} ms")
        print(f"  planned in {plan['planner_ms']:.0f} ms, {plan['estimates']} estimates,"
              f" cost ${plan['cost_per_hour']:.4f}/h", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
