//! What a reader of a batch file yields, whatever the file (CSV or a sheet of a workbook): one
//! record of text cells and the line it starts on.

/// The longest field accepted, in bytes.
pub const MAX_FIELD_BYTES: usize = 64 * 1024;

/// One data record: its fields trimmed and in header order, and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRecord {
    /// 1-based line where the record starts.
    pub line: u64,
    /// Trimmed, in header order.
    pub fields: Vec<String>,
}
