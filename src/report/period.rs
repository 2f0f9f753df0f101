//! What a batch and a period of batches cost, as finance books it: the `--json` objects of
//! `paybatch report` and the period's HTML page. Every table of a period (what left each
//! balance, the costs per product and per `--group-by` column, the line per batch, the
//! journal's totals, the suspense) is computed from the same lines of the books
//! ([`PeriodTally::book`]), each attempt booked in the period once, so that they agree to the
//! cent: what left a balance is what the paid lines charged; a suspense line (an order held
//! for a person, a total not confirmed) is totalled apart and never added to it. Amounts are
//! per environment: a rehearsal's money is never added to another environment's.

use std::collections::BTreeMap;

use minijinja::Value;
use minijinja::value::Serde;
use rust_decimal::Decimal;
use serde::Serialize;

use crate::ledger::approvals::{Approval, NO_APPROVAL};
use crate::ledger::{BatchRecord, RowState};
use crate::money::display_amount;

use super::costs::{CostKey, CostLine, Costs};
use super::journal::LineKind;
use super::page::{Balance, CostTable, PERIOD_TEMPLATE, PageError, balances, engine};
use super::tally::{Charge, Tally};
use super::unclaimed::{Unclaimed, UnclaimedLine};

/// What left one payer (a card, or a balance) as `--json` says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalanceJson {
    /// `balance USD`, or `card ID`.
    pub payer: String,
    pub currency: String,
    pub rows: usize,
    pub charged: String,
    /// Per product currency (a conversion when it is not the balance's).
    pub lines: Vec<BalanceLineJson>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BalanceLineJson {
    pub product_currency: String,
    pub rows: usize,
    pub face_value: String,
    pub charged: String,
}

/// One line of the books, as the period counts it: `rows` attempts (one, or the rows of a
/// MISMATCH order) of products in `product_currency` worth `face_value`, priced at `price`;
/// `charged` in `balance_currency` (for a suspense line what the service claimed, `None` when
/// its answer does not say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booked<'a> {
    pub kind: LineKind,
    pub environment: &'a str,
    pub batch: &'a str,
    /// When its order was booked (RFC 3339).
    pub booked_at: &'a str,
    /// `balance USD`, or `card ID`.
    pub payer: &'a str,
    pub rows: usize,
    /// The products as the page names them (`A|B`).
    pub product: &'a str,
    pub product_currency: &'a str,
    pub face_value: Decimal,
    pub price: Decimal,
    pub balance_currency: &'a str,
    pub charged: Option<Decimal>,
    /// The value of each `--group-by` column of the period, in its order.
    pub groups: &'a [String],
}

/// What the lines in suspense of one environment and currency claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuspenseJson {
    pub environment: String,
    /// The currency the service claimed it in (the payment currency when it said nothing).
    pub currency: String,
    pub lines: usize,
    pub rows: usize,
    /// What the service claimed, the lines that said it.
    pub claimed: String,
    /// What their rows were expected to cost (face value), per product currency.
    pub expected: Vec<AmountJson>,
}

/// A total line of the journal, as the period's lines give it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalTotalJson {
    pub environment: String,
    pub kind: LineKind,
    pub currency: String,
    pub lines: usize,
    pub amount: String,
}

/// A month of the period closed with `paybatch close`, as `--json` and the page say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClosedJson {
    pub month: String,
    pub closed_at: String,
    pub by: String,
    pub journal_digest: String,
}

/// The costs per value of one `--group-by` column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupJson {
    pub column: String,
    pub lines: Vec<CostLine>,
}

/// `paybatch report --batch NAME --json`: what the batch cost, where finance books it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchCostsJson {
    pub batch: String,
    pub environment: String,
    pub rows: usize,
    /// Rows COMPLETED.
    pub paid_rows: usize,
    pub balances: Vec<BalanceJson>,
    pub products: Vec<CostLine>,
    pub groups: Vec<GroupJson>,
}

/// An amount and its currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AmountJson {
    pub currency: String,
    pub amount: String,
}

