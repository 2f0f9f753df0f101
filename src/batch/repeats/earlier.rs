//! What the other batches of the ledger hold ([`Earlier`]), loaded once before the file is read:
//! their references (by the hash of their loose forms) and the recipients they paid as hashes,
//! and where one of them has a reference, in any spelling.

use std::collections::HashMap;

use crate::input::rules::RowSpec;
use crate::ledger::repeats::{EarlierRow, likeness};
use crate::ledger::{BatchRecord, Ledger, LedgerError};
use crate::reference::{Folded, loose_hash, loose_reference, same_reference};

use super::findings::{EarlierState, LikelyReference, Repeat};
use super::hashes::Hashes;

/// How far back a recipient paid the same thing makes a row a likely repeat.
pub const ALIKE_WINDOW_DAYS: i64 = 35;

/// What the other batches of the ledger (same environment and service) hold, by hash.
pub struct Earlier {
    /// The high 32 bits of the hash of every reference's loose form of the other batches
    /// ([`loose_hash`]; 4 bytes a row: a hash found is only a candidate, looked up in the
    /// ledger, where the references are compared).
    references: Hashes,
    /// The high 32 bits of the likeness ([`likeness`]) of every row the other batches paid in
    /// the window.
    paid: Hashes,
    /// The other batches.
    batches: Vec<BatchRecord>,
    /// The batch being checked, when the ledger has it, its name, and the references it
    /// skipped as repeats (skipped again until a person allows them).
    pub(super) this: Option<i64>,
    pub(super) this_name: String,
    pub(super) skipped_here: std::collections::HashSet<String>,
    /// Rows of other batches' orders at the service that this ledger does not know.
    service: ServiceRows,
    /// The start of the window of likely repeats (RFC 3339).
    pub(super) since: String,
}

