//! A finished order is checked against what was sent before anything of it is believed: the
//! service's answer must hold the items paybatch asked for (count, products, face values,
//! currencies, distribution), the payment method it asked for, and no negative or inflated
//! price; a COMPLETED order's items each carry a payout link, a FAILED order's items none. An
//! order that differs is recorded MISMATCH: its rows need a person, are never
//! COMPLETED and never sent again by themselves.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::order_body;
use crate::api::decimal::parse_decimal_text;
use crate::api::models::{
    DistributionMethod, NewOrder, NewOrderItem, Order, OrderItem, OrderStatus, PaymentMethod,
    PaymentMethodType, ProductSelection, TransactionDetail,
};
use crate::money::minor_units;
use crate::row::RowContent;

/// What an order's fees may add to its items' prices, as a share of them, before its
/// `total_price` needs a person: the published documentation says the total "includes any
/// applicable fees" and names no amount but the FX fee of `transaction_detail`, which is
/// allowed on top (see `docs/ledger.md`).
pub const FEE_SHARE: Decimal = Decimal::from_parts(5, 0, 0, false, 2);

/// How far a published FX rate may be rounded, as a share of the amount it converts.
const RATE_ROUNDING: Decimal = Decimal::from_parts(1, 0, 0, false, 3);

/// What the reports say of a finished order whose answer names neither its idempotency key nor
/// its batch (no `description`, no `metadata`): the ledger records it as the service answered
/// it, without knowing that it is the order sent.
pub const UNCONFIRMED: &str = "the service's answer names neither the order's idempotency key nor its batch (no description, no metadata): it could not be confirmed as the order sent";

/// What the reports say of a COMPLETED order whose total could not be checked: it converted an
/// item from another currency and its answer left out what the check needs, the
/// `transaction_detail` entry of that currency or its `fx`, which the published contract leaves
/// optional. The order is paid as asked; what left the balance is its `total_price` as answered.
pub const TOTAL_UNCONFIRMED: &str = "total not confirmed";

/// A finished order that holds what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Which answered item stands for each item sent (in the order sent).
    pub pairs: Vec<usize>,
    /// The answer names the order's key or batch and rows, as sent; when `false` it names
    /// neither, and could not be confirmed ([`UNCONFIRMED`]).
    pub confirmed: bool,
    /// Why the order's total could not be checked ([`TOTAL_UNCONFIRMED`]), when it could not:
    /// the answer left out an optional field the check needs. `None` when it was checked, or
    /// needs no check.
    pub total_unchecked: Option<String>,
}

/// What the ledger holds of one row of the order, in item order: the product's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRow {
    pub reference: String,
    pub currency: Option<String>,
}

/// Whose order an order the ledger adopted from the service is: its idempotency key, its batch
/// and its rows (reference, attempt) in item order, as the ledger recorded them from the
/// service's `description` and `metadata`.
pub struct Owner<'a> {
    pub key: &'a str,
    pub batch: &'a str,
    pub rows: &'a [(&'a str, i64)],
}

/// The body an order of `specs` (stored row specs, `rows.spec`, in item order) paid by `payment`
/// for `owner` stands for, with the `description` and `metadata` paybatch writes for it: what
/// the rows of an order the ledger adopted from the service (reconciliation), which has no body
/// of its own, asked for.
pub fn body_of_rows(
    payment: PaymentMethod,
    specs: &[Option<&RowContent>],
    owner: &Owner<'_>,
) -> Result<Vec<u8>, String> {
    let references: Vec<&str> = owner.rows.iter().map(|(r, _)| *r).collect();
    let mut items = Vec::with_capacity(specs.len());
    for spec in specs {
        let spec = spec.ok_or_else(|| "a row of the order has no readable spec".to_string())?;
        items.push(NewOrderItem {
            face_value: spec.face_value,
            distribution_method: DistributionMethod {
                kind: spec.distribution,
                email_address: spec.email.clone(),
                template_id: None,
            },
            products: ProductSelection::of(&spec.product_codes),
        });
    }
    let order = NewOrder {
        payment_method: payment,
        items,
        description: Some(order_body::description(owner.key, owner.batch, &references)),
        metadata: Some(order_body::metadata(owner.batch, owner.rows)),
    };
    serde_json::to_vec(&order).map_err(|e| e.to_string())
}

/// What an item is asked for, compared whatever the order of items or of a choice's products:
/// products (sorted), face value (as a number), delivery and address.
fn item_key(
    products: &ProductSelection,
    face_value: Option<Decimal>,
    distribution: &DistributionMethod,
) -> (Vec<String>, Option<Decimal>, &'static str, String) {
    let mut codes = products.codes();
    codes.sort();
    (
        codes,
        face_value.map(|v| v.normalize()),
        distribution.kind.as_str(),
        distribution
            .email_address
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase(),
    )
}

/// Whether the finished order `answer` asks for what the recorded `body` asks, item for item
/// (in any order): an order answered with neither description nor metadata that this may be
/// the answer of. Nothing else is compared.
pub fn asks_the_same(body: &[u8], answer: &Order) -> bool {
    let Ok(sent) = serde_json::from_slice::<NewOrder>(body) else {
        return false;
    };
    if sent.items.is_empty() || sent.items.len() != answer.items.len() {
        return false;
    }
    let mut asked: Vec<_> = sent
        .items
        .iter()
        .map(|i| item_key(&i.products, Some(i.face_value), &i.distribution_method))
        .collect();
    let mut answered: Vec<_> = answer
        .items
        .iter()
        .map(|a| item_key(&a.products, a.face_value, &a.distribution_method))
        .collect();
    asked.sort();
    answered.sort();
    asked == answered
}

/// Which answered item stands for each item sent: the service need not answer the items in
/// the order they were sent, so they are paired by what each asks for (the same position first,
/// among items alike). `None` for an item sent that no answered item matches.
fn pair_items(sent: &NewOrder, answer: &Order) -> Vec<Option<usize>> {
    let keys: Vec<_> = answer
        .items
        .iter()
        .map(|a| item_key(&a.products, a.face_value, &a.distribution_method))
        .collect();
    let mut used = vec![false; answer.items.len()];
    sent.items
        .iter()
        .enumerate()
        .map(|(i, asked)| {
            let want = item_key(
                &asked.products,
                Some(asked.face_value),
                &asked.distribution_method,
            );
            let j = std::iter::once(i)
                .chain(0..answer.items.len())
                .find(|j| *j < keys.len() && !used[*j] && keys[*j] == want)?;
            used[j] = true;
            Some(j)
        })
        .collect()
}

