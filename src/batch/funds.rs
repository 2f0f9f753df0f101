//! What a batch costs and what pays for it: the price of a row, the card or balance it is paid
//! from, what the rows converted by the service will cost (the service's estimate, else the
//! rate of the ledger's latest converted order of the pair with a margin), the balance pre-flight
//! that `run` and `validate` share, and what the service stopped for want of funds (or of its
//! spending limit) during a run.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rust_decimal::{Decimal, RoundingStrategy};
use serde::Serialize;

use crate::api::models::{Product, ProductSelection};
use crate::api::{ApiError, Client};
use crate::input::rules::RowSpec;
use crate::ledger::{self, Ledger, OrderState, RowState};
use crate::money::{human_amount, in_currency};

use super::send_context::ServiceStop;
use crate::ops::error::OpError;

/// Added to what a rate read from the ledger gives (3 %): the rate moves between the ledger's
/// last converted order of a currency pair and the orders of this batch.
pub const LEDGER_RATE_MARGIN: Decimal = Decimal::from_parts(3, 0, 0, false, 2);

/// Most estimate requests one pre-flight makes (one per kind of converted row): the kinds
/// beyond are priced from the ledger's rate, or not at all.
pub const MAX_ESTIMATES: usize = 50;

/// One payment currency's balance against what the rows still to pay need from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BalanceCheck {
    pub currency: String,
    /// What the rows priced in this currency and the converted rows that could be priced
    /// need.
    pub needed: Decimal,
    pub available: Decimal,
    pub enough: bool,
    /// The rows converted from other currencies that draw on this balance: what those priced
    /// cost (part of `needed`), and those not priced.
    pub converted: ConvertedCost,
}

impl BalanceCheck {
    /// What is missing, in the words `run` refuses a batch with and `validate` says: what is
    /// needed (and of it, what the converted rows are priced at, and how), what the balance has
    /// and how much is missing.
    pub fn short_words(&self) -> String {
        let c = &self.converted;
        let h = |amount: Decimal| human_amount(amount, &self.currency);
        let of_it = if c.rows > c.unpriced_rows {
            format!(
                " ({} for the rows priced in {cur}, {} for {} converted from other currencies, {})",
                h(self.needed - c.priced),
                h(c.priced),
                crate::text::rows(c.rows - c.unpriced_rows),
                c.priced_by.iter().cloned().collect::<Vec<_>>().join("; "),
                cur = self.currency,
            )
        } else {
            String::new()
        };
        format!(
            "{}: need {}{of_it}, available {}, short by {}",
            self.currency,
            h(self.needed),
            h(self.available),
            h(self.needed - self.available)
        )
    }

    /// For a balance that pays what is known but not the converted rows no one could price:
    /// plainly, that it may be short, and by how much at most.
    pub fn may_be_short(&self) -> Option<String> {
        let c = &self.converted;
        if !self.enough || c.unpriced_rows == 0 {
            return None;
        }
        let prices: Vec<String> = c
            .unpriced
            .iter()
            .map(|(cur, price)| format!("{} {cur}", human_amount(*price, cur)))
            .collect();
        let cur = &self.currency;
        let left = human_amount(self.available - self.needed, cur);
        let at_most = if self.available == self.needed {
            "nothing is left for them: each is refused and the balance is short by all they cost"
                .to_string()
        } else {
            format!(
                "{left} {cur} is left for them; if they cost more, the run stops part-way and the balance is short by at most what they cost less {left} {cur}"
            )
        };
        Some(format!(
            "{cur}: {} rows converted from {} are not priced here ({}): {at_most}",
            c.unpriced_rows,
            prices.join(" + "),
            c.why_not.as_deref().unwrap_or("no price known"),
        ))
    }
}

/// What the rows to pay draw on the balances (card-paid rows draw on none).
#[derive(Debug, Clone, Default)]
pub struct Need {
    /// Per payment currency, the prices of the rows priced in it: checked against its balance.
    pub from_balance: BTreeMap<String, Decimal>,
    /// The rows the service converts at order time (embedded FX), by kind: checked against
    /// their balance at what they are priced before sending ([`ConvertedPrices`]).
    pub converted: BTreeMap<ConvertedKind, usize>,
}

