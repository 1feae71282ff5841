-- A variant the registration did not keep (status 'pruned'): another variant of the model on
-- the same hardware, threads and max batch is at least as accurate and at least as fast at
-- every batch size. The kept variant that dominates it (by name) and why, for the model's
-- answers; serving never sees a pruned variant.
ALTER TABLE variants ADD COLUMN pruned_by TEXT;
ALTER TABLE variants ADD COLUMN pruned_reason TEXT;