/// How `answer` differs from the order `body` paybatch sent for `rows`, or, when it holds what
/// was asked for, which answered item stands for each item sent (in the order sent) and whether
/// the answer names the order as sent. An answer whose `description` names another idempotency
/// key, or whose `metadata` names another batch or other rows, is another order; one whose
/// total is not its items' prices (and fees) is not believed either.
pub fn check(body: &[u8], rows: &[SentRow], answer: &Order) -> Result<Verified, Vec<String>> {
    // What was sent as an answer that echoes it is read: with the key's spellings hidden (a
    // reference or an address can hold the key; the client hides it in every answer).
    let sent: NewOrder = match serde_json::from_slice(&crate::api::key::conceal_answer(body)) {
        Ok(sent) => sent,
        Err(e) => {
            return Err(vec![format!(
                "the order's recorded body cannot be read: {e}"
            )]);
        }
    };
    let mut out = differences_of(&sent, answer);
    let (named, whose) = ownership(&sent, answer);
    out.extend(whose);
    let pairs = pair_items(&sent, answer);
    let total = total_differences(&sent, answer, rows, &pairs);
    out.extend(total.differences);
    for (i, pair) in pairs.iter().enumerate() {
        let (Some(j), Some(asked)) = (pair, sent.items.get(i)) else {
            continue;
        };
        let who = who(rows, i);
        item_differences(&who, &answer.items[*j], asked, rows.get(i), &mut out);
    }
    out.extend(link_differences(rows, answer, &pairs));
    if out.is_empty() && pairs.iter().all(Option::is_some) {
        return Ok(Verified {
            pairs: pairs.into_iter().flatten().collect(),
            confirmed: named,
            total_unchecked: total.unchecked,
        });
    }
    for (i, asked) in sent.items.iter().enumerate() {
        if pairs.get(i).is_some_and(Option::is_none) && answer.items.len() == sent.items.len() {
            out.push(format!(
                "{}: no answered item is {} {} by {}",
                who(rows, i),
                asked.products.codes().join("|"),
                asked.face_value,
                asked.distribution_method.kind.as_str()
            ));
            if let Some(item) = answer.items.get(i) {
                item_differences(&who(rows, i), item, asked, rows.get(i), &mut out);
            }
        }
    }
    if out.is_empty() {
        out.push("the answered items cannot be paired with the items sent".into());
    }
    Err(out)
}

fn who(rows: &[SentRow], i: usize) -> String {
    rows.get(i).map_or_else(
        || format!("item {}", i + 1),
        |r| format!("item {} (row {})", i + 1, r.reference),
    )
}

/// The payout link `item` carries (in either dated version's shape), when it is not empty.
fn link_of(item: &OrderItem) -> Option<&str> {
    let given = |url: Option<&str>| url.is_some_and(|u| !u.trim().is_empty());
    let payout = item.payout.as_ref().and_then(|p| p.url.as_deref());
    if given(payout) {
        payout
    } else {
        item.redemption_url
            .as_deref()
            .filter(|u| !u.trim().is_empty())
    }
}

/// Whether `item` carries a payout link that is not empty.
fn has_link(item: &OrderItem) -> bool {
    link_of(item).is_some()
}

/// Whether `link` is a web address a recipient can open: `https` (or `http`) with a host, and
/// nothing in it that is not printed as itself (white space, control characters, bidirectional
/// overrides: a line break in a link makes a result file's reader see another row).
fn is_web_address(link: &str) -> bool {
    let plain = link
        .chars()
        .all(|c| !c.is_whitespace() && !c.is_control() && !crate::text::is_unsafe(c));
    plain
        && url::Url::parse(link)
            .is_ok_and(|u| matches!(u.scheme(), "https" | "http") && u.host_str().is_some())
}

/// What the payout links of a finished order say against its status. Every item of a COMPLETED
/// order carries its link (the published API requires `payout.url`, whatever the delivery): one
/// without it left the balance and cannot reach its recipient. No item of a FAILED order carries
/// one: an order that failed with links may have paid, and sending its rows again may pay twice.
/// Either needs a person.
fn link_differences(rows: &[SentRow], answer: &Order, pairs: &[Option<usize>]) -> Vec<String> {
    let named = |j: usize| {
        pairs
            .iter()
            .position(|p| *p == Some(j))
            .map_or_else(|| format!("answered item {}", j + 1), |i| who(rows, i))
    };
    match answer.status {
        OrderStatus::Completed => answer
            .items
            .iter()
            .enumerate()
            .filter_map(|(j, item)| match link_of(item) {
                None => Some(format!("{}: completed without a payout link", named(j))),
                Some(link) if !is_web_address(link) => Some(format!(
                    "{}: completed with a payout link that is not a web address: {}",
                    named(j),
                    crate::text::escape(link)
                )),
                Some(_) => None,
            })
            .collect(),
        OrderStatus::Failed => {
            let linked: Vec<String> = answer
                .items
                .iter()
                .enumerate()
                .filter(|(_, item)| has_link(item))
                .map(|(j, _)| named(j))
                .collect();
            if linked.is_empty() {
                Vec::new()
            } else {
                vec![format!(
                    "failed, but its items carry payout links ({})",
                    linked.join(", ")
                )]
            }
        }
        _ => Vec::new(),
    }
}

/// The order-level differences (count, payment method, currency, totals).
fn differences_of(sent: &NewOrder, answer: &Order) -> Vec<String> {
    let mut out = Vec::new();
    if answer.items.len() != sent.items.len() {
        out.push(format!(
            "{} items answered, {} sent",
            answer.items.len(),
            sent.items.len()
        ));
    }
    if let Some(pm) = &answer.payment_method {
        if pm.kind != sent.payment_method.kind {
            out.push(format!(
                "paid by {}, sent {}",
                method_name(pm.kind),
                method_name(sent.payment_method.kind)
            ));
        }
        if pm.currency.is_some() && pm.currency != sent.payment_method.currency {
            out.push(format!(
                "payment currency {}, sent {}",
                shown(pm.currency.as_deref()),
                shown(sent.payment_method.currency.as_deref())
            ));
        }
        if sent.payment_method.card_id.is_some()
            && pm.card_id.is_some()
            && pm.card_id != sent.payment_method.card_id
        {
            out.push("paid by another card than the one sent".to_string());
        }
    }
    if let Some(currency) = &answer.currency
        && sent.payment_method.currency.as_ref() != Some(currency)
    {
        out.push(format!(
            "order currency {currency}, sent {}",
            shown(sent.payment_method.currency.as_deref())
        ));
    }
    for (name, value) in [
        ("total price", answer.total_price),
        ("total discount", answer.total_discount),
    ] {
        if let Some(v) = value
            && v < Decimal::ZERO
        {
            out.push(format!("negative {name} {v}"));
        }
    }
    out
}

