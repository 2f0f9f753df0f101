//! What the catalog asks of a row naming a product: a product that can be paid, one currency,
//! a face value it comes in (a listed value, within its range, or a plan's price), a country where
//! it can be redeemed; and what makes a catalog entry impossible.

use rust_decimal::Decimal;

use super::problem::{Problem, quoted, show};
use super::row::{RowSpec, problem_at};
use crate::api::{DecimalString, Denominations, PayoutType, Product, SubscriptionPlan};

/// Why a product found in the catalog cannot be paid (not orderable, not live, of an unknown
/// payout type, or with an impossible catalog entry), and what to do.
pub(super) fn product_problem(p: &Product) -> Option<(String, String)> {
    if !p.is_orderable {
        Some((
            format!("product `{}` cannot be ordered at the moment", p.code),
            "choose another product, or remove the row and pay it when the product \
             can be ordered again"
                .into(),
        ))
    } else if !matches!(p.state.as_str(), "LIVE" | "TEMPORARILY_DEGRADED") {
        // LIVE and TEMPORARILY_DEGRADED products are payable while `is_orderable`;
        // TEMPORARILY_DISABLED and any state this version does not know are not.
        Some((
            format!(
                "product `{}` is not live (its state is `{}`)",
                p.code,
                show(&p.state)
            ),
            "choose another product, or remove the row and pay it when the product \
             is live again"
                .into(),
        ))
    } else if p.payout_type == PayoutType::Other {
        Some((
            format!(
                "product `{}` is of a payout type this version of paybatch does not know",
                p.code
            ),
            "choose a gift card, subscription or payment product, or update paybatch".into(),
        ))
    } else {
        catalog_insanity(p).map(|why| {
            (
                format!(
                    "product `{}` cannot be paid: the catalog gives it {why}",
                    show(&p.code)
                ),
                "the service's catalog is wrong for this product: choose another \
                 product, or ask the service to correct it, then `paybatch catalog sync`"
                    .into(),
            )
        })
    }
}

/// Currency: one for the whole choice, and the row's.
pub(super) fn check_currency(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let cols = &row.columns;
    let first_currency = products.first().map(|p| p.currency.as_str());
    let mixed = products
        .iter()
        .any(|p| Some(p.currency.as_str()) != first_currency);
    if mixed {
        let list = products
            .iter()
            .map(|p| format!("{} ({})", p.code, p.currency))
            .collect::<Vec<_>>()
            .join(", ");
        problems.push(problem_at(
            row,
            cols.product_code,
            "product_code",
            format!("the products of this choice are in different currencies: {list}"),
            "a choice (`A|B`) must list products of one currency; split it into rows".into(),
        ));
    } else if let Some(pc) = first_currency
        && pc != row.currency
    {
        let names = products
            .iter()
            .map(|p| p.code.as_str())
            .collect::<Vec<_>>()
            .join("|");
        problems.push(problem_at(
            row,
            cols.currency,
            "currency",
            format!(
                "{} is not the currency of {names} ({pc})",
                quoted(&row.currency)
            ),
            format!(
                "write `{pc}` and a face value in {pc}, or choose a product in {}",
                row.currency
            ),
        ));
    }
}

/// Face value: a denomination, or a plan price, of every product of the choice; a choice
/// (MULTIPLE) needs a whole face value at or above every product's minimum (the service's
/// published rule; a code named twice in a choice is refused when read).
pub(super) fn check_face_value(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let column = row.columns.face_value;
    if row.product_codes.len() > 1 && !row.face_value.fract().is_zero() {
        problems.push(problem_at(
            row,
            column,
            "face_value",
            format!(
                "{} is not a whole amount; a choice of products (`A|B`) takes whole amounts only",
                row.face_value
            ),
            format!(
                "write `{}` or `{}`",
                row.face_value.floor(),
                row.face_value.ceil()
            ),
        ));
    }
    for p in products.iter().filter(|p| p.currency == row.currency) {
        if let Some((message, help)) = denomination_problem(p, row.face_value) {
            problems.push(problem_at(row, column, "face_value", message, help));
        }
    }
}

/// Country: where every product of the choice can be redeemed.
pub(super) fn check_country(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let (Some(country), Some(ci)) = (&row.country, row.columns.country) else {
        return;
    };
    for p in products {
        let list = &p.countries_redeemable_in;
        if !list.is_empty() && !list.iter().any(|c| c == country) {
            problems.push(problem_at(
                row,
                ci,
                "country",
                format!(
                    "`{country}` is not a country where `{}` can be redeemed ({})",
                    p.code,
                    list.join(", ")
                ),
                "check the recipient's country, or choose a product redeemable there".into(),
            ));
        }
    }
}

