-- Each row's reference as a person reads it, without `-`, `_` and spaces: a 64-bit hash of its
-- loose form (`reference::loose_hash`), set when the row is inserted and, for the rows of an
-- older ledger, by this migration. A batch finds by it the rows of other batches whose
-- reference is its own in another spelling (`emp-1` for `EMP-1`: a repeat) or equal but for
-- `-`, `_` and spaces (`EMP_1`: a likely repeat); the references themselves are compared before
-- anything is said. The index is per batch, as the batches are read.
ALTER TABLE rows ADD COLUMN reference_loose INTEGER;
CREATE INDEX rows_reference_loose ON rows(batch_id, reference_loose);