impl Need {
    /// Counts a row paid by `card` (or, when `None`, from its payment currency's balance).
    pub fn add(&mut self, spec: &RowSpec, card: Option<&str>, by_code: &HashMap<&str, &Product>) {
        if card.is_some() {
            return;
        }
        if !is_converted(spec, card) {
            let price = row_price(spec, by_code);
            // Looked up first: the currency is copied once per balance, not once per row.
            match self.from_balance.get_mut(&spec.payment_currency) {
                Some(needed) => *needed += price,
                None => {
                    self.from_balance
                        .insert(spec.payment_currency.clone(), price);
                }
            }
        } else {
            *self
                .converted
                .entry(ConvertedKind::of(spec, by_code))
                .or_default() += 1;
        }
    }

    /// The payment currencies whose balances the rows draw on.
    pub fn drawn(&self) -> BTreeSet<String> {
        self.from_balance
            .keys()
            .cloned()
            .chain(self.converted.keys().map(|k| k.payment_currency.clone()))
            .collect()
    }
}

/// What one order of a converted row asks for (each is an order of its own), and its price in
/// its product's currency.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConvertedKind {
    pub payment_currency: String,
    pub product_currency: String,
    pub product_codes: Vec<String>,
    /// Normalised: `10` and `10.00` are one kind.
    pub face_value: Decimal,
    /// Face value less discount, in the product's currency ([`row_price`]).
    pub price: Decimal,
}

impl ConvertedKind {
    pub fn of(spec: &RowSpec, by_code: &HashMap<&str, &Product>) -> Self {
        ConvertedKind {
            payment_currency: spec.payment_currency.clone(),
            product_currency: spec.currency.clone(),
            product_codes: spec.product_codes.clone(),
            face_value: spec.face_value.normalize(),
            price: row_price(spec, by_code),
        }
    }
}

/// How the charge of a converted row is known before it is sent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PricedBy {
    /// The service's estimate (`POST /order/estimate`).
    Estimate,
    /// The rate of the ledger's latest converted order of the pair (units of the product's
    /// currency one unit of the payment currency bought), when that order completed, plus
    /// [`LEDGER_RATE_MARGIN`].
    LedgerRate { rate: Decimal, completed_at: String },
    /// The rate the service's estimates of other rows of the pair give (the lowest: the
    /// dearest), plus [`LEDGER_RATE_MARGIN`]: for the kinds beyond [`MAX_ESTIMATES`].
    EstimatedRate { rate: Decimal },
}

impl PricedBy {
    /// For a person: how a charge of a `kind` row was found.
    fn words(&self, kind: &ConvertedKind) -> String {
        match self {
            PricedBy::Estimate => "estimated by the service".to_string(),
            PricedBy::LedgerRate { rate, completed_at } => format!(
                "at the rate of the ledger's last order converted from {} to {} ({} {} a {}, {completed_at}) plus {}%",
                kind.payment_currency,
                kind.product_currency,
                rate.normalize(),
                kind.product_currency,
                kind.payment_currency,
                (LEDGER_RATE_MARGIN * Decimal::ONE_HUNDRED).normalize(),
            ),
            PricedBy::EstimatedRate { rate } => format!(
                "at the rate of the service's estimates of other rows converted from {} to {} ({} {} a {}) plus {}%",
                kind.payment_currency,
                kind.product_currency,
                rate.normalize(),
                kind.product_currency,
                kind.payment_currency,
                (LEDGER_RATE_MARGIN * Decimal::ONE_HUNDRED).normalize(),
            ),
        }
    }
}