fn item_differences(
    who: &str,
    item: &OrderItem,
    asked: &crate::api::models::NewOrderItem,
    row: Option<&SentRow>,
    out: &mut Vec<String>,
) {
    let sorted = |p: &ProductSelection| {
        let mut codes = p.codes();
        codes.sort();
        codes
    };
    if sorted(&item.products) != sorted(&asked.products) {
        out.push(format!(
            "{who}: products {}, sent {}",
            item.products.codes().join("|"),
            asked.products.codes().join("|")
        ));
    }
    match item.face_value {
        Some(v) if v == asked.face_value => {}
        Some(v) => out.push(format!("{who}: face value {v}, sent {}", asked.face_value)),
        None => out.push(format!("{who}: no face value answered")),
    }
    let sent_currency = row.and_then(|r| r.currency.as_deref());
    if let (Some(answered), Some(sent)) = (item.currency.as_deref(), sent_currency)
        && answered != sent
    {
        out.push(format!("{who}: currency {answered}, sent {sent}"));
    }
    if let Some(price) = item.price {
        if price < Decimal::ZERO {
            out.push(format!("{who}: negative price {price}"));
        } else if price > asked.face_value
            && item
                .currency
                .as_deref()
                .or(sent_currency)
                .is_some_and(|c| Some(c) == sent_currency)
        {
            out.push(format!(
                "{who}: price {price} above its face value {}",
                asked.face_value
            ));
        }
    }
    let dm = &item.distribution_method;
    let asked_dm = &asked.distribution_method;
    if dm.kind != asked_dm.kind {
        out.push(format!(
            "{who}: delivered by {}, sent {}",
            dm.kind.as_str(),
            asked_dm.kind.as_str()
        ));
    } else if dm.email_address.is_some()
        && asked_dm.email_address.is_some()
        && !dm
            .email_address
            .as_deref()
            .unwrap_or_default()
            .eq_ignore_ascii_case(asked_dm.email_address.as_deref().unwrap_or_default())
    {
        out.push(format!(
            "{who}: emailed to another address than the one sent"
        ));
    }
}

/// What a finished order's `description` and `metadata` say of whose order it is, against
/// the ones sent: whether either names it as sent, and how they name another order. Only what
/// the answer carries is compared: a service may leave either out, and a description is cut at
/// [`order_body::MAX_DESCRIPTION`] characters.
fn ownership(sent: &NewOrder, answer: &Order) -> (bool, Vec<String>) {
    // A description names the order when it holds at least its key or its batch.
    let by_description = sent.description.as_deref().and_then(|sent| {
        fn key_of(d: &str) -> Option<&str> {
            order_body::read_description(d).and_then(|p| p.key)
        }
        let answered = answer.description.as_deref().filter(|d| {
            !d.trim().is_empty()
                && order_body::read_description(d).is_none_or(|p| p.key.is_some() || p.batch.is_some())
                // What is left of ours names the order only while it holds our whole key.
                && (*d == sent || !sent.starts_with(d) || key_of(d).is_some_and(|k| Some(k) == key_of(sent)))
        })?;
        Some(description_differences(sent, answered))
    });
    let by_metadata = sent.metadata.as_ref().and_then(|sent| {
        let answered = answer.metadata.as_ref().filter(|m| !m.is_empty())?;
        Some(metadata_differences(sent, answered))
    });
    let named = by_description.is_some() || by_metadata.is_some();
    let out: Vec<String> = [by_description, by_metadata]
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    (named && out.is_empty(), out)
}

/// Whether two parts of descriptions may be the same, one of them perhaps cut.
fn same_part(answered: &str, sent: &str, cut: bool) -> bool {
    answered == sent || (cut && (answered.starts_with(sent) || sent.starts_with(answered)))
}

/// How the `answered` description names another order than the `sent` one: another
/// idempotency key, batch or first row.
fn description_differences(sent: &str, answered: &str) -> Vec<String> {
    // What is left of the one sent, however short the service cut it.
    if sent.starts_with(answered) {
        return Vec::new();
    }
    let Some(a) = order_body::read_description(answered) else {
        return vec![format!(
            "its description {answered:?} is not paybatch's: another order's"
        )];
    };
    let Some(s) = order_body::read_description(sent) else {
        return Vec::new();
    };
    if let (Some(ka), Some(ks)) = (a.key, s.key)
        && ka != ks
    {
        return vec![format!(
            "its description names idempotency key {ka}, sent {ks}: another order's"
        )];
    }
    let mut out = Vec::new();
    if let (Some(ba), Some(bs)) = (a.batch, s.batch)
        && !same_part(ba, bs, a.cut || s.cut)
    {
        out.push(format!(
            "its description names batch {ba:?}, sent {bs:?}: another order's"
        ));
    }
    let cut = a.first_reference_cut || s.first_reference_cut;
    if let (Some(ra), Some(rs)) = (a.first_reference, s.first_reference)
        && !same_part(ra, rs, cut)
    {
        out.push(format!(
            "its description names row {ra:?}, sent {rs:?}: another order's"
        ));
    }
    out
}

/// References shown in a message: the first few, and how many more.
fn shown_references(references: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = references
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("|");
    if references.len() > SHOWN {
        text.push_str(&format!(" (+{} more)", references.len() - SHOWN));
    }
    crate::text::escape(&text).into_owned()
}

/// How the `answered` metadata names another order than the `sent` one: another batch, other
/// rows, or other attempts of them.
fn metadata_differences(
    sent: &BTreeMap<String, String>,
    answered: &BTreeMap<String, String>,
) -> Vec<String> {
    let Some(batch) = order_body::batch_in_metadata(answered) else {
        return vec!["its metadata names no paybatch batch: another order's".into()];
    };
    if let Some(sent_batch) = order_body::batch_in_metadata(sent)
        && batch != sent_batch
    {
        return vec![format!(
            "its metadata names batch {batch:?}, sent {sent_batch:?}: another order's"
        )];
    }
    // Only what the answer holds: metadata without the row pieces names no rows.
    let rows = order_body::references_in_metadata(answered);
    let sent_rows = order_body::references_in_metadata(sent);
    if !rows.is_empty() && rows != sent_rows {
        return vec![format!(
            "its metadata names rows {}, sent {}: another order's",
            shown_references(&rows),
            shown_references(&sent_rows)
        )];
    }
    let attempts = |m| order_body::attempts_in_metadata(m, sent_rows.len());
    let answered_attempts = answered.get("paybatch_attempts");
    if answered_attempts.is_some() && attempts(answered) != attempts(sent) {
        return vec![format!(
            "its metadata names attempts {}, sent {}: another order's",
            shown(answered_attempts.map(String::as_str)),
            shown(sent.get("paybatch_attempts").map(String::as_str))
        )];
    }
    Vec::new()
}

/// Amounts that do not fit a decimal: the answer cannot be added up.
fn too_large() -> String {
    "its amounts are too large to add up".to_string()
}

/// What the answered `total_price` says against the order's items, and whether it could be
/// checked.
#[derive(Debug, Default)]
struct TotalCheck {
    /// How the total, or what declares it, differs from the items: each needs a person.
    differences: Vec<String>,
    /// Why the total could not be checked (an optional field the check needs is left out).
    unchecked: Option<String>,
}

