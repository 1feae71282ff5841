-- Arrivals that each controller replica received, published about once a second for the
-- other replicas: the leader's autoscaler plans for the cluster's demand, and every replica's
-- recorded traffic and forecasts count the queries that arrived at any replica. `seq` rises by
-- one per report of a replica, so a reader takes each report once; `at_ms` is the publisher's
-- clock, and reports older than a few minutes are removed.
CREATE TABLE arrival_reports (
    replica TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (replica, seq)
);
CREATE INDEX arrival_reports_at ON arrival_reports (at_ms);
