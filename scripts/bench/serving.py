#!/usr/bin/env python3
"""Serving benchmark as a new user measures it: the release binary on embedded defaults, a
fresh server per run, one small model registered, `wrk` (1 thread) as the closed-loop client on
the same machine, 10 s per cell. Reports req/s and latency percentiles per protocol and
connection count, and each as a ratio of the same server's `GET /healthz` rate in the same run.

Usage: serving.py --binary B --models DIR [--runs N] [--duration S] [--connections 1,16,64]
                  [--protocols v2-json,v2-binary,v1,grpc] [--server-args '...'] [--json OUT]
       serving.py ... --latency [--rates 300,1000] [--latency-duration 30]
       serving.py ... --soak MINUTES [--soak-rate 300]
Called by scripts/bench/serving.sh, which installs wrk, builds the binary and the models first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_until_ready(url: str, log: str, tries: int = 300, pause: float = 0.1) -> None:
    """Polls `url` until it answers 200; exits pointing at `log` after `tries`."""
    for _ in range(tries):
        try:
            if http("GET", url)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(pause)
    raise SystemExit(f"the server did not start; see {log}")


def stop_process(proc: subprocess.Popen, log, directory: str) -> None:
    """SIGTERM (kill after 20 s), then the data directory removed unless INFAAS_BENCH_KEEP."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    if os.environ.get("INFAAS_BENCH_KEEP"):
        print(f"kept the server's data directory and log: {directory}", flush=True)
    else:
        shutil.rmtree(directory, ignore_errors=True)


def register_model(base: str, auth: dict, models: str, name: str, app: str) -> None:
    """Registers `models/NAME.onnx` with `NAME-val.npz` under `app` and waits until ready."""
    boundary = "----infaasbench"
    parts = []
    for field, value in (("name", name), ("app", app)):
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"\r\n\r\n{value}\r\n'.encode())
    for field, path in (("model", f"{name}.onnx"), ("validation", f"{name}-val.npz")):
        with open(os.path.join(models, path), "rb") as f:
            data = f.read()
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{path}"\r\n'
            f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    s, b = http("POST", base + "/v1/models", b"".join(parts),
                {**auth, "content-type": f"multipart/form-data; boundary={boundary}"})
    assert s in (200, 201, 202), b
    for _ in range(1200):
        s, b = http("GET", f"{base}/v1/models/{name}", headers=auth)
        status = json.loads(b).get("status")
        if status == "ready":
            return
        if status == "failed":
            raise SystemExit(f"registration failed: {b!r}")
        time.sleep(0.25)
    raise SystemExit("model not ready in 5 minutes")


