"""Drives a running infaas server with the unmodified Python `tritonclient.grpc` client
(Open Inference Protocol over gRPC) and compares the answers with ONNX Runtime on the same
model.

Usage: triton_grpc_client.py HOST:PORT TOKEN MODEL_NAME MODEL_FILE VALIDATION_NPZ
Exits non-zero (with a message) on any mismatch.
"""

import sys

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def main() -> int:
    url, token, name, model_file, npz = sys.argv[1:6]
    # gRPC metadata keys are lower case.
    headers = {"authorization": f"Bearer {token}"}
    client = grpcclient.InferenceServerClient(url=url)
    # Health needs no token.
    assert client.is_server_live(), "server not live"
    assert client.is_server_ready(), "server not ready"
    meta = client.get_server_metadata(headers=headers, as_json=True)
    assert meta["name"] == "infaas", meta
    assert "model_less" in meta["extensions"], meta
    assert client.is_model_ready(name, headers=headers), f"model {name} not ready"
    model_meta = client.get_model_metadata(name, headers=headers, as_json=True)
    input_name = model_meta["inputs"][0]["name"]
    outputs = [o["name"] for o in model_meta["outputs"]]

    x = np.load(npz)["x"][:8].astype(np.float32)
    session = ort.InferenceSession(model_file, providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, {input_name: x})))

    def check(result, names, what):
        for o in names:
            got = result.as_numpy(o)
            want = expected[o]
            if got is None:
                raise SystemExit(f"{what}: output {o} missing")
            if want.dtype.kind in "iub":
                ok = np.array_equal(got.reshape(want.shape), want)
            else:
                ok = np.allclose(got.reshape(want.shape), want, atol=1e-5)
            if not ok:
                raise SystemExit(f"{what}: output {o} differs from ONNX Runtime:\n{got}\n{want}")

    # Every output asked for, then none (the server answers with every output).
    inp = grpcclient.InferInput(input_name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    requested = [grpcclient.InferRequestedOutput(o) for o in outputs]
    result = client.infer(name, [inp], outputs=requested, headers=headers, request_id="r-1")
    check(result, outputs, "requested outputs")
    response = result.get_response(as_json=True)
    assert response["id"] == "r-1", response
    params = response.get("parameters", {})
    variant = params.get("variant", {}).get("string_param")
    assert variant, response
    print(f"{len(outputs)} outputs equal ONNX Runtime's; variant {variant}")
    result = client.infer(name, [inp], headers=headers)
    check(result, outputs, "default outputs")
    # One output: only that one comes back.
    result = client.infer(name, [inp], outputs=[grpcclient.InferRequestedOutput(outputs[-1])], headers=headers)
    check(result, outputs[-1:], "one output")
    assert result.as_numpy(outputs[0]) is None or len(outputs) == 1, "an output that was not asked for"

    # Model-less requirements as request parameters (an int, a float).
    result = client.infer(name, [inp], headers=headers, parameters={"latency_ms": 1000, "min_accuracy": 0.9})
    check(result, outputs, "with requirements")
    # gzip-compressed requests.
    result = client.infer(name, [inp], headers=headers, compression_algorithm="gzip")
    check(result, outputs, "gzip")

    def refused(what, code, call):
        try:
            call()
        except InferenceServerException as e:
            if code not in str(e.status()):
                raise SystemExit(f"{what}: status {e.status()}, expected {code}: {e.message()}")
            print(f"{what}: {e.status()} {e.message()}")
            return e.message()
        raise SystemExit(f"{what} was accepted")

    # A wrong input is refused, naming the tensor.
    bad = grpcclient.InferInput("no_such_input", [1, 3], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 3), dtype=np.float32))
    message = refused("bad input", "INVALID_ARGUMENT", lambda: client.infer(name, [bad], headers=headers))
    assert "no_such_input" in message or "input" in message, message
    refused("no token", "UNAUTHENTICATED", lambda: client.infer(name, [inp]))
    refused(
        "bad token",
        "UNAUTHENTICATED",
        lambda: client.infer(name, [inp], headers={"authorization": "Bearer nope"}),
    )
    refused("unknown model", "NOT_FOUND", lambda: client.get_model_metadata("no-such-model", headers=headers))
    refused("unimplemented method", "UNIMPLEMENTED", lambda: client.get_model_config(name, headers=headers))
    # Still serving.
    check(client.infer(name, [inp], headers=headers), outputs, "after the errors")
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
