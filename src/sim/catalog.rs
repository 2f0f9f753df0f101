//! The simulator's product catalog, country and category listings, currencies and FX table.
//!
//! The data is fixed (built in code, sorted by product code) so a run is reproducible and the
//! samples can rely on the products they name.

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};

use crate::api::models::{
    Assets, ContentResources, CustomerService, DecimalString, Denominations, Expiry, GiftCard,
    Payment, PayoutType, Product, Subscription, SubscriptionPlan,
};

/// The currencies an order can be paid in (`payment_method.currency`).
pub const PAYMENT_CURRENCIES: [&str; 4] = ["EUR", "GBP", "USD", "CAD"];

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
        let mut products: Vec<Product> = SPECS.iter().map(build).collect();
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

// ---------------------------------------------------------------------------------------------
// The product data

enum Kind {
    /// Gift card with an open range `min..=max`.
    GiftOpen(&'static str, &'static str),
    /// Gift card with a fixed list of values.
    GiftFixed(&'static [&'static str]),
    /// Subscription plans: `(name, length, length_unit, price)`; `length_unit` is `DAYS` or
    /// `MONTHS`.
    Sub(&'static [(&'static str, i64, &'static str, &'static str)]),
    /// Payment with an open range `min..=max`.
    PayOpen(&'static str, &'static str),
}

struct Spec {
    code: &'static str,
    name: &'static str,
    currency: &'static str,
    countries: &'static [&'static str],
    categories: &'static [&'static str],
    discount: &'static str,
    kind: Kind,
    orderable: bool,
    state: &'static str,
    expiry_months: i64,
    color: &'static str,
}

const fn spec(
    code: &'static str,
    name: &'static str,
    currency: &'static str,
    countries: &'static [&'static str],
    categories: &'static [&'static str],
    discount: &'static str,
    kind: Kind,
) -> Spec {
    Spec {
        code,
        name,
        currency,
        countries,
        categories,
        discount,
        kind,
        orderable: true,
        state: LIVE,
        expiry_months: 12,
        color: "#1A73E8",
    }
}

const fn with(mut s: Spec, orderable: bool, state: &'static str, months: i64) -> Spec {
    s.orderable = orderable;
    s.state = state;
    s.expiry_months = months;
    s
}

const fn colored(mut s: Spec, color: &'static str) -> Spec {
    s.color = color;
    s
}

use Kind::{GiftFixed, GiftOpen, PayOpen, Sub};

