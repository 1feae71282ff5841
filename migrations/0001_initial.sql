-- infaas metadata schema. Timestamps are milliseconds since the Unix epoch (BIGINT);
-- ids are UUID strings; structured settings are JSON text. Every tenant-owned row carries
-- tenant_id so that isolation is enforced in every query.

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    quota_rps DOUBLE PRECISION NOT NULL,
    quota_max_models BIGINT NOT NULL,
    quota_max_bytes BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    role TEXT NOT NULL,
    prefix TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

-- Bytes each tenant keeps in the object store, one row per object (stored-bytes quota,
-- and the list of what to delete when a resource goes).
CREATE TABLE objects (
    key TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    size_bytes BIGINT NOT NULL,
    owner_kind TEXT NOT NULL,
    owner_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX objects_tenant ON objects(tenant_id);
CREATE INDEX objects_owner ON objects(owner_kind, owner_id);

CREATE TABLE applications (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    default_latency_ms DOUBLE PRECISION,
    default_min_accuracy DOUBLE PRECISION,
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE models (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    app_id TEXT NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    task TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    progress DOUBLE PRECISION NOT NULL DEFAULT 0,
    progress_detail TEXT,
    source_key TEXT NOT NULL,
    validation_key TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    declared TEXT NOT NULL,
    signature TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX models_app ON models(app_id);
CREATE INDEX models_status ON models(status);

-- One row per distinct model file (source, ORT-optimised, INT8, FP16): accuracy is measured
-- once per file and shared by every variant built on it.
CREATE TABLE model_files (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    object_key TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    accuracy DOUBLE PRECISION,
    created_at BIGINT NOT NULL,
    UNIQUE (model_id, kind)
);

CREATE TABLE variants (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    file_id TEXT NOT NULL REFERENCES model_files(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    precision TEXT NOT NULL,
    optimization TEXT NOT NULL,
    hardware TEXT NOT NULL,
    threads BIGINT NOT NULL,
    max_batch BIGINT NOT NULL,
    status TEXT NOT NULL,
    accuracy DOUBLE PRECISION,
    load_ms DOUBLE PRECISION,
    memory_bytes BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);
CREATE INDEX variants_model ON variants(model_id);

CREATE TABLE variant_profiles (
    variant_id TEXT NOT NULL REFERENCES variants(id) ON DELETE CASCADE,
    batch_size BIGINT NOT NULL,
    p50_ms DOUBLE PRECISION NOT NULL,
    p99_ms DOUBLE PRECISION NOT NULL,
    mean_ms DOUBLE PRECISION NOT NULL,
    throughput_per_s DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (variant_id, batch_size)
);

-- Cluster infrastructure (shared by tenants; never exposed across tenants).
CREATE TABLE workers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    address TEXT,
    provider TEXT NOT NULL,
    hardware TEXT NOT NULL,
    cores BIGINT NOT NULL,
    memory_bytes BIGINT NOT NULL,
    gpus BIGINT NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    last_heartbeat_at BIGINT,
    stopped_at BIGINT,
    metadata TEXT
);

CREATE TABLE variant_instances (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    variant_id TEXT NOT NULL REFERENCES variants(id) ON DELETE CASCADE,
    worker_id TEXT NOT NULL REFERENCES workers(id) ON DELETE CASCADE,
    state TEXT NOT NULL,
    threads BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX variant_instances_variant ON variant_instances(variant_id);
CREATE INDEX variant_instances_worker ON variant_instances(worker_id);

CREATE TABLE offline_jobs (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    app_id TEXT REFERENCES applications(id) ON DELETE CASCADE,
    model_id TEXT REFERENCES models(id) ON DELETE CASCADE,
    variant_id TEXT,
    state TEXT NOT NULL,
    input_path TEXT NOT NULL,
    output_path TEXT NOT NULL,
    min_accuracy DOUBLE PRECISION,
    webhook_url TEXT,
    items_total BIGINT NOT NULL DEFAULT 0,
    items_done BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX offline_jobs_tenant ON offline_jobs(tenant_id);
CREATE INDEX offline_jobs_state ON offline_jobs(state);

CREATE TABLE job_chunks (
    job_id TEXT NOT NULL REFERENCES offline_jobs(id) ON DELETE CASCADE,
    chunk_index BIGINT NOT NULL,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    input_key TEXT NOT NULL,
    output_key TEXT,
    items BIGINT NOT NULL,
    state TEXT NOT NULL,
    worker_id TEXT,
    attempts BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (job_id, chunk_index)
);

CREATE TABLE scaling_events (
    id TEXT PRIMARY KEY,
    tenant_id TEXT REFERENCES tenants(id) ON DELETE CASCADE,
    app_id TEXT REFERENCES applications(id) ON DELETE CASCADE,
    variant_id TEXT,
    worker_id TEXT,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    cost_before_per_s DOUBLE PRECISION,
    cost_after_per_s DOUBLE PRECISION,
    created_at BIGINT NOT NULL
);
CREATE INDEX scaling_events_app ON scaling_events(tenant_id, app_id, created_at);

-- Per-minute aggregates of online queries (dashboard, cost reports).
CREATE TABLE usage_minutely (
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    app_id TEXT NOT NULL,
    variant_id TEXT NOT NULL,
    hardware TEXT NOT NULL,
    minute BIGINT NOT NULL,
    requests BIGINT NOT NULL,
    slo_met BIGINT NOT NULL,
    slo_missed BIGINT NOT NULL,
    latency_sum_ms DOUBLE PRECISION NOT NULL,
    latency_max_ms DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant_id, app_id, variant_id, minute)
);

CREATE TABLE pipelines (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    slo_ms DOUBLE PRECISION NOT NULL,
    plan TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);
