//! The product data of the simulated catalog, one table per product family: gift cards with
//! open ranges, gift cards with fixed values, subscriptions and payments. Each [`Spec`] is
//! turned into a published `Product` by [`super::build`].

use super::{LIVE, TEMPORARILY_DEGRADED, TEMPORARILY_DISABLED};

// ---------------------------------------------------------------------------------------------
// The product data

pub(super) enum Kind {
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

pub(super) struct Spec {
    pub(super) code: &'static str,
    pub(super) name: &'static str,
    pub(super) currency: &'static str,
    pub(super) countries: &'static [&'static str],
    pub(super) categories: &'static [&'static str],
    pub(super) discount: &'static str,
    pub(super) kind: Kind,
    pub(super) orderable: bool,
    pub(super) state: &'static str,
    pub(super) expiry_months: i64,
    pub(super) color: &'static str,
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

/// Every product of the catalog, family by family (the catalog sorts them by code).
pub(super) fn all() -> impl Iterator<Item = &'static Spec> {
    [GIFT_CARDS_OPEN, GIFT_CARDS_FIXED, SUBSCRIPTIONS, PAYMENTS]
        .into_iter()
        .flatten()
}

/// Gift cards with an open range of face values (some degraded or not orderable).
const GIFT_CARDS_OPEN: &[Spec] = &[
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
];

/// Gift cards with a fixed list of face values.
const GIFT_CARDS_FIXED: &[Spec] = &[
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
];

/// Subscriptions: the face value is the price of one of their plans.
const SUBSCRIPTIONS: &[Spec] = &[
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
];

/// Payments (prepaid cards, wallets, transfers) with an open range.
const PAYMENTS: &[Spec] = &[
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