const SPECS: &[Spec] = &[
    // Gift cards: open ranges
    colored(
        spec(
            "AMZ-US",
            "Amazon.com",
            "USD",
            &["US"],
            &["shopping"],
            "0.02",
            GiftOpen("1.00", "2000.00"),
        ),
        "#FF9900",
    ),
    colored(
        with(
            spec(
                "AMZ-DE",
                "Amazon.de",
                "EUR",
                &["DE", "AT"],
                &["shopping"],
                "0.02",
                GiftOpen("5.00", "500.00"),
            ),
            true,
            LIVE,
            120,
        ),
        "#FF9900",
    ),
    colored(
        spec(
            "AMZ-GB",
            "Amazon.co.uk",
            "GBP",
            &["GB"],
            &["shopping"],
            "0.02",
            GiftOpen("1.00", "500.00"),
        ),
        "#FF9900",
    ),
    colored(
        spec(
            "AMZ-JP",
            "Amazon.co.jp",
            "JPY",
            &["JP"],
            &["shopping"],
            "0.02",
            GiftOpen("500", "50000"),
        ),
        "#FF9900",
    ),
    spec(
        "TARGET-US",
        "Target",
        "USD",
        &["US"],
        &["shopping", "groceries"],
        "0.03",
        GiftOpen("5.00", "1000.00"),
    ),
    spec(
        "WALMART-US",
        "Walmart",
        "USD",
        &["US"],
        &["groceries", "shopping"],
        "0.01",
        GiftOpen("1.00", "500.00"),
    ),
    spec(
        "AIRBNB-US",
        "Airbnb",
        "USD",
        &["US"],
        &["travel"],
        "0",
        GiftOpen("25.00", "2000.00"),
    ),
    spec(
        "IKEA-DE",
        "IKEA Deutschland",
        "EUR",
        &["DE"],
        &["home"],
        "0.03",
        GiftOpen("10.00", "1000.00"),
    ),
    // Degraded (slower, still orderable).
    with(
        spec(
            "IKEA-FR",
            "IKEA France",
            "EUR",
            &["FR"],
            &["home"],
            "0.03",
            GiftOpen("10.00", "1000.00"),
        ),
        true,
        TEMPORARILY_DEGRADED,
        12,
    ),
    spec(
        "FNAC-FR",
        "Fnac",
        "EUR",
        &["FR"],
        &["electronics", "entertainment"],
        "0.05",
        GiftOpen("10.00", "300.00"),
    ),
    spec(
        "JOHNLEWIS-GB",
        "John Lewis & Partners",
        "GBP",
        &["GB"],
        &["shopping", "home"],
        "0.04",
        GiftOpen("10.00", "1000.00"),
    ),
    spec(
        "WOOLWORTHS-AU",
        "Woolworths",
        "AUD",
        &["AU"],
        &["groceries"],
        "0.03",
        GiftOpen("10.00", "500.00"),
    ),
    spec(
        "RAKUTEN-JP",
        "Rakuten Ichiba",
        "JPY",
        &["JP"],
        &["shopping"],
        "0.02",
        GiftOpen("1000", "100000"),
    ),
    with(
        spec(
            "RETIRED-US",
            "Retired Store",
            "USD",
            &["US"],
            &["shopping"],
            "0.05",
            GiftOpen("1.00", "100.00"),
        ),
        false,
        TEMPORARILY_DISABLED,
        12,
    ),
    // Gift cards: fixed values
    colored(
        spec(
            "TESCO-GB",
            "Tesco",
            "GBP",
            &["GB"],
            &["groceries"],
            "0.04",
            GiftFixed(&["10.00", "20.00", "25.00", "50.00", "100.00"]),
        ),
        "#00539F",
    ),
    colored(
        with(
            spec(
                "STEAM-US",
                "Steam",
                "USD",
                &["US", "CA"],
                &["gaming"],
                "0",
                GiftFixed(&["5.00", "10.00", "20.00", "50.00", "100.00"]),
            ),
            true,
            LIVE,
            0,
        ),
        "#171A21",
    ),
    spec(
        "UBER-JP",
        "Uber Japan",
        "JPY",
        &["JP"],
        &["travel", "food"],
        "0.03",
        GiftFixed(&["1000", "3000", "5000"]),
    ),
    spec(
        "ZALANDO-FR",
        "Zalando",
        "EUR",
        &["FR", "DE"],
        &["fashion"],
        "0.05",
        GiftFixed(&["25.00", "50.00", "100.00"]),
    ),
    spec(
        "STARBUCKS-US",
        "Starbucks",
        "USD",
        &["US"],
        &["food"],
        "0.05",
        GiftFixed(&["5.00", "10.00", "15.00", "25.00", "50.00"]),
    ),
    spec(
        "STARBUCKS-CA",
        "Starbucks Canada",
        "CAD",
        &["CA"],
        &["food"],
        "0.05",
        GiftFixed(&["10.00", "25.00", "50.00"]),
    ),
    spec(
        "DECATHLON-FR",
        "Decathlon",
        "EUR",
        &["FR", "ES", "IT"],
        &["sports", "fashion"],
        "0.04",
        GiftFixed(&["20.00", "50.00", "100.00"]),
    ),
    spec(
        "MEDIAMARKT-DE",
        "MediaMarkt",
        "EUR",
        &["DE", "AT", "NL"],
        &["electronics"],
        "0.02",
        GiftFixed(&["25.00", "50.00", "100.00", "200.00"]),
    ),
    spec(
        "DELIVEROO-GB",
        "Deliveroo",
        "GBP",
        &["GB"],
        &["food"],
        "0.06",
        GiftFixed(&["10.00", "25.00", "50.00"]),
    ),
    spec(
        "CINEPLEX-CA",
        "Cineplex",
        "CAD",
        &["CA"],
        &["entertainment"],
        "0.05",
        GiftFixed(&["10.00", "25.00", "50.00"]),
    ),
    spec(
        "JBHIFI-AU",
        "JB Hi-Fi",
        "AUD",
        &["AU"],
        &["electronics"],
        "0.03",
        GiftFixed(&["25.00", "50.00", "100.00"]),
    ),
    spec(
        "NINTENDO-JP",
        "Nintendo eShop",
        "JPY",
        &["JP"],
        &["gaming"],
        "0.01",
        GiftFixed(&["1000", "3000", "5000", "9000"]),
    ),
    with(
        spec(
            "XBOX-GB",
            "Xbox",
            "GBP",
            &["GB"],
            &["gaming"],
            "0.02",
            GiftFixed(&["15.00", "25.00", "50.00"]),
        ),
        false,
        LIVE,
        12,
    ),
    // Subscriptions
    colored(
        spec(
            "SPOTIFY-US",
            "Spotify Premium",
            "USD",
            &["US"],
            &["music", "entertainment"],
            "0.05",
            Sub(&[
                ("1 month", 1, "MONTHS", "10.99"),
                ("3 months", 3, "MONTHS", "32.97"),
                ("12 months", 12, "MONTHS", "119.88"),
            ]),
        ),
        "#1DB954",
    ),
    colored(
        spec(
            "NETFLIX-GB",
            "Netflix",
            "GBP",
            &["GB"],
            &["entertainment"],
            "0",
            Sub(&[
                ("Standard, 1 month", 1, "MONTHS", "10.99"),
                ("Premium, 1 month", 1, "MONTHS", "17.99"),
            ]),
        ),
        "#E50914",
    ),
    spec(
        "DISNEYPLUS-CA",
        "Disney+",
        "CAD",
        &["CA"],
        &["entertainment"],
        "0.03",
        Sub(&[
            ("1 month", 1, "MONTHS", "11.99"),
            ("1 year", 12, "MONTHS", "119.99"),
        ]),
    ),
    spec(
        "DEEZER-FR",
        "Deezer Premium",
        "EUR",
        &["FR"],
        &["music"],
        "0.05",
        Sub(&[
            ("1 month", 1, "MONTHS", "11.99"),
            ("3 months", 3, "MONTHS", "35.97"),
        ]),
    ),
    spec(
        "AUDIBLE-DE",
        "Audible",
        "EUR",
        &["DE", "AT"],
        &["books", "entertainment"],
        "0.04",
        Sub(&[
            ("1 month", 1, "MONTHS", "9.95"),
            ("3 months", 3, "MONTHS", "29.85"),
        ]),
    ),
    spec(
        "GAMEPASS-US",
        "Xbox Game Pass Ultimate",
        "USD",
        &["US"],
        &["gaming"],
        "0.02",
        Sub(&[
            ("1 month", 1, "MONTHS", "16.99"),
            ("3 months", 3, "MONTHS", "50.97"),
            ("14 days", 14, "DAYS", "7.99"),
        ]),
    ),
    // Payments
    with(
        spec(
            "VISA-PREPAID-US",
            "Visa Prepaid Card",
            "USD",
            &["US"],
            &["financial"],
            "0",
            PayOpen("10.00", "1000.00"),
        ),
        true,
        LIVE,
        36,
    ),
    spec(
        "PAYPAL-CA",
        "PayPal Canada",
        "CAD",
        &["CA"],
        &["financial"],
        "0",
        PayOpen("5.00", "500.00"),
    ),
    spec(
        "PAYPAL-US",
        "PayPal",
        "USD",
        &["US"],
        &["financial"],
        "0",
        PayOpen("1.00", "2000.00"),
    ),
    spec(
        "MASTERCARD-PREPAID-GB",
        "Mastercard Prepaid",
        "GBP",
        &["GB"],
        &["financial"],
        "0.01",
        PayOpen("10.00", "500.00"),
    ),
    spec(
        "SEPA-TRANSFER-EU",
        "Bank transfer (SEPA)",
        "EUR",
        &["DE", "AT", "FR", "ES", "IT", "NL"],
        &["financial"],
        "0",
        PayOpen("1.00", "5000.00"),
    ),
    with(
        spec(
            "VENMO-US",
            "Venmo",
            "USD",
            &["US"],
            &["financial"],
            "0",
            PayOpen("1.00", "500.00"),
        ),
        false,
        TEMPORARILY_DISABLED,
        12,
    ),
];

