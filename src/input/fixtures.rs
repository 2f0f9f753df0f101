//! Records, rows and a catalog the tests of the input part share.

use std::str::FromStr;

use rust_decimal::Decimal;

use super::catalog_index::CatalogIndex;
use super::columns::ColumnMap;
use super::problem::Problem;
use super::reader::{BatchReader, InputOptions, RawRecord};
use super::row::{RowSpec, ValidateOptions, parse_record};
use super::validator::Validator;
use crate::api::{
    DecimalString, Denominations, GiftCard, Payment, PayoutType, Product, Subscription,
    SubscriptionPlan,
};

pub(super) fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

pub(super) fn base(code: &str, currency: &str, kind: PayoutType, countries: &[&str]) -> Product {
    Product {
        name: code.to_string(),
        code: code.to_string(),
        currency: currency.to_string(),
        state: "LIVE".into(),
        is_orderable: true,
        payout_type: kind,
        categories: None,
        countries_redeemable_in: countries.iter().map(|c| c.to_string()).collect(),
        customer_service: None,
        discount_multiplier: None,
        availability: None,
        gift_card: None,
        subscription: None,
        payment: None,
        approval_state: None,
    }
}

pub(super) fn open(code: &str, cur: &str, min: &str, max: &str, countries: &[&str]) -> Product {
    let mut p = base(code, cur, PayoutType::GiftCard, countries);
    p.gift_card = Some(GiftCard {
        denominations: Some(Denominations {
            kind: Some("open".into()),
            minimum_value: Some(d(min)),
            maximum_value: Some(d(max)),
            available_list: None,
        }),
        ..Default::default()
    });
    p
}

pub(super) fn fixed(code: &str, cur: &str, values: &[&str], countries: &[&str]) -> Product {
    let mut p = base(code, cur, PayoutType::GiftCard, countries);
    p.gift_card = Some(GiftCard {
        denominations: Some(Denominations {
            kind: Some("fixed".into()),
            minimum_value: None,
            maximum_value: None,
            available_list: Some(values.iter().map(|v| DecimalString(d(v))).collect()),
        }),
        ..Default::default()
    });
    p
}

pub(super) fn catalog() -> CatalogIndex {
    let mut spotify = base("SPOTIFY-US", "USD", PayoutType::Subscription, &["US"]);
    spotify.subscription = Some(Subscription {
        subscription_plans: ["10.99", "32.97"]
            .iter()
            .enumerate()
            .map(|(n, price)| SubscriptionPlan {
                length_unit: Some("MONTH".into()),
                length: Some(if n == 0 { 1 } else { 3 }),
                name: None,
                price: d(price),
                subscription_plan_code: None,
            })
            .collect(),
        ..Default::default()
    });
    let mut visa = base("VISA-US", "USD", PayoutType::Payment, &["US"]);
    visa.payment = Some(Payment {
        denominations: Some(Denominations {
            kind: None,
            minimum_value: Some(d("10")),
            maximum_value: Some(d("1000")),
            available_list: None,
        }),
        ..Default::default()
    });
    let mut retired = open("RETIRED-US", "USD", "1", "100", &["US"]);
    retired.is_orderable = false;
    let mut paused = open("PAUSED-US", "USD", "1", "100", &["US"]);
    paused.state = "SUSPENDED".into();
    CatalogIndex::new(vec![
        open("AMZ-US", "USD", "1", "2000", &["US"]),
        open("AMZ-DE", "EUR", "5", "500", &["DE", "AT"]),
        fixed(
            "STEAM-US",
            "USD",
            &["5", "10", "20", "50", "100"],
            &["US", "CA"],
        ),
        fixed("UBER-JP", "JPY", &["1000", "3000", "5000"], &["JP"]),
        spotify,
        visa,
        retired,
        paused,
    ])
}

pub(super) const HEADERS: [&str; 8] = [
    "reference",
    "product_code",
    "face_value",
    "currency",
    "distribution",
    "email",
    "payment_currency",
    "country",
];

pub(super) fn columns() -> ColumnMap {
    ColumnMap {
        reference: 0,
        product_code: 1,
        face_value: 2,
        currency: 3,
        distribution: Some(4),
        email: Some(5),
        payment_currency: Some(6),
        country: Some(7),
        card_id: None,
    }
}

pub(super) fn headers() -> Vec<String> {
    HEADERS.iter().map(|h| h.to_string()).collect()
}

pub(super) fn rec(line: u64, cells: [&str; 8]) -> RawRecord {
    RawRecord {
        line,
        fields: cells.iter().map(|c| c.to_string()).collect(),
    }
}

pub(super) fn parse(cells: [&str; 8]) -> Result<RowSpec, Vec<Problem>> {
    parse_record(
        &columns(),
        &headers(),
        &rec(7, cells),
        &ValidateOptions::default(),
    )
}

pub(super) fn problems(cells: [&str; 8]) -> Vec<Problem> {
    parse(cells).expect_err("expected problems")
}

pub(super) fn row(line: u64, cells: [&str; 8]) -> RowSpec {
    parse_record(
        &columns(),
        &headers(),
        &rec(line, cells),
        &ValidateOptions::default(),
    )
    .unwrap_or_else(|p| panic!("{p:?}"))
}

pub(super) fn check(v: &mut Validator, line: u64, cells: [&str; 8]) -> Vec<Problem> {
    v.check(&row(line, cells))
}

/// A reader over `data`, its delimiter detected.
pub(super) fn reader(data: &str) -> Result<BatchReader, Problem> {
    BatchReader::from_bytes(data.as_bytes().to_vec(), &InputOptions::default())
}
