-- The plans a person approved with `paybatch approve FILE --expect-digest DIGEST`: who (the
-- user and host the process was told, as for a run in `approvals`), when, which digest, and what
-- the plan pays per currency (JSON: currency -> face value, as decimal text). Keyed by the
-- batch's name and environment: approving creates no batch. A run that requires a second
-- person reads here whether another user than the one running it approved its digest.
CREATE TABLE plan_approvals (
    id          INTEGER PRIMARY KEY,
    digest      TEXT NOT NULL,
    batch       TEXT NOT NULL,
    environment TEXT NOT NULL,
    approved_at TEXT NOT NULL,
    user        TEXT NOT NULL,
    host        TEXT NOT NULL,
    rows        INTEGER NOT NULL,
    totals      TEXT NOT NULL
);
CREATE INDEX plan_approvals_plan ON plan_approvals(batch, environment, digest, id);

-- The rows at a later attempt than their first (retried or reissued), which the plan digest
-- covers: found without reading every row of a batch.
CREATE INDEX rows_later_attempts ON rows(batch_id, position) WHERE attempt > 1;
