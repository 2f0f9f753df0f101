-- The books' one clock. `booked_at` is when paybatch recorded the order final (COMPLETED,
-- FAILED, REJECTED or MISMATCH) by the clock of the books: the wall clock, or on the embedded
-- simulator its simulated clock. Each attempt of a row is paid by exactly one order, so the
-- order's booking time is the booking time of every attempt it holds, the current attempt (in
-- `rows`) and an earlier one reissued since (in `payouts`) alike. `booked_on` is the date its
-- lines are booked on: the UTC date of `booked_at`, or, when that month was already closed
-- (`closed_months`), the first day of the first open month after it. Both are written once, in
-- the transaction that makes the order final, and never change.
ALTER TABLE orders ADD COLUMN booked_at TEXT;
ALTER TABLE orders ADD COLUMN booked_on TEXT;

-- Orders made final before this version: the ledger kept only its own time of that
-- (`finished_at`, this machine's wall clock, also on the simulator), which is the best the
-- ledger allows; their date is its UTC date (the ledger writes RFC 3339 times in UTC, `Z`).
-- No month was closed before this version, so none is moved.
UPDATE orders SET booked_at = finished_at, booked_on = substr(finished_at, 1, 10)
WHERE state IN ('COMPLETED', 'FAILED', 'REJECTED', 'MISMATCH') AND finished_at IS NOT NULL;

-- What of a reissued attempt's order could not be confirmed (the row's `error_type` as that
-- attempt left it), kept with its charge in `payouts` so that its line of the books stays as
-- it was booked once the row holds the next attempt.
ALTER TABLE payouts ADD COLUMN error_type TEXT;

CREATE INDEX orders_booked_on ON orders(booked_on) WHERE booked_on IS NOT NULL;

-- The months closed with `paybatch close YYYY-MM`: who (user and host, as for an approval),
-- when (this machine's clock), and the month's journal as it was then (its SHA-256, its lines
-- and its totals per environment and balance currency, JSON). A line whose booking time falls
-- in a closed month is booked on the first day of the first open month after it.
CREATE TABLE closed_months (
    month          TEXT PRIMARY KEY,          -- YYYY-MM
    closed_at      TEXT NOT NULL,
    user           TEXT NOT NULL,
    host           TEXT NOT NULL,
    journal_digest TEXT NOT NULL,             -- sha256:HEX of the journal's bytes
    journal_lines  INTEGER NOT NULL,
    totals         TEXT NOT NULL
);
