//! `paybatch close YYYY-MM`: closes a month of the books. Refused while an order created on or
//! before the month's last day is not final (in doubt, or unfinished), naming their batches;
//! otherwise the month's journal (as `report --since FIRST --until LAST --journal FILE` writes
//! it) is made once more and its SHA-256, lines and totals are recorded with who closed the
//! month (user and host) and when. From then on nothing is booked in the month: an order made
//! final at a time of a closed month is booked on the first day of the first open month after
//! it ([`crate::ledger::books`]), so that the month's journal and report stay byte for byte as
//! they were. Closing a month closed already says so and changes nothing.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::environment::UsageError;
use crate::ledger::Ledger;
use crate::ledger::books::{ClosedMonth, NotFinal};
use crate::ledger::lock::LedgerLock;
use crate::ops::error::OpError;
use crate::report::period::PeriodTally;

use super::period::{Outputs, book_lines, month_bounds};
use super::run::approval::{bounded, host_name, login_name};

/// What `close` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// The month is now closed, as recorded.
    Closed(ClosedMonth),
    /// It was closed already, as recorded then: nothing changed.
    Already(ClosedMonth),
    /// Orders are not final: nothing recorded.
    Refused {
        month: String,
        not_final: Vec<NotFinal>,
    },
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> OpError + '_ {
    move |e| OpError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// `sha256:HEX` of the file at `path`.
fn digest_of(path: &Path) -> Result<String, OpError> {
    let bytes = std::fs::read(path).map_err(io_at(path))?;
    Ok(format!("sha256:{}", hex::encode(Sha256::digest(&bytes))))
}

/// Closes `month` (`YYYY-MM`) of the ledger at `ledger_path`.
pub fn close(ledger_path: &Path, month: &str) -> Result<Closing, OpError> {
    let Some((first, last)) = month_bounds(month).filter(|_| month.len() == 7) else {
        return Err(OpError::Usage(UsageError::new(
            format!("`{month}` is not a month"),
            "give the month as YYYY-MM, e.g. paybatch close 2026-11",
        )));
    };
    if !ledger_path.exists() {
        return Err(OpError::Usage(UsageError::new(
            format!("no ledger at {}", ledger_path.display()),
            "pass --ledger PATH, the ledger the batches were run with",
        )));
    }
    // No run records anything while the month is read and closed.
    let _lock = LedgerLock::acquire(ledger_path)?;
    let mut ledger = Ledger::open(ledger_path)?;
    if let Some(closed) = ledger.closed_month(month)? {
        return Ok(Closing::Already(closed));
    }
    let not_final = ledger.not_final_until(&last.to_string())?;
    if !not_final.is_empty() {
        return Ok(Closing::Refused {
            month: month.to_string(),
            not_final,
        });
    }
    let closed = journal_of(&ledger, month, &first.to_string(), &last.to_string())?;
    match ledger.close_month(&closed)? {
        true => Ok(Closing::Closed(closed)),
        false => Ok(ledger
            .closed_month(month)?
            .map_or(Closing::Closed(closed), Closing::Already)),
    }
}

/// The month's journal made once more, in a private temporary directory: what its close
/// records.
fn journal_of(
    ledger: &Ledger,
    month: &str,
    first: &str,
    last: &str,
) -> Result<ClosedMonth, OpError> {
    let dir = tempfile::tempdir().map_err(io_at(Path::new("(temporary directory)")))?;
    let path: PathBuf = dir.path().join("journal.csv");
    let outputs = Outputs {
        journal: Some(path.clone()),
        ..Outputs::default()
    };
    let mut totals = PeriodTally::new(first, last, &[]);
    book_lines(ledger, first, last, &[], &outputs, &mut totals)?;
    let json = totals.json();
    let lines: usize = json.journal_totals.iter().map(|t| t.lines).sum();
    Ok(ClosedMonth {
        month: month.to_string(),
        closed_at: crate::ledger::now(),
        user: bounded(login_name()),
        host: bounded(host_name()),
        journal_digest: digest_of(&path)?,
        journal_lines: i64::try_from(lines).unwrap_or(i64::MAX),
        totals: serde_json::to_string(&json.journal_totals).unwrap_or_default(),
    })
}
