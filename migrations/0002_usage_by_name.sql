-- Usage rows are keyed by names (application, model, variant) as queries see them, so that
-- cost reports survive the deletion and re-registration of a model.
DROP TABLE usage_minutely;

CREATE TABLE usage_minutely (
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    app TEXT NOT NULL,
    model TEXT NOT NULL,
    variant TEXT NOT NULL,
    hardware TEXT NOT NULL,
    minute BIGINT NOT NULL,
    requests BIGINT NOT NULL,
    rows_served BIGINT NOT NULL,
    slo_met BIGINT NOT NULL,
    slo_missed BIGINT NOT NULL,
    latency_sum_ms DOUBLE PRECISION NOT NULL,
    latency_max_ms DOUBLE PRECISION NOT NULL,
    cost DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant_id, app, variant, minute)
);
CREATE INDEX usage_minutely_app ON usage_minutely(tenant_id, app, minute);
