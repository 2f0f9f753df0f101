//! Turns a [`Spec`] of the product data into the published `Product`: its links, locale,
//! content resources, expiry, assets, customer service and the details of its payout type
//! (gift card, subscription or payment).

use std::str::FromStr;

use rust_decimal::Decimal;

use super::specs::Kind::{GiftFixed, GiftOpen, PayOpen, Sub};
use super::specs::Spec;
use paybatch_api::models::{
    Assets, ContentResources, CustomerService, DecimalString, Denominations, Expiry, GiftCard,
    Payment, PayoutType, Product, Subscription, SubscriptionPlan,
};

pub(super) fn dec(text: &str) -> Decimal {
    // The tables hold only valid literals; a typo is caught by the catalog unit tests.
    Decimal::from_str(text).unwrap_or(Decimal::ZERO)
}

/// What every payout type of one product shares.
struct Common {
    /// `https://playground.example/catalog/<code>`.
    base: String,
    /// The brand's (simulated) website.
    website: String,
    assets: Assets,
    content: ContentResources,
    expiry: Expiry,
}

/// The published product described by `s`.
pub(super) fn build(s: &Spec) -> Product {
    let slug = s.code.to_ascii_lowercase();
    let base = format!("https://playground.example/catalog/{slug}");
    let common = Common {
        content: content_resources(&base, locale(s)),
        expiry: expiry(s.expiry_months),
        assets: Assets {
            card_image_url: Some(format!("{base}/card.png")),
            icon_image_url: Some(format!("{base}/icon.png")),
            primary_color: Some(s.color.to_string()),
        },
        website: format!("https://{}.example", slug.replace('-', "")),
        base,
    };
    let mut product = Product {
        name: s.name.to_string(),
        code: s.code.to_string(),
        currency: s.currency.to_string(),
        state: s.state.to_string(),
        is_orderable: s.orderable,
        payout_type: PayoutType::GiftCard,
        categories: Some(s.categories.iter().map(|c| (*c).to_string()).collect()),
        countries_redeemable_in: s.countries.iter().map(|c| (*c).to_string()).collect(),
        customer_service: Some(customer_service(s, &common.website)),
        discount_multiplier: Some(two_places(dec(s.discount))),
        availability: Some(
            if matches!(s.kind, GiftFixed(_)) {
                "stocked"
            } else {
                "realtime"
            }
            .into(),
        ),
        gift_card: None,
        subscription: None,
        payment: None,
        approval_state: None,
    };
    add_payout_details(&mut product, s, &common);
    product
}

/// The first country of a product: the one its locale and phone number are of.
fn first_country(s: &Spec) -> &'static str {
    s.countries.first().copied().unwrap_or("US")
}

fn locale(s: &Spec) -> &'static str {
    match first_country(s) {
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
    }
}

/// Links to the product's markdown documents, in its locale.
fn content_resources(base: &str, locale: &str) -> ContentResources {
    ContentResources {
        description_markdown_url: Some(format!("{base}/description.md")),
        disclaimer_markdown_url: Some(format!("{base}/disclaimer.md")),
        refund_policy_markdown_url: Some(format!("{base}/refund-policy.md")),
        reissuance_policy_markdown_url: Some(format!("{base}/reissuance-policy.md")),
        terms_buyer_markdown_url: Some(format!("{base}/terms-buyer.md")),
        terms_consumer_markdown_url: Some(format!("{base}/terms-consumer.md")),
        redemption_instructions_markdown_url: Some(format!("{base}/redemption-instructions.md")),
        locale: Some(locale.to_string()),
    }
}

/// Expiry after `months` from issue, or none (`months` 0).
fn expiry(months: i64) -> Expiry {
    if months > 0 {
        Expiry {
            date_policy: Some(format!("Expires {months} months after issue")),
            in_months: Some(months),
            kind: Some("from-issue-date".into()),
        }
    } else {
        Expiry {
            date_policy: Some("Does not expire".into()),
            in_months: Some(0),
            kind: Some("indefinite".into()),
        }
    }
}

fn customer_service(s: &Spec, website: &str) -> CustomerService {
    CustomerService {
        phone_number: Some(match first_country(s) {
            "GB" => "+44 20 7946 0000".into(),
            "DE" | "AT" => "+49 30 901820".into(),
            "FR" | "ES" | "IT" | "NL" => "+33 1 70 36 00 00".into(),
            "JP" => "+81 3 1234 5678".into(),
            "AU" => "+61 2 9876 5432".into(),
            _ => "+1 202 555 0100".into(),
        }),
        website_url: Some(format!("{website}/help")),
    }
}

/// The payout type of the product and its details (`gift_card`, `subscription` or `payment`).
fn add_payout_details(product: &mut Product, s: &Spec, common: &Common) {
    match &s.kind {
        GiftFixed(list) => {
            product.payout_type = PayoutType::GiftCard;
            product.gift_card = Some(gift(s, common, fixed(list)));
        }
        GiftOpen(min, max) => {
            product.payout_type = PayoutType::GiftCard;
            product.gift_card = Some(gift(s, common, open(min, max)));
        }
        Sub(plans) => {
            product.payout_type = PayoutType::Subscription;
            product.subscription = Some(subscription(s, common, plans));
        }
        PayOpen(min, max) => {
            product.payout_type = PayoutType::Payment;
            product.payment = Some(payment(common, min, max));
        }
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

fn fixed(list: &[&str]) -> Denominations {
    Denominations {
        kind: Some("fixed".into()),
        minimum_value: list.first().map(|v| dec(v)),
        maximum_value: list.last().map(|v| dec(v)),
        available_list: Some(list.iter().map(|v| DecimalString(dec(v))).collect()),
    }
}

fn subscription(s: &Spec, common: &Common, plans: &[(&str, i64, &str, &str)]) -> Subscription {
    Subscription {
        assets: Some(common.assets.clone()),
        balance_check_url: Some(format!("{}/account", common.website)),
        content_resources: Some(common.content.clone()),
        expiry: Some(common.expiry.clone()),
        redeemable_at: Some("online".into()),
        website_url: Some(common.website.clone()),
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
    }
}

fn payment(common: &Common, min: &str, max: &str) -> Payment {
    Payment {
        assets: Some(Assets {
            card_image_url: None,
            ..common.assets.clone()
        }),
        denominations: Some(Denominations {
            kind: None,
            available_list: None,
            ..open(min, max)
        }),
        content_resources: Some(common.content.clone()),
    }
}

fn gift(s: &Spec, common: &Common, denominations: Denominations) -> GiftCard {
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
        assets: Some(common.assets.clone()),
        balance_check_url: Some(format!("{}/balance", common.base)),
        content_resources: Some(common.content.clone()),
        expiry: Some(common.expiry.clone()),
        redeemable_at: Some(redeemable_at.into()),
        website_url: Some(common.website.clone()),
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