impl Earlier {
    /// Loads what the ledger's other batches of the service at `base_url` hold.
    pub fn load(ledger: &Ledger, base_url: &str, this: Option<i64>) -> Result<Self, LedgerError> {
        let started = std::time::Instant::now();
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
            ledger.visit_references(b.id, |r| references.push(high_bits(loose_hash(r))))?;
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
            service: ServiceRows::default(),
        })
    }

    /// Adds the rows of other batches' orders that the service holds and this ledger does not
    /// know (learned by [`super::sync_service`]), for the service at `base_url`; the orders of
    /// `batch` itself are refused before ([`super::check_service`]).
    pub fn with_service(
        mut self,
        ledger: &Ledger,
        base_url: &str,
        batch: &str,
    ) -> Result<Self, LedgerError> {
        let tag = crate::batch::order_body::batch_tag(batch);
        let mut orders: HashMap<String, u32> = HashMap::new();
        let mut service = ServiceRows::default();
        ledger.visit_service_rows(base_url, |row| {
            if row.batch_tag.as_deref() == Some(tag.as_str()) {
                return;
            }
            let next = u32::try_from(service.orders.len()).unwrap_or(u32::MAX);
            let index = *orders
                .entry(row.service_order_id.clone())
                .or_insert_with(|| {
                    service.orders.push(ForeignOrder {
                        batch: row.batch_tag.clone().unwrap_or_default(),
                        created_at: row.created_at.clone().unwrap_or_default(),
                        read_at: row.read_at.clone(),
                        whole: row.rows_whole,
                    });
                    next
                });
            service.rows.push((folded_hash(&row.reference), index));
        })?;
        service.rows.sort_unstable();
        service.rows.shrink_to_fit();
        self.service = service;
        Ok(self)
    }

    /// Whether another batch may have this reference, in any spelling (a hash found;
    /// [`Earlier::repeat_of`] tells).
    pub fn may_repeat(&self, reference: &str) -> bool {
        self.service_has(reference)
            || !self.references.is_empty()
                && self.references.contains(high_bits(loose_hash(reference)))
    }

    /// Whether an order of another batch at the service that this ledger does not know has
    /// this reference.
    fn service_has(&self, reference: &str) -> bool {
        !self.service.rows.is_empty() && self.service.find(folded_hash(reference)).is_some()
    }

    /// The repeat of a row of this batch planned at `planned_at` (an intent never sent) that an
    /// order of another batch at the service holds, learned by this ledger after the row was
    /// planned: what the check at planning could not see.
    pub fn learned_since(&self, reference: &str, line: u64, planned_at: &str) -> Option<Repeat> {
        let hash = folded_hash(reference);
        self.service
            .all(hash)
            .find(|o| o.read_at.as_str() > planned_at)
            .map(|o| o.repeat(reference, line))
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
        if let Some(o) = self.service.find(folded_hash(reference)) {
            return Ok(Some(o.repeat(reference, line)));
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

    /// What the other batches have of the references another batch may have but not as written
    /// (`unsure`: each with its line; [`Earlier::repeat_of`] found none): the reference in
    /// another spelling that folds to it, a repeat ([`Found::Repeat`]), else one equal but for
    /// `-`, `_` and spaces, a likely repeat ([`Found::Likely`]), in a state that makes it so. One
    /// visit of every other batch's references (`visit`: a batch id and what to call with each),
    /// the rows found looked up with `row_of` (a batch id and a reference). In the order of
    /// `unsure`.
    pub fn resolve(
        &self,
        unsure: &[(String, u64)],
        visit: impl Fn(i64, &mut dyn FnMut(&str)) -> Result<(), LedgerError>,
        row_of: impl Fn(i64, &str) -> Result<Option<EarlierRow>, LedgerError>,
    ) -> Result<Vec<Found>, LedgerError> {
        let mut by_hash: HashMap<i64, Vec<usize>> = HashMap::new();
        for (i, (reference, _)) in unsure.iter().enumerate() {
            by_hash.entry(loose_hash(reference)).or_default().push(i);
        }
        let mut found: Vec<Option<Found>> = vec![None; unsure.len()];
        for b in &self.batches {
            let mut candidates: Vec<(usize, String)> = Vec::new();
            visit(b.id, &mut |earlier: &str| {
                if let Some(ids) = by_hash.get(&loose_hash(earlier)) {
                    candidates.extend(ids.iter().map(|i| (*i, earlier.to_string())));
                }
            })?;
            for (i, earlier) in candidates {
                let (reference, line) = &unsure[i];
                let same = same_reference(reference, &earlier);
                let better = match &found[i] {
                    None => same || loose_reference(reference) == loose_reference(&earlier),
                    Some(Found::Likely(_)) => same,
                    Some(Found::Repeat(_)) => false,
                };
                if !better {
                    continue;
                }
                let Some(row) = row_of(b.id, &earlier)? else {
                    continue;
                };
                let Some(state) = EarlierState::of(row.state, row.sends) else {
                    continue;
                };
                found[i] = Some(if same {
                    Found::Repeat(Repeat {
                        reference: reference.clone(),
                        line: *line,
                        batch: b.name.clone(),
                        batch_created_at: b.created_at.clone(),
                        state,
                        completed_at: row.completed_at,
                    })
                } else {
                    Found::Likely(LikelyReference {
                        reference: reference.clone(),
                        line: *line,
                        batch: b.name.clone(),
                        earlier_reference: earlier,
                        state,
                    })
                });
            }
        }
        Ok(found.into_iter().flatten().collect())
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

    pub(super) fn batch(&self, id: i64) -> Option<&BatchRecord> {
        self.batches.iter().find(|b| b.id == id)
    }
}

/// The rows of other batches' orders at the service that this ledger does not know: a 64-bit
/// hash of each reference as a person reads it ([`folded_hash`]) with its order (16 bytes a
/// row; a hash found stands for the reference: two references of one hash are taken as one,
/// which refuses, never pays).
#[derive(Default)]
struct ServiceRows {
    /// (hash of the reference, index in `orders`), sorted.
    rows: Vec<(u64, u32)>,
    orders: Vec<ForeignOrder>,
}

/// An order of another batch at the service, as a repeat names it.
struct ForeignOrder {
    batch: String,
    created_at: String,
    read_at: String,
    /// Its rows are all known (else only its first row is).
    whole: bool,
}

impl ForeignOrder {
    /// The repeat of the file's row `reference` on `line` that one of its rows makes.
    fn repeat(&self, reference: &str, line: u64) -> Repeat {
        Repeat {
            reference: reference.to_string(),
            line,
            batch: self.batch.clone(),
            batch_created_at: self.created_at.clone(),
            state: if self.whole {
                EarlierState::AtTheService
            } else {
                EarlierState::AtTheServiceFirstRow
            },
            completed_at: None,
        }
    }
}

impl ServiceRows {
    /// Every order with a row of this hash.
    fn all(&self, hash: u64) -> impl Iterator<Item = &ForeignOrder> {
        let start = self.rows.partition_point(|(h, _)| *h < hash);
        self.rows[start..]
            .iter()
            .take_while(move |(h, _)| *h == hash)
            .filter_map(|(_, i)| self.orders.get(*i as usize))
    }

    /// The first order with a row of this hash.
    fn find(&self, hash: u64) -> Option<&ForeignOrder> {
        self.all(hash).next()
    }
}

/// What another batch has of a row's reference in another spelling ([`Earlier::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The reference in a spelling that folds to it: a repeat.
    Repeat(Repeat),
    /// The reference but for `-`, `_` and spaces: a likely repeat, a warning.
    Likely(LikelyReference),
}

/// A 64-bit hash of a reference as a person reads it ([`Folded`]: any case, width or
/// look-alike letters).
fn folded_hash(reference: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    Folded(reference).hash(&mut h);
    h.finish()
}

/// The high 32 bits of a likeness.
fn high_bits(l: i64) -> u32 {
    ((l as u64) >> 32) as u32
}