/// The rate of a converted order the ledger recorded: units of the product's currency one unit
/// of the payment currency bought (its price against what left the balance), and when it
/// completed; `None` when its amounts are not positive.
fn rate_of(c: &ledger::Conversion) -> Option<(Decimal, String)> {
    let positive = |d: Decimal| (d.is_sign_positive() && !d.is_zero()).then_some(d);
    let rate = positive(c.price)?.checked_div(positive(c.debited)?)?;
    Some((rate, c.completed_at.clone()))
}

/// What a row of `kind` costs from its balance at `rate` plus the margin, rounded up to the
/// payment currency's minor unit; `None` if it does not fit a decimal.
fn at_rate(kind: &ConvertedKind, rate: Decimal) -> Option<Decimal> {
    let places = crate::money::minor_units(&kind.payment_currency);
    kind.price
        .checked_div(rate)?
        .checked_mul(Decimal::ONE + LEDGER_RATE_MARGIN)
        .map(|d| d.round_dp_with_strategy(places, RoundingStrategy::AwayFromZero))
}

/// The converted rows' charges found before sending, per kind, and why the others are not.
#[derive(Debug, Clone, Default)]
pub struct ConvertedPrices {
    /// What one row of each kind priced costs from its balance, and how it was found.
    pub per_kind: BTreeMap<ConvertedKind, (Decimal, PricedBy)>,
    /// Per payment currency, why its converted rows not in `per_kind` are not priced.
    pub why_not: BTreeMap<String, String>,
    /// The currency pairs whose rate the ledger was asked for.
    looked_up: BTreeSet<(String, String)>,
}

impl ConvertedPrices {
    /// Prices the `kinds` the service did not estimate at the rate its estimates of other kinds
    /// of their pair give, else at the rate of the ledger's latest converted order of the pair
    /// (`latest`: payment currency, product currency), plus [`LEDGER_RATE_MARGIN`]; the others
    /// are not priced, with why. Each pair is looked up in the ledger once, and only when a
    /// kind of it has no price.
    pub fn price_from_ledger<'k>(
        &mut self,
        kinds: impl IntoIterator<Item = &'k ConvertedKind>,
        mut latest: impl FnMut(&str, &str) -> Result<Option<ledger::Conversion>, ledger::LedgerError>,
    ) -> Result<(), ledger::LedgerError> {
        let estimated = self.estimated_rates();
        let mut rates: BTreeMap<(String, String), Option<(Decimal, String)>> = BTreeMap::new();
        for kind in kinds {
            if self.per_kind.contains_key(kind) {
                continue;
            }
            let pair = (kind.payment_currency.clone(), kind.product_currency.clone());
            if let Some(rate) = estimated.get(&pair)
                && let Some(price) = at_rate(kind, *rate)
            {
                let by = PricedBy::EstimatedRate { rate: *rate };
                self.per_kind.insert(kind.clone(), (price, by));
                continue;
            }
            if !rates.contains_key(&pair) {
                let rate = if self.looked_up.insert(pair.clone()) {
                    latest(&pair.0, &pair.1)?.as_ref().and_then(rate_of)
                } else {
                    None
                };
                rates.insert(pair.clone(), rate);
            }
            let priced = rates[&pair].as_ref().and_then(|(rate, completed_at)| {
                let by = PricedBy::LedgerRate {
                    rate: *rate,
                    completed_at: completed_at.clone(),
                };
                at_rate(kind, *rate).map(|price| (price, by))
            });
            match priced {
                Some(priced) => {
                    self.per_kind.insert(kind.clone(), priced);
                }
                None => self.not_in_ledger(kind),
            }
        }
        Ok(())
    }

    /// Per currency pair, the lowest rate the service's estimates give (units of the product's
    /// currency a unit of the payment currency buys): the dearest.
    fn estimated_rates(&self) -> BTreeMap<(String, String), Decimal> {
        let mut rates: BTreeMap<(String, String), Decimal> = BTreeMap::new();
        for (kind, (price, by)) in &self.per_kind {
            if *by != PricedBy::Estimate || !price.is_sign_positive() || price.is_zero() {
                continue;
            }
            let Some(rate) = kind.price.checked_div(*price) else {
                continue;
            };
            let pair = (kind.payment_currency.clone(), kind.product_currency.clone());
            let lowest = rates.entry(pair).or_insert(rate);
            *lowest = (*lowest).min(rate);
        }
        rates
    }

    /// Says why a converted row of `kind` has no price: no estimate, and no rate in the ledger.
    fn not_in_ledger(&mut self, kind: &ConvertedKind) {
        let why = self
            .why_not
            .get(&kind.payment_currency)
            .cloned()
            .unwrap_or_else(|| "no estimate".into());
        let tail = format!(
            ", and the ledger has no order converted from {} to {}",
            kind.payment_currency, kind.product_currency
        );
        if !why.ends_with(&tail) {
            self.why_not
                .insert(kind.payment_currency.clone(), format!("{why}{tail}"));
        }
    }

    /// What the converted rows (`rows` of each kind) cost, per payment currency.
    pub fn costs<'k>(
        &self,
        rows: impl IntoIterator<Item = (&'k ConvertedKind, usize)>,
    ) -> BTreeMap<String, ConvertedCost> {
        let mut costs: BTreeMap<String, ConvertedCost> = BTreeMap::new();
        for (kind, n) in rows {
            let cost = costs.entry(kind.payment_currency.clone()).or_default();
            cost.rows += n;
            match self.per_kind.get(kind) {
                Some((price, by)) => {
                    cost.priced += *price * Decimal::from(n);
                    cost.priced_by.insert(by.words(kind));
                }
                None => {
                    cost.unpriced_rows += n;
                    *cost
                        .unpriced
                        .entry(kind.product_currency.clone())
                        .or_default() += kind.price * Decimal::from(n);
                    cost.why_not = self.why_not.get(&kind.payment_currency).cloned();
                }
            }
        }
        costs
    }
}