/// What the answered `total_price` says against the order's items, for a COMPLETED order whose
/// items are all priced: the total is the items' prices (those the service converted, through
/// the rate of their `transaction_detail` entry, whose value is their prices) plus fees: the
/// FX fees `transaction_detail` declares, and at most [`FEE_SHARE`] of the items' prices more,
/// within a minor unit of the payment currency per item (and the rounding of a published rate).
/// A `transaction_detail` entry of the payment currency lies between the items' prices and the
/// total. An order that converted an item and whose answer leaves out that currency's entry, or
/// its `fx` (both optional in the published contract), cannot be checked: it is not a
/// difference, only a total not confirmed.
fn total_differences(
    sent: &NewOrder,
    answer: &Order,
    rows: &[SentRow],
    pairs: &[Option<usize>],
) -> TotalCheck {
    let (Some(total), Some(paid_in), OrderStatus::Completed) = (
        answer.total_price,
        sent.payment_method.currency.as_deref(),
        answer.status,
    ) else {
        return TotalCheck::default();
    };
    let priced = match item_prices(answer, rows, pairs, paid_in) {
        Some(Ok(priced)) => priced,
        Some(Err(why)) => {
            return TotalCheck {
                differences: vec![why],
                unchecked: None,
            };
        }
        None => return TotalCheck::default(),
    };
    let detail = answer.transaction_detail.as_ref();
    let mut out: Vec<String> = detail
        .into_iter()
        .flat_map(BTreeMap::keys)
        .filter(|c| *c != paid_in && !priced.converted.contains_key(c.as_str()))
        .map(|c| format!("its transaction_detail names {c}, in which no item is priced"))
        .collect();
    let (mut in_payment, mut fees) = (Decimal::ZERO, Decimal::ZERO);
    let mut unchecked = Vec::new();
    for (currency, (prices, count)) in &priced.converted {
        match conversion(detail, currency, *prices, *count, paid_in) {
            Ok(Converted::Known(a, f)) => match (in_payment.checked_add(a), fees.checked_add(f)) {
                (Some(a), Some(f)) => (in_payment, fees) = (a, f),
                _ => out.push(too_large()),
            },
            Ok(Converted::Unknown(why)) => unchecked.push(why),
            Err(why) => out.push(why),
        }
    }
    if out.is_empty() && unchecked.is_empty() {
        let totals = Totals {
            total,
            own: priced.own,
            in_payment,
            fees,
            count: answer.items.len(),
        };
        out.extend(totals.differences(detail, paid_in).err());
    }
    TotalCheck {
        unchecked: (out.is_empty() && !unchecked.is_empty()).then(|| unchecked.join("; ")),
        differences: out,
    }
}

/// The prices of an order's items: those in the payment currency added up, and those the
/// service converted added up by currency, with how many items each.
struct ItemPrices<'a> {
    own: Decimal,
    converted: BTreeMap<&'a str, (Decimal, usize)>,
}

/// The prices of `answer`'s items, each in its currency (the row's when the answer leaves it
/// out); `None` when an item's price or currency is not known.
fn item_prices<'a>(
    answer: &'a Order,
    rows: &'a [SentRow],
    pairs: &[Option<usize>],
    paid_in: &str,
) -> Option<Result<ItemPrices<'a>, String>> {
    let mut priced = ItemPrices {
        own: Decimal::ZERO,
        converted: BTreeMap::new(),
    };
    for (j, item) in answer.items.iter().enumerate() {
        let row_currency = pairs
            .iter()
            .position(|p| *p == Some(j))
            .and_then(|i| rows.get(i))
            .and_then(|r| r.currency.as_deref());
        let Some(price) = item.price else {
            // What the order charged for it cannot be told: its total cannot be checked.
            return Some(Err(format!(
                "answered item {} completed without a price: the order's total cannot be checked",
                j + 1
            )));
        };
        let currency = item.currency.as_deref().or(row_currency)?;
        let sum = if currency == paid_in {
            &mut priced.own
        } else {
            let entry = priced.converted.entry(currency).or_default();
            entry.1 += 1;
            &mut entry.0
        };
        match sum.checked_add(price) {
            Some(s) => *sum = s,
            None => return Some(Err(too_large())),
        }
    }
    Some(Ok(priced))
}

/// An order's total against its items' prices in the payment currency and declared fees.
struct Totals {
    total: Decimal,
    /// The items priced in the payment currency.
    own: Decimal,
    /// The converted items, in the payment currency.
    in_payment: Decimal,
    /// The declared FX fees, in the payment currency.
    fees: Decimal,
    count: usize,
}

impl Totals {
    fn differences(
        &self,
        detail: Option<&BTreeMap<String, TransactionDetail>>,
        paid_in: &str,
    ) -> Result<(), String> {
        let places = minor_units(paid_in);
        let unit = Decimal::new(1, places);
        let items = self
            .own
            .checked_add(self.in_payment)
            .ok_or_else(too_large)?;
        let slack = unit
            .checked_mul(Decimal::from(self.count.max(1)))
            .and_then(|s| s.checked_add(self.in_payment.checked_mul(RATE_ROUNDING)?))
            .ok_or_else(too_large)?;
        let charged = items.checked_add(self.fees).ok_or_else(too_large)?;
        let highest = items
            .checked_mul(FEE_SHARE)
            .and_then(|share| charged.checked_add(share)?.checked_add(slack))
            .ok_or_else(too_large)?;
        let total = self.total;
        let lowest = charged.checked_sub(slack).ok_or_else(too_large)?;
        if total < lowest {
            return Err(format!(
                "total price {total} {paid_in} below its items' prices {} {paid_in}",
                charged.round_dp(places)
            ));
        }
        if total > highest {
            return Err(format!(
                "total price {total} {paid_in} is not its items' prices {} {paid_in} with fees (at most {} {paid_in})",
                charged.round_dp(places),
                highest.round_dp(places)
            ));
        }
        let below = self.own.checked_sub(slack).ok_or_else(too_large)?;
        let above = total.checked_add(slack).ok_or_else(too_large)?;
        match detail.and_then(|d| d.get(paid_in)) {
            Some(entry)
                if self.in_payment.is_zero() && (entry.value < below || entry.value > above) =>
            {
                Err(format!(
                    "transaction_detail {paid_in} {}, its items' prices {} {paid_in} and total {total} {paid_in}",
                    entry.value, self.own
                ))
            }
            _ => Ok(()),
        }
    }
}

/// What converted items cost in the payment currency, as far as the answer says.
enum Converted {
    /// Their price in the payment currency and the FX fee declared for them.
    Known(Decimal, Decimal),
    /// The answer leaves out what converts them (optional fields): why.
    Unknown(String),
}

