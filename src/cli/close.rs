//! `paybatch close YYYY-MM`: closes a month of the books, once its orders are final. Records
//! who closed it (user and host), when, and the digest, lines and totals of its journal; from
//! then on its journal and report are reproduced byte for byte, and an order made final at a
//! time of the month is booked in the first open month after it.

use clap::Args;
use serde::Serialize;

use crate::exit::Exit;
use crate::ledger::books::{ClosedMonth, NotFinal};
use crate::ops::close::{Closing, close};

use super::{CliError, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Close a month of the books (YYYY-MM, UTC). Refused (exit 3) while \
an order created on or before the month's last day is not final: in doubt (sent, no answer \
recorded) or unfinished (processing at the service, or planned and not sent); the batches that \
hold them are named (`paybatch run` resumes them, `paybatch reconcile` settles the orders in \
doubt). Otherwise the month's journal is made as `paybatch report --since FIRST --until LAST \
--journal FILE` makes it, and its SHA-256, lines and totals are recorded in the ledger with who \
closed the month (the user, from $USER or $LOGNAME, and the host) and when.\n\nFrom then on \
nothing is booked in the month: an order recorded final at a time of a closed month is booked \
on the first day of the first open month after it, with a note saying so, so that the month's \
journal and report stay byte for byte as they were. `paybatch status` and the period report say \
which months are closed. Closing a month closed already says so and changes nothing (exit 0).";

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// The month to close, YYYY-MM (UTC), e.g. 2026-11.
    #[arg(value_name = "YYYY-MM")]
    pub month: String,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// `paybatch close --json`: the month closed (its closer as `user@host`) or refused, in one shape.
#[derive(Debug, Serialize)]
struct CloseJson<'a> {
    month: &'a str,
    /// `closed`, `already_closed` or `refused`.
    outcome: &'static str,
    closed_at: Option<&'a str>,
    closed_by: Option<String>,
    journal_digest: Option<&'a str>,
    journal_lines: Option<i64>,
    /// The journal's totals per environment, kind and currency, as recorded.
    totals: Option<serde_json::Value>,
    /// The batches with orders not final, when refused.
    not_final: &'a [NotFinal],
}

fn closed_json<'a>(closed: &'a ClosedMonth, outcome: &'static str) -> CloseJson<'a> {
    CloseJson {
        month: &closed.month,
        outcome,
        closed_at: Some(&closed.closed_at),
        closed_by: Some(format!("{}@{}", closed.user, closed.host)),
        journal_digest: Some(&closed.journal_digest),
        journal_lines: Some(closed.journal_lines),
        totals: serde_json::from_str(&closed.totals).ok(),
        not_final: &[],
    }
}

/// The batches with orders not final, said.
fn not_final_said(not_final: &[NotFinal]) -> String {
    not_final
        .iter()
        .map(|n| {
            let mut what = Vec::new();
            if n.in_doubt > 0 {
                what.push(format!("{} in doubt", n.in_doubt));
            }
            if n.unfinished > 0 {
                what.push(format!("{} unfinished", n.unfinished));
            }
            format!(
                "batch {}: {} orders {}",
                crate::text::shown(&n.batch),
                n.in_doubt + n.unfinished,
                what.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The month closed, said (text).
fn tell(closed: &ClosedMonth, already: bool) {
    let verb = if already { "already closed" } else { "closed" };
    outln!(
        "month {} {verb}: at {} by {}@{}; journal {} ({} lines)",
        closed.month,
        closed.closed_at,
        crate::text::shown(&closed.user),
        crate::text::shown(&closed.host),
        closed.journal_digest,
        closed.journal_lines
    );
}

pub fn execute(args: CloseArgs) -> Result<Exit, CliError> {
    match close(&args.service.ledger, &args.month)? {
        Closing::Closed(closed) => {
            match args.json {
                true => super::out_json(&closed_json(&closed, "closed")),
                false => tell(&closed, false),
            }
            Ok(Exit::Ok)
        }
        Closing::Already(closed) => {
            match args.json {
                true => super::out_json(&closed_json(&closed, "already_closed")),
                false => tell(&closed, true),
            }
            Ok(Exit::Ok)
        }
        Closing::Refused { month, not_final } => {
            if args.json {
                super::out_json(&CloseJson {
                    month: &month,
                    outcome: "refused",
                    closed_at: None,
                    closed_by: None,
                    journal_digest: None,
                    journal_lines: None,
                    totals: None,
                    not_final: &not_final,
                });
            }
            Err(CliError::new(
                Exit::Invalid,
                format!(
                    "month {month} cannot be closed: orders of it are not final ({}); nothing was recorded",
                    not_final_said(&not_final)
                ),
                Some(
                    "resume the batch with `paybatch run` (or settle orders in doubt with `paybatch reconcile`), then close the month again",
                ),
            ))
        }
    }
}
