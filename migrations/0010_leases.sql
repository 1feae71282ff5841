-- Leases the controller replicas of one cluster contend for ('leader': the replica that runs
-- the loops that must run once for the cluster). The holder renews its lease before
-- `expires_ms`; another replica takes it only once it has expired, and every change of holder
-- raises `token`, the fencing token that the leader's writes carry. Times are the database's
-- clock, so the replicas' own clocks never decide who leads.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    address TEXT NOT NULL,
    token BIGINT NOT NULL,
    acquired_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);

-- The controller replicas that have announced themselves, with the last time each renewed
-- its announcement (the database's clock).
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    started_ms BIGINT NOT NULL,
    seen_ms BIGINT NOT NULL
);