/// What `count` items priced `prices` in `currency` cost in the payment currency `paid_in`, and
/// the FX fee declared for them, as their `transaction_detail` entry says: its `value` is their
/// prices, its `fx.rate` converts them (`rate_symbol` `PAIDITEM`: item units per paying unit;
/// `ITEMPAID`: paying units per item unit), its `fx.fee` is in either currency. Without the
/// entry, or without its `fx` (the published contract makes both optional), it cannot be told
/// ([`Converted::Unknown`]); an entry that is there and disagrees is a difference (`Err`).
fn conversion(
    detail: Option<&BTreeMap<String, TransactionDetail>>,
    currency: &str,
    prices: Decimal,
    count: usize,
    paid_in: &str,
) -> Result<Converted, String> {
    let Some(entry) = detail.and_then(|d| d.get(currency)) else {
        let what = if detail.is_none() {
            "without a transaction_detail".to_string()
        } else {
            format!("without a transaction_detail entry for {currency}")
        };
        return Ok(Converted::Unknown(format!(
            "priced in {currency}, paid in {paid_in}, {what}"
        )));
    };
    let slack = Decimal::new(1, minor_units(currency)) * Decimal::from(count.max(1));
    let gap = entry.value.checked_sub(prices).ok_or_else(too_large)?;
    if gap.abs() > slack {
        return Err(format!(
            "transaction_detail {currency} {}, its items' prices {prices} {currency}",
            entry.value
        ));
    }
    let Some(fx) = entry.fx.as_ref().filter(|fx| !fx.is_null()) else {
        return Ok(Converted::Unknown(format!(
            "priced in {currency}, paid in {paid_in}, its transaction_detail entry without fx"
        )));
    };
    let fx = Some(fx);
    let number = |v: Option<&serde_json::Value>| match v? {
        serde_json::Value::String(s) => parse_decimal_text(s),
        serde_json::Value::Number(n) => parse_decimal_text(&n.to_string()),
        _ => None,
    };
    let rate = number(fx.and_then(|f| f.get("rate"))).filter(|r| *r > Decimal::ZERO);
    let symbol = fx
        .and_then(|f| f.get("rate_symbol"))
        .and_then(|s| s.as_str());
    let convert = |amount: Decimal| -> Option<Decimal> {
        let rate = rate?;
        match symbol? {
            s if s == format!("{paid_in}{currency}") => amount.checked_div(rate),
            s if s == format!("{currency}{paid_in}") => amount.checked_mul(rate),
            _ => None,
        }
    };
    let Some(amount) = convert(prices) else {
        return Err(format!(
            "transaction_detail {currency} has no rate from {currency} to {paid_in} that can be read"
        ));
    };
    let fee = fx.and_then(|f| f.get("fee"));
    let fee_value = number(fee.and_then(|f| f.get("value"))).unwrap_or_default();
    let fee = match fee.and_then(|f| f.get("currency")).and_then(|c| c.as_str()) {
        _ if fee_value.is_zero() => Some(Decimal::ZERO),
        Some(c) if c == paid_in => Some(fee_value),
        Some(c) if c == currency => convert(fee_value),
        _ => None,
    };
    match fee {
        Some(fee) if fee >= Decimal::ZERO => Ok(Converted::Known(amount, fee)),
        _ => Err(format!(
            "transaction_detail {currency} declares a fee that cannot be read"
        )),
    }
}

fn method_name(kind: PaymentMethodType) -> &'static str {
    match kind {
        PaymentMethodType::Other => "another method",
        known => known.as_str(),
    }
}

