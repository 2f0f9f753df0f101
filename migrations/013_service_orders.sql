-- What the service holds of paybatch's orders that this ledger did not make: another ledger's,
-- another machine's, a lost ledger's. Each finished order is read whole once (`GET
-- /order/{id}`: its metadata names every row) and kept for ever, since a finished order never
-- changes; every row about to be paid is checked against these rows first.
CREATE TABLE service_orders (
    service         TEXT NOT NULL,            -- the service's address, as `service_address` spells it
    service_order_id TEXT NOT NULL,
    idempotency_key TEXT,                     -- as its description names it
    batch_tag       TEXT,                     -- the batch as its metadata names it (or its description)
    status          TEXT NOT NULL,
    created_at      TEXT,                     -- the service's clock
    read_at         TEXT NOT NULL,            -- this machine's clock
    rows_whole      INTEGER NOT NULL,         -- 1: its metadata named every row; 0: only the first row is known
    PRIMARY KEY (service, service_order_id)
);

CREATE TABLE service_order_rows (
    service         TEXT NOT NULL,
    service_order_id TEXT NOT NULL,
    item_index      INTEGER NOT NULL,
    reference       TEXT NOT NULL,
    attempt         INTEGER,                  -- NULL where the order does not say
    PRIMARY KEY (service, service_order_id, item_index)
);
CREATE INDEX service_order_rows_reference ON service_order_rows(service, reference);

-- How far each service's order list has been read: every order created up to `read_to` (the
-- service's clock) is known to this ledger, its own or in `service_orders`.
CREATE TABLE service_reads (
    service         TEXT PRIMARY KEY,
    read_to         TEXT NOT NULL,
    read_at         TEXT NOT NULL,
    pages           INTEGER NOT NULL,
    learned         INTEGER NOT NULL
);
