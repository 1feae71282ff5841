-- What-if runs: a SIMULATED replay of a trace on a tenant's applications under some policies.
-- `request` describes the trace, policies and cluster (JSON); `progress` holds queries
-- simulated per policy (JSON); `result` the reports per policy once the run has succeeded.
CREATE TABLE whatif_runs (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    progress TEXT NOT NULL,
    error TEXT,
    result TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT,
    updated_at BIGINT NOT NULL
);
CREATE INDEX whatif_runs_tenant ON whatif_runs(tenant_id, created_at);
CREATE INDEX whatif_runs_status ON whatif_runs(status);