fn shown(v: Option<&str>) -> &str {
    v.unwrap_or("none")
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"payment_method":{"type":"ACCOUNT_BALANCE","currency":"USD"},"items":[
        {"face_value":10,"distribution_method":{"type":"EMAIL","email_address":"a@b.example"},"products":{"type":"SINGLE","value":"AMZ-US"}},
        {"face_value":25.50,"distribution_method":{"type":"PAYOUT_LINK"},"products":{"type":"SINGLE","value":"AMZ-US"}}]}"#;

    fn rows() -> Vec<SentRow> {
        ["A", "B"]
            .iter()
            .map(|r| SentRow {
                reference: r.to_string(),
                currency: Some("USD".into()),
            })
            .collect()
    }

    fn answer() -> serde_json::Value {
        serde_json::json!({
            "id": "O-1", "status": "COMPLETED",
            "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
            "currency": "USD", "total_price": "34.79", "total_discount": "0.71",
            "items": [
                {"id": "E-1", "distribution_method": {"type": "EMAIL", "email_address": "A@B.example"},
                 "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "10.00",
                 "price": "9.80", "currency": "USD",
                 "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                            "url": "https://payouts.example/r/E-1"}},
                {"id": "E-2", "distribution_method": {"type": "PAYOUT_LINK"},
                 "products": {"type": "SINGLE", "value": "AMZ-US"}, "face_value": "25.5",
                 "price": "24.99", "currency": "USD",
                 "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                            "url": "https://payouts.example/r/E-2"}}
            ]
        })
    }

    fn diff(change: impl FnOnce(&mut serde_json::Value)) -> Vec<String> {
        let mut a = answer();
        change(&mut a);
        let order: Order = serde_json::from_value(a).expect("an order");
        check(BODY.as_bytes(), &rows(), &order)
            .err()
            .unwrap_or_default()
    }

    #[test]
    fn the_order_that_was_sent_passes_whatever_the_scale_of_its_amounts() {
        assert!(diff(|_| {}).is_empty(), "{:?}", diff(|_| {}));
    }

    /// The service need not answer the items in the order sent: they are paired by what each
    /// asks for, and each row gets its own item.
    #[test]
    fn items_answered_in_another_order_are_paired_with_what_was_sent() {
        let mut a = answer();
        if let Some(items) = a["items"].as_array_mut() {
            items.reverse();
        }
        let order: Order = serde_json::from_value(a).expect("an order");
        let pairs = |order: &Order| check(BODY.as_bytes(), &rows(), order).map(|v| v.pairs);
        assert_eq!(pairs(&order), Ok(vec![1, 0]));
        let order: Order = serde_json::from_value(answer()).expect("an order");
        assert_eq!(pairs(&order), Ok(vec![0, 1]));
    }

    /// A bare answer is taken for an intent in doubt only when it asks, item for item, what
    /// the intent asked.
    #[test]
    fn a_bare_answer_asks_the_same_as_the_body_item_for_item() {
        let mut a = answer();
        if let Some(items) = a["items"].as_array_mut() {
            items.reverse();
        }
        let order: Order = serde_json::from_value(a).expect("an order");
        assert!(asks_the_same(BODY.as_bytes(), &order));
        let mut other = answer();
        other["items"][1]["face_value"] = serde_json::json!("25.51");
        let order: Order = serde_json::from_value(other).expect("an order");
        assert!(!asks_the_same(BODY.as_bytes(), &order));
        let mut fewer = answer();
        if let Some(items) = fewer["items"].as_array_mut() {
            items.pop();
        }
        let order: Order = serde_json::from_value(fewer).expect("an order");
        assert!(!asks_the_same(BODY.as_bytes(), &order));
        assert!(!asks_the_same(b"not a body", &order));
    }

    /// A completed item's link may come in the older version's shape; a failed order's items
    /// carry none.
    #[test]
    fn links_as_the_service_answers_them_pass() {
        let older = diff(|a| {
            for item in a["items"].as_array_mut().into_iter().flatten() {
                let url = item["payout"]["url"].clone();
                item.as_object_mut().map(|i| i.remove("payout"));
                item["redemption_url"] = url;
            }
        });
        assert!(older.is_empty(), "{older:?}");
        let failed = diff(|a| {
            a["status"] = "FAILED".into();
            for item in a["items"].as_array_mut().into_iter().flatten() {
                item.as_object_mut().map(|i| i.remove("payout"));
            }
        });
        assert!(failed.is_empty(), "{failed:?}");
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        type Change = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "face value 11",
                Box::new(|a| a["items"][0]["face_value"] = "11".into()),
            ),
            (
                "currency EUR, sent USD",
                Box::new(|a| a["items"][1]["currency"] = "EUR".into()),
            ),
            (
                "order currency EUR",
                Box::new(|a| a["currency"] = "EUR".into()),
            ),
            (
                "payment currency GBP",
                Box::new(|a| a["payment_method"]["currency"] = "GBP".into()),
            ),
            (
                "paid by CARD",
                Box::new(|a| a["payment_method"]["type"] = "CARD".into()),
            ),
            (
                "negative price",
                Box::new(|a| a["items"][1]["price"] = "-1".into()),
            ),
            (
                "negative total price",
                Box::new(|a| a["total_price"] = "-34.79".into()),
            ),
            (
                "above its face value",
                Box::new(|a| a["items"][0]["price"] = "10.01".into()),
            ),
            (
                "0 items answered, 2 sent",
                Box::new(|a| a["items"] = serde_json::json!([])),
            ),
            (
                "products STEAM-US",
                Box::new(|a| a["items"][1]["products"]["value"] = "STEAM-US".into()),
            ),
            (
                "delivered by PAYOUT_LINK",
                Box::new(|a| {
                    a["items"][0]["distribution_method"] =
                        serde_json::json!({"type": "PAYOUT_LINK"})
                }),
            ),
            (
                "another address",
                Box::new(|a| {
                    a["items"][0]["distribution_method"]["email_address"] = "x@y.example".into()
                }),
            ),
            (
                "item 1 (row A): completed without a payout link",
                Box::new(|a| {
                    a["items"][0].as_object_mut().map(|o| o.remove("payout"));
                }),
            ),
            (
                "item 2 (row B): completed without a payout link",
                Box::new(|a| a["items"][1]["payout"]["url"] = "".into()),
            ),
            (
                "completed without a payout link",
                Box::new(|a| {
                    a["items"][1]["payout"]
                        .as_object_mut()
                        .map(|o| o.remove("url"));
                }),
            ),
            (
                "failed, but its items carry payout links (item 2 (row B))",
                Box::new(|a| {
                    a["status"] = "FAILED".into();
                    a["items"][0].as_object_mut().map(|o| o.remove("payout"));
                }),
            ),
            (
                "no face value",
                Box::new(|a| {
                    a["items"][0]
                        .as_object_mut()
                        .map(|o| o.remove("face_value"));
                }),
            ),
        ];
        for (needle, change) in cases {
            let found = diff(change);
            assert!(
                found.iter().any(|d| d.contains(needle)),
                "{needle}: {found:?}"
            );
        }
    }

    const KEY: &str = "0b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c11";
    const OTHER_KEY: &str = "7c1d2e3f-0a1b-5c2d-8e3f-4a5b6c7d8e9f";

    /// The body paybatch sends for rows A and B of batch `nov`, with its description and
    /// metadata.
    fn named_body() -> Vec<u8> {
        let mut sent: NewOrder = serde_json::from_str(BODY).expect("a body");
        sent.description = Some(order_body::description(KEY, "nov", &["A", "B"]));
        sent.metadata = Some(order_body::metadata("nov", &[("A", 1), ("B", 1)]));
        serde_json::to_vec(&sent).expect("a body")
    }

    /// The answer naming the order as `named_body` sent it, changed by `change`.
    fn named_answer(change: impl FnOnce(&mut serde_json::Value)) -> Result<Verified, Vec<String>> {
        let mut a = answer();
        a["description"] = order_body::description(KEY, "nov", &["A", "B"]).into();
        a["metadata"] = serde_json::to_value(order_body::metadata("nov", &[("A", 1), ("B", 1)]))
            .expect("metadata");
        a["transaction_detail"] = serde_json::json!({"USD": {"value": "34.79", "fx": null}});
        change(&mut a);
        let order: Order = serde_json::from_value(a).expect("an order");
        check(&named_body(), &rows(), &order)
    }

    /// The order sent, as the service answers it, passes and is confirmed; one whose service
    /// dropped its description and metadata passes, not confirmed; a description cut shorter
    /// still names it.
    #[test]
    fn the_order_named_as_sent_is_confirmed_and_one_naming_nothing_is_not() {
        assert_eq!(named_answer(|_| {}).map(|v| v.confirmed), Ok(true));
        let dropped = named_answer(|a| {
            a["description"] = serde_json::Value::Null;
            a["metadata"] = serde_json::Value::Null;
        });
        assert_eq!(dropped.map(|v| v.confirmed), Ok(false));
        let emptied = named_answer(|a| {
            a["description"] = "".into();
            a["metadata"] = serde_json::json!({});
        });
        assert_eq!(emptied.map(|v| v.confirmed), Ok(false));
        let cut = named_answer(|a| {
            a["description"] = format!("paybatch {KEY} batch=no").into();
            a["metadata"] = serde_json::Value::Null;
        });
        assert_eq!(cut.map(|v| v.confirmed), Ok(true));
        let only_metadata = named_answer(|a| a["description"] = serde_json::Value::Null);
        assert_eq!(only_metadata.map(|v| v.confirmed), Ok(true));
        // Metadata that lost its row pieces still names the batch, and no other rows.
        let only_batch = named_answer(|a| {
            a["description"] = serde_json::Value::Null;
            a["metadata"] = serde_json::json!({"paybatch_batch": "nov"});
        });
        assert_eq!(only_batch.map(|v| v.confirmed), Ok(true));
    }

    /// An order adopted by reconciliation is checked against the description and metadata its
    /// key, batch and rows stand for, and passes when the service's order is the one it named;
    /// an older description without a key names its batch and row.
    #[test]
    fn an_adopted_order_passes_against_what_its_rows_stand_for() {
        let spec = |face: &str, distribution: &str, email: Option<&str>| {
            serde_json::json!({"product_codes": ["AMZ-US"], "face_value": face,
                "currency": "USD", "distribution": distribution, "email": email,
                "payment_currency": "USD"})
            .to_string()
        };
        let specs = [
            spec("10", "EMAIL", Some("a@b.example")),
            spec("25.50", "PAYOUT_LINK", None),
        ]
        .map(|s| RowContent::parse(&s).expect("a row"));
        let specs: Vec<Option<&RowContent>> = specs.iter().map(Some).collect();
        let owner = Owner {
            key: KEY,
            batch: "nov",
            rows: &[("A", 1), ("B", 1)],
        };
        let body =
            body_of_rows(order_body::payment_method("USD", None), &specs, &owner).expect("a body");
        let mut a = answer();
        a["description"] = order_body::description(KEY, "nov", &["A", "B"]).into();
        a["metadata"] = serde_json::to_value(order_body::metadata("nov", &[("A", 1), ("B", 1)]))
            .expect("metadata");
        let order: Order = serde_json::from_value(a.clone()).expect("an order");
        assert_eq!(check(&body, &rows(), &order).map(|v| v.confirmed), Ok(true));
        a["description"] = "paybatch batch=nov rows=A (+1 more)".into();
        let order: Order = serde_json::from_value(a.clone()).expect("an order");
        assert_eq!(check(&body, &rows(), &order).map(|v| v.confirmed), Ok(true));
        a["description"] = format!("paybatch {OTHER_KEY} batch=nov rows=A (+1 more)").into();
        let order: Order = serde_json::from_value(a).expect("an order");
        assert!(check(&body, &rows(), &order).is_err());
    }

    /// A batch name over 200 characters: its description is cut inside the name, its metadata
    /// names it by hash; the order sent still passes, another long name's does not, and a
    /// retried row (attempt 2) is named with its attempt.
    #[test]
    fn long_batch_names_and_retries_are_compared_as_written() {
        let long = format!("nov-{}", "x".repeat(250));
        let other = format!("{long}-2");
        let rows_sent: &[(&str, i64)] = &[("A", 2), ("B", 2)];
        let mut sent: NewOrder = serde_json::from_str(BODY).expect("a body");
        sent.description = Some(order_body::description(KEY, &long, &["A", "B"]));
        sent.metadata = Some(order_body::metadata(&long, rows_sent));
        let body = serde_json::to_vec(&sent).expect("a body");
        let answered = |batch: &str, named: &[(&str, i64)]| {
            let mut a = answer();
            a["description"] = order_body::description(KEY, batch, &["A", "B"]).into();
            a["metadata"] =
                serde_json::to_value(order_body::metadata(batch, named)).expect("metadata");
            let order: Order = serde_json::from_value(a).expect("an order");
            check(&body, &rows(), &order)
        };
        assert_eq!(answered(&long, rows_sent).map(|v| v.confirmed), Ok(true));
        let found = answered(&other, rows_sent).err().unwrap_or_default();
        assert!(
            found
                .iter()
                .any(|d| d.contains("its metadata names batch \"sha256:")),
            "{found:?}"
        );
        let found = answered(&long, &[("A", 1), ("B", 1)])
            .err()
            .unwrap_or_default();
        assert!(
            found
                .iter()
                .any(|d| d.contains("its metadata names attempts 1, sent 2")),
            "{found:?}"
        );
    }

    /// An answer naming another key, batch, rows or attempts is another order's.
    #[test]
    fn an_order_named_as_another_is_a_mismatch() {
        type Change = Box<dyn FnOnce(&mut serde_json::Value)>;
        let other_rows = order_body::metadata("nov", &[("A", 1), ("C", 1)]);
        let cases: Vec<(&str, Change)> = vec![
            (
                "its description names idempotency key 7c1d2e3f",
                Box::new(|a| {
                    a["description"] = order_body::description(OTHER_KEY, "nov", &["A", "B"]).into()
                }),
            ),
            (
                "its description names batch \"dec\"",
                Box::new(|a| {
                    a["description"] = format!("paybatch {KEY} batch=dec rows=A (+1 more)").into()
                }),
            ),
            (
                "its description \"Team lunch\" is not paybatch's",
                Box::new(|a| a["description"] = "Team lunch".into()),
            ),
            (
                "its metadata names batch \"dec\", sent \"nov\"",
                Box::new(|a| a["metadata"]["paybatch_batch"] = "dec".into()),
            ),
            (
                "its metadata names rows A|C, sent A|B",
                Box::new(move |a| {
                    a["metadata"] = serde_json::to_value(other_rows).expect("metadata")
                }),
            ),
            (
                "its metadata names attempts 2, sent 1",
                Box::new(|a| a["metadata"]["paybatch_attempts"] = "2".into()),
            ),
            (
                "its metadata names no paybatch batch",
                Box::new(|a| a["metadata"] = serde_json::json!({"campaign": "summer"})),
            ),
        ];
        for (needle, change) in cases {
            let found = named_answer(change).err().unwrap_or_default();
            assert!(
                found.iter().any(|d| d.contains(needle)),
                "{needle}: {found:?}"
            );
        }
    }

    /// A total that is not the items' prices with fees, or a transaction_detail that disagrees
    /// with them, needs a person; fees of a few percent, and rounding, do not.
    #[test]
    fn totals_are_checked_against_the_items() {
        type Change = Box<dyn FnOnce(&mut serde_json::Value)>;
        let passing: Vec<(&str, Change)> = vec![
            ("as answered", Box::new(|_| {})),
            (
                "a fee of 1.50",
                Box::new(|a| a["total_price"] = "36.29".into()),
            ),
            (
                "a detail with the fee",
                Box::new(|a| {
                    a["total_price"] = "36.29".into();
                    a["transaction_detail"]["USD"]["value"] = "36.29".into();
                }),
            ),
            (
                "no detail",
                Box::new(|a| {
                    a.as_object_mut().map(|o| o.remove("transaction_detail"));
                }),
            ),
        ];
        for (what, change) in passing {
            let found = named_answer(change);
            assert!(found.is_ok(), "{what}: {found:?}");
        }
        let failing: Vec<(&str, Change)> = vec![
            (
                "total price 34790.00 USD is not its items' prices 34.79 USD with fees",
                Box::new(|a| a["total_price"] = "34790.00".into()),
            ),
            (
                "total price 30.00 USD below its items' prices 34.79 USD",
                Box::new(|a| a["total_price"] = "30.00".into()),
            ),
            (
                "transaction_detail USD 34790.00",
                Box::new(|a| a["transaction_detail"]["USD"]["value"] = "34790.00".into()),
            ),
            (
                "its amounts are too large to add up",
                Box::new(|a| {
                    for item in a["items"].as_array_mut().into_iter().flatten() {
                        item["price"] = "79228162514264337593543950335".into();
                    }
                }),
            ),
            (
                "its transaction_detail names EUR",
                Box::new(|a| {
                    a["transaction_detail"]["EUR"] = serde_json::json!({"value": "30.00"})
                }),
            ),
        ];
        for (needle, change) in failing {
            let found = named_answer(change).err().unwrap_or_default();
            assert!(
                found.iter().any(|d| d.contains(needle)),
                "{needle}: {found:?}"
            );
        }
    }

    /// A converted (embedded FX) order: its total is its item's price through the rate of its
    /// transaction_detail entry, whichever way the rate is quoted, plus the declared fee.
    #[test]
    fn a_converted_order_is_checked_through_its_transaction_detail() {
        const FX_BODY: &str = r#"{"payment_method":{"type":"ACCOUNT_BALANCE","currency":"USD"},"items":[
            {"face_value":3000,"distribution_method":{"type":"PAYOUT_LINK"},"products":{"type":"SINGLE","value":"UBER-JP"}}]}"#;
        let jpy = [SentRow {
            reference: "J".into(),
            currency: Some("JPY".into()),
        }];
        let fx = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut a = serde_json::json!({
                "id": "O-2", "status": "COMPLETED",
                "payment_method": {"type": "ACCOUNT_BALANCE", "currency": "USD"},
                "currency": "USD", "total_price": "19.50", "total_discount": "0.60",
                "items": [{"id": "E-3", "distribution_method": {"type": "PAYOUT_LINK"},
                    "products": {"type": "SINGLE", "value": "UBER-JP"}, "face_value": "3000",
                    "price": "2910", "currency": "JPY",
                    "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                               "url": "https://payouts.example/r/E-3"}}],
                "transaction_detail": {"JPY": {"value": "2910", "fx": {
                    "rate": "149.253731", "rate_symbol": "USDJPY",
                    "fee": {"value": "0.00", "currency": "USD"}}}}
            });
            change(&mut a);
            let order: Order = serde_json::from_value(a).expect("an order");
            check(FX_BODY.as_bytes(), &jpy, &order)
                .err()
                .unwrap_or_default()
        };
        assert_eq!(fx(&|_| {}), Vec::<String>::new());
        let quoted_the_other_way = fx(&|a| {
            a["transaction_detail"]["JPY"]["fx"]["rate"] = "0.0067".into();
            a["transaction_detail"]["JPY"]["fx"]["rate_symbol"] = "JPYUSD".into();
        });
        assert_eq!(quoted_the_other_way, Vec::<String>::new());
        let with_fee = fx(&|a| {
            a["total_price"] = "20.50".into();
            a["transaction_detail"]["JPY"]["fx"]["fee"]["value"] = "1.00".into();
        });
        assert_eq!(with_fee, Vec::<String>::new());
        for (needle, change) in [
            (
                "transaction_detail JPY 29100, its items' prices 2910 JPY",
                &(|a: &mut serde_json::Value| {
                    a["transaction_detail"]["JPY"]["value"] = "29100".into()
                }) as &dyn Fn(&mut serde_json::Value),
            ),
            (
                "total price 19.50 USD below its items' prices 194.97 USD",
                &|a| a["transaction_detail"]["JPY"]["fx"]["rate"] = "14.9253731".into(),
            ),
            (
                "total price 19500.00 USD is not its items' prices 19.50 USD",
                &|a| a["total_price"] = "19500.00".into(),
            ),
            ("has no rate from JPY to USD", &|a| {
                a["transaction_detail"]["JPY"]["fx"]["rate"] = "none".into()
            }),
        ] {
            let found = fx(change);
            assert!(
                found.iter().any(|d| d.contains(needle)),
                "{needle}: {found:?}"
            );
        }
    }

    /// What the published contract leaves optional is never a difference: a converted order
    /// whose answer leaves out `transaction_detail`, its currency's entry or the entry's `fx`
    /// holds what was sent, its total not confirmed; with the detail there, an inflated total
    /// is still a difference.
    #[test]
    fn a_converted_order_without_its_transaction_detail_is_paid_its_total_not_confirmed() {
        const FX_BODY: &str = r#"{"payment_method":{"type":"ACCOUNT_BALANCE","currency":"USD"},"items":[
            {"face_value":50,"distribution_method":{"type":"PAYOUT_LINK"},"products":{"type":"SINGLE","value":"AMZ-DE"}}]}"#;
        let eur = [SentRow {
            reference: "E".into(),
            currency: Some("EUR".into()),
        }];
        let check_of = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut a = serde_json::json!({
                "id": "O-3", "status": "COMPLETED", "created_at": "2024-03-01T10:00:00Z",
                "payment_method": {"type": "ACCOUNT_BALANCE"},
                "currency": "USD", "total_price": "53.37", "total_discount": "0.98",
                "items": [{"id": "E-4", "distribution_method": {"type": "PAYOUT_LINK"},
                    "products": {"type": "SINGLE", "value": "AMZ-DE"}, "face_value": "50",
                    "price": "49.02",
                    "payout": {"status": "ACTIVE", "status_updated_at": "2024-03-01T10:00:00Z",
                               "url": "https://payouts.example/r/E-4"}}],
                "transaction_detail": {"EUR": {"value": "49.02", "fx": {
                    "rate": "1.0887", "rate_symbol": "EURUSD",
                    "fee": {"value": "0.00", "currency": "USD"}}}}
            });
            change(&mut a);
            let order: Order = serde_json::from_value(a).expect("an order");
            check(FX_BODY.as_bytes(), &eur, &order)
        };
        assert_eq!(check_of(&|_| {}).map(|v| v.total_unchecked), Ok(None));
        for (what, change) in [
            (
                "without a transaction_detail",
                &(|a: &mut serde_json::Value| {
                    a.as_object_mut().map(|o| o.remove("transaction_detail"));
                }) as &dyn Fn(&mut serde_json::Value),
            ),
            ("without a transaction_detail entry for EUR", &|a| {
                a["transaction_detail"] = serde_json::json!({"USD": {"value": "53.37"}})
            }),
            ("its transaction_detail entry without fx", &|a| {
                a["transaction_detail"]["EUR"]
                    .as_object_mut()
                    .map(|o| o.remove("fx"));
            }),
            ("its transaction_detail entry without fx", &|a| {
                a["transaction_detail"]["EUR"]["fx"] = serde_json::Value::Null
            }),
        ] {
            let unchecked = check_of(change).map(|v| v.total_unchecked);
            assert!(
                matches!(&unchecked, Ok(Some(why)) if why.contains(what)),
                "{what}: {unchecked:?}"
            );
        }
        // Without the detail nothing tells an inflated total; with it, the total is checked.
        let inflated = |a: &mut serde_json::Value| a["total_price"] = "53370.00".into();
        let found = check_of(&inflated).err().unwrap_or_default();
        assert!(
            found
                .iter()
                .any(|d| d.contains("total price 53370.00 USD is not its items' prices")),
            "{found:?}"
        );
        // An entry that is there and disagrees with the items is a difference.
        let found = check_of(&|a| {
            a["transaction_detail"]["EUR"]["value"] = "490.20".into();
            a["transaction_detail"]["EUR"]
                .as_object_mut()
                .map(|o| o.remove("fx"));
        })
        .err()
        .unwrap_or_default();
        assert!(
            found
                .iter()
                .any(|d| d.contains("transaction_detail EUR 490.20")),
            "{found:?}"
        );
    }
}