/// What is impossible in a product's catalog entry, if anything: a discount multiplier outside
/// 0 (no discount) to below 1 (a price of zero or less, or above the face value), a minimum
/// above the maximum, or an amount (minimum, maximum, listed value, plan price) that is not
/// positive. A row naming such a product is not payable: its price, and the balance check,
/// would be wrong.
pub fn catalog_insanity(p: &Product) -> Option<String> {
    if let Some(m) = p.discount_multiplier
        && !(Decimal::ZERO..Decimal::ONE).contains(&m)
    {
        return Some(format!(
            "the discount multiplier {m} (it must be from 0 to below 1)"
        ));
    }
    let positive = |what: &str, v: Decimal| {
        (v <= Decimal::ZERO).then(|| format!("{what} {v} (amounts must be positive)"))
    };
    if let Some(d) = p.denominations() {
        if let Some(min) = d.minimum_value
            && let Some(why) = positive("the minimum value", min)
        {
            return Some(why);
        }
        if let Some(max) = d.maximum_value
            && let Some(why) = positive("the maximum value", max)
        {
            return Some(why);
        }
        if let (Some(min), Some(max)) = (d.minimum_value, d.maximum_value)
            && min > max
        {
            return Some(format!(
                "a minimum value {min} above its maximum value {max}"
            ));
        }
        for v in d.available_list.iter().flatten() {
            if let Some(why) = positive("the listed value", v.0) {
                return Some(why);
            }
        }
    }
    for plan in p.subscription_plans() {
        if let Some(why) = positive("the plan price", plan.price) {
            return Some(why);
        }
    }
    None
}

/// Why `value` is not a face value `p` can be ordered with, and what to do.
fn denomination_problem(p: &Product, value: Decimal) -> Option<(String, String)> {
    if p.payout_type == PayoutType::Subscription {
        return plan_problem(p, value);
    }
    let d = p.denominations()?;
    match d.available_list.as_ref().filter(|l| !l.is_empty()) {
        Some(list) => listed_value_problem(p, list, value),
        None => range_problem(p, d, value),
    }
}

/// Why `value` is not the price of one of subscription `p`'s plans.
fn plan_problem(p: &Product, value: Decimal) -> Option<(String, String)> {
    let plans = p.subscription_plans();
    if plans.is_empty() {
        return Some((
            format!("the catalog lists no subscription plans for `{}`", p.code),
            "choose another product".into(),
        ));
    }
    if plans.iter().any(|plan| plan.price == value) {
        return None;
    }
    let list = plans.iter().map(plan_label).collect::<Vec<_>>();
    Some((
        format!(
            "{} is not the price of a `{}` plan; plans: {} {}",
            quoted(&value.to_string()),
            p.code,
            list.join(", "),
            p.currency
        ),
        "a subscription's face value is the price of one of its plans: write one of them \
         exactly"
            .into(),
    ))
}

/// A plan as listed in a problem: its price, then its name or length, e.g. `9.99 (3 months)`.
fn plan_label(plan: &SubscriptionPlan) -> String {
    let label = plan.name.clone().or_else(|| {
        plan.length.map(|n| {
            let mut unit = plan.length_unit.as_deref().unwrap_or("").to_lowercase();
            if n != 1 && !unit.is_empty() && !unit.ends_with('s') {
                unit.push('s');
            }
            format!("{n} {unit}").trim().to_string()
        })
    });
    match label {
        Some(l) => format!("{} ({})", plan.price, l),
        None => plan.price.to_string(),
    }
}

/// Why `value` is not one of the fixed values `list` of `p`.
fn listed_value_problem(
    p: &Product,
    list: &[DecimalString],
    value: Decimal,
) -> Option<(String, String)> {
    if list.iter().any(|a| a.0 == value) {
        return None;
    }
    const SHOWN: usize = 20;
    let mut values: Vec<String> = list.iter().take(SHOWN).map(|a| a.0.to_string()).collect();
    if list.len() > SHOWN {
        values.push(format!("and {} more", list.len() - SHOWN));
    }
    Some((
        format!(
            "{} is not a denomination of `{}`; available: {} {}",
            quoted(&value.to_string()),
            p.code,
            values.join(", "),
            p.currency
        ),
        "this product comes in fixed values only: write one of them".into(),
    ))
}

