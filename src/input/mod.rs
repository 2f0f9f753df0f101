//! The input part: reading a batch file (encoding, delimiter, header, records), the problems it
//! can have, the rules every row must keep (syntax, then against the catalog and the rows
//! before it), and the two passes over the file that check it and then hand its rows on.

pub mod problem;
pub mod reader;
pub mod row;
pub mod scan;

/// The rules every row must keep, under the path the rest of paybatch names them by.
pub mod rules {
    pub use crate::input::row::*;
}
