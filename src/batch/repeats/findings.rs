//! What a check of a file against the other batches found ([`Repeats`]), the decision of the
//! person running it ([`OnRepeat`]), and how the findings read: the lines of a refusal, the note
//! on the batch, what they add to the plan digest.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::ledger::RowState;

use crate::ops::error::OpError;

/// Likely repeats listed one by one; the rest are counted.
pub(super) const ALIKE_LISTED: usize = 20;

/// References named per earlier batch in a message; the rest are counted.
const NAMED_PER_BATCH: usize = 5;

/// What to do with repeats: the person running the batch decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnRepeat {
    /// Refuse the batch before anything is sent (the default).
    #[default]
    Refuse,
    /// `--allow-repeats`: pay them anyway.
    Allow,
    /// `--skip-repeats`: pay only the other rows.
    Skip,
}

impl OnRepeat {
    pub fn flag(self) -> Option<&'static str> {
        match self {
            OnRepeat::Refuse => None,
            OnRepeat::Allow => Some("--allow-repeats"),
            OnRepeat::Skip => Some("--skip-repeats"),
        }
    }
}

/// Where another batch has the reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlierState {
    /// COMPLETED: paid.
    Paid,
    /// SUBMITTED: the service has its order.
    InFlight,
    /// PLANNED, its order sent without an answer recorded.
    InDoubt,
    /// PLANNED, its order not sent yet: that batch's next run sends it.
    Planned,
    /// MISMATCH: its order finished, not as sent; money may have left.
    NeedsAPerson,
    /// A row of an order at the service that this ledger does not know (another ledger's,
    /// another machine's), every row of which is known.
    AtTheService,
    /// The first row of such an order, answered without its metadata: its other rows are not
    /// known.
    AtTheServiceFirstRow,
    /// Such a row that this batch planned in an order it may have sent (in doubt): only a
    /// reconciliation tells which of the two orders the service has.
    AtTheServiceInDoubtHere,
    /// Skipped by this batch before, as a repeat: skipped again unless a person allows it.
    SkippedBefore,
}

impl EarlierState {
    pub(super) fn of(state: RowState, sends: Option<i64>) -> Option<Self> {
        Some(match state {
            RowState::Completed => EarlierState::Paid,
            RowState::Submitted => EarlierState::InFlight,
            RowState::Planned if sends.unwrap_or(0) > 0 => EarlierState::InDoubt,
            RowState::Planned => EarlierState::Planned,
            RowState::Mismatch => EarlierState::NeedsAPerson,
            _ => return None,
        })
    }

    pub fn words(&self) -> &'static str {
        match self {
            EarlierState::Paid => "paid",
            EarlierState::InFlight => "in flight",
            EarlierState::InDoubt => "in doubt",
            EarlierState::Planned => "planned",
            EarlierState::NeedsAPerson => "held for a person",
            EarlierState::AtTheService => "ordered at the service, unknown to this ledger",
            EarlierState::AtTheServiceInDoubtHere => {
                "ordered at the service by another ledger, while this batch's own order of it is in doubt"
            }
            EarlierState::AtTheServiceFirstRow => {
                "ordered at the service, unknown to this ledger (the first row of an order whose other rows the service did not name)"
            }
            EarlierState::SkippedBefore => "skipped before as a repeat",
        }
    }
}

/// A row of the file that another batch already has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repeat {
    pub reference: String,
    pub line: u64,
    pub batch: String,
    pub batch_created_at: String,
    pub state: EarlierState,
    /// When the earlier batch paid it.
    pub completed_at: Option<String>,
}

/// An earlier batch made from the same file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepeatedFile {
    pub batch: String,
    pub created_at: String,
}

/// A row that pays a recipient what another batch paid them lately: a warning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LikelyRepeat {
    pub reference: String,
    pub line: u64,
    pub batch: String,
    pub earlier_reference: String,
    pub completed_at: String,
}

/// A row whose reference another batch has but for `-`, `_` and spaces (`EMP_1` for `EMP-1`,
/// [`crate::reference::loose_reference`]): a warning, most likely one reference spelt two ways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LikelyReference {
    pub reference: String,
    pub line: u64,
    pub batch: String,
    pub earlier_reference: String,
    pub state: EarlierState,
}

