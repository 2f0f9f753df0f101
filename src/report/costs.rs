//! Costs where finance books them: for each product and each value of a `--group-by` column,
//! what the paid rows were worth (face value, in the product's currency), what the service
//! priced them at and the discount it granted (in the product's currency), and what left the
//! paying balance for them (charged, in the balance's currency), with the effective rate of a
//! conversion. One line per pair of currencies: amounts of different currencies are never
//! added. Plain data here, shown by the page and `report --json`.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::money::display_amount;

/// The significant digits an effective rate is shown with.
pub const RATE_DIGITS: u32 = 6;

/// A line of costs: the value of the column (the products, or a `--group-by` column), the
/// product's currency and the currency charged.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct CostKey {
    pub value: String,
    pub product_currency: String,
    pub charged_currency: String,
}

/// What the paid rows (each paid attempt) of one line cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    pub rows: usize,
    /// In the product's currency.
    pub face_value: Decimal,
    /// What the service priced them at, in the product's currency.
    pub price: Decimal,
    /// What left the paying balance (or card), in its currency.
    pub charged: Decimal,
}

impl Cost {
    pub fn add(&mut self, face_value: Decimal, price: Decimal, charged: Decimal) {
        self.rows += 1;
        self.face_value += face_value;
        self.price += price;
        self.charged += charged;
    }

    pub fn merge(&mut self, other: &Cost) {
        self.rows += other.rows;
        self.face_value += other.face_value;
        self.price += other.price;
        self.charged += other.charged;
    }
}

/// The costs of one breakdown (the products, or a column of the file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs {
    pub lines: BTreeMap<CostKey, Cost>,
}

impl Costs {
    pub fn add(&mut self, key: CostKey, face_value: Decimal, price: Decimal, charged: Decimal) {
        self.lines
            .entry(key)
            .or_default()
            .add(face_value, price, charged);
    }

    pub fn merge(&mut self, other: &Costs) {
        for (key, cost) in &other.lines {
            self.lines.entry(key.clone()).or_default().merge(cost);
        }
    }

    /// The lines as shown, in order of value then currencies.
    pub fn shown(&self) -> Vec<CostLine> {
        self.lines
            .iter()
            .map(|(key, cost)| CostLine::new(key, cost))
            .collect()
    }
}

/// One line of costs as the page and `--json` show it: amounts as decimal strings with their
/// currency's decimals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CostLine {
    pub value: String,
    pub rows: usize,
    pub product_currency: String,
    pub face_value: String,
    pub price: String,
    /// Face value less price, in the product's currency.
    pub discount: String,
    pub charged_currency: String,
    pub charged: String,
    /// Charged per unit of price (balance currency per product currency), for converted
    /// rows only; to [`RATE_DIGITS`] significant digits.
    pub effective_rate: Option<String>,
}

impl CostLine {
    fn new(key: &CostKey, cost: &Cost) -> Self {
        let product = key.product_currency.as_str();
        let converted = key.product_currency != key.charged_currency;
        CostLine {
            value: key.value.clone(),
            rows: cost.rows,
            product_currency: key.product_currency.clone(),
            face_value: display_amount(cost.face_value, product),
            price: display_amount(cost.price, product),
            discount: display_amount(cost.face_value - cost.price, product),
            charged_currency: key.charged_currency.clone(),
            charged: display_amount(cost.charged, &key.charged_currency),
            effective_rate: converted
                .then(|| effective_rate(cost.charged, cost.price))
                .flatten(),
        }
    }
}

/// `charged / price` to [`RATE_DIGITS`] significant digits, trailing zeros dropped; `None`
/// when nothing was priced.
pub fn effective_rate(charged: Decimal, price: Decimal) -> Option<String> {
    if price.is_zero() {
        return None;
    }
    let rate = charged.checked_div(price)?.round_sf(RATE_DIGITS)?;
    Some(rate.normalize().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).expect("a decimal")
    }

    #[test]
    fn a_rate_has_six_significant_digits() {
        assert_eq!(
            effective_rate(d("20.10"), d("3000")).as_deref(),
            Some("0.0067")
        );
        assert_eq!(effective_rate(d("10"), d("3")).as_deref(), Some("3.33333"));
        assert_eq!(effective_rate(d("10"), d("0")), None);
    }

    #[test]
    fn a_line_says_discount_and_charged_in_their_own_currencies() {
        let mut costs = Costs::default();
        let key = CostKey {
            value: "CC-JP".into(),
            product_currency: "JPY".into(),
            charged_currency: "USD".into(),
        };
        costs.add(key.clone(), d("3000"), d("2940"), d("19.70"));
        costs.add(key, d("1000"), d("980"), d("6.57"));
        let line = &costs.shown()[0];
        assert_eq!(line.rows, 2);
        assert_eq!(line.face_value, "4000");
        assert_eq!(line.discount, "80");
        assert_eq!(line.charged, "26.27");
        assert_eq!(line.effective_rate.as_deref(), Some("0.00670153"));
    }
}
