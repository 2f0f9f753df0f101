-- How each valid row is delivered (EMAIL | PAYOUT_LINK), beside its validated content: the
-- run's summary counts rows per state and delivery from one index instead of reading the
-- content of every row.
ALTER TABLE rows ADD COLUMN delivery TEXT;
UPDATE rows SET delivery = json_extract(spec, '$.distribution') WHERE spec IS NOT NULL;
DROP INDEX rows_batch_state;
CREATE INDEX rows_batch_state ON rows(batch_id, state, delivery);