/// What the other batches already did with this file's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Repeats {
    /// What the run does with them.
    pub decision: OnRepeat,
    pub rows: Vec<Repeat>,
    pub files: Vec<RepeatedFile>,
    /// The first likely repeats (`ALIKE_LISTED`); `likely_total` counts them all.
    pub likely: Vec<LikelyRepeat>,
    pub likely_total: usize,
    /// The first rows whose reference another batch has but for `-`, `_` and spaces
    /// (`ALIKE_LISTED`); `likely_references_total` counts them all.
    pub likely_references: Vec<LikelyReference>,
    pub likely_references_total: usize,
}

impl Repeats {
    /// Whether there is anything a run refuses without a flag.
    pub fn any(&self) -> bool {
        !self.rows.is_empty() || !self.files.is_empty()
    }

    /// Whether the run stops here: repeats without a decision, or rows to skip of another
    /// ledger's orders whose other rows the service did not name (they would be paid again).
    pub fn refuses(&self) -> bool {
        self.any() && (self.decision == OnRepeat::Refuse || self.skips_unknown_orders())
    }

    /// `--skip-repeats` of rows of another ledger's orders of which only the first row is known.
    fn skips_unknown_orders(&self) -> bool {
        self.decision == OnRepeat::Skip
            && self.rows.iter().any(|r| {
                matches!(
                    r.state,
                    EarlierState::AtTheServiceFirstRow | EarlierState::AtTheServiceInDoubtHere
                )
            })
    }

    /// The rows the run leaves out (`--skip-repeats`).
    pub fn skipped(&self) -> HashMap<String, String> {
        if self.decision != OnRepeat::Skip {
            return Default::default();
        }
        self.rows
            .iter()
            .map(|r| (r.reference.clone(), r.reason()))
            .collect()
    }

