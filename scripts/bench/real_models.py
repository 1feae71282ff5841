#!/usr/bin/env python3
"""Serving a milliseconds-a-row model on this machine's cores, as a new user would: the release
binary on embedded defaults, a fresh server, one zoo model of a real architecture registered
(the residual CNN by default), and the platform's own `infaas loadgen` as the client on the same
machine.

In one run it measures:
1. the machine's capacity for the model: raw ONNX Runtime's best rows/s on one core (one
   thread, batch sizes 1 to 32, on the validation rows) times the cores, less what a request of
   this model costs besides the model itself (the HTTP edge parsing and answering its JSON
   body, the load generator building and reading it, on the same cores). That cost is measured
   in the same run on the model's *edge twin*: a model with the same inputs and outputs (names,
   element types, shapes) whose own run is negligible (it sums its inputs), registered beside it
   and sent Poisson queries with the same rows by the same load generator at the rate the model
   would take at 0.8x of raw ONNX Runtime's capacity; the CPU time the server and the load
   generator spend (from /proc and getrusage), per request, is the request's cost `c` in
   core-seconds, so `capacity = cores / (1 / best_rows_per_core_s + c)`. (At saturation the
   twin costs less a request, since the edge then handles many requests a wakeup; that rate
   and `GET /healthz`'s are reported for reference.)
2. Poisson 1-row queries at 0.5x and 0.8x of that capacity, with an SLO of 10x the model's
   batch-1 latency (raw ONNX Runtime, one thread), as a trace replayed by `infaas loadgen
   --trace`: SLO attainment, p50/p99, and, sampled every 250 ms from `GET /v1/workers`, the
   threads of busy instances against the cores and each serving instance's run time (p50) and
   mean batch beside its idle profile; then the same trace in the simulator
   (`POST /v1/whatif`: the platform's policy from a cold start, as the server's, one worker with
   this machine's cores, the profiles the platform measured, the edge twin's latency one query at a time as the request path, and
   the request's cost `c` as the core time each query takes from the instances' cores), whose
   attainment is compared with the server's;
3. the throughput at saturation: closed-loop clients for the same time, as a ratio of the
   capacity;
4. the scaling events of the run (every load for queries among them).

Usage: real_models.py --binary B [--model cifar-resnet] [--duration 60] [--connections 32]
                      [--server-args '...'] [--json OUT]
Called by scripts/bench/real_models.sh, which installs wrk and builds the binary first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shlex
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import serving  # noqa: E402  (the shared server and wrk helpers)

# Zoo models of real architectures: (model file, validation set, application).
MODELS = {
    "cifar-resnet": ("cifar-resnet.onnx", "cifar-val.npz", "vision"),
    "text-encoder": ("text-encoder.onnx", "text-val.npz", "text"),
}


def feeds(npz_path: str, session) -> list[dict]:
    """Validation rows as ONNX Runtime feeds, one dict per row."""
    z = np.load(npz_path)
    names = [i.name for i in session.get_inputs()]
    if "x" in z.files:
        arrays = {names[0]: z["x"]}
    else:
        arrays = {n: z[f"x.{n}"] for n in names}
    rows = min(len(a) for a in arrays.values())
    return [{n: a[i:i + 1] for n, a in arrays.items()} for i in range(rows)]


def edge_twin(model_path: str, out_path: str) -> None:
    """Writes a model with `model_path`'s inputs and outputs (names, element types, shapes) whose
    run costs next to nothing: every input is cast to float and summed per row, and each output
    is that sum times a constant, reshaped to the output's shape. Serving it costs what the
    model's requests cost besides the model. Outputs need fixed non-batch dimensions."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    src = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in src.graph.initializer}
    inputs = [i for i in src.graph.input if i.name not in inits]
    nodes, init = [], [numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")]
    sums = []
    for k, i in enumerate(inputs):
        nodes += [
            helper.make_node("Cast", [i.name], [f"f{k}"], to=TensorProto.FLOAT),
            helper.make_node("Flatten", [f"f{k}"], [f"flat{k}"], axis=1),
            helper.make_node("ReduceSum", [f"flat{k}", "axis1"], [f"s{k}"], keepdims=1),
        ]
        sums.append(f"s{k}")
    total = sums[0]
    for k, name in enumerate(sums[1:]):
        nodes.append(helper.make_node("Add", [total, name], [f"t{k}"]))
        total = f"t{k}"
    outputs = []
    for k, o in enumerate(src.graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in o.type.tensor_type.shape.dim]
        if not dims or any(d is None for d in dims[1:]):
            raise SystemExit(f"output '{o.name}' has no fixed shape past the batch: no edge twin")
        width = int(np.prod(dims[1:])) if len(dims) > 1 else 1
        init += [numpy_helper.from_array(np.full((1, width), 1e-3, dtype=np.float32), f"w{k}"),
                 numpy_helper.from_array(np.array([0, *dims[1:]], dtype=np.int64), f"shape{k}")]
        nodes += [helper.make_node("MatMul", [total, f"w{k}"], [f"m{k}"]),
                  helper.make_node("Reshape", [f"m{k}", f"shape{k}"], [f"r{k}"]),
                  helper.make_node("Cast", [f"r{k}"], [o.name], to=o.type.tensor_type.elem_type)]
        outputs.append(o)
    graph = helper.make_graph(nodes, "edge_twin", list(inputs), outputs, init)
    twin = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    twin.ir_version = 8
    onnx.checker.check_model(twin)
    onnx.save(twin, out_path)


def raw_ort(model_path: str, npz_path: str) -> dict:
    """ONNX Runtime (Python, one thread): rows/s per batch size and the batch-1 median latency."""
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = 1, 1
    s = ort.InferenceSession(model_path, o, providers=["CPUExecutionProvider"])
    rows = feeds(npz_path, s)
    out = {"rows_per_s": {}}
    for b in (1, 2, 4, 8, 16, 32):
        batch = {n: np.concatenate([rows[(i) % len(rows)][n] for i in range(b)]) for n in rows[0]}
        for _ in range(10):
            s.run(None, batch)
        n, times, t = 0, [], time.perf_counter()
        while time.perf_counter() - t < 3:
            t0 = time.perf_counter()
            s.run(None, batch)
            times.append(time.perf_counter() - t0)
            n += 1
        out["rows_per_s"][b] = b * n / (time.perf_counter() - t)
        if b == 1:
            out["b1_ms"] = float(np.median(times) * 1e3)
    out["best_rows_per_s"] = max(out["rows_per_s"].values())
    return out


class Sampler(threading.Thread):
    """Samples `GET /v1/workers` every 250 ms: busy threads against cores, instances, states,
    the serving instances' run times and batches."""

    def __init__(self, server: serving.Server):
        super().__init__(daemon=True)
        self.server, self.stop_at, self.samples = server, None, []
        self.running = True

    def run(self) -> None:
        while self.running:
            s, b = serving.http("GET", f"{self.server.base}/v1/workers", headers=self.server.auth)
            if s == 200:
                for w in json.loads(b)["workers"]:
                    busy_instance_threads = sum(i["threads"] for i in w["instances"] if i["busy"])
                    self.samples.append({
                        "cores": w["cores"],
                        "busy_threads": w["busy_threads"],
                        "busy_instance_threads": busy_instance_threads,
                        "instances": [(i["variant"], i["state"], i["threads"]) for i in w["instances"]],
                        # Run time per batch of the instances serving now, with their batch sizes.
                        "runs": [(i["variant"], i["exec_p50_ms"], i["batch_histogram"]) for i in w["instances"]
                                 if i["qps"] > 0 and i["exec_p50_ms"] > 0],
                    })
            time.sleep(0.25)

    def summary(self) -> dict:
        if not self.samples:
            return {"samples": 0}
        over = [s for s in self.samples if s["busy_threads"] > s["cores"]]
        return {
            "samples": len(self.samples),
            "cores": self.samples[0]["cores"],
            "max_busy_threads": max(s["busy_threads"] for s in self.samples),
            # Busy threads count loads under way too; a replacement (upgrade, downgrade) loads
            # its new instance while the old one still serves. Serving instances alone:
            "max_busy_instance_threads": max(s["busy_instance_threads"] for s in self.samples),
            "samples_over_cores": len(over),
            "max_instances": max(len(s["instances"]) for s in self.samples),
            "states": sorted({st for s in self.samples for (_, st, _) in s["instances"]}),
            "variants": sorted({v for s in self.samples for (v, _, _) in s["instances"]}),
            "runs": self.runs(),
        }

    def runs(self) -> dict:
        """Per serving variant: the median over the samples of its run time's p50 (ms; each
        over its latest 1,000 runs) and the mean batch of its runs in this phase (rows)."""
        by_variant: dict = {}
        for s in self.samples:
            for variant, exec_p50, histogram in s["runs"]:
                by_variant.setdefault(variant, []).append((exec_p50, histogram))
        return {v: {"exec_p50_ms": float(np.median([e for e, _ in seen])),
                    "mean_batch": mean_batch([h for _, h in seen])}
                for v, seen in sorted(by_variant.items())}


def mean_batch(histograms: list) -> float:
    """Mean rows a run between the first and the last of an instance's cumulative batch
    histograms (`[rows, runs]` pairs)."""
    first, last = dict(map(tuple, histograms[0])), dict(map(tuple, histograms[-1]))
    runs = {b: c - first.get(b, 0) for b, c in last.items()}
    n = sum(runs.values())
    return sum(b * c for b, c in runs.items()) / n if n > 0 else 0.0


def profile_ms(server: serving.Server, model: str) -> dict:
    """Each variant's profiled mean latency per batch size, ms, as the registration measured it."""
    s, b = serving.http("GET", f"{server.base}/v1/models/{model}", headers=server.auth)
    assert s == 200, b
    return {v["name"]: {p["batch"]: p["mean_ms"] for p in v["latency"]} for v in json.loads(b)["variants"]}


def write_trace(path: str, app: str, rate: float, duration: float, slo: float, seed: int,
                min_accuracy: float | None = None) -> int:
    """A Poisson trace in the simulator's CSV format (the server and the simulator replay it)."""
    rng = random.Random(seed)
    t, n = 0.0, 0
    with open(path, "w") as f:
        f.write("time_ms,app,slo_ms,min_accuracy\n")
        while True:
            t += rng.expovariate(rate) * 1e3
            if t >= duration * 1e3:
                return n
            f.write(f"{t:.3f},{app},{slo:.3f},{'' if min_accuracy is None else min_accuracy}\n")
            n += 1


def whatif(server: serving.Server, csv: str, cores: int, overhead: list[float], request_cpu_ms: float) -> dict:
    """The same trace in the simulator (`POST /v1/whatif`, the platform's policy starting with
    nothing loaded as the server did, one CPU worker with this machine's cores, the profiles the
    platform measured, the request path drawn from `overhead`, each query taking
    `request_cpu_ms` of core time beside the instances)."""
    body = {"trace": {"csv": csv}, "policies": ["infaas_greedy"], "cpu_workers": 1,
            "cpu_cores": cores, "gpu_workers": 0, "request_overhead_ms": overhead,
            "request_cpu_ms": request_cpu_ms, "cold_start": True}
    s, b = serving.http("POST", f"{server.base}/v1/whatif", json.dumps(body).encode(),
                        {**server.auth, "content-type": "application/json"})
    assert s == 202, b
    run = json.loads(b)
    for _ in range(1200):
        s, b = serving.http("GET", f"{server.base}/v1/whatif/{run['id']}", headers=server.auth)
        run = json.loads(b)
        if run["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    if run["status"] != "succeeded":
        raise SystemExit(f"the what-if run did not succeed: {run}")
    return run["results"][0]["summary"]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a running process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request_cost(binary: str, server: serving.Server, args: list[str]) -> tuple[dict, float, float]:
    """A load generator run with the CPU time it and the server spent per answered request,
    core-ms: (summary, server's, load generator's)."""
    children, served = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_seconds(server.proc.pid)
    r = loadgen(binary, server, args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = max(1, r["ok"])
    client = (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / n
    return r, 1e3 * (cpu_seconds(server.proc.pid) - served) / n, 1e3 * client


def measure_capacity(binary: str, server: serving.Server, twin_app: str, rows: list[str], cores: int,
                     best_rows_per_s: float, connections: int) -> dict:
    """The machine's capacity for a model, rows/s (see the module's doc), from its edge twin
    registered on `server` under `twin_app`, sent `rows` by the same load generator: the twin's
    most requests/s (for reference), its latency one query at a time (the request path), and the
    CPU time the server and the load generator spend a request at the rate the model would take
    at 0.8x of raw ONNX Runtime's capacity."""
    base = ["--app", twin_app, *rows]
    edge = loadgen(binary, server, [*base, "--rate", "0", "--connections", str(connections), "--duration", "8"])
    path = loadgen(binary, server, [*base, "--rate", "0", "--duration", "5"])
    probe, server_ms, client_ms = request_cost(
        binary, server, [*base, "--rate", f"{0.8 * cores * best_rows_per_s:.1f}", "--duration", "8"])
    request_ms = server_ms + client_ms
    return {"capacity": cores / (1.0 / best_rows_per_s + request_ms / 1e3), "twin_rps": edge["throughput_per_s"],
            "path": path, "probe_rps": probe["throughput_per_s"], "request_ms": request_ms,
            "server_ms": server_ms, "client_ms": client_ms}


def loadgen(binary: str, server: serving.Server, args: list[str]) -> dict:
    env = dict(os.environ, INFAAS_SERVER=server.base, INFAAS_API_KEY=server.key)
    out = subprocess.run([binary, "loadgen", "--json", *args], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout)


def phase(binary: str, server: serving.Server, name: str, lg_args: list[str]) -> dict:
    sampler = Sampler(server)
    sampler.start()
    r = loadgen(binary, server, lg_args)
    sampler.running = False
    sampler.join()
    r["threads"] = sampler.summary()
    r.pop("percentiles_ms", None)
    print(f"  {name}: sent {r['sent']}, ok {r['ok']}, {r['throughput_per_s']:.1f}/s, "
          f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
          f"attainment {100 * (r.get('slo_attainment') or 0):.2f}%, "
          f"busy threads max {r['threads'].get('max_busy_threads')} / {r['threads'].get('cores')} "
          f"(serving instances {r['threads'].get('max_busy_instance_threads')}) "
          f"({r['threads'].get('samples_over_cores')} of {r['threads'].get('samples')} samples over), "
          f"variants {r['variants']}", flush=True)
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", default="cifar-resnet", choices=sorted(MODELS))
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--min-accuracy", type=float,
                    help="sent with every query (e.g. 1.0: only the model's full-precision files qualify)")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--json")
    a = ap.parse_args()
    model_file, val_file, app = MODELS[a.model]
    model_path, val_path = os.path.join(ROOT, "zoo", model_file), os.path.join(ROOT, "zoo", val_file)
    cores = os.cpu_count() or 1
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{a.model}: {cores} cores, {started}", flush=True)

    raw = raw_ort(model_path, val_path)
    print(f"  raw ONNX Runtime, one thread: batch 1 {raw['b1_ms']:.2f} ms; rows/s "
          + ", ".join(f"b{b} {r:.0f}" for b, r in raw["rows_per_s"].items()), flush=True)

    # The server reads `<name>.onnx` and `<name>-val.npz` from one directory.
    models = tempfile.mkdtemp(prefix="infaas-real-models-")
    os.symlink(model_path, os.path.join(models, f"{a.model}.onnx"))
    os.symlink(val_path, os.path.join(models, f"{a.model}-val.npz"))
    twin = f"{a.model}-edge-twin"
    edge_twin(model_path, os.path.join(models, f"{twin}.onnx"))
    os.symlink(val_path, os.path.join(models, f"{twin}-val.npz"))
    server = serving.Server(a.binary, models, shlex.split(a.server_args))
    try:
        healthz = serving.wrk(server, "/healthz", None, {}, 16, 5)
        rows = ["--npz", val_path]
        if "x" in np.load(val_path).files:
            import onnxruntime as ort
            rows += ["--input", ort.InferenceSession(model_path, providers=["CPUExecutionProvider"]).get_inputs()[0].name]
        server.register(twin, "edge-twin")
        cap = measure_capacity(a.binary, server, "edge-twin", rows, cores, raw["best_rows_per_s"], a.connections)
        capacity, path, request_ms = cap["capacity"], cap["path"], cap["request_ms"]
        slo = 10.0 * raw["b1_ms"]
        print(f"  /healthz {healthz['rps']:.0f} req/s; the edge twin (this model's requests, no model): "
              f"at most {cap['twin_rps']:.0f} req/s; one at a time p50 {path['p50_ms']:.2f} ms, p99 {path['p99_ms']:.2f} ms; "
              f"at {cap['probe_rps']:.0f} req/s {request_ms:.3f} core-ms a request (server {cap['server_ms']:.3f}, "
              f"client {cap['client_ms']:.3f}); capacity {capacity:.1f} rows/s ({cores} cores x best "
              f"{raw['best_rows_per_s']:.0f} rows/s, less the requests' cost); SLO {slo:.1f} ms", flush=True)
        t0 = time.time()
        server.register(a.model, app)
        print(f"  registered in {time.time() - t0:.1f} s", flush=True)
        acc = ["--min-accuracy", str(a.min_accuracy)] if a.min_accuracy is not None else []
        base = ["--app", app, *rows, "--latency-ms", f"{slo:.3f}", *acc]
        results, simulated = {}, {}
        work = tempfile.mkdtemp(prefix="infaas-real-traces-")
        for frac in (0.5, 0.8):
            trace = os.path.join(work, f"{frac}.csv")
            n = write_trace(trace, app, frac * capacity, a.duration, slo, seed=int(frac * 10),
                            min_accuracy=a.min_accuracy)
            results[f"{frac}x"] = phase(
                a.binary, server, f"{frac}x ({frac * capacity:.0f} q/s Poisson, {n} queries, {a.duration:.0f} s)",
                ["--trace", trace, *rows])
            with open(trace) as f:
                sim = whatif(server, f.read(), cores, path["percentiles_ms"], request_ms)
            simulated[f"{frac}x"] = sim
            real = results[f"{frac}x"].get("slo_attainment") or 0.0
            print(f"    simulated (what-if, same trace): attainment {100 * sim['slo_attainment']:.2f}% "
                  f"({100 * (sim['slo_attainment'] - real):+.2f} points), p50 {sim['p50_ms']:.1f} ms, "
                  f"p99 {sim['p99_ms']:.1f} ms", flush=True)
        results["saturation"] = phase(
            a.binary, server, f"saturation ({a.connections} closed-loop clients, {a.duration:.0f} s)",
            [*base, "--rate", "0", "--connections", str(a.connections), "--duration", f"{a.duration}"])
        sat = results["saturation"]["throughput_per_s"] / capacity
        events = server.scaling_events(app)
        # Run time under load beside the idle profile: each serving variant's median run
        # (p50 over its latest 1,000 runs) and the mean batch of its runs in the phase.
        profiles = profile_ms(server, a.model)
        for k, r in results.items():
            runs = r["threads"].get("runs", {})
            for v, run in runs.items():
                run["profile_ms"] = profiles.get(v, {})
            print(f"  {k}: runs under load: "
                  + ", ".join(f"{v.split('.', 1)[1]} p50 {run['exec_p50_ms']:.2f} ms at a mean batch of "
                              f"{run['mean_batch']:.2f} (idle profile at batch 1: "
                              f"{run['profile_ms'].get(1, float('nan')):.2f} ms)"
                              for v, run in runs.items()),
                  flush=True)
        report = {
            "model": a.model, "date": started, "cores": cores, "raw_ort": raw,
            "healthz_rps": healthz["rps"], "edge_twin_rps": cap["twin_rps"], "capacity_rows_per_s": capacity, "slo_ms": slo,
            "phases": results, "simulated": simulated, "saturation_ratio": sat, "scaling_events": events,
            "request_path_idle": {k: path[k] for k in ("p50_ms", "p99_ms")},
            "request_cpu_ms": {"server": cap["server_ms"], "client": cap["client_ms"], "at_rps": cap["probe_rps"]},
        }
        print(f"  saturation: {sat:.2f}x of capacity; scaling events: {events}")
        print()
        print("| load | offered q/s | SLO attained | simulated | p50 | p99 | served q/s | busy threads max / cores | samples over |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k, r in results.items():
            t = r["threads"]
            offered = "closed loop" if k == "saturation" else f"{float(k[:-1]) * capacity:.0f}"
            sim = simulated.get(k)
            sim_text = f"{100 * sim['slo_attainment']:.2f}%" if sim else "-"
            print(f"| {k} | {offered} | {100 * (r.get('slo_attainment') or 0):.2f}% | {sim_text} "
                  f"| {r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['throughput_per_s']:.0f} "
                  f"| {t.get('max_busy_threads')} / {t.get('cores')} "
                  f"| {t.get('samples_over_cores')} of {t.get('samples')} |")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(report, f, indent=2)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
