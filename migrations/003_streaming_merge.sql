-- Each merge of an input file stamps the rows it sees with the batch's merge number; rows with
-- an older stamp are the ones the file no longer has (no list of references held in memory).
ALTER TABLE batches ADD COLUMN merges INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rows ADD COLUMN merged INTEGER NOT NULL DEFAULT 0;
-- The result file and the reports list rows in input order, straight from this index.
CREATE INDEX rows_batch_position ON rows(batch_id, position);
