-- The plans `paybatch validate` showed a digest for, kept so that `paybatch run --expect-digest`
-- can say what changed when a file no longer gives the approved digest. Keyed by the batch's
-- name: validating creates no batch, and nothing of a batch's state is read from here. The
-- last few plans of each batch and environment are kept (`ledger::approved::KEPT_PER_BATCH`).
CREATE TABLE approved_plans (
    id          INTEGER PRIMARY KEY,
    digest      TEXT NOT NULL,
    batch       TEXT NOT NULL,
    environment TEXT NOT NULL,
    input_path  TEXT NOT NULL,
    input_hash  TEXT NOT NULL,
    approved_at TEXT NOT NULL,
    rows        INTEGER NOT NULL,
    -- JSON: the other parts the digest covers (orders followed, repeats and their decision).
    context     TEXT NOT NULL,
    -- The valid rows' payable fields, column by column, compressed (`batch::approved`).
    plan        BLOB NOT NULL
);
CREATE INDEX approved_plans_digest ON approved_plans(digest);
CREATE INDEX approved_plans_batch ON approved_plans(batch, environment, id);
