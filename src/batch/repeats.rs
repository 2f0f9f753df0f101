//! Repeats across the batches of one ledger, found before anything of a batch is sent:
//!
//! - a **repeat**: a row whose `reference` another batch of the same environment paid
//!   (COMPLETED), has in flight (SUBMITTED), in doubt or planned (PLANNED), or holds for a
//!   person (MISMATCH);
//! - a **repeated file**: a new batch made from a file whose SHA-256 another batch was made of;
//! - a **likely repeat** (a warning, never a refusal: weekly bonuses repeat): a row that pays
//!   a recipient (email) the same products, face value and currency as a row another batch
//!   paid within the last [`ALIKE_WINDOW_DAYS`] days.
//!
//! A run refuses repeats (exit 3) unless the person running it says what to do with them:
//! `--allow-repeats` pays them anyway (recorded on the batch), `--skip-repeats` pays only the
//! other rows (the repeats are recorded INVALID, with the batch that has them).
//!
//! What the other batches hold is loaded once, before the file is read ([`Earlier`]): their
//! references and the recipients they paid as 64-bit keyed hashes (8 bytes a row, from indexes,
//! no row read), so that checking a row costs a look-up; a row whose hash is found is then
//! compared with the ledger's rows themselves ([`Checker`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};

use futures::StreamExt;
use serde::Serialize;

use crate::input::rules::RowSpec;
use crate::ledger::repeats::{Alike, EarlierRow, likeness};
use crate::ledger::{BatchRecord, Ledger, LedgerError, RowState};

use super::outcome::RunError;
use super::{plan, window};

/// How far back a recipient paid the same thing makes a row a likely repeat.
pub const ALIKE_WINDOW_DAYS: i64 = 35;

/// Likely repeats listed one by one; the rest are counted.
const ALIKE_LISTED: usize = 20;

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

/// What the other batches of the ledger (same environment and service) hold, by hash.
pub struct Earlier {
    keys: RandomState,
    /// 32-bit keyed hashes of every reference of the other batches (4 bytes a row: a hash
    /// found is only a candidate, looked up in the ledger).
    references: Hashes,
    /// The high 32 bits of the likeness ([`likeness`]) of every row the other batches paid in
    /// the window.
    paid: Hashes,
    /// The other batches.
    batches: Vec<BatchRecord>,
    /// The batch being checked, when the ledger has it, its name, and the references it
    /// skipped as repeats (skipped again until a person allows them).
    this: Option<i64>,
    this_name: String,
    skipped_here: std::collections::HashSet<String>,
    /// Rows of other batches' orders at the service that this ledger does not know, by
    /// reference: (batch, created).
    service: HashMap<String, (String, String)>,
    /// The start of the window of likely repeats (RFC 3339).
    since: String,
}

impl Earlier {
    /// Loads what the ledger's other batches of the service at `base_url` hold.
    pub fn load(ledger: &Ledger, base_url: &str, this: Option<i64>) -> Result<Self, LedgerError> {
        let started = std::time::Instant::now();
        let keys = RandomState::new();
        let batches = ledger.sibling_batches(base_url, this)?;
        // Sized once, exactly (a vector that grows leaves the memory of its smaller copies
        // behind, and one sized larger than it needs takes that memory all the same).
        let mut rows = 0;
        for b in &batches {
            rows += ledger
                .row_counts(b.id)?
                .iter()
                .map(|(_, n)| *n)
                .sum::<i64>();
        }
        let mut references = Vec::with_capacity(usize::try_from(rows).unwrap_or(0));
        for b in &batches {
            ledger.visit_references(b.id, |r| references.push(short_hash(&keys, r)))?;
        }
        let references = Hashes::new(references);
        let since = (chrono::Utc::now() - chrono::Duration::days(ALIKE_WINDOW_DAYS))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut paid = Vec::new();
        if !batches.is_empty() {
            paid.reserve_exact(usize::try_from(ledger.count_paid_likeness(&since)?).unwrap_or(0));
            ledger.visit_paid_likeness(&since, |l, batch| {
                if Some(batch) != this {
                    paid.push(high_bits(l));
                }
            })?;
        }
        let paid = Hashes::new(paid);
        tracing::info!(
            "other batches: {} references, {} paid recipients, read in {:.2?}",
            references.len(),
            paid.len(),
            started.elapsed()
        );
        Ok(Earlier {
            keys,
            references,
            paid,
            this_name: this
                .and_then(|id| ledger.batches().ok()?.into_iter().find(|b| b.id == id))
                .map(|b| b.name)
                .unwrap_or_default(),
            skipped_here: match this {
                Some(id) => ledger.skipped_references(id)?.into_iter().collect(),
                None => Default::default(),
            },
            batches,
            this,
            since,
            service: HashMap::new(),
        })
    }