    /// The repeats grouped by earlier batch, each with its first references and a count:
    /// `batch 2026-11 (created 2026-11-03): 17 rows paid: EMP-1, EMP-2, ... (+12 more)`.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                format!(
                    "the file is the one batch {} was made from (created {})",
                    crate::text::escape(&f.batch),
                    short_date(&f.created_at)
                )
            })
            .collect();
        let mut by_batch: BTreeMap<(&str, &str), Vec<&Repeat>> = BTreeMap::new();
        for r in &self.rows {
            by_batch
                .entry((r.batch_created_at.as_str(), r.batch.as_str()))
                .or_default()
                .push(r);
        }
        for ((created, batch), rows) in by_batch {
            let mut states: BTreeMap<&str, usize> = BTreeMap::new();
            for r in &rows {
                *states.entry(r.state.words()).or_default() += 1;
            }
            let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
            let named: Vec<String> = rows
                .iter()
                .take(NAMED_PER_BATCH)
                .map(|r| crate::text::escape(&r.reference).into_owned())
                .collect();
            let more = rows.len().saturating_sub(NAMED_PER_BATCH);
            lines.push(format!(
                "batch {} ({}) has {} of its rows ({}): {}{}",
                crate::text::escape(batch),
                if created.is_empty() {
                    "at the service or skipped before".to_string()
                } else {
                    format!("created {}", short_date(created))
                },
                rows.len(),
                states.join(", "),
                named.join(", "),
                if more > 0 {
                    format!(" (+{more} more)")
                } else {
                    String::new()
                }
            ));
        }
        lines
    }

    /// The likely repeats, one line each, then how many more.
    pub fn likely_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .likely
            .iter()
            .map(|l| {
                format!(
                    "line {}: {} pays the recipient, products and face value that batch {} paid on {} ({})",
                    l.line,
                    crate::text::escape(&l.reference),
                    crate::text::escape(&l.batch),
                    short_date(&l.completed_at),
                    crate::text::escape(&l.earlier_reference)
                )
            })
            .collect();
        let more = self.likely_total.saturating_sub(self.likely.len());
        if more > 0 {
            lines.push(format!("(+{more} more)"));
        }
        lines
    }

    /// Notes a row whose reference another batch has but for `-`, `_` and spaces.
    pub(super) fn note_likely_reference(&mut self, found: LikelyReference) {
        self.likely_references_total += 1;
        if self.likely_references.len() < ALIKE_LISTED {
            self.likely_references.push(found);
        }
    }

    /// The rows whose reference another batch has but for `-`, `_` and spaces, one line each,
    /// then how many more.
    pub fn likely_reference_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .likely_references
            .iter()
            .map(|l| {
                format!(
                    "line {}: `{}` is `{}` of batch {} ({}) but for `-`, `_` or spaces",
                    l.line,
                    crate::text::escape(&l.reference),
                    crate::text::escape(&l.earlier_reference),
                    crate::text::escape(&l.batch),
                    l.state.words()
                )
            })
            .collect();
        let more = self
            .likely_references_total
            .saturating_sub(self.likely_references.len());
        if more > 0 {
            lines.push(format!("(+{more} more)"));
        }
        lines
    }

    /// The error of a run that refuses its repeats: nothing was sent.
    pub fn refusal(&self, batch: &str) -> OpError {
        let what = match (self.rows.len(), self.files.is_empty()) {
            (0, _) => "its file was already made into another batch".to_string(),
            (n, true) => format!("{n} of its rows are already in other batches"),
            (n, false) => format!(
                "its file was already made into another batch, and {n} of its rows are already in other batches"
            ),
        };
        let help = if self.skips_unknown_orders() {
            "rows of another ledger's orders that the service answered without their metadata \
             (only their first rows are known), or that this batch's own orders in doubt may \
             also hold, cannot be skipped one by one: reconcile the batch that has them into \
             this ledger first (`paybatch reconcile --batch NAME --rebuild FILE`), then \
             --skip-repeats skips exactly what it paid; or pay them again with --allow-repeats"
        } else {
            "if this file was paid already, there is nothing to do; to pay only the rows \
             not paid yet, run again with --skip-repeats; to pay the repeats again too, \
             with --allow-repeats (`paybatch history --reference REF` shows each payout)"
        };
        OpError::Refused {
            message: format!(
                "batch {} repeats what other batches already have: {what}; nothing was submitted:\n  {}",
                crate::text::escape(batch),
                self.lines().join("\n  ")
            ),
            help: help.into(),
        }
    }

    /// What the plan digest adds for the repeats and the decision on them, so that an approved
    /// digest covers which rows repeat earlier batches and what the run does with them. A plan
    /// without repeats keeps the digest of its rows alone.
    pub fn fold_into(&self, digest: &str) -> String {
        use sha2::{Digest, Sha256};
        if !self.any() {
            return digest.to_string();
        }
        let mut d = Sha256::new();
        d.update(b"paybatch-plan-repeats-v1\n");
        d.update(digest.as_bytes());
        d.update(format!("\ndecision={:?}\n", self.decision).as_bytes());
        for f in &self.files {
            d.update(format!("file={}:{}\n", f.batch.len(), f.batch).as_bytes());
        }
        for r in &self.rows {
            d.update(
                format!(
                    "row={}:{}@{}:{}\n",
                    r.reference.len(),
                    r.reference,
                    r.batch.len(),
                    r.batch
                )
                .as_bytes(),
            );
        }
        format!("sha256:{}", hex::encode(d.finalize()))
    }

    /// The note recorded on a batch whose repeats a person allowed or skipped.
    pub fn note(&self) -> Option<String> {
        let flag = self.decision.flag()?;
        if !self.any() {
            return None;
        }
        let verb = match self.decision {
            OnRepeat::Allow => "repeats allowed",
            _ => "repeats skipped",
        };
        Some(format!("{verb} ({flag}): {}", self.lines().join("; ")))
    }
}

impl Repeat {
    /// Why a skipped row was not paid (its error in the ledger and the result file).
    pub fn reason(&self) -> String {
        let created = if self.batch_created_at.is_empty() {
            String::new()
        } else {
            format!(" (created {})", short_date(&self.batch_created_at))
        };
        format!(
            "repeat: batch {}{created} has this reference, {}; left out by --skip-repeats",
            self.batch,
            self.state.words()
        )
    }
}

/// `2026-11-03` of an RFC 3339 time.
pub(super) fn short_date(at: &str) -> &str {
    at.get(..10).unwrap_or(at)
}
