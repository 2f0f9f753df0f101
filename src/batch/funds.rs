//! What a batch costs and what pays for it: the price of a row, the card or balance it is paid
//! from, the balance pre-flight that `run` and `validate` share, and what the service stopped
//! for want of funds (or of its spending limit) during a run.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rust_decimal::Decimal;
use serde::Serialize;

use crate::api::models::Product;
use crate::api::{ApiError, Client};
use crate::input::rules::RowSpec;
use crate::ledger::{self, Ledger, OrderState, RowState};

use super::outcome::RunError;

/// One payment currency's balance against what the rows still to pay need from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BalanceCheck {
    pub currency: String,
    pub needed: Decimal,
    pub available: Decimal,
    pub enough: bool,
}

/// What the rows to pay draw on the balances (card-paid rows draw on none).
#[derive(Debug, Clone, Default)]
pub struct Need {
    /// Per payment currency, the prices of the rows priced in it: checked against its balance.
    pub from_balance: BTreeMap<String, Decimal>,
    /// Per (payment currency, product currency), the prices of the rows the service converts
    /// at order time: known only then, not checked.
    pub converted: BTreeMap<(String, String), Decimal>,
}

impl Need {
    /// Counts a row paid by `card` (or, when `None`, from its payment currency's balance).
    pub fn add(&mut self, spec: &RowSpec, card: Option<&str>, by_code: &HashMap<&str, &Product>) {
        if card.is_some() {
            return;
        }
        let price = row_price(spec, by_code);
        if !is_converted(spec, card) {
            *self
                .from_balance
                .entry(spec.payment_currency.clone())
                .or_default() += price;
        } else {
            *self
                .converted
                .entry((spec.payment_currency.clone(), spec.currency.clone()))
                .or_default() += price;
        }
    }
}

/// Reads the balance of each currency, all at once, checked once it is known what is new to
/// pay ([`check`]): before the ledger is written when the file is read in two passes. The one
/// pass of a new batch starts each read ([`BalanceReads`]) as soon as its rows first draw on
/// the currency, and checks them at its end, its transaction still open (the ledger's lock
/// keeps every other writer out meanwhile).
pub async fn read_balances(
    client: &Client,
    currencies: impl IntoIterator<Item = String>,
) -> BTreeMap<String, Result<Decimal, ApiError>> {
    let mut reads = BalanceReads::default();
    for currency in currencies {
        reads.start(client, currency);
    }
    reads.finish().await
}

/// Balances being read, one request each, all at once.
#[derive(Default)]
pub struct BalanceReads {
    started: BTreeSet<String>,
    reads: tokio::task::JoinSet<(String, Result<Decimal, ApiError>)>,
}

impl BalanceReads {
    /// Starts reading `currency`'s balance, unless it is being read.
    pub fn start(&mut self, client: &Client, currency: String) {
        if !self.started.insert(currency.clone()) {
            return;
        }
        let client = client.clone();
        self.reads.spawn(async move {
            let balance = client.balance(&currency).await.map(|b| b.balance);
            (currency, balance)
        });
    }

    /// Every balance started, once read (a currency whose read did not end is missing, and
    /// the pre-flight says it was not read).
    pub async fn finish(mut self) -> BTreeMap<String, Result<Decimal, ApiError>> {
        let mut read = BTreeMap::new();
        while let Some(done) = self.reads.join_next().await {
            if let Ok((currency, balance)) = done {
                read.insert(currency, balance);
            }
        }
        read
    }
}

/// The balance pre-flight of `run` and `validate`: each balance `need`s draws on, against what
/// it has. A balance that could not be read stops the check (a refused key as such).
pub fn check(
    need: &BTreeMap<String, Decimal>,
    balances: &mut BTreeMap<String, Result<Decimal, ApiError>>,
) -> Result<Vec<BalanceCheck>, RunError> {
    let mut checks = Vec::new();
    for (currency, amount) in need {
        let available = match balances.remove(currency) {
            Some(Ok(available)) => available,
            Some(Err(e)) => return Err(RunError::from_api(e)),
            None => {
                return Err(RunError::Ledger(ledger::LedgerError::Corrupt(format!(
                    "the balance of {currency} was not read"
                ))));
            }
        };
        checks.push(BalanceCheck {
            currency: currency.clone(),
            needed: *amount,
            available,
            enough: available >= *amount,
        });
    }
    Ok(checks)
}

/// Price of a row in its product's currency: face value less discount. For a choice of
/// products the smallest discount counts (the highest price the recipient's choice can cost).
pub fn row_price(spec: &RowSpec, products: &HashMap<&str, &Product>) -> Decimal {
    price(
        &spec.product_codes,
        spec.face_value,
        &spec.currency,
        products,
    )
}

/// Face value less the smallest discount of `codes`, to the currency's minor unit.
fn price(
    codes: &[String],
    face_value: Decimal,
    currency: &str,
    products: &HashMap<&str, &Product>,
) -> Decimal {
    let discount = codes
        .iter()
        .filter_map(|c| products.get(c.as_str()))
        .map(|p| p.discount())
        .min()
        .unwrap_or(Decimal::ZERO);
    let places = crate::money::minor_units(currency);
    (face_value * (Decimal::ONE - discount)).round_dp(places)
}

