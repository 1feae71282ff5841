#!/usr/bin/env python3
"""What a query costs on a cluster of controller replicas, against one controller, on the same
machine in the same run: the release binary on Postgres and S3, one small model (`bench-mlp`),
`infaas loadgen` (Poisson, 1-row queries) at a fixed rate.

Three setups, each on a fresh Postgres schema, with the same one worker (the first controller's
embedded worker; the others host nothing):
  one       one `infaas serve`, queries through it;
  3-local   three replicas, queries through the one whose embedded worker serves them;
  3-remote  three replicas, queries through another one (each query crosses to the worker's
            replica over HTTP, as it does when a load balancer picks a replica without the
            instance).
Per setup: the CPU time all controller processes spent per query during the load (from
/proc/PID/stat), their CPU time per second when idle (the election, heartbeats and the arrival
exchange), and loadgen's p50/p99.

Usage: replicas.py --binary B --models DIR --database-url URL --object-store S3URL
                   --s3-endpoint URL [--rate 200] [--duration 20]
Called by scripts/bench/replicas.sh, which starts the services and builds the binary first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

from serving import free_port, http, register_model, stop_process, wait_until_ready

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICKS


class Replica:
    def __init__(self, args, database_url: str, threads: int):
        self.dir = tempfile.mkdtemp(prefix="infaas-replica-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        env = dict(os.environ, INFAAS_LOG_LEVEL="warn")
        self.proc = subprocess.Popen(
            [args.binary, "serve", "--data-dir", self.dir, "--listen", f"127.0.0.1:{self.port}",
             "--grpc-listen", "off", "--database-url", database_url,
             "--object-store", args.object_store, "--s3-endpoint", args.s3_endpoint,
             "--worker-thread-budget", str(threads)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self) -> None:
        wait_until_ready(self.base + "/readyz", self.log.name, 600)

    def stop(self) -> None:
        stop_process(self.proc, self.log, self.dir)


def fresh_schema(database_url: str) -> str:
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", database_url, "-qc", f"CREATE SCHEMA {schema}"], check=True)
    sep = "&" if "?" in database_url else "?"
    return f"{database_url}{sep}options=-c%20search_path%3D{schema}"


def run_setup(args, label: str, replicas: int, through: int) -> dict:
    url = fresh_schema(args.database_url)
    # The first replica's embedded worker serves; the others host nothing.
    nodes = [Replica(args, url, 2 if i == 0 else 0) for i in range(replicas)]
    try:
        for n in nodes:
            n.wait_ready()
        key = subprocess.run([args.binary, "admin", "--database-url", url, "create-tenant", "bench"],
                             check=True, capture_output=True, text=True).stdout.strip().split()[-1]
        subprocess.run([args.binary, "admin", "--database-url", url, "set-quotas", "bench", "--rps", "10000000"],
                       check=True, capture_output=True)
        s, b = http("POST", nodes[0].base + "/v1/auth/token", json.dumps({"api_key": key}).encode(),
                    {"content-type": "application/json"})
        assert s == 200, b
        auth = {"Authorization": f"Bearer {json.loads(b)['access_token']}"}
        register_model(nodes[0].base, auth, args.models, "bench-mlp", "bench")
        target = nodes[through]
        loadgen = [args.binary, "--server", target.base, "--api-key", key, "loadgen", "--app", "bench",
                   "--npz", os.path.join(args.models, "bench-mlp-val.npz"), "--json"]
        # Warm-up: the instance loads, every replica learns of the worker.
        subprocess.run(loadgen + ["--rate", str(args.rate), "--duration", "5"], check=True, capture_output=True)
        time.sleep(3)
        idle_from = [cpu_seconds(n.proc.pid) for n in nodes]
        time.sleep(args.idle)
        idle_cpu = sum(cpu_seconds(n.proc.pid) - c for n, c in zip(nodes, idle_from)) / args.idle
        before = [cpu_seconds(n.proc.pid) for n in nodes]
        out = subprocess.run(loadgen + ["--rate", str(args.rate), "--duration", str(args.duration)],
                             check=True, capture_output=True, text=True).stdout
        spent = sum(cpu_seconds(n.proc.pid) - c for n, c in zip(nodes, before))
        d = json.loads(out)
        answered = d["ok"]
        # What the idle loops spent meanwhile is not the queries'.
        per_query_ms = (spent - idle_cpu * args.duration) / max(answered, 1) * 1e3
        row = {"setup": label, "replicas": replicas, "answered": answered, "errors": sum(d["errors"].values()),
               "cpu_ms_per_query": per_query_ms, "idle_cpu_ms_per_s": idle_cpu * 1e3,
               "p50_ms": d["p50_ms"], "p99_ms": d["p99_ms"]}
        print(f"{label:>9}: {answered} queries, {row['errors']} errors; CPU {per_query_ms:.3f} ms/query "
              f"(all controllers, idle loops subtracted); idle {idle_cpu * 1e3:.1f} ms/s; "
              f"p50 {d['p50_ms']:.2f} ms, p99 {d['p99_ms']:.2f} ms", flush=True)
        return row
    finally:
        for n in nodes:
            n.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--database-url", required=True)
    p.add_argument("--object-store", required=True)
    p.add_argument("--s3-endpoint", required=True)
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--idle", type=int, default=10)
    p.add_argument("--json")
    args = p.parse_args()
    rows = [
        run_setup(args, "one", 1, 0),
        run_setup(args, "3-local", 3, 0),
        run_setup(args, "3-remote", 3, 1),
    ]
    base = rows[0]
    for r in rows[1:]:
        print(f"{r['setup']:>9} / one: CPU per query {r['cpu_ms_per_query'] / base['cpu_ms_per_query']:.2f}x, "
              f"p50 {r['p50_ms'] / base['p50_ms']:.2f}x, p99 {r['p99_ms'] / base['p99_ms']:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
