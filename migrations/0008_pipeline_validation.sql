-- A pipeline's validation set: which of its outputs the labels grade and how many rows the
-- set holds (the NPZ itself is the object at `validation_key`).
ALTER TABLE pipelines ADD COLUMN validation_output TEXT;
ALTER TABLE pipelines ADD COLUMN validation_rows BIGINT;
