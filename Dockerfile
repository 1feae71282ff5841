# The infaas controller image: a release build of `infaas` on Debian bookworm, with the
# ONNX Runtime library taken from the official Python wheel (no Python in the final image).
#
#   docker build -t infaas .      (or `docker compose build`)

FROM rust:1.95-bookworm AS builder
# The CBC MILP solver that infaas-scheduler links (scripts/lib.sh BUILD_DEBS).
RUN apt-get update \
    && apt-get install -y --no-install-recommends coinor-libcbc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p infaas --bin infaas \
    && cp target/release/infaas /usr/local/bin/infaas

# Only the shared library is kept from this stage.
FROM python:3.11-slim AS onnxruntime
RUN pip install --no-cache-dir onnxruntime==1.31.1 \
    && cp "$(python -c 'import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))')/capi/libonnxruntime.so.1.31.1" \
          /libonnxruntime.so.1.31.1

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates coinor-libcbc3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/infaas infaas
COPY --from=builder /usr/local/bin/infaas /usr/local/bin/infaas
COPY --from=onnxruntime /libonnxruntime.so.1.31.1 /usr/local/lib/libonnxruntime.so.1.31.1
ENV INFAAS_ORT_DYLIB_PATH=/usr/local/lib/libonnxruntime.so.1.31.1 \
    INFAAS_DATA_DIR=/var/lib/infaas \
    INFAAS_LISTEN=0.0.0.0:8080 \
    INFAAS_GRPC_LISTEN=0.0.0.0:8001
USER infaas
WORKDIR /var/lib/infaas
EXPOSE 8080 8001
CMD ["infaas", "serve"]
