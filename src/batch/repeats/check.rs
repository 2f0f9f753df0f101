//! The check of a file's rows, one at a time, against the other batches ([`Checker`]), and the
//! rows a one pass keeps to check for likely repeats once it has committed ([`Noticed`]).

use crate::input::rules::RowSpec;
use crate::ledger::repeats::Alike;
use crate::ledger::{Ledger, LedgerError, RowState};

use super::earlier::{Earlier, Found};
use super::findings::{
    ALIKE_LISTED, EarlierState, LikelyRepeat, OnRepeat, Repeat, RepeatedFile, Repeats,
};

/// Checks the rows of a file, one at a time, against [`Earlier`] and the ledger's rows.
pub struct Checker<'l> {
    ledger: &'l Ledger,
    earlier: &'l Earlier,
    pub repeats: Repeats,
    /// Rows another batch may have in another spelling ([`Earlier::resolve`]), with their
    /// lines: told by [`Checker::finish`].
    unsure: Vec<(String, u64)>,
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
            unsure: Vec::new(),
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
            if state == Some(RowState::Planned) {
                return self.planned_here(this, spec);
            }
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
        // Another batch may have it in another spelling: told once the file is read.
        if self.earlier.may_repeat(&spec.reference) {
            self.unsure.push((spec.reference.clone(), spec.line));
        }
        if let Some(l) = self.earlier.may_resemble(spec) {
            self.resemble(spec, l)?;
        }
        Ok(false)
    }

    /// A row this batch planned, its intent not answered yet: an order of another batch at the
    /// service that this ledger learned of since the row was planned (another ledger paid it
    /// meanwhile) makes it a repeat; what was known when it was planned was checked then. When
    /// its own intent may have been sent (in doubt), it cannot be skipped by itself.
    fn planned_here(&mut self, this: i64, spec: &RowSpec) -> Result<bool, LedgerError> {
        let Some((planned_at, never_sent)) =
            self.ledger.planned_intent_of(this, &spec.reference)?
        else {
            return Ok(false);
        };
        match self
            .earlier
            .learned_since(&spec.reference, spec.line, &planned_at)
        {
            Some(mut repeat) => {
                if !never_sent {
                    repeat.state = EarlierState::AtTheServiceInDoubtHere;
                }
                self.repeats.rows.push(repeat);
                Ok(true)
            }
            None => Ok(false),
        }
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
            .filter(|p| Alike::of(&p.spec).is_some_and(|a| a.same_as(mine)))
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

    /// Ends the check of a file whose SHA-256 is `file_hash`: the rows another batch has in
    /// another spelling (one read of the other batches' references, when a row may be one), and
    /// a batch new to the ledger made from another batch's file is a repeated file.
    pub fn finish(mut self, file_hash: &str) -> Result<Repeats, LedgerError> {
        if !self.unsure.is_empty() {
            let ledger = self.ledger;
            let found = self.earlier.resolve(
                &self.unsure,
                |b, visit| ledger.visit_references(b, visit),
                |b, reference| ledger.earlier_row(b, reference),
            )?;
            for f in found {
                match f {
                    Found::Repeat(repeat) => self.repeats.rows.push(repeat),
                    Found::Likely(likely) => self.repeats.note_likely_reference(likely),
                }
            }
            self.repeats.rows.sort_by_key(|r| r.line);
        }
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
        Ok(self.repeats)
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
/// the first `NOTICED_KEPT` with what they pay, then a count. Checked against the ledger
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