    /// Adds what the service's order list holds of other batches ([`AtTheService`]).
    pub fn with_service(mut self, at: &AtTheService) -> Self {
        self.service = at.rows.clone();
        self
    }

    /// Whether another batch may have this reference (a hash found; [`Earlier::repeats`]
    /// tells).
    pub fn may_repeat(&self, reference: &str) -> bool {
        self.service.contains_key(reference)
            || !self.references.is_empty()
                && self.references.contains(short_hash(&self.keys, reference))
    }

    /// Where another batch has this reference in a state that makes it a repeat ([`Repeat`]),
    /// looked up with `row_of` (a batch id and the reference: the ledger's row, read by the
    /// ledger or inside a merge). `None` when no other batch (nor the service) has it so.
    pub fn repeat_of(
        &self,
        reference: &str,
        line: u64,
        row_of: impl Fn(i64) -> Result<Option<EarlierRow>, LedgerError>,
    ) -> Result<Option<Repeat>, LedgerError> {
        if !self.may_repeat(reference) {
            return Ok(None);
        }
        if let Some((batch, _)) = self.service.get(reference) {
            return Ok(Some(Repeat {
                reference: reference.to_string(),
                line,
                batch: batch.clone(),
                batch_created_at: String::new(),
                state: EarlierState::AtTheService,
                completed_at: None,
            }));
        }
        for b in &self.batches {
            let Some(row) = row_of(b.id)? else {
                continue;
            };
            let Some(state) = EarlierState::of(row.state, row.sends) else {
                continue;
            };
            return Ok(Some(Repeat {
                reference: reference.to_string(),
                line,
                batch: b.name.clone(),
                batch_created_at: b.created_at.clone(),
                state,
                completed_at: row.completed_at,
            }));
        }
        Ok(None)
    }

    /// The row's likeness when another batch may have paid the same recipient the same thing.
    pub fn may_resemble(&self, spec: &RowSpec) -> Option<i64> {
        let email = spec.email.as_deref()?;
        if self.paid.is_empty() {
            return None;
        }
        let codes: Vec<&str> = spec.product_codes.iter().map(String::as_str).collect();
        let l = likeness(email, &codes, spec.face_value, &spec.currency);
        self.paid.contains(high_bits(l)).then_some(l)
    }

    /// Whether the row needs a closer look: [`Earlier::may_repeat`] or
    /// [`Earlier::may_resemble`].
    pub fn notices(&self, spec: &RowSpec) -> bool {
        self.may_repeat(&spec.reference) || self.may_resemble(spec).is_some()
    }

    /// The other batches made from a file of this SHA-256.
    pub fn files_like(&self, file_hash: &str) -> Vec<&BatchRecord> {
        self.batches
            .iter()
            .filter(|b| b.input_hash == file_hash)
            .collect()
    }

    fn batch(&self, id: i64) -> Option<&BatchRecord> {
        self.batches.iter().find(|b| b.id == id)
    }
}

