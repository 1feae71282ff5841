-- The tightest and loosest latency SLO of the queries aggregated in a row (NULL when none
-- of them had one), so that reports can draw latency against the SLOs asked for.
ALTER TABLE usage_minutely ADD COLUMN slo_min_ms DOUBLE PRECISION;
ALTER TABLE usage_minutely ADD COLUMN slo_max_ms DOUBLE PRECISION;