/// Why `value` is outside the open range of `p`'s denominations `d`.
fn range_problem(p: &Product, d: &Denominations, value: Decimal) -> Option<(String, String)> {
    let below = d.minimum_value.is_some_and(|min| value < min);
    let above = d.maximum_value.is_some_and(|max| value > max);
    if !(below || above) {
        return None;
    }
    let range = match (d.minimum_value, d.maximum_value) {
        (Some(min), Some(max)) => format!("{min} to {max} {}", p.currency),
        (Some(min), None) => format!("at least {min} {}", p.currency),
        (None, Some(max)) => format!("at most {max} {}", p.currency),
        (None, None) => String::new(),
    };
    Some((
        format!(
            "{} is outside the range of `{}`: {range}",
            quoted(&value.to_string()),
            p.code
        ),
        if above {
            "split a larger amount over several rows, or choose another product".into()
        } else {
            "write an amount within the range, or choose another product".into()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::catalog_index::CatalogIndex;
    use crate::input::fixtures::*;
    use crate::input::row::ValidateOptions;
    use crate::input::validator::Validator;

    #[test]
    fn catalog_rules() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        let ok = |v: &mut Validator, l, c| {
            let ps = check(v, l, c);
            assert!(ps.is_empty(), "{ps:#?}");
        };
        ok(&mut v, 2, ["R1", "AMZ-US", "2000", "USD", "", "", "", "US"]);
        ok(
            &mut v,
            3,
            ["R2", "STEAM-US", "20.00", "USD", "", "", "", "CA"],
        );
        ok(
            &mut v,
            4,
            ["R3", "SPOTIFY-US", "32.97", "USD", "", "", "", ""],
        );
        ok(
            &mut v,
            5,
            ["R4", "AMZ-US|STEAM-US", "50", "USD", "", "", "", "US"],
        );
        ok(
            &mut v,
            6,
            ["R5", "UBER-JP", "3000", "JPY", "", "", "USD", "JP"],
        );
        ok(&mut v, 7, ["R6", "VISA-US", "10", "USD", "", "", "", ""]);

        let one = |v: &mut Validator, cells: [&str; 8], col: usize, needle: &str| {
            let ps = check(v, 9, cells);
            assert_eq!(ps.len(), 1, "{ps:#?}");
            assert_eq!(ps[0].column, Some(col), "{}", ps[0]);
            assert!(ps[0].message.contains(needle), "{}", ps[0]);
            assert!(ps[0].help.is_some());
            ps.into_iter().next().unwrap()
        };
        let p = one(
            &mut v,
            ["U1", "AMZ-UK", "10", "USD", "", "", "", ""],
            2,
            "not in the catalog",
        );
        assert!(p.help.unwrap().contains("`AMZ-US`"));
        let p = one(
            &mut v,
            ["U2", "amz-us", "10", "USD", "", "", "", ""],
            2,
            "not in the catalog",
        );
        assert!(p.help.unwrap().contains("`AMZ-US`"));
        one(
            &mut v,
            ["U3", "RETIRED-US", "10", "USD", "", "", "", ""],
            2,
            "cannot be ordered",
        );
        one(
            &mut v,
            ["U4", "PAUSED-US", "10", "USD", "", "", "", ""],
            2,
            "SUSPENDED",
        );
        let p = one(
            &mut v,
            ["U5", "AMZ-DE", "10", "USD", "", "", "", ""],
            4,
            "(EUR)",
        );
        assert_eq!(p.value.as_deref(), Some("USD"));
        one(
            &mut v,
            ["U6", "AMZ-US|AMZ-DE", "10", "USD", "", "", "", ""],
            2,
            "different currencies",
        );
        let p = one(
            &mut v,
            ["U7", "STEAM-US", "30", "USD", "", "", "", ""],
            3,
            "5, 10, 20, 50, 100 USD",
        );
        assert_eq!(p.value.as_deref(), Some("30"));
        one(
            &mut v,
            ["U8", "AMZ-DE", "501", "EUR", "", "", "", ""],
            3,
            "5 to 500 EUR",
        );
        one(
            &mut v,
            ["U9", "AMZ-DE", "4.99", "EUR", "", "", "", ""],
            3,
            "outside the range",
        );
        one(
            &mut v,
            ["U10", "VISA-US", "1000.01", "USD", "", "", "", ""],
            3,
            "10 to 1000",
        );
        one(
            &mut v,
            ["U11", "SPOTIFY-US", "11", "USD", "", "", "", ""],
            3,
            "10.99 (1 month), 32.97 (3 months)",
        );
        one(
            &mut v,
            ["U12", "AMZ-DE", "10", "EUR", "", "", "", "FR"],
            8,
            "DE, AT",
        );
        // In a choice, each product is checked.
        one(
            &mut v,
            ["U13", "AMZ-US|STEAM-US", "25", "USD", "", "", "", ""],
            3,
            "STEAM-US",
        );
        one(
            &mut v,
            ["U14", "AMZ-US|STEAM-US", "10", "USD", "", "", "", "CA"],
            8,
            "AMZ-US",
        );
    }

    /// The service's published rule for a choice of products (MULTIPLE): at least two
    /// different products, and a whole face value.
    #[test]
    fn a_choice_needs_two_different_products_and_a_whole_amount() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(
            check(
                &mut v,
                2,
                ["C1", "AMZ-US|STEAM-US", "50", "USD", "", "", "", ""]
            )
            .is_empty()
        );
        let ps = problems(["C2", "AMZ-US|AMZ-US", "50", "USD", "", "", "", ""]);
        assert_eq!(ps.len(), 1, "{ps:#?}");
        assert_eq!(ps[0].column, Some(2));
        assert!(ps[0].message.contains("twice"), "{}", ps[0]);
        let ps = check(
            &mut v,
            4,
            ["C3", "AMZ-US|VISA-US", "50.50", "USD", "", "", "", ""],
        );
        assert!(
            ps.iter()
                .any(|p| p.column == Some(3) && p.message.contains("not a whole amount")),
            "{ps:#?}"
        );
        // One product alone keeps its own denominations: cents are fine there.
        assert!(check(&mut v, 5, ["C4", "AMZ-US", "50.50", "USD", "", "", "", ""]).is_empty());
    }

    /// Published product states: LIVE and TEMPORARILY_DEGRADED are payable while
    /// `is_orderable`; TEMPORARILY_DISABLED is not; a payout type this version does not know
    /// is listed but never paid.
    #[test]
    fn degraded_products_are_payable_and_unknown_payout_types_are_not() {
        let mut degraded = open("DEG-US", "USD", "1", "100", &["US"]);
        degraded.state = "TEMPORARILY_DEGRADED".into();
        let mut disabled = open("DIS-US", "USD", "1", "100", &["US"]);
        disabled.state = "TEMPORARILY_DISABLED".into();
        let mut other = open("NEW-US", "USD", "1", "100", &["US"]);
        other.payout_type = PayoutType::Other;
        let products = vec![degraded, disabled, other];
        let cat = CatalogIndex::new(products);
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(check(&mut v, 2, ["D1", "DEG-US", "10", "USD", "", "", "", ""]).is_empty());
        let ps = check(&mut v, 3, ["D2", "DIS-US", "10", "USD", "", "", "", ""]);
        assert!(ps[0].message.contains("TEMPORARILY_DISABLED"), "{ps:#?}");
        let ps = check(&mut v, 4, ["D3", "NEW-US", "10", "USD", "", "", "", ""]);
        assert!(ps[0].message.contains("payout type"), "{ps:#?}");
    }

    #[test]
    fn a_product_whose_catalog_values_are_impossible_is_not_payable() {
        let mut free = open("FREE-US", "USD", "1", "100", &["US"]);
        free.discount_multiplier = Some(d("1"));
        let mut dearer = open("DEAR-US", "USD", "1", "100", &["US"]);
        dearer.discount_multiplier = Some(d("-0.5"));
        let upside_down = open("UPSIDE-US", "USD", "100", "1", &["US"]);
        let negative = open("NEG-US", "USD", "-5", "100", &["US"]);
        let zero_value = fixed("ZERO-US", "USD", &["0", "10"], &["US"]);
        let mut fine = open("FINE-US", "USD", "1", "100", &["US"]);
        fine.discount_multiplier = Some(d("0.99"));
        let cat = CatalogIndex::new(vec![free, dearer, upside_down, negative, zero_value, fine]);
        let mut v = Validator::new(&cat, ValidateOptions::default());
        for (n, (code, why)) in [
            (
                "FREE-US",
                "the discount multiplier 1 (it must be from 0 to below 1)",
            ),
            ("DEAR-US", "the discount multiplier -0.5"),
            ("UPSIDE-US", "a minimum value 100 above its maximum value 1"),
            ("NEG-US", "the minimum value -5 (amounts must be positive)"),
            ("ZERO-US", "the listed value 0 (amounts must be positive)"),
        ]
        .into_iter()
        .enumerate()
        {
            let reference = format!("R{n}");
            let ps = check(
                &mut v,
                2 + n as u64,
                [&reference, code, "10", "USD", "", "", "", ""],
            );
            assert!(
                ps.iter().any(|p| p.column == Some(2)
                    && p.message.contains(&format!(
                        "product `{code}` cannot be paid: the catalog gives it {why}"
                    ))),
                "{code}: {ps:#?}"
            );
        }
        let ps = check(&mut v, 9, ["R9", "FINE-US", "10", "USD", "", "", "", ""]);
        assert!(ps.is_empty(), "{ps:#?}");
    }
}
