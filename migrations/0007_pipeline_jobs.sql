-- Offline jobs may run a pipeline: its name (then app_name and model_name are NULL).
ALTER TABLE offline_jobs ADD COLUMN pipeline_name TEXT;
