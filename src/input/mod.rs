//! The input part: reading a batch file (encoding, delimiter, header, records), the problems it
//! can have, the rules every row must keep (syntax, then against the catalog and the rows
//! before it), and the two passes over the file that check it and then hand its rows on.

pub mod catalog_index;
pub mod catalog_rules;
pub mod columns;
pub mod content_hash;
#[cfg(test)]
mod fixtures;
pub mod problem;
pub mod reader;
pub mod record;
pub mod row;
pub mod scan;
pub mod seen;
pub mod sheet;
pub mod validator;

/// The rules every row must keep, under the path the rest of paybatch names them by.
pub mod rules {
    pub use crate::input::catalog_index::CatalogIndex;
    pub use crate::input::catalog_rules::catalog_insanity;
    pub use crate::input::content_hash::{content_hash, content_hash_of};
    pub use crate::input::problem::{KEPT, KEPT_PER_KIND, Problem, Problems, show};
    pub use crate::input::row::{
        MAX_EMAIL_BYTES, MAX_REFERENCE_CHARS, REFERENCE_PUNCTUATION, RowSpec, ValidateOptions,
        email_problem, parse_record, parse_record_owned,
    };
    pub use crate::input::seen::Seen;
    pub use crate::input::validator::Validator;
    pub use crate::reference::{
        Folded, fold_reference, loose_hash, loose_reference, same_reference,
    };
}