/// A batch with lines booked in a period: when the last of them was booked, how many were
/// paid and held in suspense, and what the paid ones charged per currency. Made from the
/// period's lines alone, so that a month's batch lines never change once the month is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodBatch {
    pub name: String,
    /// When the last of its lines of the period was booked (RFC 3339).
    pub last_booked_at: String,
    /// Paid attempts booked in the period.
    pub paid_rows: usize,
    /// Rows held in suspense booked in the period.
    pub suspense_rows: usize,
    pub charged: Vec<AmountJson>,
    /// The batch's last run held to an approved plan by the end of the period: its digest,
    /// who ran it and who approved it (`paybatch approve`); or that no run was held to one.
    pub approval: String,
}

/// What left one payer of one environment in a period, as `--json` says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodBalanceJson {
    /// `sim`, `playground`, `production` or `custom`: amounts of different environments are
    /// never added.
    pub environment: String,
    #[serde(flatten)]
    pub balance: BalanceJson,
}

/// `paybatch report --since DATE --json`: the period's totals and its batches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodJson {
    pub since: String,
    pub until: String,
    pub batches: Vec<PeriodBatch>,
    /// Batches not finished, left out of the period.
    pub unfinished: Vec<String>,
    /// Rows of the batches completed in the period.
    pub rows: usize,
    /// Paid attempts booked in the period.
    pub paid_rows: usize,
    pub balances: Vec<PeriodBalanceJson>,
    pub products: Vec<CostLine>,
    pub groups: Vec<GroupJson>,
    pub suspense: Vec<SuspenseJson>,
    pub journal_totals: Vec<JournalTotalJson>,
    /// The months of the period closed.
    pub closed: Vec<ClosedJson>,
    /// What the links of the period's batches not claimed cost (as in `payouts --json`).
    pub unclaimed: Option<Unclaimed>,
}

/// The last run of a batch held to an approved plan, in words (not escaped): `sha256:… run by
/// alice@pay-1 (run ID); approved by bob@desk-2 at TIME`; or that none was.
fn approval_line(approvals: &[Approval]) -> String {
    match approvals.last() {
        None => NO_APPROVAL.to_string(),
        Some(a) => format!(
            "{} run by {} (run {}); {}",
            crate::input::scan::short_digest(&a.digest),
            a.by(),
            a.run,
            a.approvers()
        ),
    }
}

type Charged = BTreeMap<(String, String), BTreeMap<String, Charge>>;

fn balances_json(charged: &Charged) -> Vec<BalanceJson> {
    charged
        .iter()
        .map(|((payer, currency), per_product)| BalanceJson {
            payer: payer.clone(),
            currency: currency.clone(),
            rows: per_product.values().map(|c| c.rows).sum(),
            charged: display_amount(per_product.values().map(|c| c.charged).sum(), currency),
            lines: per_product
                .iter()
                .map(|(product_currency, c)| BalanceLineJson {
                    product_currency: product_currency.clone(),
                    rows: c.rows,
                    face_value: display_amount(c.face_value, product_currency),
                    charged: display_amount(c.charged, currency),
                })
                .collect(),
        })
        .collect()
}

fn groups_json<'a>(costs: impl Iterator<Item = (Option<&'a str>, &'a Costs)>) -> Vec<GroupJson> {
    costs
        .filter_map(|(column, costs)| {
            Some(GroupJson {
                column: column?.to_string(),
                lines: costs.shown(),
            })
        })
        .collect()
}

/// The `--json` object of one batch, from its tally.
pub fn batch_json(batch: &BatchRecord, tally: &Tally) -> BatchCostsJson {
    BatchCostsJson {
        batch: batch.name.clone(),
        environment: batch.environment.clone(),
        rows: tally.rows(),
        paid_rows: tally.rows_in(RowState::Completed),
        balances: balances_json(&tally.charged),
        products: tally
            .costs()
            .next()
            .map(|(_, c)| c.shown())
            .unwrap_or_default(),
        groups: groups_json(tally.costs()),
    }
}

/// What the suspense lines of one environment and claimed currency add up to.
#[derive(Debug, Clone, Default)]
struct Suspense {
    lines: usize,
    rows: usize,
    claimed: Decimal,
    /// Product currency -> face value.
    expected: BTreeMap<String, Decimal>,
}

