-- A batch rebuilt from the service while orders it could not attribute were still processing:
-- its rows without an order may be in one of them, so nothing is planned for it until a
-- reconciliation finds every order of the account attributable.
ALTER TABLE batches ADD COLUMN unsettled INTEGER NOT NULL DEFAULT 0;
