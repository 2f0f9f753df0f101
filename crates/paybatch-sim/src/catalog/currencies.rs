//! The currencies of the simulator: those an order can be paid in, their minor units, and the
//! fixed FX table of embedded FX.

use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};

/// The currencies an order can be paid in (`payment_method.currency`).
pub use paybatch_api::rules::PAYMENT_CURRENCIES;

/// Minor units (decimal places) of a currency: 0 for JPY and KRW, 2 for the others.
pub fn minor_units(currency: &str) -> u32 {
    match currency {
        "JPY" | "KRW" => 0,
        _ => 2,
    }
}

/// Rounds an amount to the minor units of its currency and writes it at that scale
/// (`9.8` USD becomes `9.80`, `2910.0` JPY becomes `2910`).
pub fn to_minor(amount: Decimal, currency: &str) -> Decimal {
    let dp = minor_units(currency);
    let mut v = amount.round_dp_with_strategy(dp, RoundingStrategy::MidpointAwayFromZero);
    v.rescale(dp);
    v
}

/// US dollars per one unit of a currency: the fixed FX table of the simulator.
fn usd_per_unit(currency: &str) -> Option<Decimal> {
    let text = match currency {
        "USD" => "1",
        "EUR" => "1.08",
        "GBP" => "1.27",
        "CAD" => "0.74",
        "AUD" => "0.66",
        "JPY" => "0.0067",
        _ => return None,
    };
    Decimal::from_str(text).ok()
}

/// The rate that converts an amount in `from` into `to` (1 when they are equal), rounded to
/// 6 decimal places. `None` for a currency outside the table.
pub fn fx_rate(from: &str, to: &str) -> Option<Decimal> {
    if from == to {
        return Some(Decimal::ONE);
    }
    let rate = usd_per_unit(from)? / usd_per_unit(to)?;
    Some(rate.round_dp_with_strategy(6, RoundingStrategy::MidpointAwayFromZero))
}
