//! The simulator state's schema, as its migrations create it, in turn.

pub(super) const SCHEMA_V1: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE balances (
    currency TEXT PRIMARY KEY,
    amount   TEXT NOT NULL
);
CREATE TABLE orders (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    key_fingerprint TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    status          TEXT NOT NULL,
    outcome         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    created_ms      INTEGER NOT NULL,
    due_ms          INTEGER NOT NULL,
    completed_at    TEXT,
    description     TEXT,
    metadata        TEXT NOT NULL,
    payment_method  TEXT NOT NULL,
    currency        TEXT NOT NULL,
    total_price     TEXT NOT NULL,
    total_discount  TEXT NOT NULL,
    fx              TEXT NOT NULL,
    message         TEXT
);
CREATE INDEX orders_processing ON orders (status, due_ms);
CREATE INDEX orders_by_key ON orders (key_fingerprint, seq);
CREATE TABLE items (
    order_id            TEXT NOT NULL REFERENCES orders (id),
    position            INTEGER NOT NULL,
    id                  TEXT NOT NULL UNIQUE,
    distribution_method TEXT NOT NULL,
    products            TEXT NOT NULL,
    face_value          TEXT NOT NULL,
    price               TEXT NOT NULL,
    currency            TEXT NOT NULL,
    discount_multiplier TEXT NOT NULL,
    payout_url          TEXT NOT NULL,
    expiry_months       INTEGER NOT NULL,
    PRIMARY KEY (order_id, position)
);
CREATE TABLE idempotency (
    key_fingerprint TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    body_sha256     TEXT NOT NULL,
    status_code     INTEGER NOT NULL,
    response        BLOB NOT NULL,
    created_ms      INTEGER NOT NULL,
    order_id        TEXT,
    PRIMARY KEY (key_fingerprint, idempotency_key)
);
";

/// The items without a unique index on their id: ids are drawn at random, so each new item
/// landed on a page of that index of its own, and an order of 200 items wrote some 200 pages
/// of it to the log. Nothing looks an item up by its id; the service draws ids of 9
/// characters of 32 as its examples show.
pub(super) const SCHEMA_V2: &str = "
CREATE TABLE items_v2 (
    order_id            TEXT NOT NULL REFERENCES orders (id),
    position            INTEGER NOT NULL,
    id                  TEXT NOT NULL,
    distribution_method TEXT NOT NULL,
    products            TEXT NOT NULL,
    face_value          TEXT NOT NULL,
    price               TEXT NOT NULL,
    currency            TEXT NOT NULL,
    discount_multiplier TEXT NOT NULL,
    payout_url          TEXT NOT NULL,
    expiry_months       INTEGER NOT NULL,
    PRIMARY KEY (order_id, position)
);
INSERT INTO items_v2 (order_id, position, id, distribution_method, products, face_value, price,
    currency, discount_multiplier, payout_url, expiry_months)
SELECT order_id, position, id, distribution_method, products, face_value, price, currency,
    discount_multiplier, payout_url, expiry_months FROM items;
DROP TABLE items;
ALTER TABLE items_v2 RENAME TO items;
";
