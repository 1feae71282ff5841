// The TypeScript client against a live server: token, registration (and a refused one),
// a model-less query, and jobs (multipart with a file, JSON over a path of the file area)
// followed to the end with their results.
//
// Run by infaas/tests/integration/sdk_clients.rs, which starts the server and sets:
//   INFAAS_URL, INFAAS_API_KEY, INFAAS_ZOO (the zoo directory),
//   INFAAS_SDK_DATA (JSON {"x": rows of digits-val.npz, "y": their labels}).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { type InfaasClient, type Schemas, createInfaasClient, login, multipart } from "../src/index.js";

function env(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (this test is run by infaas/tests/integration/sdk_clients.rs)`);
  return v;
}

const url = env("INFAAS_URL");
const zoo = env("INFAAS_ZOO");
const data = JSON.parse(readFileSync(env("INFAAS_SDK_DATA"), "utf8")) as { x: number[][]; y: number[] };
const APP = "digits";
const MODEL = "digits-logreg";

function checked(what: string): void {
  console.log(`checked: ${what}`);
}

async function until<T>(what: string, poll: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await poll();
    if (done(v)) return v;
    if (Date.now() - start > 120_000) throw new Error(`${what}: not done after 120 s: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function job(client: InfaasClient, id: string): Promise<Schemas["JobView"]> {
  const { data: j, error } = await client.GET("/v1/jobs/{id}", { params: { path: { id } } });
  assert.ok(j, `GET job ${id}: ${JSON.stringify(error)}`);
  return j;
}

async function finished(client: InfaasClient, id: string): Promise<Schemas["JobView"]> {
  const j = await until(`job ${id}`, () => job(client, id), (j) =>
    ["succeeded", "failed", "cancelled"].includes(j.state),
  );
  assert.equal(j.state, "succeeded", JSON.stringify(j));
  assert.equal(j.items_done, j.items_total);
  return j;
}

async function resultLines(client: InfaasClient, id: string): Promise<{ item: number }[]> {
  const { data: text, response } = await client.GET("/v1/jobs/{id}/results", {
    params: { path: { id } },
    parseAs: "text",
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get("x-infaas-complete"), "true");
  return (text ?? "")
    .split("\n")
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as { item: number });
}

test("the TypeScript client against a live server", async () => {
  // A wrong key is refused with the JSON error body.
  await assert.rejects(login(url, "infaas_wrong"), /401/);
  const client = await login(url, env("INFAAS_API_KEY"));
  const me = await client.GET("/v1/me");
  assert.equal(me.response.status, 200, JSON.stringify(me.error));
  assert.ok(me.data?.tenant);
  checked(`token for tenant ${me.data.tenant}`);

  // Registration: a file that is not ONNX is refused, naming the problem.
  const validation = new File([readFileSync(join(zoo, "digits-val.npz"))], "digits-val.npz");
  const bad = await client.POST("/v1/models", {
    body: {
      name: "broken",
      app: APP,
      model: new File([new TextEncoder().encode("not onnx")], "broken.onnx") as unknown as string,
      validation: validation as unknown as string,
    },
    bodySerializer: multipart,
  });
  assert.equal(bad.response.status, 400);
  assert.equal(bad.error?.error_type, "bad_request", JSON.stringify(bad.error));
  checked("refused registration: " + bad.error?.error);

  const registered = await client.POST("/v1/models", {
    body: {
      name: MODEL,
      app: APP,
      model: new File([readFileSync(join(zoo, "digits-logreg.onnx"))], "digits-logreg.onnx") as unknown as string,
      validation: validation as unknown as string,
    },
    bodySerializer: multipart,
  });
  assert.equal(registered.response.status, 202, JSON.stringify(registered.error));
  assert.equal(registered.data?.name, MODEL);
  const ready = await until(
    "registration",
    async () => (await client.GET("/v1/models/{name}", { params: { path: { name: MODEL } } })).data,
    (m) => m?.status === "ready" || m?.status === "failed",
  );
  assert.equal(ready?.status, "ready", JSON.stringify(ready));
  assert.ok((ready?.variants.length ?? 0) > 0);
  checked(`registered ${MODEL} with ${ready?.variants.length} variants`);

  // A model-less query of the rows: labels come back, mostly the right ones.
  const rows = data.x.length;
  const answer = await client.POST("/v1/apps/{app}/infer", {
    params: { path: { app: APP } },
    body: {
      inputs: [{ name: "input", shape: [rows, 64], datatype: "FP32", data: data.x.flat() }],
      latency_ms: 1000,
      min_accuracy: 0.5,
    },
  });
  assert.equal(answer.response.status, 200, JSON.stringify(answer.error));
  const a = answer.data!;
  assert.ok(a.variant.startsWith(MODEL), a.variant);
  assert.ok(a.reason.length > 0);
  const labels = a.outputs.find((o) => o.datatype === "INT64");
  assert.ok(labels, JSON.stringify(a.outputs));
  assert.deepEqual(labels.shape, [rows]);
  const right = (labels.data as number[]).filter((l, i) => l === data.y[i]).length;
  assert.ok(right >= rows - 2, `only ${right} of ${rows} labels right`);
  checked(`infer on ${a.variant}: ${right}/${rows} labels right (${a.reason})`);

  // Unsatisfiable requirements: a 4xx with the error body.
  const impossible = await client.POST("/v1/apps/{app}/infer", {
    params: { path: { app: APP } },
    body: { inputs: [{ name: "input", shape: [1, 64], datatype: "FP32", data: data.x[0]! }], min_accuracy: 1.5 },
  });
  assert.ok(impossible.response.status >= 400 && impossible.response.status < 500);
  assert.ok(impossible.error?.error);
  checked(`refused query (${impossible.response.status}): ${impossible.error?.error}`);

  // A job with its input uploaded in the same request, then one over that input's path.
  const submitted = await client.POST("/v1/jobs", {
    body: { input: [validation], app: APP, min_accuracy: 0.5 } as unknown as Schemas["JobForm"],
    bodySerializer: multipart,
  });
  assert.equal(submitted.response.status, 202, JSON.stringify(submitted.error));
  const first = await finished(client, submitted.data!.id);
  const lines = await resultLines(client, first.id);
  assert.equal(lines.length, first.items_total);
  assert.deepEqual(
    lines.map((l) => l.item),
    [...Array(first.items_total).keys()],
  );
  checked(`job ${first.id} (multipart): ${first.items_done}/${first.items_total} items on ${first.variant}`);

  const byPath = await client.POST("/v1/jobs", {
    body: { input_path: first.input_path, model: MODEL, output_path: "sdk/typescript" },
  });
  assert.equal(byPath.response.status, 202, JSON.stringify(byPath.error));
  const second = await finished(client, byPath.data!.id);
  assert.equal(second.output_path, "sdk/typescript");
  assert.equal(second.items_total, first.items_total);
  const listed = await client.GET("/v1/jobs");
  assert.deepEqual(
    listed.data?.jobs.map((j) => j.id).sort(),
    [first.id, second.id].sort(),
  );
  checked(`job ${second.id} (JSON): ${second.items_done}/${second.items_total} items`);

  // Another client without a token is refused.
  const anonymous = await createInfaasClient(url).GET("/v1/jobs");
  assert.equal(anonymous.response.status, 401);
  checked("requests without a token are refused");
});
