"""The work of scripts/calibrate.sh once the server runs: register a zoo model, write a trace,
measure the request path (one query at a time), replay the trace on the server with the load
generator and in the simulator through the what-if API (without and with the measured request
path), and compare.

Usage: python3 calibrate.py --bin INFAAS --url URL --key API_KEY --zoo DIR --rate N
       --duration S --slo MS --work DIR [--json FILE]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request
import uuid

APP = "calib"
MODEL = "calib-mlp-l"


def call(base, token, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    h = {"Authorization": f"Bearer {token}"} if token else {}
    if data is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    req = urllib.request.Request(base + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def register(base, token, zoo):
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in [("name", MODEL), ("app", APP)]:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, path in [("model", "digits-mlp-l.onnx"), ("validation", "digits-val.npz")]:
        with open(f"{zoo}/{path}", "rb") as f:
            data = f.read()
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{path}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        parts.append(head.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    urllib.request.urlopen(
        urllib.request.Request(
            f"{base}/v1/models",
            data=b"".join(parts),
            method="POST",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": f"multipart/form-data; boundary={boundary}",
            },
        )
    )
    for _ in range(1200):
        model = call(base, token, "GET", f"/v1/models/{MODEL}")
        if model["status"] == "ready":
            return model
        if model["status"] == "failed":
            sys.exit(f"registration failed: {model}")
        time.sleep(0.5)
    sys.exit("the model was not profiled within 600 s")


def write_trace(path, rate, duration, slo, seed=7):
    rng = random.Random(seed)
    t, n = 0.0, 0
    with open(path, "w") as f:
        f.write("time_ms,app,slo_ms,min_accuracy\n")
        while True:
            t += rng.expovariate(rate) * 1e3
            if t >= duration * 1e3:
                break
            f.write(f"{t:.3f},{APP},{slo},\n")
            n += 1
    return n


def rel(sim, real):
    if real is None or sim is None:
        return None
    return (sim - real) / real if real else None


def main():
    ap = argparse.ArgumentParser()
    for a in ["bin", "url", "key", "zoo", "work", "json"]:
        ap.add_argument(f"--{a}")
    ap.add_argument("--rate", type=float)
    ap.add_argument("--duration", type=float)
    ap.add_argument("--slo", type=float)
    args = ap.parse_args()
    base = args.url
    token = call(base, None, "POST", "/v1/auth/token", {"api_key": args.key})["access_token"]
    print(f"registering zoo/digits-mlp-l as {MODEL} of application {APP}; profiling ...", flush=True)
    register(base, token, args.zoo)
    trace = os.path.join(args.work, "trace.csv")
    n = write_trace(trace, args.rate, args.duration, args.slo)
    print(f"trace: {n} queries over {args.duration:.0f} s ({args.rate:.0f}/s Poisson), SLO {args.slo:.0f} ms")

    # 1. The request path alone: one query at a time on the idle server (closed loop).
    env = dict(os.environ, INFAAS_SERVER=base, INFAAS_API_KEY=args.key)
    npz = f"{args.zoo}/digits-val.npz"
    idle = json.loads(subprocess.run(
        [args.bin, "loadgen", "--app", APP, "--rate", "0", "--duration", "5", "--npz", npz, "--json"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout)
    print(f"request path, one query at a time: p50 {idle['p50_ms']:.3f} ms, p99 {idle['p99_ms']:.3f} ms")

    # 2. The trace on the real server.
    real = json.loads(subprocess.run(
        [args.bin, "loadgen", "--trace", trace, "--npz", npz, "--json"],
        env=env, check=True, capture_output=True, text=True,
    ).stdout)

    # 3. The same trace in the simulator on the profiles the platform measured: the model of
    # the instances alone, then with the request path measured in 1.
    with open(trace) as f:
        csv = f.read()
    cores = os.cpu_count() or 1

    def simulate(overhead):
        body = {
            "trace": {"csv": csv},
            "policies": ["infaas_greedy"],
            "cpu_workers": 1,
            "cpu_cores": cores,
            "gpu_workers": 0,
        }
        if overhead:
            body["request_overhead_ms"] = overhead
        run = call(base, token, "POST", "/v1/whatif", body)
        for _ in range(600):
            run = call(base, token, "GET", f"/v1/whatif/{run['id']}")
            if run["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.5)
        if run["status"] != "succeeded":
            sys.exit(f"the what-if run did not succeed: {run}")
        return run["results"][0]["summary"]

    bare = simulate(None)
    with_path = simulate(idle["percentiles_ms"])

    rows = [
        ("p50_ms", real["p50_ms"], bare["p50_ms"], with_path["p50_ms"]),
        ("p99_ms", real["p99_ms"], bare["p99_ms"], with_path["p99_ms"]),
        ("slo_attainment", real["slo_attainment"], bare["slo_attainment"], with_path["slo_attainment"]),
    ]
    print(f"{'figure':<16} {'real':>9} {'sim':>9} {'diff':>8} {'sim+path':>9} {'diff':>8}")
    for name, r, b, w in rows:
        fmt = lambda d: "" if d is None else f"{d * 100:+.1f}%"
        print(f"{name:<16} {r:>9.4f} {b:>9.4f} {fmt(rel(b, r)):>8} {w:>9.4f} {fmt(rel(w, r)):>8}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"idle": idle, "real": real, "simulated": bare,
                       "simulated_with_request_path": with_path,
                       "difference": {n: rel(b, r) for n, r, b, _ in rows},
                       "difference_with_request_path": {n: rel(w, r) for n, r, _, w in rows}},
                      f, indent=2)


if __name__ == "__main__":
    main()
