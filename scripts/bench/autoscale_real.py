#!/usr/bin/env python3
"""The platform's autoscaling on the real server with a milliseconds-a-row model, against fixed
peak provisioning, on this machine's cores, in one run.

The model (the zoo's residual CNN by default) is registered on a fresh server twice:
  autoscaled  `infaas serve` with its defaults (the model autoscaler on); warmed up at the low
              rate;
  fixed peak  `infaas serve --autoscale false`, warmed up at the high rate, so the query path
              loads what the peak needs, which then stays loaded (nothing scales in).
Both then get the same Poisson 1-row queries in three phases (low, high, low again; rates as
fractions of the machine's capacity for the model, measured in the same run as
scripts/bench/real_models.py measures it), with an SLO of 10x the model's batch-1 latency.

Per setup and phase: SLO attainment, p50/p99 (the platform's `infaas loadgen`), and the cores
the loaded instances hold (their intra-op threads, sampled every 250 ms from `GET
/v1/workers`), summed over the run as core-seconds: the cost, priced per core as the platform
prices it. The low phase after the surge is longer than the peak hold (60 s), so the
autoscaled server gives back what the surge needed.

`--model-interval-ms 250,1000` runs the autoscaled setup once per model-autoscaler period
(`autoscale.model_interval_ms`, written to a configuration file), beside the one fixed peak.

Usage: autoscale_real.py --binary B [--model cifar-resnet] [--low 0.15] [--high 0.6]
                         [--phases 30,60,150] [--model-interval-ms MS[,MS...]] [--json OUT]
Called by scripts/bench/autoscale_real.sh, which builds the binary first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import serving  # noqa: E402
import real_models  # noqa: E402  (capacity, traces, the load generator)

# The platform's default price of one CPU core for one second (scheduler::Prices).
CORE_PER_S = 0.0000117


class Holding(threading.Thread):
    """Samples `GET /v1/workers` every 250 ms: the threads of every loaded instance."""

    def __init__(self, server: serving.Server):
        super().__init__(daemon=True)
        self.server, self.running, self.samples = server, True, []

    def run(self) -> None:
        while self.running:
            s, b = serving.http("GET", f"{self.server.base}/v1/workers", headers=self.server.auth)
            if s == 200:
                threads = sum(i["threads"] for w in json.loads(b)["workers"] for i in w["instances"])
                self.samples.append((time.time(), threads))
            time.sleep(0.25)

    def core_seconds(self, since: float, until: float) -> float:
        """Threads held, integrated over [since, until] (each sample holds until the next)."""
        total = 0.0
        for (t, n), (t2, _) in zip(self.samples, self.samples[1:] + [(until, 0)]):
            a, b = max(t, since), min(t2, until)
            if b > a:
                total += n * (b - a)
        return total


def setup(a, name: str, extra: list[str], warm_rate: float, capacity: float, slo: float,
          models: str, rows: list[str], work: str, app: str) -> dict:
    server = serving.Server(a.binary, models, extra)
    try:
        server.register(a.model, app)
        warm = os.path.join(work, f"{name}-warm.csv")
        real_models.write_trace(warm, app, warm_rate, a.warmup, slo, seed=7)
        real_models.loadgen(a.binary, server, ["--trace", warm, *rows])
        holding = Holding(server)
        holding.start()
        time.sleep(0.5)
        phases = []
        start = time.time()
        for k, (frac, secs) in enumerate(zip((a.low, a.high, a.low), a.phases)):
            trace = os.path.join(work, f"{name}-{k}.csv")
            n = real_models.write_trace(trace, app, frac * capacity, secs, slo, seed=11 + k)
            t0 = time.time()
            r = real_models.loadgen(a.binary, server, ["--trace", trace, *rows])
            t1 = time.time()
            cs = holding.core_seconds(t0, t1)
            phases.append({
                "rate": frac * capacity, "seconds": secs, "queries": n,
                "slo_attainment": r.get("slo_attainment") or 0.0,
                "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
                "core_seconds": cs, "mean_cores": cs / max(t1 - t0, 1e-9),
            })
            p = phases[-1]
            print(f"  {name} phase {k + 1} ({frac:.2f}x, {p['rate']:.0f} q/s, {secs:.0f} s): "
                  f"attainment {100 * p['slo_attainment']:.2f}%, p50 {p['p50_ms']:.1f} ms, "
                  f"p99 {p['p99_ms']:.1f} ms, mean cores held {p['mean_cores']:.2f}", flush=True)
        holding.running = False
        holding.join()
        queries = sum(p["queries"] for p in phases)
        met = sum(p["queries"] * p["slo_attainment"] for p in phases)
        core_s = sum(p["core_seconds"] for p in phases)
        return {
            "phases": phases,
            "slo_attainment": met / max(queries, 1),
            "core_seconds": core_s,
            "cost_usd": core_s * CORE_PER_S,
            # Each event as `action@seconds` since the first phase began (the phases start at
            # 0 and at the ends of the phases before).
            "scaling_events": [f"{action}@{t - start:.1f}s"
                               for t, action in sorted(server.scaling_events_at(app))
                               if t >= start],
        }
    finally:
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", default="cifar-resnet", choices=sorted(real_models.MODELS))
    ap.add_argument("--low", type=float, default=0.15, help="low rate, fraction of capacity")
    ap.add_argument("--high", type=float, default=0.6, help="high rate, fraction of capacity")
    ap.add_argument("--phases", default="30,60,150", help="seconds of low, high, low")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--model-interval-ms", default="",
                    help="autoscaled runs at these model periods, comma-separated (default: the server's)")
    ap.add_argument("--json")
    a = ap.parse_args()
    periods = [int(x) for x in a.model_interval_ms.split(",") if x.strip()]
    a.phases = [float(x) for x in a.phases.split(",")]
    if len(a.phases) != 3:
        raise SystemExit("--phases takes three durations: low, high, low")
    model_file, val_file, app = real_models.MODELS[a.model]
    model_path, val_path = os.path.join(ROOT, "zoo", model_file), os.path.join(ROOT, "zoo", val_file)
    cores = os.cpu_count() or 1
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{a.model}: {cores} cores, {started}", flush=True)
    raw = real_models.raw_ort(model_path, val_path)
    models = tempfile.mkdtemp(prefix="infaas-autoscale-models-")
    os.symlink(model_path, os.path.join(models, f"{a.model}.onnx"))
    os.symlink(val_path, os.path.join(models, f"{a.model}-val.npz"))
    twin = f"{a.model}-edge-twin"
    real_models.edge_twin(model_path, os.path.join(models, f"{twin}.onnx"))
    os.symlink(val_path, os.path.join(models, f"{twin}-val.npz"))
    rows = ["--npz", val_path]
    if "x" in np.load(val_path).files:
        import onnxruntime as ort
        rows += ["--input", ort.InferenceSession(model_path, providers=["CPUExecutionProvider"]).get_inputs()[0].name]
    # The machine's capacity for the model, as scripts/bench/real_models.py measures it.
    server = serving.Server(a.binary, models, [])
    try:
        server.register(twin, "edge-twin")
        capacity = real_models.measure_capacity(a.binary, server, "edge-twin", rows, cores,
                                                raw["best_rows_per_s"], 32)["capacity"]
    finally:
        server.stop()
    slo = 10.0 * raw["b1_ms"]
    print(f"  capacity {capacity:.1f} rows/s; SLO {slo:.1f} ms; low {a.low:.2f}x, high {a.high:.2f}x, "
          f"phases {a.phases} s", flush=True)
    work = tempfile.mkdtemp(prefix="infaas-autoscale-traces-")
    common = (capacity, slo, models, rows, work, app)
    autos = []
    for ms in periods or [None]:
        extra, name = [], "autoscaled"
        if ms is not None:
            conf = os.path.join(work, f"period-{ms}.toml")
            with open(conf, "w") as f:
                f.write(f"[autoscale]\nmodel_interval_ms = {ms}\n")
            extra, name = ["--config", conf], f"autoscaled, {ms} ms period"
        autos.append((name, ms, setup(a, name.replace(", ", "-").replace(" ", "-"), extra,
                                      a.low * capacity, *common)))
    fixed = setup(a, "fixed-peak", ["--autoscale", "false"], a.high * capacity, *common)
    auto = autos[0][2]
    report = {"model": a.model, "date": started, "cores": cores, "capacity_rows_per_s": capacity,
              "slo_ms": slo, "autoscaled": auto, "fixed_peak": fixed,
              "cost_ratio": auto["cost_usd"] / max(fixed["cost_usd"], 1e-12),
              "by_model_interval_ms": [{"model_interval_ms": ms, **r} for _, ms, r in autos]}
    print()
    print("| setup | low | high | low after | all | core-seconds | cost / fixed peak |")
    print("|---|---|---|---|---|---|---|")
    for name, r in [(n, r) for n, _, r in autos] + [("fixed peak (`--autoscale false`)", fixed)]:
        ph = " | ".join(f"{100 * p['slo_attainment']:.2f}%" for p in r["phases"])
        print(f"| {name} | {ph} | {100 * r['slo_attainment']:.2f}% | {r['core_seconds']:.0f} "
              f"| {r['cost_usd'] / max(fixed['cost_usd'], 1e-12):.2f}x |")
    for name, _, r in autos:
        print(f"\nscaling events ({name}): {r['scaling_events']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
