//! What a run says of its plan before it sends: the repeats of other batches, the balances, the
//! rows taken out of the file, the orders and how fast they go out.

use crate::api::models::ExecutionMode;
use crate::batch::options::{ItemsPerOrder, RunOptions, per_order};
use crate::batch::plan::Merged;
use crate::batch::progress::Reporter;
use crate::batch::repeats::{self, Repeats};
use crate::ledger;

/// Says what other batches of the ledger already have of the file, and what the run does with
/// it (a refusal is said by the error).
pub(super) fn tell_repeats(repeats: &Repeats, reporter: &Reporter) {
    if repeats.any() && !repeats.refuses() {
        let what = match repeats.decision {
            repeats::OnRepeat::Allow => "paid again (--allow-repeats)",
            _ => "left out (--skip-repeats)",
        };
        reporter.alert(format!(
            "{} rows that other batches already have are {what}:",
            repeats.rows.len()
        ));
        for line in repeats.lines() {
            reporter.alert(format!("  {line}"));
        }
    }
    if repeats.likely_total > 0 {
        reporter.warn(format!(
            "{} rows pay a recipient what another batch paid them in the last {} days (a likely repeat; paid if nothing else stops them):",
            repeats.likely_total,
            repeats::ALIKE_WINDOW_DAYS
        ));
        for line in repeats.likely_lines() {
            reporter.warn(format!("  {line}"));
        }
    }
    if repeats.likely_references_total > 0 {
        reporter.warn(format!(
            "{} rows have a reference that another batch has but for `-`, `_` or spaces (a likely repeat; paid if nothing else stops them):",
            repeats.likely_references_total
        ));
        for line in repeats.likely_reference_lines() {
            reporter.warn(format!("  {line}"));
        }
    }
}

/// Says what the merge did and what is planned: the balances, the rows taken out of the file,
/// the orders and how fast they go out, the converted rows.
pub(super) fn tell_plan(
    merged: &Merged,
    opts: &RunOptions,
    valid_rows: usize,
    reporter: &Reporter,
) {
    for line in &merged.balance_lines {
        reporter.line(line.clone());
    }
    for warning in &merged.balance_warnings {
        reporter.warn(warning.clone());
    }
    let removed: Vec<&str> = merged.report.removed.iter().map(String::as_str).collect();
    if !removed.is_empty() {
        let (rows, are) = named_rows(&removed);
        reporter.alert(format!(
            "{rows} {are} no longer in the input file and {} never sent: marked REMOVED",
            if removed.len() == 1 { "was" } else { "were" }
        ));
    }
    let report = &merged.report;
    if let Some(text) = cancelled_text(report) {
        reporter.alert(text);
    }
    let followed = &report.missing_but_submitted;
    if !followed.is_empty() {
        let refs: Vec<&str> = followed.iter().map(|(r, _)| r.as_str()).collect();
        let (rows, are) = named_rows(&refs);
        // A PLANNED row here is in an intent in doubt: one never sent would have been
        // cancelled.
        let states: std::collections::BTreeSet<String> = followed
            .iter()
            .map(|(_, s)| match s {
                ledger::RowState::Planned => "in doubt: sent, no answer recorded".to_string(),
                other => other.to_string(),
            })
            .collect();
        reporter.alert(format!(
            "{rows} {are} no longer in the input file but {} already sent ({}): still followed",
            if refs.len() == 1 { "was" } else { "were" },
            states.into_iter().collect::<Vec<_>>().join(", "),
        ));
    }
    if merged.orders > 0 {
        let per = per_order(opts, valid_rows);
        let how = match opts.items_per_order {
            ItemsPerOrder::Auto if opts.mode != ExecutionMode::Sync => format!(
                " (--items-per-order auto: {valid_rows} valid rows, {} orders a minute, {} in flight)",
                opts.order_rate,
                opts.sized_for_in_flight()
            ),
            _ => String::new(),
        };
        let rate = opts.order_rate.max(1) as usize;
        let takes = if merged.orders <= rate {
            "in one burst".to_string()
        } else {
            format!(
                "over about {} minutes",
                (merged.orders - rate).div_ceil(rate)
            )
        };
        reporter.line(format!(
            "planned: {} new orders, up to {per} {} each{how}, intents committed; at most {rate} orders a minute: sent {takes}",
            merged.orders,
            if per == 1 { "row" } else { "rows" }
        ));
    }
    if merged.converted_rows > 0 {
        reporter.line(match merged.converted_rows {
            1 => "1 row is paid from another currency's balance: it goes alone in a sync order (the service converts currencies only in one-item sync orders)".to_string(),
            n => format!("{n} rows are paid from another currency's balance: each goes alone in a sync order (the service converts currencies only in one-item sync orders)"),
        });
    }
}

/// What a merge cancelled: the intents never sent that held rows the file no longer has, and
/// what became of their other rows.
fn cancelled_text(report: &ledger::MergeReport) -> Option<String> {
    if report.cancelled.is_empty() {
        return None;
    }
    let n = report.cancelled.len();
    let mut text = format!(
        "{n} {} never sent held rows no longer in the input file: cancelled, never to be sent",
        if n == 1 { "intent" } else { "intents" }
    );
    let theirs = if n == 1 { "its" } else { "their" };
    let verb = |k: usize| if k == 1 { "is" } else { "are" };
    if report.planned_again > 0 {
        text.push_str(&format!(
            "; {} of {theirs} rows still in the file {} planned again into new orders",
            report.planned_again,
            verb(report.planned_again)
        ));
    }
    if report.pending_again > 0 {
        text.push_str(&format!(
            "; {} of {theirs} rows {} PENDING: the next run plans them",
            report.pending_again,
            verb(report.pending_again)
        ));
    }
    Some(text)
}

/// Rows named in one warning at most; the others are counted.
const NAMED_ROWS: usize = 5;

/// `row `A``, `rows `A`, `B` and 12 more`, with the verb that goes with it.
fn named_rows(references: &[&str]) -> (String, &'static str) {
    let named: Vec<String> = references
        .iter()
        .take(NAMED_ROWS)
        .map(|r| format!("`{r}`"))
        .collect();
    match references.len() {
        1 => (format!("row {}", named[0]), "is"),
        n if n <= NAMED_ROWS => (format!("rows {}", named.join(", ")), "are"),
        n => (
            format!("rows {} and {} more", named.join(", "), n - NAMED_ROWS),
            "are",
        ),
    }
}