fn dec(text: &str) -> Decimal {
    // The table above holds only valid literals; a typo is caught by the catalog unit tests.
    Decimal::from_str(text).unwrap_or(Decimal::ZERO)
}

fn build(s: &Spec) -> Product {
    let slug = s.code.to_ascii_lowercase();
    let base = format!("https://playground.example/catalog/{slug}");
    let locale = match s.countries.first().copied().unwrap_or("US") {
        "DE" | "AT" => "de_DE",
        "FR" => "fr_FR",
        "ES" => "es_ES",
        "IT" => "it_IT",
        "NL" => "nl_NL",
        "JP" => "ja_JP",
        "GB" => "en_GB",
        "CA" => "en_CA",
        "AU" => "en_AU",
        _ => "en_US",
    };
    let content = ContentResources {
        description_markdown_url: Some(format!("{base}/description.md")),
        disclaimer_markdown_url: Some(format!("{base}/disclaimer.md")),
        refund_policy_markdown_url: Some(format!("{base}/refund-policy.md")),
        reissuance_policy_markdown_url: Some(format!("{base}/reissuance-policy.md")),
        terms_buyer_markdown_url: Some(format!("{base}/terms-buyer.md")),
        terms_consumer_markdown_url: Some(format!("{base}/terms-consumer.md")),
        redemption_instructions_markdown_url: Some(format!("{base}/redemption-instructions.md")),
        locale: Some(locale.to_string()),
    };
    let expiry = if s.expiry_months > 0 {
        Expiry {
            date_policy: Some(format!("Expires {} months after issue", s.expiry_months)),
            in_months: Some(s.expiry_months),
            kind: Some("from-issue-date".into()),
        }
    } else {
        Expiry {
            date_policy: Some("Does not expire".into()),
            in_months: Some(0),
            kind: Some("indefinite".into()),
        }
    };
    let assets = Assets {
        card_image_url: Some(format!("{base}/card.png")),
        icon_image_url: Some(format!("{base}/icon.png")),
        primary_color: Some(s.color.to_string()),
    };
    let website = format!("https://{}.example", slug.replace('-', ""));
    let (payout_type, gift_card, subscription, payment) = match &s.kind {
        GiftFixed(list) => {
            let d = Denominations {
                kind: Some("fixed".into()),
                minimum_value: list.first().map(|v| dec(v)),
                maximum_value: list.last().map(|v| dec(v)),
                available_list: Some(list.iter().map(|v| DecimalString(dec(v))).collect()),
            };
            let g = gift(s, &base, &website, &assets, &content, &expiry, d);
            (PayoutType::GiftCard, Some(g), None, None)
        }
        GiftOpen(min, max) => {
            let g = gift(
                s,
                &base,
                &website,
                &assets,
                &content,
                &expiry,
                open(min, max),
            );
            (PayoutType::GiftCard, Some(g), None, None)
        }
        Sub(plans) => {
            let sub = Subscription {
                assets: Some(assets.clone()),
                balance_check_url: Some(format!("{website}/account")),
                content_resources: Some(content.clone()),
                expiry: Some(expiry.clone()),
                redeemable_at: Some("online".into()),
                website_url: Some(website.clone()),
                barcode_format: None,
                e_code_usage_type: Some("url-only".into()),
                subscription_plans: plans
                    .iter()
                    .enumerate()
                    .map(|(i, (name, length, unit, price))| SubscriptionPlan {
                        length_unit: Some((*unit).to_string()),
                        length: Some(*length),
                        name: Some((*name).to_string()),
                        price: dec(price),
                        subscription_plan_code: Some(format!("{}-P{}", s.code, i + 1)),
                    })
                    .collect(),
            };
            (PayoutType::Subscription, None, Some(sub), None)
        }
        PayOpen(min, max) => {
            let pay = Payment {
                assets: Some(Assets {
                    card_image_url: None,
                    ..assets.clone()
                }),
                denominations: Some(Denominations {
                    kind: None,
                    available_list: None,
                    ..open(min, max)
                }),
                content_resources: Some(content.clone()),
            };
            (PayoutType::Payment, None, None, Some(pay))
        }
    };
    Product {
        name: s.name.to_string(),
        code: s.code.to_string(),
        currency: s.currency.to_string(),
        state: s.state.to_string(),
        is_orderable: s.orderable,
        payout_type,
        categories: Some(s.categories.iter().map(|c| (*c).to_string()).collect()),
        countries_redeemable_in: s.countries.iter().map(|c| (*c).to_string()).collect(),
        customer_service: Some(CustomerService {
            phone_number: Some(match s.countries.first().copied().unwrap_or("US") {
                "GB" => "+44 20 7946 0000".into(),
                "DE" | "AT" => "+49 30 901820".into(),
                "FR" | "ES" | "IT" | "NL" => "+33 1 70 36 00 00".into(),
                "JP" => "+81 3 1234 5678".into(),
                "AU" => "+61 2 9876 5432".into(),
                _ => "+1 202 555 0100".into(),
            }),
            website_url: Some(format!("{website}/help")),
        }),
        discount_multiplier: Some(two_places(dec(s.discount))),
        availability: Some(
            if matches!(s.kind, GiftFixed(_)) {
                "stocked"
            } else {
                "realtime"
            }
            .into(),
        ),
        gift_card,
        subscription,
        payment,
        approval_state: None,
    }
}

