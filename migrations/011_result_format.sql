-- The layout of a batch's files (`file_format`): the input file's as the reader found it
-- (delimiter, byte-order mark, line ends), and the result file's with what chose it
-- (`--out-format`, or `same`: the input's), both as JSON, e.g.
-- `{"delimiter":";","bom":true,"line_end":"CRLF","chosen":"same"}`. So `report` writes the
-- bytes `run` wrote, even once the input file is gone. NULL in a batch of an earlier version:
-- its result file stays plain CSV (`,`, LF, no BOM), as it always was.
ALTER TABLE batches ADD COLUMN input_format TEXT;
ALTER TABLE batches ADD COLUMN result_format TEXT;
