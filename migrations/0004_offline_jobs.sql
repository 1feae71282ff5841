-- Offline jobs name their target as queries do (application or model name), remember the
-- variant they run on and why they are paused; a chunk is a row range of one input object.
ALTER TABLE offline_jobs ADD COLUMN app_name TEXT;
ALTER TABLE offline_jobs ADD COLUMN model_name TEXT;
ALTER TABLE offline_jobs ADD COLUMN variant_name TEXT;
ALTER TABLE offline_jobs ADD COLUMN paused_reason TEXT;
ALTER TABLE job_chunks ADD COLUMN format TEXT NOT NULL DEFAULT 'npz';
ALTER TABLE job_chunks ADD COLUMN row_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE job_chunks ADD COLUMN item_start BIGINT NOT NULL DEFAULT 0;
CREATE INDEX job_chunks_state ON job_chunks(job_id, state, chunk_index);