/// A multiplier written with exactly two decimal places (`0.05`, `0.00`), as the published
/// pattern of `discount_multiplier` has it.
fn two_places(value: Decimal) -> Decimal {
    let mut v = value.round_dp(2);
    v.rescale(2);
    v
}

fn open(min: &str, max: &str) -> Denominations {
    Denominations {
        kind: Some("open".into()),
        minimum_value: Some(dec(min)),
        maximum_value: Some(dec(max)),
        available_list: None,
    }
}

fn gift(
    s: &Spec,
    base: &str,
    website: &str,
    assets: &Assets,
    content: &ContentResources,
    expiry: &Expiry,
    denominations: Denominations,
) -> GiftCard {
    // Groceries are spent in shops only, food and homeware in shops and online, the rest online.
    let redeemable_at = if s.categories.contains(&"groceries") {
        "in-store"
    } else if s.categories.iter().any(|c| matches!(*c, "food" | "home")) {
        "all"
    } else {
        "online"
    };
    let in_store = redeemable_at != "online";
    GiftCard {
        assets: Some(assets.clone()),
        balance_check_url: Some(format!("{base}/balance")),
        content_resources: Some(content.clone()),
        expiry: Some(expiry.clone()),
        redeemable_at: Some(redeemable_at.into()),
        website_url: Some(website.to_string()),
        barcode_format: in_store.then(|| "code-128".into()),
        e_code_usage_type: Some(
            if in_store {
                "url-recommended"
            } else {
                "url-only"
            }
            .into(),
        ),
        denominations: Some(denominations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for s in SPECS {
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
