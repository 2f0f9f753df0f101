//! What a batch and a period of batches cost, as finance books it: the `--json` objects of
//! `paybatch report` and the period's HTML page. A period's costs are the sum of its batches'
//! tallies ([`PeriodTally::absorb`]): totals per product and per `--group-by` column, and a
//! line per batch; never its rows. What left each balance is what the journal books
//! ([`PeriodTally::book`]): every paid attempt whose order became final in the period, per
//! environment, so that a rehearsal's money is never added to another environment's.

use std::collections::BTreeMap;

use minijinja::Value;
use minijinja::value::Serde;
use rust_decimal::Decimal;
use serde::Serialize;

use crate::ledger::approvals::NO_APPROVAL;
use crate::ledger::{BatchRecord, RowState};
use crate::money::display_amount;

use super::costs::{CostLine, Costs};
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

/// What one booking of the journal took from a balance: `rows` paid attempts of products in
/// `product_currency` worth `face_value`, `charged` in `balance_currency`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paid<'a> {
    pub rows: usize,
    pub product_currency: &'a str,
    pub face_value: Decimal,
    pub balance_currency: &'a str,
    pub charged: Decimal,
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

/// A batch of a period: when it completed, its rows and what it charged per currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodBatch {
    pub name: String,
    pub completed_at: String,
    pub rows: usize,
    pub paid_rows: usize,
    pub charged: Vec<AmountJson>,
    /// The batch's last run held to an approved plan: its digest, who ran it and who
    /// approved it (`paybatch approve`); or that no run was held to one.
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
    pub rows: usize,
    pub paid_rows: usize,
    pub balances: Vec<PeriodBalanceJson>,
    pub products: Vec<CostLine>,
    pub groups: Vec<GroupJson>,
    /// What the links of the period's batches not claimed cost (as in `payouts --json`).
    pub unclaimed: Option<Unclaimed>,
}

/// The last run of a batch held to an approved plan, in words (not escaped): `sha256:… run by
/// alice@pay-1 (run ID); approved by bob@desk-2 at TIME`; or that none was.
fn approval_line(tally: &Tally) -> String {
    match tally.approvals.last() {
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

/// The totals of a period: the sum of its batches' tallies, and a line per batch.
pub struct PeriodTally {
    since: String,
    until: String,
    /// Environment -> what left each payer, as the journal books it.
    charged: BTreeMap<String, Charged>,
    /// Products first, then each `--group-by` column as asked.
    costs: Vec<(Option<String>, Costs)>,
    batches: Vec<PeriodBatch>,
    unfinished: Vec<String>,
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
            unfinished: Vec::new(),
            rows: 0,
            paid_rows: 0,
            unclaimed: None,
        }
    }

    /// Names a batch left out because it is not finished.
    pub fn unfinished(&mut self, name: &str) {
        self.unfinished.push(name.to_string());
    }

    /// Counts what left `payer` (`balance USD`, `card ID`) of `environment` for paid
    /// attempts: the period's balances hold what its journal books.
    pub fn book(&mut self, environment: &str, payer: &str, paid: &Paid<'_>) {
        self.charged
            .entry(environment.to_string())
            .or_default()
            .entry((payer.to_string(), paid.balance_currency.to_string()))
            .or_default()
            .entry(paid.product_currency.to_string())
            .or_default()
            .merge(&Charge {
                rows: paid.rows,
                face_value: paid.face_value,
                charged: paid.charged,
            });
    }

    /// Adds a batch of the period, completed at `completed_at`, counted in `tally` (made
    /// with [`Tally::group_by_or_blank`] for each column of the period, in the same order).
    pub fn absorb(&mut self, name: &str, completed_at: &str, tally: &Tally) {
        let mut per_currency: BTreeMap<String, Decimal> = BTreeMap::new();
        for (key, per_product) in tally.charges() {
            for c in per_product.values() {
                *per_currency.entry(key.1.clone()).or_default() += c.charged;
            }
        }
        for ((_, mine), (_, theirs)) in self.costs.iter_mut().zip(tally.costs()) {
            mine.merge(theirs);
        }
        let paid_rows = tally.rows_in(RowState::Completed);
        self.rows += tally.rows();
        self.paid_rows += paid_rows;
        self.batches.push(PeriodBatch {
            name: name.to_string(),
            completed_at: completed_at.to_string(),
            rows: tally.rows(),
            paid_rows,
            approval: approval_line(tally),
            charged: per_currency
                .into_iter()
                .map(|(currency, amount)| AmountJson {
                    amount: display_amount(amount, &currency),
                    currency,
                })
                .collect(),
        });
    }

    /// The batches of the period so far.
    pub fn batches(&self) -> &[PeriodBatch] {
        &self.batches
    }

    /// The period's `--json` object.
    pub fn json(&self) -> PeriodJson {
        PeriodJson {
            since: self.since.clone(),
            until: self.until.clone(),
            batches: self.batches.clone(),
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
            rows: self.rows,
            paid_rows: self.paid_rows,
            balances: self
                .charged
                .iter()
                .map(|(environment, charged)| EnvironmentBalances {
                    environment: environment.clone(),
                    balances: balances(charged),
                })
                .collect(),
            costs,
            batches: &self.batches,
            unfinished: &self.unfinished,
            ledger: ledger_path,
            generated_at,
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
    rows: usize,
    paid_rows: usize,
    /// Per environment, in name order.
    balances: Vec<EnvironmentBalances>,
    costs: Vec<CostTable>,
    batches: &'a [PeriodBatch],
    unfinished: &'a [String],
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