/// What a batch is checked against ([`Earlier`]), and whether the service's order list is to
/// be read as well: until anything of the batch has left (a batch new to the ledger, one only
/// planned, one stopped before its first send), another ledger may be paying it.
pub fn earlier_for(
    ledger: &Ledger,
    base_url: &str,
    existing: Option<&BatchRecord>,
) -> Result<(Earlier, bool), LedgerError> {
    let earlier = Earlier::load(ledger, base_url, existing.map(|b| b.id))?;
    let unsent = match existing {
        None => true,
        Some(b) => !ledger.has_sent(b.id)?,
    };
    Ok((earlier, unsent))
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
    /// another machine's).
    AtTheService,
    /// Skipped by this batch before, as a repeat: skipped again unless a person allows it.
    SkippedBefore,
}

impl EarlierState {
    fn of(state: RowState, sends: Option<i64>) -> Option<Self> {
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

/// What the other batches already did with this file's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Repeats {
    /// What the run does with them.
    pub decision: OnRepeat,
    pub rows: Vec<Repeat>,
    pub files: Vec<RepeatedFile>,
    /// The first likely repeats ([`ALIKE_LISTED`]); `likely_total` counts them all.
    pub likely: Vec<LikelyRepeat>,
    pub likely_total: usize,
}

impl Repeats {
    /// Whether there is anything a run refuses without a flag.
    pub fn any(&self) -> bool {
        !self.rows.is_empty() || !self.files.is_empty()
    }

    /// Whether the run stops here: repeats without a decision, or rows of another ledger's
    /// orders to skip (the service shows only some rows of such an order: the others would be
    /// paid again).
    pub fn refuses(&self) -> bool {
        self.any() && (self.decision == OnRepeat::Refuse || self.skips_unknown_orders())
    }