/// Whether a row is paid from the balance of another currency than its product's: the service
/// converts it (embedded FX) only in an order of one item, sent in sync mode.
pub fn is_converted(spec: &RowSpec, card: Option<&str>) -> bool {
    card.is_none() && spec.currency != spec.payment_currency
}

/// The card a row is paid by: its own `card_id` cell, else `--card-id`, else none (balance).
pub fn row_card<'a>(spec: &'a RowSpec, default_card: Option<&'a str>) -> Option<&'a str> {
    spec.card_id
        .as_deref()
        .filter(|c| !c.is_empty())
        .or(default_card)
}

/// The rows a stop of the service left unpaid: per payment currency (balance-paid rows only),
/// (rows, rows converted from another currency, what the others need); and the rows the
/// service refused for it, and all unpaid rows.
#[derive(Default)]
struct Unpaid {
    per_currency: BTreeMap<String, (usize, usize, Decimal)>,
    refused: usize,
    all: usize,
}

impl Unpaid {
    /// Rows not sent, or refused for a balance too low or the account's spending limit.
    fn of(
        ledger: &Ledger,
        batch: &ledger::BatchRecord,
        products: &[Product],
    ) -> Result<Self, RunError> {
        let by_code: HashMap<&str, &Product> =
            products.iter().map(|p| (p.code.as_str(), p)).collect();
        let mut unpaid = Unpaid::default();
        // One row at a time: a batch can hold a million.
        ledger.visit_planned_or_refused(batch.id, |row| {
            let stopped = match row.row_state {
                RowState::Planned => row.order_state == OrderState::Intent,
                RowState::Rejected => matches!(
                    row.error_type.as_deref(),
                    Some("insufficient_funds" | "insufficient_balance" | "ordering_restricted")
                ),
                _ => false,
            };
            if stopped {
                unpaid.add(row, &by_code);
            }
        })?;
        Ok(unpaid)
    }

    fn add(&mut self, row: &ledger::HeldRow, by_code: &HashMap<&str, &Product>) {
        self.all += 1;
        if row.row_state == RowState::Rejected {
            self.refused += 1;
        }
        if row.card_id.is_some() {
            return;
        }
        let entry = self
            .per_currency
            .entry(row.payment_currency.clone())
            .or_default();
        entry.0 += 1;
        match row
            .spec
            .as_deref()
            .and_then(|s| serde_json::from_str::<StoredPrice>(s).ok())
        {
            Some(spec) if spec.currency == row.payment_currency => {
                entry.2 += price(
                    &spec.product_codes,
                    spec.face_value,
                    &spec.currency,
                    by_code,
                );
            }
            _ => entry.1 += 1,
        }
    }
}

/// What the service stopped in this run, for a person: per balance too low, the rows it left
/// unpaid, what they need, what the balance has and how much is missing; for the account's
/// spending limit, the rows left unpaid. With what to do next.
pub fn held_lines(
    ledger: &Ledger,
    batch: &ledger::BatchRecord,
    products: &[Product],
    held: &BTreeMap<String, String>,
    balances: &BTreeMap<String, Option<Decimal>>,
) -> Result<Vec<String>, RunError> {
    let unpaid = Unpaid::of(ledger, batch, products)?;
    let then = if unpaid.refused > 0 {
        format!(
            "then `paybatch retry --batch {}` (for the {} rows the service refused) and run the same command again",
            batch.name, unpaid.refused
        )
    } else {
        "then run the same command again".to_string()
    };
    let mut lines = Vec::new();
    if let Some(why) = held.get("account") {
        lines.push(format!(
            "the service stopped ordering for this account ({why}): {} rows not paid; ask the account's owner to raise its spending limit, {then}",
            unpaid.all
        ));
    }
    for (what, why) in held {
        let Some(currency) = what.strip_prefix("balance ") else {
            continue;
        };
        let available = balances.get(currency).copied().flatten();
        lines.push(balance_line(currency, why, &unpaid, available, &then));
    }
    Ok(lines)
}

/// One balance the service found too low: the rows it left unpaid, what they need, what the
/// balance has and how much is missing.
fn balance_line(
    currency: &str,
    why: &str,
    unpaid: &Unpaid,
    available: Option<Decimal>,
    then: &str,
) -> String {
    let (rows, converted, need) = unpaid
        .per_currency
        .get(currency)
        .cloned()
        .unwrap_or_default();
    let has = match &available {
        Some(available) => format!("the balance has {available} {currency}"),
        None => "the balance could not be read".to_string(),
    };
    let money = match (&available, rows - converted) {
        (_, 0) => has,
        (Some(available), _) if *available < need => format!(
            "those priced in {currency} need {need} {currency}, {has}: {} {currency} missing",
            need - available
        ),
        (_, _) => format!("those priced in {currency} need {need} {currency}, {has}"),
    };
    let fx = if converted > 0 {
        format!(
            "; {converted} of them are converted from other currencies, priced in {currency} only when ordered"
        )
    } else {
        String::new()
    };
    format!(
        "the {currency} balance is too low ({why}): {rows} rows not paid; {money}{fx}; top up the {currency} balance, {then}"
    )
}

/// What [`held_lines`] reads of a stored row (`rows.spec`).
#[derive(serde::Deserialize)]
struct StoredPrice {
    product_codes: Vec<String>,
    #[serde(with = "rust_decimal::serde::str")]
    face_value: Decimal,
    currency: String,
}
