"""Drives a running infaas server with the unmodified Python `tritonclient.http` client
(Open Inference Protocol v2) and compares the answers with ONNX Runtime on the same model.

Usage: triton_client.py URL TOKEN MODEL_NAME MODEL_FILE VALIDATION_NPZ
Exits non-zero (with a message) on any mismatch.
"""

import sys

import numpy as np
import onnxruntime as ort
import tritonclient.http as httpclient


def main() -> int:
    url, token, name, model_file, npz = sys.argv[1:6]
    headers = {"Authorization": f"Bearer {token}"}
    client = httpclient.InferenceServerClient(url=url.replace("http://", ""))
    assert client.is_server_live(headers=headers), "server not live"
    assert client.is_server_ready(headers=headers), "server not ready"
    meta = client.get_server_metadata(headers=headers)
    assert "binary_tensor_data" in meta["extensions"], meta
    assert client.is_model_ready(name, headers=headers), f"model {name} not ready"
    model_meta = client.get_model_metadata(name, headers=headers)
    input_name = model_meta["inputs"][0]["name"]
    outputs = [o["name"] for o in model_meta["outputs"]]

    x = np.load(npz)["x"][:8].astype(np.float32)
    session = ort.InferenceSession(model_file, providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, {input_name: x})))

    for binary in (False, True):
        inp = httpclient.InferInput(input_name, list(x.shape), "FP32")
        inp.set_data_from_numpy(x, binary_data=binary)
        requested = [httpclient.InferRequestedOutput(o, binary_data=binary) for o in outputs]
        result = client.infer(name, [inp], outputs=requested, headers=headers)
        for o in outputs:
            got = result.as_numpy(o)
            want = expected[o]
            if got is None:
                print(f"binary={binary}: output {o} missing", file=sys.stderr)
                return 1
            if want.dtype.kind in "iub":
                ok = np.array_equal(got.reshape(want.shape), want)
            else:
                ok = np.allclose(got.reshape(want.shape), want, atol=1e-5)
            if not ok:
                print(f"binary={binary}: output {o} differs from ONNX Runtime:\n{got}\n{want}", file=sys.stderr)
                return 1
        params = result.get_response().get("parameters", {})
        print(f"binary={binary}: {len(outputs)} outputs equal ONNX Runtime's; variant {params.get('variant')}")

    # Default request (no outputs listed): the client asks for every output in binary.
    inp = httpclient.InferInput(input_name, list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    result = client.infer(name, [inp], headers=headers)
    for o in outputs:
        assert result.as_numpy(o) is not None, f"default request: {o} missing"

    # A wrong input name is a 400 that names the tensor.
    bad = httpclient.InferInput("no_such_input", [1, 3], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 3), dtype=np.float32))
    try:
        client.infer(name, [bad], headers=headers)
        print("a bad input was accepted", file=sys.stderr)
        return 1
    except httpclient.InferenceServerException as e:
        print(f"bad input rejected: {e.message()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
