//! The simulator's product catalog, country and category listings, currencies and FX table.
//!
//! The data is fixed (built in code, sorted by product code) so a run is reproducible and the
//! samples can rely on the products they name.
//!
//! [`specs`] holds the product data, one table per product family, [`build`] turns it into the
//! published products, [`currencies`] holds the currencies and the FX table.

mod build;
mod currencies;
mod specs;

use std::collections::{BTreeMap, BTreeSet};

use paybatch_api::models::Product;

pub use currencies::{PAYMENT_CURRENCIES, fx_rate, minor_units, to_minor};

/// The product states of the published contract (`state`).
pub const LIVE: &str = "LIVE";
pub const TEMPORARILY_DISABLED: &str = "TEMPORARILY_DISABLED";
/// Still orderable when `is_orderable` is true (slower or partly unavailable).
pub const TEMPORARILY_DEGRADED: &str = "TEMPORARILY_DEGRADED";

/// The catalog: products sorted by code.
pub struct Catalog {
    products: Vec<Product>,
    by_code: BTreeMap<String, usize>,
}

impl Catalog {
    pub fn new() -> Self {
        let mut products: Vec<Product> = specs::all().map(build::build).collect();
        products.sort_by(|a, b| a.code.cmp(&b.code));
        let by_code = products
            .iter()
            .enumerate()
            .map(|(i, p)| (p.code.clone(), i))
            .collect();
        Catalog { products, by_code }
    }

    /// Every product, sorted by code.
    pub fn products(&self) -> &[Product] {
        &self.products
    }

    pub fn get(&self, code: &str) -> Option<&Product> {
        self.by_code.get(code).map(|&i| &self.products[i])
    }

    /// The ISO 3166 alpha-2 code of every country some product is redeemable in, sorted.
    pub fn countries(&self) -> Vec<String> {
        let codes: BTreeSet<&str> = self
            .products
            .iter()
            .flat_map(|p| p.countries_redeemable_in.iter().map(String::as_str))
            .collect();
        codes.into_iter().map(str::to_string).collect()
    }

