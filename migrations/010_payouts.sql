-- The life of each paid row's payout link after its order COMPLETED, as the service last
-- reported it (`GET /order/{id}`, each item's `payout`): one line per row and attempt. Written
-- when the order completes and by `paybatch payouts`; a change of status is also an event
-- (subject `payout`), so the history of a link is kept.
CREATE TABLE payouts (
    row_id          INTEGER NOT NULL REFERENCES rows(id),
    attempt         INTEGER NOT NULL,
    batch_id        INTEGER NOT NULL REFERENCES batches(id),
    order_id        INTEGER NOT NULL REFERENCES orders(id),
    status          TEXT NOT NULL,            -- ACTIVE | CLAIMED | CANCELLED | EXPIRED, or as sent
    since           TEXT,                     -- the service's status_updated_at
    expires_at      TEXT,                     -- the link's expiry_date; NULL: it does not expire
    read_at         TEXT NOT NULL,
    -- Set when `paybatch retry --expired` made the row payable again; the attempt's outcome is
    -- kept here, since the row then holds the next attempt's.
    reissued_at     TEXT,
    item_id         TEXT,
    payout_url      TEXT,
    price           TEXT,
    debited_amount  TEXT,
    debited_currency TEXT,
    completed_at    TEXT,
    PRIMARY KEY (row_id, attempt)
);
CREATE INDEX payouts_batch ON payouts(batch_id, status);
CREATE INDEX payouts_order ON payouts(order_id);

-- When `paybatch payouts` last read the batch's orders.
ALTER TABLE batches ADD COLUMN payouts_read_at TEXT;