/// The totals of a period: its lines of the books, and the rows of its batches.
pub struct PeriodTally {
    since: String,
    until: String,
    /// Environment -> what left each payer, as the journal books it.
    charged: BTreeMap<String, Charged>,
    /// Products first, then each `--group-by` column as asked.
    costs: Vec<(Option<String>, Costs)>,
    batches: Vec<PeriodBatch>,
    /// Per batch line: what its paid lines charged, per currency.
    batch_charged: Vec<BTreeMap<String, Decimal>>,
    /// (environment, claimed currency) -> the suspense lines.
    suspense: BTreeMap<(String, String), Suspense>,
    /// (environment, kind, currency) -> (lines, amount): the journal's totals.
    journal: BTreeMap<(String, LineKind, String), (usize, Decimal)>,
    unfinished: Vec<String>,
    closed: Vec<ClosedJson>,
    /// When the period is one closed month: when and by whom, said instead of when the page
    /// was made, so that the page is the same every time.
    as_closed: Option<String>,
    rows: usize,
    paid_rows: usize,
    /// What the links of the period's batches not claimed cost, when it was asked.
    unclaimed: Option<Unclaimed>,
}

impl PeriodTally {
    /// Sets what the links of the period's batches not claimed, expired and cancelled cost
    /// the paying balances ([`crate::ops::period::unclaimed_of`]).
    pub fn set_unclaimed(&mut self, unclaimed: Unclaimed) {
        self.unclaimed = Some(unclaimed);
    }

    /// An empty period from `since` to `until` (dates as given), with the costs per each
    /// column of `group_by`.
    pub fn new(since: &str, until: &str, group_by: &[String]) -> Self {
        let mut costs = vec![(None, Costs::default())];
        costs.extend(group_by.iter().map(|c| (Some(c.clone()), Costs::default())));
        PeriodTally {
            since: since.to_string(),
            until: until.to_string(),
            charged: BTreeMap::new(),
            costs,
            batches: Vec::new(),
            batch_charged: Vec::new(),
            suspense: BTreeMap::new(),
            journal: BTreeMap::new(),
            unfinished: Vec::new(),
            closed: Vec::new(),
            as_closed: None,
            rows: 0,
            paid_rows: 0,
            unclaimed: None,
        }
    }

    /// The closed month the period is exactly, if it is one.
    pub fn closed_exactly(&self) -> Option<&ClosedJson> {
        self.as_closed.as_ref().and_then(|_| self.closed.last())
    }

    /// Names a closed month of the period; `exactly`: the period is that month.
    pub fn closed(&mut self, closed: ClosedJson, exactly: bool) {
        if exactly {
            self.as_closed = Some(format!(
                "as closed at {} by {} (journal {})",
                closed.closed_at, closed.by, closed.journal_digest
            ));
        }
        self.closed.push(closed);
    }

    /// Names a batch left out because it is not finished.
    pub fn unfinished(&mut self, name: &str) {
        self.unfinished.push(name.to_string());
    }