    /// `--skip-repeats` of rows known only from orders of another ledger.
    fn skips_unknown_orders(&self) -> bool {
        self.decision == OnRepeat::Skip
            && self
                .rows
                .iter()
                .any(|r| r.state == EarlierState::AtTheService)
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

    /// The error of a run that refuses its repeats: nothing was sent.
    pub fn refusal(&self, batch: &str) -> RunError {
        let what = match (self.rows.len(), self.files.is_empty()) {
            (0, _) => "its file was already made into another batch".to_string(),
            (n, true) => format!("{n} of its rows are already in other batches"),
            (n, false) => format!(
                "its file was already made into another batch, and {n} of its rows are already in other batches"
            ),
        };
        let help = if self.skips_unknown_orders() {
            "the rows of another ledger's orders cannot be skipped one by one (the service's \
             list shows an order's first row only): reconcile the batch that has them into \
             this ledger first (`paybatch reconcile --batch NAME --rebuild FILE`), then \
             --skip-repeats skips exactly what it paid; or pay them again with --allow-repeats"
        } else {
            "if this file was paid already, there is nothing to do; to pay only the rows \
             not paid yet, run again with --skip-repeats; to pay the repeats again too, \
             with --allow-repeats (`paybatch history --reference REF` shows each payout)"
        };
        RunError::Refused {
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

/// A set of 32-bit hashes: sorted, with where each value of the top 16 bits starts, so that a
/// look-up reads two places of memory, not twenty (4 bytes a value and 256 KiB).
struct Hashes {
    values: Vec<u32>,
    /// `starts[p]..starts[p + 1]`: the values whose top 16 bits are `p`.
    starts: Vec<u32>,
}

impl Hashes {
    fn new(mut values: Vec<u32>) -> Self {
        values.sort_unstable();
        values.dedup();
        if values.is_empty() {
            return Hashes {
                values,
                starts: Vec::new(),
            };
        }
        let mut starts = Vec::with_capacity((1 << 16) + 1);
        let mut at = 0usize;
        for p in 0..=(1u32 << 16) {
            while at < values.len() && (values[at] >> 16) < p {
                at += 1;
            }
            starts.push(at as u32);
        }
        Hashes { values, starts }
    }

    fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn contains(&self, h: u32) -> bool {
        let p = (h >> 16) as usize;
        match (self.starts.get(p), self.starts.get(p + 1)) {
            (Some(&a), Some(&b)) => self.values[a as usize..b as usize]
                .binary_search(&h)
                .is_ok(),
            _ => false,
        }
    }
}

/// A 32-bit keyed hash of a reference.
fn short_hash(keys: &RandomState, reference: &str) -> u32 {
    (keys.hash_one(reference) >> 32) as u32
}

/// The high 32 bits of a likeness.
fn high_bits(l: i64) -> u32 {
    ((l as u64) >> 32) as u32
}

/// `2026-11-03` of an RFC 3339 time.
fn short_date(at: &str) -> &str {
    at.get(..10).unwrap_or(at)
}

/// Checks the rows of a file, one at a time, against [`Earlier`] and the ledger's rows.
pub struct Checker<'l> {
    ledger: &'l Ledger,
    earlier: &'l Earlier,
    pub repeats: Repeats,
}

impl<'l> Checker<'l> {
    /// A checker of a file from which a batch of `file_hash` is made (`None`: not known yet).
    pub fn new(ledger: &'l Ledger, earlier: &'l Earlier, decision: OnRepeat) -> Self {
        Checker {
            ledger,
            earlier,
            repeats: Repeats {
                decision,
                ..Repeats::default()
            },
        }
    }

    /// Checks a valid row. Returns whether it is a repeat (a row the run would pay again).
    pub fn see(&mut self, spec: &RowSpec) -> Result<bool, LedgerError> {
        // Skipped once as a repeat, skipped until a person allows it: what made it a repeat
        // (another batch, the service's list) may not be seen this time.
        if self.earlier.skipped_here.contains(&spec.reference)
            && self.repeats.decision != OnRepeat::Allow
        {
            self.repeats.rows.push(Repeat {
                reference: spec.reference.clone(),
                line: spec.line,
                batch: self.earlier.this_name.clone(),
                batch_created_at: String::new(),
                state: EarlierState::SkippedBefore,
                completed_at: None,
            });
            return Ok(true);
        }
        if !self.earlier.notices(spec) {
            return Ok(false);
        }
        if let Some(this) = self.earlier.this {
            // A row this batch already planned, paid or refused is not paid again by this run;
            // one it skipped (and is allowed now), or has not planned, is checked again.
            let state = self.ledger.row_state(this, &spec.reference)?;
            if state.is_some_and(|s| {
                !matches!(
                    s,
                    RowState::Pending | RowState::Invalid | RowState::Removed | RowState::Skipped
                )
            }) {
                return Ok(false);
            }
        }
        let ledger = self.ledger;
        let found = self.earlier.repeat_of(&spec.reference, spec.line, |b| {
            ledger.earlier_row(b, &spec.reference)
        })?;
        if let Some(repeat) = found {
            self.repeats.rows.push(repeat);
            return Ok(true);
        }
        if let Some(l) = self.earlier.may_resemble(spec) {
            self.resemble(spec, l)?;
        }
        Ok(false)
    }

    /// Records a likely repeat when a paid row of another batch pays the same.
    fn resemble(&mut self, spec: &RowSpec, l: i64) -> Result<(), LedgerError> {
        let Some(mine) = alike_of(spec) else {
            return Ok(());
        };
        self.resemble_alike(&spec.reference, spec.line, &mine, l)
    }

    /// Records a likely repeat of the row `reference` on `line`, which pays `mine`.
    fn resemble_alike(
        &mut self,
        reference: &str,
        line: u64,
        mine: &Alike,
        l: i64,
    ) -> Result<(), LedgerError> {
        let found = self
            .ledger
            .paid_alike(l, &self.earlier.since, self.earlier.this)?
            .into_iter()
            .filter(|p| Alike::of_spec(&p.spec).is_some_and(|a| a.same_as(mine)))
            .max_by(|a, b| a.completed_at.cmp(&b.completed_at));
        let Some(paid) = found else {
            return Ok(());
        };
        self.repeats.likely_total += 1;
        if self.repeats.likely.len() < ALIKE_LISTED {
            self.repeats.likely.push(LikelyRepeat {
                reference: reference.to_string(),
                line,
                batch: self
                    .earlier
                    .batch(paid.batch_id)
                    .map(|b| b.name.clone())
                    .unwrap_or_else(|| format!("#{}", paid.batch_id)),
                earlier_reference: paid.reference,
                completed_at: paid.completed_at,
            });
        }
        Ok(())
    }

    /// Checks the rows a one pass noticed ([`Noticed`]) for likely repeats.
    pub fn likely_of(mut self, noticed: Noticed) -> Result<Repeats, LedgerError> {
        for (reference, line, mine, l) in &noticed.rows {
            self.resemble_alike(reference, *line, mine, *l)?;
        }
        self.repeats.likely_total += noticed.more;
        Ok(self.repeats)
    }

    /// Ends the check of a file whose SHA-256 is `file_hash`: a batch new to the ledger made
    /// from another batch's file is a repeated file.
    pub fn finish(mut self, file_hash: &str) -> Repeats {
        if self.earlier.this.is_none() {
            self.repeats.files = self
                .earlier
                .files_like(file_hash)
                .into_iter()
                .map(|b| RepeatedFile {
                    batch: b.name.clone(),
                    created_at: b.created_at.clone(),
                })
                .collect();
        }
        self.repeats
    }
}

/// What makes a row alike to another ([`Alike`]); `None` without an email address.
fn alike_of(spec: &RowSpec) -> Option<Alike> {
    Some(Alike {
        email: spec.email.clone()?,
        product_codes: spec.product_codes.clone(),
        face_value: spec.face_value,
        currency: spec.currency.clone(),
    })
}

/// Rows a one pass kept to check for likely repeats once it has committed.
const NOTICED_KEPT: usize = 10_000;

/// The rows a batch read in one pass may be likely repeats of ([`Earlier::may_resemble`]):
/// the first [`NOTICED_KEPT`] with what they pay, then a count. Checked against the ledger
/// after the pass ([`Checker::likely_of`]): a warning does not stop the pass.
#[derive(Debug, Default)]
pub struct Noticed {
    rows: Vec<(String, u64, Alike, i64)>,
    /// Rows noticed beyond those kept (counted as likely repeats, unchecked).
    more: usize,
}

impl Noticed {
    /// Keeps `spec` when another batch may have paid the same.
    pub fn note(&mut self, earlier: &Earlier, spec: &RowSpec) {
        let Some(l) = earlier.may_resemble(spec) else {
            return;
        };
        if self.rows.len() >= NOTICED_KEPT {
            self.more += 1;
        } else if let Some(a) = alike_of(spec) {
            self.rows.push((spec.reference.clone(), spec.line, a, l));
        }
    }
}

/// Full orders read at most to tell what the order list does not show of them: whose batch an
/// order is when its description was cut inside the name, which rows it holds when its first
/// row was cut. Past this, such orders are a refusal: they cannot be told.
const MAX_FULL_READS: usize = 200;

/// Full orders read at once.
const FULL_READS_AT_ONCE: usize = 16;

/// A refused key or version (exit 2) apart from a service that failed.
fn refused_or_failed(e: crate::api::ApiError) -> RunError {
    if super::outcome::is_auth_error(&e) {
        RunError::Auth(e)
    } else {
        RunError::Api(e)
    }
}

/// What the service's order list holds, read before a batch sends anything ([`read_service`]),
/// with the full orders read where the list says too little.
pub struct ServiceRead {
    window: window::ServiceWindow,
    /// Full orders read: service id -> (batch tag of its metadata, its references).
    full: HashMap<String, (Option<String>, Vec<String>)>,
    /// Orders that needed a full read and got none (past [`MAX_FULL_READS`], or processing).
    untold: usize,
}

/// Reads the service's order list back over its idempotency window (30 days and a margin,
/// [`window::window_since`]), and the full order of each entry whose description was cut where
/// it would tell its batch or its first row (at most [`MAX_FULL_READS`]).
pub async fn read_service(
    client: &crate::api::Client,
    batch: &str,
) -> Result<ServiceRead, RunError> {
    let since = window::window_since(chrono::Utc::now(), None);
    let window = window::read_window(client, since)
        .await
        .map_err(refused_or_failed)?;
    let mut untold = 0;
    let mut to_read = Vec::new();
    for o in &window.orders {
        let unclear = !o.is_unnamed()
            && (o.naming(batch) == plan::BatchNaming::MayName || o.first_reference_cut);
        if !unclear {
            continue;
        }
        if to_read.len() >= MAX_FULL_READS || !o.status.is_terminal() {
            untold += 1;
        } else {
            to_read.push(o.id.clone());
        }
    }
    // A few at a time, as the polling reads finished orders.
    let reads: Vec<_> = futures::stream::iter(to_read.into_iter().map(|id| async move {
        let view =
            crate::api::client::read_retrying_until(client.deadline(), || client.order(&id)).await;
        (id, view)
    }))
    .buffer_unordered(FULL_READS_AT_ONCE)
    .collect()
    .await;
    let mut full = HashMap::new();
    for (id, view) in reads {
        match view.map_err(refused_or_failed)? {
            crate::api::models::OrderView::Done(order) => {
                let m = order.metadata.clone().unwrap_or_default();
                full.insert(
                    id,
                    (
                        plan::batch_in_metadata(&m).map(str::to_string),
                        plan::references_in_metadata(&m),
                    ),
                );
            }
            crate::api::models::OrderView::Processing(_) => untold += 1,
        }
    }
    Ok(ServiceRead {
        window,
        full,
        untold,
    })
}

/// What the service's order list holds that this ledger does not know ([`check_service`]).
#[derive(Debug, Clone, Default)]
pub struct AtTheService {
    /// Rows of other batches' orders, by reference: (batch, created).
    rows: HashMap<String, (String, String)>,
    /// Of `rows`, those known from an order's first row only (its other rows are not known).
    pub first_rows_only: usize,
    /// Pages of the order list read, and paybatch's orders among them.
    pub pages: usize,
    pub orders: usize,
    /// How far back the list was read (RFC 3339), and whether it was read that far.
    pub since: String,
    pub complete: bool,
}

/// What [`read_service`] read, against the ledger. Refused: orders the ledger does not know
/// that name the batch (another ledger's run of it: a colleague's laptop, a second cron host,
/// a lost ledger), with how to adopt them; orders still processing that the ledger does not
/// know (the list shows nothing of them: they may be this batch's, being paid elsewhere now,
/// exit 5); orders whose batch or rows could not be told. The rows of other batches' orders
/// are kept for the file to be checked against ([`Earlier::with_service`]).
pub fn check_service(
    read: ServiceRead,
    ledger: &Ledger,
    batch: &str,
    input: &std::path::Path,
) -> Result<AtTheService, RunError> {
    let ServiceRead {
        window,
        full,
        untold,
    } = read;
    let mut known = std::collections::HashSet::new();
    for o in &window.orders {
        if !o.is_unnamed() && ledger.knows_order(o.key.as_deref(), &o.id)? {
            known.insert(o.id.clone());
        }
        if o.is_unnamed() && ledger.knows_order(None, &o.id)? {
            known.insert(o.id.clone());
        }
    }
    let tag = plan::batch_tag(batch);
    let mut ours = Vec::new();
    let mut rows = HashMap::new();
    let mut first_rows_only = 0;
    let mut processing = 0;
    for o in window.orders.iter().filter(|o| !known.contains(&o.id)) {
        if o.is_unnamed() {
            processing += 1;
            continue;
        }
        let read = full.get(&o.id);
        let names_batch = match (o.naming(batch), read) {
            (plan::BatchNaming::Names, _) => true,
            (plan::BatchNaming::MayName, Some((t, _))) => t.as_deref() == Some(tag.as_str()),
            // Not read: counted in `untold`.
            (plan::BatchNaming::MayName, None) => false,
            (plan::BatchNaming::Other, _) => false,
        };
        if names_batch {
            ours.push(o);
            continue;
        }
        let created = o.created_at.map(|t| t.to_rfc3339()).unwrap_or_default();
        let other = o.batch.clone().unwrap_or_default();
        match read {
            Some((t, references)) if !references.is_empty() => {
                let other = t.clone().unwrap_or(other);
                for r in references {
                    rows.entry(r.clone())
                        .or_insert_with(|| (other.clone(), created.clone()));
                }
            }
            _ if o.first_reference_cut => {}
            _ => {
                if let Some(r) = &o.first_reference {
                    first_rows_only += 1;
                    rows.entry(r.clone())
                        .or_insert_with(|| (other.clone(), created.clone()));
                }
            }
        }
    }
    refuse_what_cannot_be_told(&ours, processing, untold, batch, input)?;
    Ok(AtTheService {
        rows,
        first_rows_only,
        pages: window.pages,
        orders: window.orders.len(),
        since: window.since.to_rfc3339(),
        complete: window.complete,
    })
}

/// The refusals of [`check_service`]: orders of this batch the ledger does not know (`ours`),
/// unknown orders still processing, orders that could not be told (`untold`).
fn refuse_what_cannot_be_told(
    ours: &[&window::ListedOrder],
    processing: usize,
    untold: usize,
    batch: &str,
    input: &std::path::Path,
) -> Result<(), RunError> {
    if !ours.is_empty() {
        let first = ours
            .iter()
            .filter_map(|o| o.created_at)
            .min()
            .map(|t| t.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| "unknown".into());
        return Err(RunError::Refused {
            message: format!(
                "batch {} already has {} orders at the service (first {first}) that this ledger does not know; nothing was submitted",
                crate::text::escape(batch),
                ours.len()
            ),
            help: format!(
                "adopt them with `paybatch reconcile --batch {} --rebuild {}`, then run the same command: it pays only what is missing; if this is another batch that shares the name, give it its own with --batch NAME",
                crate::text::shell_word(batch),
                crate::text::shell_word(&input.display().to_string())
            ),
        });
    }
    if processing > 0 {
        return Err(RunError::Unsettled {
            message: format!(
                "{processing} orders are still processing at the service, and this ledger does not know them: the service shows nothing of them but their id, so they may be this batch's, being paid from another ledger now; nothing was submitted"
            ),
            help: "run the same command again once they finish (in a minute or two): the service then shows whose they are".into(),
        });
    }
    if untold > 0 {
        return Err(RunError::Refused {
            message: format!(
                "{untold} orders at the service show too little to tell whether they are this batch's or hold its rows (a description cut by a long batch name, more than {MAX_FULL_READS} to read whole, or still processing); nothing was submitted"
            ),
            help: "run again in a minute; if it stays, give the batch a shorter --batch name, or reconcile the batches they belong to into this ledger (paybatch reconcile --batch NAME --rebuild FILE)".into(),
        });
    }
    Ok(())
}

impl AtTheService {
    /// What the read found, for the person running the batch: one line, then warnings.
    pub fn lines(&self) -> (String, Vec<String>) {
        let head = format!(
            "service: {} page{} of its order list read back to {} ({} of paybatch's orders, none of this batch){}",
            self.pages,
            if self.pages == 1 { "" } else { "s" },
            short_date(&self.since),
            self.orders,
            if self.complete {
                ""
            } else {
                "; the list holds more than is read: older orders were not checked"
            }
        );
        let mut warnings = Vec::new();
        if self.first_rows_only > 0 {
            warnings.push(format!(
                "{} orders of other batches at the service are unknown to this ledger; the list shows only their first rows, which the file's rows are compared with",
                self.first_rows_only
            ));
        }
        (head, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_hold_exactly_the_values_given_across_every_bucket() {
        let values: Vec<u32> = (0..5000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .chain([0, u32::MAX, 0x0001_0000, 0xffff_0000])
            .collect();
        let set = Hashes::new(values.clone());
        for v in &values {
            assert!(set.contains(*v), "{v:#x}");
        }
        for v in [1u32, 0x0000_ffff, 0xfffe_ffff, 12345] {
            assert_eq!(set.contains(v), values.contains(&v), "{v:#x}");
        }
        assert!(!Hashes::new(Vec::new()).contains(0));
    }
}