    /// Every category name in use, sorted.
    pub fn categories(&self) -> Vec<String> {
        let names: BTreeSet<&str> = self
            .products
            .iter()
            .flat_map(|p| p.categories.iter().flatten().map(String::as_str))
            .collect();
        names.into_iter().map(str::to_string).collect()
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::build::dec;
    use super::specs::{self, Kind::*};
    use super::*;
    use paybatch_api::models::PayoutType;
    use rust_decimal::Decimal;
    use std::str::FromStr;

    #[test]
    fn catalog_is_large_and_varied() {
        let c = Catalog::new();
        assert!(c.products().len() >= 30);
        let currencies: BTreeSet<_> = c.products().iter().map(|p| p.currency.clone()).collect();
        assert!(currencies.len() >= 5, "{currencies:?}");
        assert!(c.countries().len() >= 8);
        assert!(c.categories().len() >= 5);
        for t in [
            PayoutType::GiftCard,
            PayoutType::Subscription,
            PayoutType::Payment,
        ] {
            assert!(c.products().iter().any(|p| p.payout_type == t));
        }
        assert!(c.products().iter().any(|p| !p.is_orderable));
        let codes: Vec<_> = c.products().iter().map(|p| p.code.clone()).collect();
        let mut sorted = codes.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(codes, sorted, "sorted by code, no duplicates");
    }

    #[test]
    fn every_literal_parses_and_objects_match_the_type() {
        for s in specs::all() {
            assert!(Decimal::from_str(s.discount).is_ok(), "{}", s.code);
            match &s.kind {
                GiftOpen(a, b) | PayOpen(a, b) => {
                    assert!(Decimal::from_str(a).is_ok() && Decimal::from_str(b).is_ok());
                }
                GiftFixed(list) => {
                    assert!(
                        list.iter().all(|v| Decimal::from_str(v).is_ok()),
                        "{}",
                        s.code
                    )
                }
                Sub(plans) => assert!(
                    plans.iter().all(|p| Decimal::from_str(p.3).is_ok()),
                    "{}",
                    s.code
                ),
            }
        }
        for p in Catalog::new().products() {
            match p.payout_type {
                PayoutType::GiftCard => {
                    assert!(p.gift_card.is_some() && p.denominations().is_some())
                }
                PayoutType::Subscription => assert!(!p.subscription_plans().is_empty()),
                PayoutType::Payment => assert!(p.payment.is_some() && p.denominations().is_some()),
                PayoutType::Other => panic!("{}: the simulator lists known payout types", p.code),
            }
        }
    }

    #[test]
    fn required_sample_products() {
        let c = Catalog::new();
        let amz = c.get("AMZ-US").unwrap();
        assert_eq!(amz.currency, "USD");
        assert_eq!(amz.discount(), dec("0.02"));
        let d = amz.denominations().unwrap();
        assert_eq!(d.minimum_value, Some(dec("1")));
        assert_eq!(d.maximum_value, Some(dec("2000")));
        let tesco = c.get("TESCO-GB").unwrap().denominations().unwrap();
        assert_eq!(tesco.available_list.as_ref().unwrap().len(), 5);
        let prices: Vec<_> = c
            .get("SPOTIFY-US")
            .unwrap()
            .subscription_plans()
            .iter()
            .map(|p| p.price)
            .collect();
        assert_eq!(prices, vec![dec("10.99"), dec("32.97"), dec("119.88")]);
        assert!(!c.get("RETIRED-US").unwrap().is_orderable);
        assert_eq!(c.get("UBER-JP").unwrap().currency, "JPY");
        assert_eq!(c.get("PAYPAL-CA").unwrap().payout_type, PayoutType::Payment);
        assert_eq!(
            c.get("AMZ-DE").unwrap().countries_redeemable_in,
            vec!["DE", "AT"]
        );
    }

    /// Every value the published contract restricts (enums, patterns) is one it allows.
    #[test]
    fn catalog_values_are_the_published_ones() {
        let two_places = |v: &Decimal| {
            let t = v.to_string();
            t.split_once('.')
                .is_some_and(|(u, f)| !u.is_empty() && f.len() == 2)
        };
        let mut states = BTreeSet::new();
        for p in Catalog::new().products() {
            assert!(
                [LIVE, TEMPORARILY_DISABLED, TEMPORARILY_DEGRADED].contains(&p.state.as_str()),
                "{}",
                p.code
            );
            states.insert((p.state.clone(), p.is_orderable));
            assert!(
                p.discount_multiplier.as_ref().is_some_and(two_places),
                "{}",
                p.code
            );
            assert!(matches!(
                p.availability.as_deref(),
                Some("stocked" | "realtime")
            ));
            assert!(p.approval_state.is_none());
            assert!(p.customer_service.is_some() && p.categories.is_some());
            let base = [
                p.gift_card.as_ref().map(|g| {
                    (
                        &g.redeemable_at,
                        &g.barcode_format,
                        &g.e_code_usage_type,
                        &g.expiry,
                        &g.content_resources,
                    )
                }),
                p.subscription.as_ref().map(|g| {
                    (
                        &g.redeemable_at,
                        &g.barcode_format,
                        &g.e_code_usage_type,
                        &g.expiry,
                        &g.content_resources,
                    )
                }),
            ];
            for (redeemable_at, barcode, usage, expiry, content) in base.into_iter().flatten() {
                assert!(matches!(
                    redeemable_at.as_deref(),
                    Some("all" | "online" | "in-store")
                ));
                assert!(matches!(
                    barcode.as_deref(),
                    None | Some(
                        "code-128"
                            | "code-39"
                            | "QR"
                            | "ean-13"
                            | "pdf417"
                            | "ITF"
                            | "DATA_MATRIX"
                            | "other"
                    )
                ));
                assert!(matches!(
                    usage.as_deref(),
                    Some("undefined" | "url-recommended" | "url-only")
                ));
                let kind = expiry.as_ref().and_then(|e| e.kind.as_deref());
                assert!(matches!(
                    kind,
                    Some(
                        "from-last-use"
                            | "from-last-balance-check"
                            | "from-issue-date"
                            | "indefinite"
                            | "do-not-show"
                    )
                ));
                let locale = content
                    .as_ref()
                    .and_then(|c| c.locale.clone())
                    .unwrap_or_default();
                let b = locale.as_bytes();
                assert!(
                    b.len() == 5
                        && b[..2].iter().all(u8::is_ascii_lowercase)
                        && b[2] == b'_'
                        && b[3..].iter().all(u8::is_ascii_uppercase),
                    "{locale}"
                );
            }
            if let Some(d) = p.denominations() {
                assert!(matches!(d.kind.as_deref(), None | Some("open" | "fixed")));
            }
            for plan in p.subscription_plans() {
                assert!(matches!(
                    plan.length_unit.as_deref(),
                    Some("DAYS" | "MONTHS")
                ));
            }
        }
        // Not orderable, and degraded but orderable, are both exercised.
        assert!(states.contains(&(TEMPORARILY_DISABLED.to_string(), false)));
        assert!(states.contains(&(TEMPORARILY_DEGRADED.to_string(), true)));
        assert!(states.contains(&(LIVE.to_string(), false)));
    }

    #[test]
    fn fx_and_rounding() {
        assert_eq!(fx_rate("USD", "USD"), Some(Decimal::ONE));
        assert_eq!(fx_rate("EUR", "USD"), Some(dec("1.08")));
        assert_eq!(fx_rate("JPY", "USD"), Some(dec("0.0067")));
        assert_eq!(fx_rate("XXX", "USD"), None);
        assert_eq!(to_minor(dec("9.8"), "USD").to_string(), "9.80");
        assert_eq!(to_minor(dec("2910.0"), "JPY").to_string(), "2910");
        assert_eq!(to_minor(dec("0.125"), "USD").to_string(), "0.13");
    }
}