class Server:
    """A fresh `infaas serve` in its own data directory."""

    def __init__(self, binary: str, models: str, extra: list[str]):
        self.binary, self.models = binary, models
        self.dir = tempfile.mkdtemp(prefix="infaas-bench-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.grpc_port = free_port()
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.args = ["--data-dir", self.dir, "--listen", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(
            [binary, "serve", *self.args, "--grpc-listen", f"127.0.0.1:{self.grpc_port}", *extra]
            if grpc_supported(binary)
            else [binary, "serve", *self.args, *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )
        wait_until_ready(self.base + "/readyz", self.log.name)
        key = subprocess.run(
            [binary, "admin", "--data-dir", self.dir, "create-tenant", "bench"],
            check=True, capture_output=True, text=True,
        ).stdout.strip().split()[-1]
        # The benchmark measures the server, not the tenant's request-rate quota.
        subprocess.run([binary, "admin", "--data-dir", self.dir, "set-quotas", "bench", "--rps", "10000000"],
                       check=True, capture_output=True)
        s, b = http("POST", self.base + "/v1/auth/token", json.dumps({"api_key": key}).encode(),
                    {"content-type": "application/json"})
        assert s == 200, b
        self.key = key
        self.token = json.loads(b)["access_token"]
        self.auth = {"Authorization": f"Bearer {self.token}"}

    def register(self, name: str, app: str) -> None:
        register_model(self.base, self.auth, self.models, name, app)

    def rss_kb(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def scaling_events(self, app: str) -> list[str]:
        return [action for _, action in self.scaling_events_at(app)]

    def scaling_events_at(self, app: str) -> list[tuple[float, str]]:
        """The application's scaling events as (completed at, seconds since the epoch; action)."""
        s, b = http("GET", f"{self.base}/v1/apps/{app}/scaling-events", headers=self.auth)
        if s != 200:
            return []
        events = json.loads(b)
        events = events.get("events", events) if isinstance(events, dict) else events
        return [(e.get("at_ms", 0) / 1000.0, e.get("action", "?")) for e in events]

    def stop(self) -> None:
        stop_process(self.proc, self.log, self.dir)


_grpc = {}


def grpc_supported(binary: str) -> bool:
    if binary not in _grpc:
        out = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
        _grpc[binary] = "--grpc-listen" in out
    return _grpc[binary]


def body_for(model: str, protocol: str) -> tuple[str, bytes, dict]:
    """(path, body, extra headers) of one 1-row query in the given protocol."""
    if model == "bench-cnn":
        name, shape, row = "image", [1, 1, 8, 8], np.load(os.path.join(ARGS.models, "bench-cnn-val.npz"))["x"][:1]
    else:
        name, shape, row = "input", [1, 30], np.load(os.path.join(ARGS.models, "bench-mlp-val.npz"))["x"][:1]
    data = [round(float(v), 4) for v in row.reshape(-1)]
    if protocol == "v2-json":
        doc = {"inputs": [{"name": name, "shape": shape, "datatype": "FP32", "data": data}]}
        return f"/v2/models/{APP}/infer", json.dumps(doc).encode(), {"content-type": "application/json"}
    if protocol == "v2-binary":
        raw = np.asarray(data, dtype=np.float32).tobytes()
        header = json.dumps({"inputs": [{"name": name, "shape": shape, "datatype": "FP32",
                                         "parameters": {"binary_data_size": len(raw)}}],
                             "outputs": [{"name": "label", "parameters": {"binary_data": True}}]}).encode()
        return (f"/v2/models/{APP}/infer", header + raw,
                {"content-type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))})
    if protocol == "v1":
        doc = {"inputs": [{"name": name, "shape": shape, "datatype": "FP32", "data": data}]}
        return f"/v1/apps/{APP}/infer", json.dumps(doc).encode(), {"content-type": "application/json"}
    raise ValueError(protocol)


LUA = """
wrk.method = "{method}"
wrk.body = io.open("{body}", "rb"):read("*a")
{headers}
"""


def wrk(server: Server, path: str, body: bytes | None, headers: dict, connections: int, seconds: float) -> dict:
    with tempfile.NamedTemporaryFile("wb", suffix=".bin", delete=False) as f:
        f.write(body or b"")
        body_file = f.name
    auth = server.auth if body else {}
    hdr = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in {**auth, **headers}.items())
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(LUA.format(method="POST" if body else "GET", body=body_file, headers=hdr))
        lua = f.name
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "--latency", "-s", lua, server.base + path],
        capture_output=True, text=True, check=True,
    ).stdout
    os.unlink(body_file)
    os.unlink(lua)

    def ms(label: str) -> float:
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not m:
            return float("nan")
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    return {"rps": rps, "p50_ms": ms("50"), "p99_ms": ms("99"),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(0) if errors else ""}


APP = "bench"
ARGS = None


def throughput_run(binary: str, extra: list[str], run: int) -> dict:
    server = Server(binary, ARGS.models, extra)
    try:
        server.register(ARGS.model, APP)
        path, body, headers = body_for(ARGS.model, "v2-json")
        for _ in range(20):
            s, b = http("POST", server.base + path, body, {**server.auth, **headers})
            assert s == 200, b
        rss_before = server.rss_kb()
        cells = {}
        for c in ARGS.connections:
            cells[f"healthz/{c}"] = wrk(server, "/healthz", None, {}, c, ARGS.duration)
            for proto in ARGS.protocols:
                if proto == "grpc":
                    if not grpc_supported(binary):
                        continue
                    cells[f"grpc/{c}"] = grpc_load(server, c, ARGS.duration)
                    continue
                path, body, headers = body_for(ARGS.model, proto)
                perf = None
                if ARGS.perf and not os.path.exists(ARGS.perf):
                    # A sampled profile of the server during this cell (the first one asked for).
                    perf = subprocess.Popen(["perf", "record", "-F", "997", *ARGS.perf_args.split(),
                                             "-p", str(server.proc.pid), "-o", ARGS.perf],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                cells[f"{proto}/{c}"] = wrk(server, path, body, headers, c, ARGS.duration)
                if perf:
                    perf.send_signal(signal.SIGINT)
                    perf.wait(60)
        return {"run": run, "cells": cells, "scaling": server.scaling_events(APP),
                "rss_mb": [rss_before / 1024, server.rss_kb() / 1024]}
    finally:
        server.stop()


def grpc_load(server: Server, connections: int, seconds: float) -> dict:
    """Closed-loop gRPC clients (the infaas `grpc-load` bench binary, if built)."""
    tool = os.environ.get("INFAAS_GRPC_LOAD") or os.path.join(os.path.dirname(ARGS.binary), "examples", "grpc_load")
    if not tool or not os.path.exists(tool):
        return {"rps": float("nan"), "p50_ms": float("nan"), "p99_ms": float("nan"), "non_2xx": 0, "socket_errors": "no grpc load tool"}
    name, shape = ("image", "1,1,8,8") if ARGS.model == "bench-cnn" else ("input", "1,30")
    out = subprocess.run(
        [tool, "--addr", f"127.0.0.1:{server.grpc_port}", "--token", server.token, "--model", APP,
         "--input", name, "--shape", shape, "--connections", str(connections), "--seconds", str(seconds)],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def latency_runs(binary: str, extra: list[str]) -> None:
    """Light load: `infaas loadgen` (Poisson arrivals, 1-row queries) against the MLP, with the
    control loops on (defaults) and off, at each rate."""
    for label, args in (("defaults", []), ("--autoscale false", ["--autoscale", "false"])):
        server = Server(binary, ARGS.models, extra + args)
        try:
            server.register("bench-mlp", APP)
            for rate in ARGS.rates:
                out = subprocess.run(
                    [binary, "--server", server.base, "--api-key", server.key, "loadgen", "--app", APP,
                     "--rate", str(rate), "--duration", str(int(ARGS.latency_duration)),
                     "--npz", os.path.join(ARGS.models, "bench-mlp-val.npz"), "--json"],
                    capture_output=True, text=True, check=True).stdout
                d = json.loads(out)
                print(f"latency {label:>18} {rate:>5} q/s: p50 {d['p50_ms']:.2f} ms  p99 {d['p99_ms']:.2f} ms"
                      f"  max {d.get('max_ms', float('nan')):.2f} ms", flush=True)
        finally:
            server.stop()


def soak(binary: str, extra: list[str]) -> None:
    """Resident memory of a server under a steady load (loadgen at `--soak-rate`), sampled every
    minute for `--soak` minutes."""
    server = Server(binary, ARGS.models, extra)
    try:
        server.register("bench-mlp", APP)
        load = subprocess.Popen(
            [binary, "--server", server.base, "--api-key", server.key, "loadgen", "--app", APP,
             "--rate", str(ARGS.soak_rate), "--duration", str(int(ARGS.soak * 60)),
             "--npz", os.path.join(ARGS.models, "bench-mlp-val.npz"), "--json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.time()
        samples = []
        while load.poll() is None:
            samples.append(server.rss_kb() / 1024)
            print(f"soak minute {(time.time() - start) / 60:5.1f}: rss {samples[-1]:.1f} MB", flush=True)
            time.sleep(60)
        if len(samples) > 3:
            after = samples[2:]
            print(f"soak: rss after minute 2 from {after[0]:.1f} to {after[-1]:.1f} MB "
                  f"(max {max(after):.1f}); growth {(after[-1] - after[0]) / max(len(after) - 1, 1):.3f} MB/min")
    finally:
        server.stop()


class MLServer:
    """MLServer (the Python serving peer) on the same model: a custom runtime running ONNX
    Runtime with one intra-op thread, adaptive batching (max batch 32, up to 1 ms), started
    from its own virtual environment (`--peer-python`)."""

    def __init__(self, python: str, models: str, model: str):
        self.dir = tempfile.mkdtemp(prefix="infaas-peer-")
        self.port, self.grpc_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.auth = {}
        mdir = os.path.join(self.dir, APP)
        os.makedirs(mdir)
        shutil.copy(os.path.join(HERE, "mlserver_runtime.py"), self.dir)
        with open(os.path.join(mdir, "model-settings.json"), "w") as f:
            json.dump({"name": APP, "implementation": "mlserver_runtime.OnnxModel",
                       "max_batch_size": 32, "max_batch_time": 0.001,
                       "parameters": {"uri": os.path.join(models, f"{model}.onnx")}}, f)
        with open(os.path.join(self.dir, "settings.json"), "w") as f:
            json.dump({"http_port": self.port, "grpc_port": self.grpc_port, "metrics_port": free_port(),
                       "parallel_workers": 0, "debug": False}, f)
        self.log = open(os.path.join(self.dir, "mlserver.log"), "w")
        mlserver = os.path.join(os.path.dirname(python), "mlserver")
        self.proc = subprocess.Popen([mlserver, "start", self.dir], cwd=self.dir, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_until_ready(f"{self.base}/v2/models/{APP}/ready", self.log.name, 600, 0.2)

    def stop(self) -> None:
        stop_process(self.proc, self.log, self.dir)


def peer_run(extra: list[str]) -> None:
    """infaas and MLServer side by side, one after the other on the same machine, model, client
    and body (v2 JSON): req/s and p99 at each connection count, plus `/healthz` and raw ONNX
    Runtime for reference."""
    rows = []
    path, body, headers = body_for(ARGS.model, "v2-json")
    server = Server(ARGS.binary, ARGS.models, extra)
    try:
        server.register(ARGS.model, APP)
        for _ in range(20):
            http("POST", server.base + path, body, {**server.auth, **headers})
        for c in ARGS.connections:
            h = wrk(server, "/healthz", None, {}, c, ARGS.duration)
            r = wrk(server, path, body, headers, c, ARGS.duration)
            rows.append(("infaas", c, r, h))
    finally:
        server.stop()
    peer = MLServer(ARGS.peer_python, ARGS.models, ARGS.model)
    try:
        for _ in range(20):
            http("POST", peer.base + path, body, headers)
        for c in ARGS.connections:
            r = wrk(peer, path, body, headers, c, ARGS.duration)
            rows.append(("mlserver", c, r, None))
    finally:
        peer.stop()
    raw = raw_ort()
    print(f"raw ONNX Runtime ({ARGS.model}, 1 thread): {raw[1]:.0f} rows/s at batch 1, {raw[32]:.0f} at batch 32")
    print("| server | connections | req/s | p50 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|")
    for name, c, r, h in rows:
        print(f"| {name} | {c} | {r['rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['non_2xx']} |")
    for c in ARGS.connections:
        ours, h = next((r, h) for n, cc, r, h in rows if n == "infaas" and cc == c)
        theirs = next(r for n, cc, r, _ in rows if n == "mlserver" and cc == c)
        ideal = ideal_rps(h["rps"], raw)
        print(f"{c} connections: infaas {ours['rps'] / max(theirs['rps'], 1e-9):.1f}x MLServer's req/s, "
              f"p99 {ours['p99_ms']:.2f} against {theirs['p99_ms']:.2f} ms; "
              f"{ours['rps'] / h['rps']:.2f}x /healthz ({h['rps']:.0f} req/s); "
              f"{ours['rps'] / ideal:.2f}x the ideal {ideal:.0f} req/s (cores / (healthz cost + raw row at batch 32)); "
              f"{ours['rps'] / raw[1]:.2f}x raw batch-1 rows/s")


def ideal_rps(healthz_rps: float, raw: dict) -> float:
    """What a server adding nothing to `/healthz` and raw ONNX Runtime would serve on this
    machine: its cores over the machine time of one `/healthz` request (client included) plus
    one row at batch 32."""
    cores = os.cpu_count() or 1
    return cores / (cores / healthz_rps + 1.0 / raw[32])


def raw_ort() -> dict:
    """Rows/s of ONNX Runtime (Python, one thread) on the bench model at batch 1 and 32."""
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
    s = ort.InferenceSession(os.path.join(ARGS.models, f"{ARGS.model}.onnx"), o, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    shape = [d if isinstance(d, int) else 1 for d in s.get_inputs()[0].shape[1:]]
    out = {}
    for b in (1, 32):
        x = np.random.default_rng(0).random((b, *shape), dtype=np.float32)
        for _ in range(50):
            s.run(None, {name: x})
        n, t = 0, time.perf_counter()
        while time.perf_counter() - t < 2:
            s.run(None, {name: x})
            n += 1
        out[b] = b * n / (time.perf_counter() - t)
    return out


def main() -> int:
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--model", default="bench-cnn")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--connections", default="1,16,64")
    ap.add_argument("--protocols", default="v2-json,v2-binary,v1,grpc")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--json")
    ap.add_argument("--perf", help="write a `perf record` profile of the server during the first inference cell")
    ap.add_argument("--perf-args", default="", help="extra `perf record` arguments, e.g. '--call-graph dwarf'")
    ap.add_argument("--latency", action="store_true", help="light-load latency runs instead")
    ap.add_argument("--rates", default="300,1000")
    ap.add_argument("--latency-duration", type=float, default=30)
    ap.add_argument("--soak", type=float, default=0, help="minutes of a memory soak instead")
    ap.add_argument("--soak-rate", type=float, default=300)
    ap.add_argument("--peer", choices=["mlserver"], help="side by side with a Python serving peer instead")
    ap.add_argument("--peer-python", default=os.path.expanduser("~/.cache/infaas/peers/mlserver-venv/bin/python3"))
    ARGS = ap.parse_args()
    ARGS.rates = [float(r) for r in ARGS.rates.split(",")]
    ARGS.connections = [int(c) for c in ARGS.connections.split(",")]
    ARGS.protocols = [p for p in ARGS.protocols.split(",") if p]
    extra = ARGS.server_args.split()
    if ARGS.latency:
        latency_runs(ARGS.binary, extra)
        return 0
    if ARGS.soak:
        soak(ARGS.binary, extra)
        return 0
    if ARGS.peer:
        peer_run(extra)
        return 0
    raw = raw_ort()
    print(f"raw ONNX Runtime ({ARGS.model}, 1 thread): {raw[1]:.0f} rows/s at batch 1, {raw[32]:.0f} at batch 32", flush=True)
    runs = []
    for r in range(ARGS.runs):
        res = throughput_run(ARGS.binary, extra, r)
        runs.append(res)
        for cell, v in res["cells"].items():
            c = cell.split("/")[1]
            healthz = res["cells"][f"healthz/{c}"]["rps"]
            ratio = v["rps"] / healthz
            ideal = v["rps"] / ideal_rps(healthz, raw)
            print(f"run {r} {cell:>16}: {v['rps']:>9.0f} req/s  p50 {v['p50_ms']:6.2f} ms  p99 {v['p99_ms']:6.2f} ms"
                  f"  {ratio:5.2f}x healthz  {ideal:5.2f}x ideal  non-2xx {v['non_2xx']} {v['socket_errors']}", flush=True)
        print(f"run {r} scaling: {' '.join(res['scaling']) or '-'}; rss {res['rss_mb'][0]:.1f} -> {res['rss_mb'][1]:.1f} MB", flush=True)
    if ARGS.runs > 1:
        print("spread over runs (saturation, v2-json at the largest connection count):")
        for cell in runs[0]["cells"]:
            vals = [r["cells"][cell]["rps"] for r in runs]
            med = statistics.median(vals)
            print(f"  {cell:>16}: median {med:.0f} req/s, min {min(vals)/med:.2f}x, max {max(vals)/med:.2f}x median")
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
