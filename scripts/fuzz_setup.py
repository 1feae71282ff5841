"""Resources for scripts/fuzz-api.sh: a registered model and a stored file, so that generated
requests that name them (openapi/schemathesis.toml) reach the code behind the 404s.

Usage: python3 fuzz_setup.py PORT TOKEN ZOO_DIR
"""

import json
import sys
import time
import urllib.request
import uuid


def main() -> None:
    port, token, zoo = sys.argv[1:4]
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"}

    boundary = uuid.uuid4().hex
    parts = []
    for name, value in [("name", "fuzz-model"), ("app", "fuzz-app")]:
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, path in [("model", "digits-mlp-s.onnx"), ("validation", "digits-val.npz")]:
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
            headers={**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
    )
    with open(f"{zoo}/digits-val.npz", "rb") as f:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{base}/v1/files/fuzz/inputs.npz",
                data=f.read(),
                method="PUT",
                headers={**auth, "Content-Type": "application/octet-stream"},
            )
        )
    for _ in range(600):
        req = urllib.request.Request(f"{base}/v1/models/fuzz-model", headers=auth)
        model = json.load(urllib.request.urlopen(req))
        if model["status"] == "ready":
            return
        if model["status"] == "failed":
            sys.exit(f"registration failed: {model}")
        time.sleep(0.5)
    sys.exit("the model was not ready within 300 s")


if __name__ == "__main__":
    main()