    /// Books one line: what left its payer, its costs per product and per column and its
    /// batch's line when it is paid; the suspense totals when it is held; the journal's
    /// totals either way. Every table of the period is made here, from the same lines.
    pub fn book(&mut self, line: &Booked<'_>) {
        let batch = self.batch_line(line.batch);
        if self.batches[batch].last_booked_at.as_str() < line.booked_at {
            self.batches[batch].last_booked_at = line.booked_at.to_string();
        }
        let journal = self
            .journal
            .entry((
                line.environment.to_string(),
                line.kind,
                line.balance_currency.to_string(),
            ))
            .or_default();
        journal.0 += 1;
        journal.1 += line.charged.unwrap_or_default();
        if line.kind == LineKind::Suspense {
            self.batches[batch].suspense_rows += line.rows;
            let s = self
                .suspense
                .entry((
                    line.environment.to_string(),
                    line.balance_currency.to_string(),
                ))
                .or_default();
            s.lines += 1;
            s.rows += line.rows;
            s.claimed += line.charged.unwrap_or_default();
            *s.expected
                .entry(line.product_currency.to_string())
                .or_default() += line.face_value;
            return;
        }
        let charged = line.charged.unwrap_or_default();
        self.paid_rows += line.rows;
        self.batches[batch].paid_rows += line.rows;
        *self.batch_charged[batch]
            .entry(line.balance_currency.to_string())
            .or_default() += charged;
        self.charged
            .entry(line.environment.to_string())
            .or_default()
            .entry((line.payer.to_string(), line.balance_currency.to_string()))
            .or_default()
            .entry(line.product_currency.to_string())
            .or_default()
            .merge(&Charge {
                rows: line.rows,
                face_value: line.face_value,
                charged,
            });
        for (i, (_, costs)) in self.costs.iter_mut().enumerate() {
            let value = match i {
                0 => line.product.to_string(),
                _ => line.groups.get(i - 1).cloned().unwrap_or_default(),
            };
            costs.add(
                CostKey {
                    value,
                    product_currency: line.product_currency.to_string(),
                    charged_currency: line.balance_currency.to_string(),
                },
                line.face_value,
                line.price,
                charged,
            );
        }
    }

    /// The place of batch `name`'s line, added when it has none yet.
    fn batch_line(&mut self, name: &str) -> usize {
        if let Some(i) = self.batches.iter().position(|b| b.name == name) {
            return i;
        }
        self.batches.push(PeriodBatch {
            name: name.to_string(),
            last_booked_at: String::new(),
            paid_rows: 0,
            suspense_rows: 0,
            charged: Vec::new(),
            approval: approval_line(&[]),
        });
        self.batch_charged.push(BTreeMap::new());
        self.batches.len() - 1
    }

    /// Counts the rows of a batch completed in the period (its rows are in the period's
    /// result CSV).
    pub fn absorb(&mut self, tally: &Tally) {
        self.rows += tally.rows();
    }

    /// Names the approvals of batch `name`, those recorded by the end of the period.
    pub fn approvals_of(&mut self, name: &str, approvals: &[Approval]) {
        let end = format!("{}T23:59:59.999Z", self.until);
        let by_then: Vec<Approval> = approvals
            .iter()
            .filter(|a| a.approved_at.as_str() <= end.as_str())
            .cloned()
            .collect();
        if let Some(b) = self.batches.iter_mut().find(|b| b.name == name) {
            b.approval = approval_line(&by_then);
        }
    }

    /// The environments of the period's lines, joined (`sim`, `production`, ...).
    pub fn environments(&self) -> String {
        let mut all: Vec<&str> = self
            .journal
            .keys()
            .map(|(environment, _, _)| environment.as_str())
            .collect();
        all.dedup();
        all.join(", ")
    }

    /// The batches of the period so far, each with what its paid lines charged.
    pub fn batches(&self) -> Vec<PeriodBatch> {
        self.batches
            .iter()
            .zip(&self.batch_charged)
            .map(|(b, charged)| PeriodBatch {
                charged: charged
                    .iter()
                    .map(|(currency, amount)| AmountJson {
                        amount: display_amount(*amount, currency),
                        currency: currency.clone(),
                    })
                    .collect(),
                ..b.clone()
            })
            .collect()
    }

    fn suspense_json(&self) -> Vec<SuspenseJson> {
        self.suspense
            .iter()
            .map(|((environment, currency), s)| SuspenseJson {
                environment: environment.clone(),
                currency: currency.clone(),
                lines: s.lines,
                rows: s.rows,
                claimed: display_amount(s.claimed, currency),
                expected: s
                    .expected
                    .iter()
                    .map(|(c, v)| AmountJson {
                        currency: c.clone(),
                        amount: display_amount(*v, c),
                    })
                    .collect(),
            })
            .collect()
    }

