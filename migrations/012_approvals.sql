-- The runs held to an approved plan (`paybatch run --expect-digest`): one line per run whose
-- file gave the approved digest, written (durably) before the run sends anything. The user and
-- host are what the process was told (`$USER`/`$LOGNAME` else the numeric uid; the host name):
-- text a person controls, shown escaped. `run` tells the runs apart (a ULID made by the run).
CREATE TABLE approvals (
    id          INTEGER PRIMARY KEY,
    batch_id    INTEGER NOT NULL REFERENCES batches(id),
    digest      TEXT NOT NULL,
    approved_at TEXT NOT NULL,
    user        TEXT NOT NULL,
    host        TEXT NOT NULL,
    run         TEXT NOT NULL
);
CREATE INDEX approvals_batch ON approvals(batch_id, id);
