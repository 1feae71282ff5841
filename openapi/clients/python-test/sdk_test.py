"""The generated Python client (openapi/clients/python) against a live server: token,
registration (and a refused one), a model-less query, and jobs (multipart with a file,
JSON over a path of the file area) followed to the end with their results.

Run by infaas/tests/integration/sdk_clients.rs, which starts the server and sets INFAAS_URL,
INFAAS_API_KEY, INFAAS_ZOO (the zoo directory) and INFAAS_SDK_DATA (JSON {"x": rows of
digits-val.npz, "y": their labels}), with openapi/clients/python on PYTHONPATH.
"""

import io
import json
import os
import sys
import time

from infaas_client import AuthenticatedClient, Client
from infaas_client.api.auth import me, token
from infaas_client.api.inference import infer_app
from infaas_client.api.jobs import list_jobs, results, show_job, submit
from infaas_client.api.models import register, show_model
from infaas_client.models import (
    Datatype,
    ErrorBody,
    InferRequest,
    InferResponse,
    JobForm,
    JobRequest,
    JobView,
    ModelView,
    RegisterForm,
    TensorJson,
    TokenRequest,
    TokenResponse,
)
from infaas_client.types import File

APP = "digits"
MODEL = "digits-logreg"


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"{name} is not set (this test is run by infaas/tests/integration/sdk_clients.rs)")
    return value


def checked(what):
    print(f"checked: {what}", flush=True)


def until(what, poll, done, timeout=120.0):
    start = time.monotonic()
    while True:
        value = poll()
        if done(value):
            return value
        assert time.monotonic() - start < timeout, f"{what}: not done after {timeout} s: {value}"
        time.sleep(0.1)


def zoo_file(name):
    with open(os.path.join(env("INFAAS_ZOO"), name), "rb") as f:
        return File(payload=io.BytesIO(f.read()), file_name=name)


def finished(client, job_id):
    job = until(
        f"job {job_id}",
        lambda: show_job.sync(client=client, id=job_id),
        lambda j: isinstance(j, JobView) and j.state in ("succeeded", "failed", "cancelled"),
    )
    assert job.state == "succeeded", job
    assert job.items_done == job.items_total, job
    return job


def result_items(client, job_id):
    r = results.sync_detailed(client=client, id=job_id)
    assert r.status_code == 200, r
    assert r.headers.get("x-infaas-complete") == "true", r.headers
    return [json.loads(line)["item"] for line in r.content.decode().splitlines() if line]


def main():
    url = env("INFAAS_URL")
    with open(env("INFAAS_SDK_DATA")) as f:
        data = json.load(f)

    # Tokens: a wrong key is refused with the error body; the right one gives a token.
    anonymous = Client(base_url=url, raise_on_unexpected_status=True)
    refused = token.sync_detailed(client=anonymous, body=TokenRequest(api_key="infaas_wrong"))
    assert refused.status_code == 401 and isinstance(refused.parsed, ErrorBody), refused
    answer = token.sync(client=anonymous, body=TokenRequest(api_key=env("INFAAS_API_KEY")))
    assert isinstance(answer, TokenResponse), answer
    client = AuthenticatedClient(base_url=url, token=answer.access_token, raise_on_unexpected_status=True)
    who = me.sync(client=client)
    assert who.tenant, who
    checked(f"token for tenant {who.tenant}")

    # Registration: a file that is not ONNX is refused, naming the problem.
    bad = register.sync_detailed(
        client=client,
        body=RegisterForm(
            name="broken",
            app=APP,
            model=File(payload=io.BytesIO(b"not onnx"), file_name="broken.onnx"),
            validation=zoo_file("digits-val.npz"),
        ),
    )
    assert bad.status_code == 400 and isinstance(bad.parsed, ErrorBody), bad
    assert bad.parsed.error_type == "bad_request", bad.parsed
    checked(f"refused registration: {bad.parsed.error}")

    accepted = register.sync(
        client=client,
        body=RegisterForm(
            name=MODEL,
            app=APP,
            model=zoo_file("digits-logreg.onnx"),
            validation=zoo_file("digits-val.npz"),
        ),
    )
    assert isinstance(accepted, ModelView) and accepted.name == MODEL, accepted
    ready = until(
        "registration",
        lambda: show_model.sync(client=client, name=MODEL),
        lambda m: m.status in ("ready", "failed"),
    )
    assert ready.status == "ready", ready
    assert ready.variants, ready
    checked(f"registered {MODEL} with {len(ready.variants)} variants")

    # A model-less query of the rows: labels come back, mostly the right ones.
    rows = len(data["x"])
    flat = [v for row in data["x"] for v in row]
    out = infer_app.sync(
        client=client,
        app=APP,
        body=InferRequest(
            inputs=[TensorJson(name="input", shape=[rows, 64], datatype=Datatype.FP32, data=flat)],
            latency_ms=1000.0,
            min_accuracy=0.5,
        ),
    )
    assert isinstance(out, InferResponse), out
    assert out.variant.startswith(MODEL), out.variant
    assert out.reason, out
    labels = next(o for o in out.outputs if o.datatype == "INT64")
    assert labels.shape == [rows], labels
    right = sum(1 for got, want in zip(labels.data, data["y"]) if got == want)
    assert right >= rows - 2, f"only {right} of {rows} labels right"
    checked(f"infer on {out.variant}: {right}/{rows} labels right ({out.reason})")

    impossible = infer_app.sync_detailed(
        client=client,
        app=APP,
        body=InferRequest(
            inputs=[TensorJson(name="input", shape=[1, 64], datatype=Datatype.FP32, data=data["x"][0])],
            min_accuracy=1.5,
        ),
    )
    assert 400 <= impossible.status_code < 500 and isinstance(impossible.parsed, ErrorBody), impossible
    checked(f"refused query ({impossible.status_code}): {impossible.parsed.error}")

    # A job with its input uploaded in the same request, then one over that input's path.
    job = submit.sync(
        client=client,
        body=JobForm(input_=[zoo_file("digits-val.npz")], app=APP, min_accuracy=0.5),
    )
    assert isinstance(job, JobView), job
    first = finished(client, job.id)
    items = result_items(client, first.id)
    assert items == list(range(first.items_total)), items[:10]
    checked(f"job {first.id} (multipart): {first.items_done}/{first.items_total} items on {first.variant}")

    job = submit.sync(
        client=client,
        body=JobRequest(input_path=first.input_path, model=MODEL, output_path="sdk/python"),
    )
    assert isinstance(job, JobView), job
    second = finished(client, job.id)
    assert second.output_path == "sdk/python", second
    assert second.items_total == first.items_total, second
    listed = list_jobs.sync(client=client)
    assert sorted(j.id for j in listed.jobs) == sorted([first.id, second.id]), listed
    checked(f"job {second.id} (JSON): {second.items_done}/{second.items_total} items")
    print("python SDK: all checks passed")


if __name__ == "__main__":
    main()