    fn journal_json(&self) -> Vec<JournalTotalJson> {
        let mut totals: Vec<JournalTotalJson> = self
            .journal
            .iter()
            .map(
                |((environment, kind, currency), (lines, amount))| JournalTotalJson {
                    environment: environment.clone(),
                    kind: *kind,
                    currency: currency.clone(),
                    lines: *lines,
                    amount: display_amount(*amount, currency),
                },
            )
            .collect();
        totals.sort_by(|a, b| (a.kind, &a.environment).cmp(&(b.kind, &b.environment)));
        totals
    }

    /// The period's `--json` object.
    pub fn json(&self) -> PeriodJson {
        PeriodJson {
            since: self.since.clone(),
            until: self.until.clone(),
            batches: self.batches(),
            unfinished: self.unfinished.clone(),
            rows: self.rows,
            paid_rows: self.paid_rows,
            balances: self
                .charged
                .iter()
                .flat_map(|(environment, charged)| {
                    balances_json(charged)
                        .into_iter()
                        .map(|balance| PeriodBalanceJson {
                            environment: environment.clone(),
                            balance,
                        })
                })
                .collect(),
            products: self
                .costs
                .first()
                .map(|(_, c)| c.shown())
                .unwrap_or_default(),
            groups: groups_json(self.costs.iter().map(|(c, costs)| (c.as_deref(), costs))),
            suspense: self.suspense_json(),
            journal_totals: self.journal_json(),
            closed: self.closed.clone(),
            unclaimed: self.unclaimed.clone(),
        }
    }

    /// The period's HTML page: what left each balance, the costs per product and per column,
    /// a line per batch. No payout link (the tallies hold none).
    pub fn render(
        &self,
        environments: &str,
        ledger_path: &str,
        generated_at: &str,
        version: &str,
    ) -> Result<String, PageError> {
        let costs: Vec<CostTable> = self
            .costs
            .iter()
            .map(|(column, costs)| {
                let (heading, column) = match column {
                    None => ("product".to_string(), "Product".to_string()),
                    Some(name) => (name.to_lowercase(), name.clone()),
                };
                CostTable {
                    heading,
                    column,
                    lines: costs.shown(),
                }
            })
            .collect();
        let page = PeriodPage {
            since: &self.since,
            until: &self.until,
            environments,
            paid_rows: self.paid_rows,
            suspense_lines: self.suspense.values().map(|s| s.lines).sum(),
            balances: self
                .charged
                .iter()
                .map(|(environment, charged)| EnvironmentBalances {
                    environment: environment.clone(),
                    balances: balances(charged),
                })
                .collect(),
            costs,
            batches: self.batches(),
            // What is unfinished today is no part of a closed month's page.
            unfinished: if self.as_closed.is_some() {
                &[]
            } else {
                &self.unfinished
            },
            suspense: self.suspense_json(),
            journal_totals: self.journal_json(),
            closed: &self.closed,
            ledger: ledger_path,
            generated_at: self.as_closed.as_deref().unwrap_or(generated_at),
            version,
            unclaimed: self.unclaimed.as_ref().map(Unclaimed::page_lines),
        };
        let env = engine()?;
        let page = env
            .get_template(PERIOD_TEMPLATE)?
            .render(Value::from(Serde(&page)))?;
        Ok(page)
    }
}

/// The period page's data, in the template's order.
#[derive(Serialize)]
struct PeriodPage<'a> {
    since: &'a str,
    until: &'a str,
    /// The environments of the batches (`sim`, `production`, ...), joined.
    environments: &'a str,
    paid_rows: usize,
    suspense_lines: usize,
    /// Per environment, in name order.
    balances: Vec<EnvironmentBalances>,
    costs: Vec<CostTable>,
    batches: Vec<PeriodBatch>,
    unfinished: &'a [String],
    suspense: Vec<SuspenseJson>,
    journal_totals: Vec<JournalTotalJson>,
    closed: &'a [ClosedJson],
    ledger: &'a str,
    generated_at: &'a str,
    version: &'a str,
    /// The table of unclaimed value (`unclaimed.html`), when it was asked.
    unclaimed: Option<Vec<UnclaimedLine>>,
}

/// What left the balances of one environment.
#[derive(Serialize)]
struct EnvironmentBalances {
    environment: String,
    balances: Vec<Balance>,
}
