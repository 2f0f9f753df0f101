-- What makes two payouts alike across batches (the same recipient, products, face value and
-- currency): a 64-bit hash of them (`ledger::repeats::likeness`), set when a row completes.
-- The index holds only the paid rows, so a new batch reads the paid ones of the last weeks
-- without reading a row's content, and planning a file never writes to it.
ALTER TABLE rows ADD COLUMN likeness INTEGER;
CREATE INDEX rows_paid_likeness ON rows(likeness, completed_at, batch_id)
    WHERE state = 'COMPLETED' AND likeness IS NOT NULL;
