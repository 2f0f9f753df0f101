-- The paybatch ledger. Every step of a batch is recorded here before it happens.
-- States and transitions: docs/ledger.md.

CREATE TABLE batches (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    input_path      TEXT NOT NULL,
    input_hash      TEXT NOT NULL,
    headers         TEXT NOT NULL,           -- JSON array: the input file's header row
    environment     TEXT NOT NULL,           -- sim | playground | production | custom
    base_url        TEXT NOT NULL,           -- "embedded-simulator" for the embedded simulator
    key_fingerprint TEXT NOT NULL,           -- never the key itself
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

CREATE TABLE orders (
    id               INTEGER PRIMARY KEY,
    batch_id         INTEGER NOT NULL REFERENCES batches(id),
    idempotency_key  TEXT NOT NULL UNIQUE,
    body             BLOB NOT NULL,          -- the exact bytes sent, every time
    mode             TEXT NOT NULL,          -- sync | async
    payment_currency TEXT NOT NULL,
    state            TEXT NOT NULL,          -- INTENT | ACCEPTED | COMPLETED | FAILED | REJECTED
    service_order_id TEXT,
    sends            INTEGER NOT NULL DEFAULT 0,   -- incremented (durably) before each send
    polls            INTEGER NOT NULL DEFAULT 0,
    created_at       TEXT NOT NULL,
    first_sent_at    TEXT,
    last_sent_at     TEXT,
    accepted_at      TEXT,
    finished_at      TEXT,
    last_http_status INTEGER,
    last_response    TEXT,                   -- last answer body (orders may hold payout links)
    error_type       TEXT,
    error_message    TEXT,
    total_price      TEXT
);
CREATE INDEX orders_batch_state ON orders(batch_id, state);

CREATE TABLE rows (
    id            INTEGER PRIMARY KEY,
    batch_id      INTEGER NOT NULL REFERENCES batches(id),
    reference     TEXT NOT NULL,
    position      INTEGER NOT NULL,          -- order in the latest input file
    line          INTEGER NOT NULL,
    fields        TEXT NOT NULL,             -- JSON array: the input cells, for the result file
    spec          TEXT,                      -- JSON of the validated row; NULL when INVALID
    content_hash  TEXT NOT NULL,
    state         TEXT NOT NULL,             -- PENDING | PLANNED | SUBMITTED | COMPLETED | FAILED | REJECTED | INVALID | REMOVED
    attempt       INTEGER NOT NULL DEFAULT 1,
    order_id      INTEGER REFERENCES orders(id),
    item_index    INTEGER,
    item_id       TEXT,
    payout_url    TEXT,
    price         TEXT,
    discount      TEXT,
    error_type    TEXT,
    error_message TEXT,
    completed_at  TEXT,
    UNIQUE (batch_id, reference)
);
CREATE INDEX rows_batch_state ON rows(batch_id, state);
CREATE INDEX rows_order ON rows(order_id);

-- Append-only: every transition with its time and cause.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY,
    batch_id   INTEGER NOT NULL,
    at         TEXT NOT NULL,
    subject    TEXT NOT NULL,                -- row | order | batch
    subject_id INTEGER NOT NULL,
    from_state TEXT,
    to_state   TEXT,
    cause      TEXT NOT NULL
);
CREATE INDEX events_batch ON events(batch_id, id);

-- The service's catalog, cached per environment.
CREATE TABLE catalog_products (
    environment TEXT NOT NULL,
    code        TEXT NOT NULL,
    product     TEXT NOT NULL,               -- JSON, as the service sent it
    PRIMARY KEY (environment, code)
);
CREATE TABLE catalog_syncs (
    environment TEXT PRIMARY KEY,
    fetched_at  TEXT NOT NULL,
    products    INTEGER NOT NULL
);