/// What the converted rows that draw on one balance cost, as far as it is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ConvertedCost {
    pub rows: usize,
    /// What those priced cost from the balance.
    pub priced: Decimal,
    /// How they were priced, in words.
    pub priced_by: BTreeSet<String>,
    /// Those no one could price, and their prices in their products' currencies.
    pub unpriced_rows: usize,
    pub unpriced: BTreeMap<String, Decimal>,
    /// Why they are not priced.
    pub why_not: Option<String>,
}

/// Prices the converted rows of `kinds` before anything is sent with the service's estimate of
/// an order of one row of each kind (`POST /order/estimate`, at most [`MAX_ESTIMATES`], asked
/// all at once), saying, per payment currency, why some have none (the service offers none
/// here, as its playground; its answer could not be read). Those are then priced from the
/// ledger ([`ConvertedPrices::price_from_ledger`]).
pub async fn estimate(
    client: &Client,
    kinds: impl IntoIterator<Item = ConvertedKind>,
) -> ConvertedPrices {
    let kinds: BTreeSet<ConvertedKind> = kinds.into_iter().collect();
    let mut asked = tokio::task::JoinSet::new();
    for kind in kinds.iter().take(MAX_ESTIMATES) {
        let client = client.clone();
        let kind = kind.clone();
        asked.spawn(async move {
            let item = (ProductSelection::of(&kind.product_codes), kind.face_value);
            let estimate = client.estimate(&kind.payment_currency, &[item]).await;
            (kind, estimate)
        });
    }
    let mut prices = ConvertedPrices::default();
    let why_not = &mut prices.why_not;
    while let Some(done) = asked.join_next().await {
        let Ok((kind, estimate)) = done else {
            continue;
        };
        let why = match estimate {
            Ok(price) => {
                prices.per_kind.insert(kind, (price, PricedBy::Estimate));
                continue;
            }
            Err(e) if e.is_not_offered() => "the service offers no estimate here (POST /order/estimate; its playground does not)".to_string(),
            Err(e) => format!("the service's estimate could not be read ({e})"),
        };
        why_not.insert(kind.payment_currency, why);
    }
    for kind in kinds.iter().skip(MAX_ESTIMATES) {
        why_not
            .entry(kind.payment_currency.clone())
            .or_insert_with(|| {
                format!(
                    "{} kinds of converted rows, at most {MAX_ESTIMATES} are estimated",
                    kinds.len()
                )
            });
    }
    prices
}

