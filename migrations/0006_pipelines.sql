-- Pipelines (the table exists since 0001): the object holding a pipeline's validation set
-- (NPZ), if any. `spec` is the registered document (JSON), `slo_ms` its end-to-end latency
-- SLO (0 for none), `plan` the applied plan (JSON).
ALTER TABLE pipelines ADD COLUMN validation_key TEXT;