/// The balances read and the converted rows priced, before the pre-flight decides.
#[derive(Debug, Default)]
pub struct Funds {
    pub balances: BTreeMap<String, Result<Decimal, ApiError>>,
    pub prices: ConvertedPrices,
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

/// The balance pre-flight of `run` and `validate`: each balance `need`s (rows priced in its
/// currency) and `converted` (rows converted from others) draw on, against what it has. A
/// balance that could not be read stops the check (a refused key as such).
pub fn check(
    need: &BTreeMap<String, Decimal>,
    converted: &BTreeMap<String, ConvertedCost>,
    balances: &mut BTreeMap<String, Result<Decimal, ApiError>>,
) -> Result<Vec<BalanceCheck>, OpError> {
    let currencies: BTreeSet<&String> = need.keys().chain(converted.keys()).collect();
    let mut checks = Vec::new();
    for currency in currencies {
        let available = match balances.remove(currency) {
            Some(Ok(available)) => available,
            Some(Err(e)) => return Err(OpError::from_api(e)),
            None => {
                return Err(OpError::Ledger(ledger::LedgerError::Corrupt(format!(
                    "the balance of {currency} was not read"
                ))));
            }
        };
        let mut converted = converted.get(currency).cloned().unwrap_or_default();
        let needed = need.get(currency).copied().unwrap_or_default() + converted.priced;
        converted.priced = in_currency(converted.priced, currency);
        for (cur, price) in converted.unpriced.iter_mut() {
            *price = in_currency(*price, cur);
        }
        checks.push(BalanceCheck {
            currency: currency.clone(),
            needed: in_currency(needed, currency),
            available: in_currency(available, currency),
            enough: available >= needed,
            converted,
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
    ) -> Result<Self, OpError> {
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

    fn add(&mut self, row: &ledger::UnpaidRow, by_code: &HashMap<&str, &Product>) {
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
        match &row.spec {
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
/// spending limit, the rows left unpaid. With what to do next, the commands given `flags`, the
/// flags that chose the service and the ledger ([`super::options::RunOptions::repeated_flags`]).
pub fn stopped_lines(
    ledger: &Ledger,
    batch: &ledger::BatchRecord,
    products: &[Product],
    stopped: &BTreeMap<ServiceStop, String>,
    balances: &BTreeMap<String, Option<Decimal>>,
    flags: &str,
) -> Result<Vec<String>, OpError> {
    let unpaid = Unpaid::of(ledger, batch, products)?;
    let then = if unpaid.refused > 0 {
        format!(
            "then `paybatch retry --batch {}{flags}` (for the {} rows the service refused) and run the same command again",
            crate::text::shell_word(&batch.name),
            unpaid.refused
        )
    } else {
        "then run the same command again".to_string()
    };
    let mut lines = Vec::new();
    if let Some(why) = stopped.get(&ServiceStop::Account) {
        lines.push(format!(
            "the service stopped ordering for this account ({why}): {} rows not paid; ask the account's owner to raise its spending limit, {then}",
            unpaid.all
        ));
    }
    for (what, why) in stopped {
        let ServiceStop::Balance(currency) = what else {
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
    let h = |amount: Decimal| human_amount(amount, currency);
    let has = match &available {
        Some(available) => format!("the balance has {} {currency}", h(*available)),
        None => "the balance could not be read".to_string(),
    };
    let money = match (&available, rows - converted) {
        (_, 0) => has,
        (Some(available), _) if *available < need => format!(
            "those priced in {currency} need {} {currency}, {has}: {} {currency} missing",
            h(need),
            h(need - available)
        ),
        (_, _) => format!(
            "those priced in {currency} need {} {currency}, {has}",
            h(need)
        ),
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
