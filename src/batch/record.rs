//! Recording what the service answered for an order: a finished order is checked against what
//! was sent ([`super::verify`]) and recorded COMPLETED or FAILED with what it says of each item
//! (payout link, price, what left the paying balance), or MISMATCH with what differs. Used by
//! the run (sync answers, polling) and by reconciliation.

use rust_decimal::Decimal;

use crate::api::models::{Order, OrderItem, OrderStatus};
use crate::ledger::{
    ItemOutcome, Ledger, LedgerError, OrderRecord, OrderState, PayoutLife, PayoutStatus, RowRecord,
    Transition,
};
use crate::row::RowContent;

use super::order_body;
use super::verify;

/// What the paying balance (or card) was charged for `item` (of a row priced in
/// `row_currency`) of the completed `order` paid in `paid_in`: the item's price when it is
/// priced in that currency (the item's own currency, or the row's when the answer leaves it
/// out); for an order of one item the service converted (embedded FX), the order's price,
/// which is in the payment currency.
fn debited(
    order: &Order,
    item: &OrderItem,
    row_currency: Option<&str>,
    paid_in: &str,
) -> Option<(Decimal, String)> {
    match item.currency.as_deref().or(row_currency) {
        Some(c) if c == paid_in => item.price.map(|p| (p, paid_in.to_string())),
        Some(_) if order.items.len() == 1 => order.total_price.map(|p| {
            let currency = order
                .currency
                .clone()
                .unwrap_or_else(|| paid_in.to_string());
            (p, currency)
        }),
        _ => None,
    }
}

/// Spreads what the order cost beyond its items' prices (fees: the order's `total_price`
/// includes them) over its rows, in proportion to their prices, to the cent, so that what the
/// rows say left the balance adds up to what the order cost. Only when every row was charged
/// in the order's currency.
fn spread_fees(order: &Order, charged: &mut [Option<(Decimal, String)>], paid_in: &str) {
    let Some(total) = order.total_price else {
        return;
    };
    if order.currency.as_deref().is_some_and(|c| c != paid_in)
        || charged
            .iter()
            .any(|c| c.as_ref().is_none_or(|(_, cur)| cur != paid_in))
    {
        return;
    }
    let sum: Decimal = charged.iter().flatten().map(|(p, _)| *p).sum();
    let fee = total - sum;
    if fee.is_zero() || total < Decimal::ZERO {
        return;
    }
    let places = crate::money::minor_units(paid_in);
    let unit = Decimal::new(1, places);
    let mut given = Decimal::ZERO;
    for (price, _) in charged.iter_mut().flatten() {
        let share = if sum.is_zero() {
            Decimal::ZERO
        } else {
            (fee * *price / sum)
                .round_dp_with_strategy(places, rust_decimal::RoundingStrategy::ToZero)
        };
        *price += share;
        given += share;
    }
    // What rounding left, a cent at a time from the first row.
    let mut left = fee - given;
    let step = if left < Decimal::ZERO { -unit } else { unit };
    for (price, _) in charged.iter_mut().flatten() {
        if left.is_zero() {
            break;
        }
        *price += step;
        left -= step;
    }
}

/// The `error_type` of the rows of a COMPLETED order that could not be confirmed as the order
/// sent ([`verify::UNCONFIRMED`]): paid, with a note.
pub const UNCONFIRMED_TYPE: &str = "order_unconfirmed";

/// The `error_type` of the rows of a COMPLETED order whose total could not be checked
/// ([`verify::TOTAL_UNCONFIRMED`]): paid, with a note.
pub const TOTAL_UNCONFIRMED_TYPE: &str = "total_unconfirmed";

/// The `error_type` of the rows of a COMPLETED order that could be confirmed neither as the
/// order sent nor in its total: paid, with a note saying both.
pub const ORDER_AND_TOTAL_UNCONFIRMED_TYPE: &str = "order_and_total_unconfirmed";

/// What of a COMPLETED order could not be confirmed, as its rows' `error_type` records it: the
/// order as the one sent (its answer named neither key nor batch), its total (its answer left
/// out what checks it), or both. A row noted so is paid; the note tells a person what to compare
/// with the account's orders.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unconfirmed {
    pub order: bool,
    pub total: bool,
}

impl Unconfirmed {
    /// The `error_type`s of a COMPLETED row that note something not confirmed.
    pub const TYPES: [&'static str; 3] = [
        UNCONFIRMED_TYPE,
        TOTAL_UNCONFIRMED_TYPE,
        ORDER_AND_TOTAL_UNCONFIRMED_TYPE,
    ];

    /// What a COMPLETED row's `error_type` notes as not confirmed (nothing for another type).
    pub fn of(error_type: Option<&str>) -> Unconfirmed {
        let (order, total) = match error_type {
            Some(UNCONFIRMED_TYPE) => (true, false),
            Some(TOTAL_UNCONFIRMED_TYPE) => (false, true),
            Some(ORDER_AND_TOTAL_UNCONFIRMED_TYPE) => (true, true),
            _ => (false, false),
        };
        Unconfirmed { order, total }
    }

    /// The `error_type` that records it; `None` when everything was confirmed.
    pub fn error_type(self) -> Option<&'static str> {
        match (self.order, self.total) {
            (true, false) => Some(UNCONFIRMED_TYPE),
            (false, true) => Some(TOTAL_UNCONFIRMED_TYPE),
            (true, true) => Some(ORDER_AND_TOTAL_UNCONFIRMED_TYPE),
            (false, false) => None,
        }
    }

    /// The note a line of the accounting journal carries: `order not confirmed`,
    /// `total not confirmed`, both, or nothing.
    pub fn note(self) -> &'static str {
        match (self.order, self.total) {
            (true, false) => "order not confirmed",
            (false, true) => verify::TOTAL_UNCONFIRMED,
            (true, true) => "order and total not confirmed",
            (false, false) => "",
        }
    }
}

/// What the ledger's order `order_id` holds of an answer naming service order `service_id`
/// that makes it a mismatch: the id belongs to another of the ledger's orders.
pub fn id_of_another_order(
    ledger: &Ledger,
    order_id: i64,
    service_id: &str,
) -> Result<Option<String>, LedgerError> {
    Ok(ledger
        .order_by_service_id(service_id)?
        .filter(|other| other.id != order_id)
        .map(|other| {
            format!(
                "the service answered with order {service_id}, which the ledger holds for another intent (key {})",
                other.idempotency_key
            )
        }))
}

/// Records the ledger's order `order_id` as MISMATCH: the service's answer is not what was
/// sent. Its rows need a person; the service's answer is kept on the order.
pub fn record_mismatch(
    ledger: &mut Ledger,
    order_id: i64,
    service_id: Option<&str>,
    response: Option<&str>,
    http: u16,
    differences: &[String],
) -> Result<(), LedgerError> {
    let message = format!(
        "the service's answer differs from the order sent: {}; a person must compare it with the account's orders",
        differences.join("; ")
    );
    ledger.transition_order(
        order_id,
        Transition {
            service_order_id: service_id,
            http_status: Some(http),
            response,
            error: Some(("order_mismatch", &message)),
            ..Transition::to(
                OrderState::Mismatch,
                "the service's answer differs from the order sent",
            )
        },
    )
}

/// Records a terminal order (COMPLETED or FAILED) and what it says of each item, once it is
/// checked against what was sent (see [`super::verify`]); an order that differs is recorded
/// MISMATCH instead.
pub fn record_terminal_in(
    ledger: &mut Ledger,
    order_id: i64,
    order: &Order,
    http: u16,
) -> Result<(), LedgerError> {
    let record = ledger
        .order(order_id)?
        .ok_or_else(|| LedgerError::Corrupt(format!("order {order_id} not found")))?;
    let another = id_of_another_order(ledger, order_id, &order.id)?;
    let mut differences: Vec<String> = another.iter().cloned().collect();
    differences.extend(other_id_held(&record, order));
    let rows = ledger.rows_of_order(order_id)?;
    let row_currencies = currencies_of(&rows);
    let verified = match items_as_sent(ledger, &record, &rows, &row_currencies, order) {
        Ok(verified) => Some(verified),
        Err(found) => {
            differences.extend(found);
            None
        }
    };
    if !differences.is_empty() {
        let response = serde_json::to_string(order).ok();
        let id = if another.is_some() {
            None
        } else {
            Some(order.id.as_str())
        };
        return record_mismatch(
            ledger,
            order_id,
            id,
            response.as_deref(),
            http,
            &differences,
        );
    }
    let (pairs, confirmed, total_unchecked) = verified.map_or((Vec::new(), true, None), |v| {
        (v.pairs, v.confirmed, v.total_unchecked)
    });
    let items = item_outcomes(order, &pairs, &row_currencies, &record.payment_currency);
    let noted = Noted {
        confirmed,
        total_unchecked,
    };
    record_outcome(ledger, order_id, order, http, &items, &noted)
}

/// What makes an answer naming another service order than the one the ledger's order holds a
/// mismatch, if it does.
fn other_id_held(record: &OrderRecord, order: &Order) -> Option<String> {
    let known = record.service_order_id.as_deref()?;
    (known != order.id).then(|| {
        format!(
            "the service answered with order {}, the ledger holds order {known}",
            order.id
        )
    })
}

/// The currency each row asked for, as its stored spec says.
fn currencies_of(rows: &[RowRecord]) -> Vec<Option<String>> {
    rows.iter()
        .map(|r| r.spec.as_ref().map(|s| s.currency.clone()))
        .collect()
}

/// The answered item of each row (its index among the order's items), in the order the rows
/// were sent, and whether the answer names the order as sent, when the items are what was
/// sent; else what differs. A FAILED order that answers no items has none to check.
fn items_as_sent(
    ledger: &Ledger,
    record: &OrderRecord,
    rows: &[RowRecord],
    row_currencies: &[Option<String>],
    order: &Order,
) -> Result<verify::Verified, Vec<String>> {
    if order.status != OrderStatus::Completed && order.items.is_empty() {
        return Ok(verify::Verified {
            pairs: Vec::new(),
            confirmed: true,
            total_unchecked: None,
        });
    }
    // An order adopted from the service has no body: what its rows asked for stands in, with
    // the key, batch and rows the ledger recorded for it.
    let body = if record.body.is_empty() {
        let batch = ledger
            .batch_by_id(record.batch_id)
            .map_err(|e| vec![format!("the order's batch cannot be read: {e}")])?
            .map(|b| b.name)
            .unwrap_or_default();
        let payment =
            order_body::payment_method(&record.payment_currency, record.card_id.as_deref());
        let specs: Vec<Option<&RowContent>> = rows.iter().map(|r| r.spec.as_ref()).collect();
        // Its rows as the service spells them where the ledger spells them another way that
        // reads the same (reconciliation adopted them so).
        let answered = order
            .metadata
            .as_ref()
            .map(order_body::references_in_metadata)
            .unwrap_or_default();
        let same_rows = answered.len() == rows.len()
            && answered.iter().zip(rows).all(|(a, r)| {
                crate::reference::fold_reference(a)
                    == crate::reference::fold_reference(&r.reference)
            });
        let named: Vec<(&str, i64)> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let spelt = answered.get(i).filter(|_| same_rows);
                (
                    spelt.map_or(r.reference.as_str(), String::as_str),
                    r.attempt,
                )
            })
            .collect();
        let owner = verify::Owner {
            key: &record.idempotency_key,
            batch: &batch,
            rows: &named,
        };
        verify::body_of_rows(payment, &specs, &owner)
    } else {
        Ok(record.body.clone())
    };
    let sent: Vec<verify::SentRow> = rows
        .iter()
        .zip(row_currencies)
        .map(|(r, currency)| verify::SentRow {
            currency: currency.clone(),
            reference: r.reference.clone(),
        })
        .collect();
    match body.map(|body| verify::check(&body, &sent, order)) {
        Ok(checked) => checked,
        Err(why) => Err(vec![why]),
    }
}

/// What the order says of each row's item (`pairs`, from [`items_as_sent`]), with what the
/// paying balance was charged for it when the order completed.
fn item_outcomes(
    order: &Order,
    pairs: &[usize],
    row_currencies: &[Option<String>],
    paid_in: &str,
) -> Vec<ItemOutcome> {
    // The answered item of each row, in the order sent (the service may answer them in another).
    let answered: Vec<&OrderItem> = pairs.iter().filter_map(|j| order.items.get(*j)).collect();
    let mut charged: Vec<Option<(Decimal, String)>> = answered
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let row_currency = row_currencies.get(i).and_then(|c| c.as_deref());
            (order.status == OrderStatus::Completed)
                .then(|| debited(order, item, row_currency, paid_in))
                .flatten()
        })
        .collect();
    if order.status == OrderStatus::Completed {
        spread_fees(order, &mut charged, paid_in);
    }
    answered
        .iter()
        .zip(charged)
        .map(|(item, charged)| ItemOutcome {
            item_id: item.id.clone(),
            payout_url: item.payout_url().map(str::to_string),
            price: item.price,
            discount: match (item.face_value, item.price) {
                (Some(f), Some(p)) => Some(f - p),
                _ => None,
            },
            debited: charged,
            // A link answered EXPIRED before its expiry date is not believed: left unread, for
            // `paybatch payouts` to read again.
            payout: payout_life(item).filter(|l| !expired_ahead(l, chrono::Utc::now())),
        })
        .collect()
}

/// Whether `life` says its link EXPIRED with an `expiry_date` later than the time of the answer
/// (the later of `now` and the answer's own `status_updated_at`): a link cannot expire before
/// its expiry date, so such an answer contradicts itself and is not believed.
pub fn expired_ahead(life: &PayoutLife, now: chrono::DateTime<chrono::Utc>) -> bool {
    if life.status != PayoutStatus::Expired {
        return false;
    }
    let time = |t: &Option<String>| {
        t.as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
    };
    let Some(expiry) = time(&life.expires_at) else {
        return false;
    };
    let answered = time(&life.since).map_or(now, |since| since.max(now));
    expiry > answered
}

/// The life of an item's payout link as an answer gives it (`payout.status`, since when,
/// expiry); none when the answer has no status (the 2023-07-27 shapes, a link without one).
pub fn payout_life(item: &OrderItem) -> Option<PayoutLife> {
    let payout = item.payout.as_ref()?;
    Some(PayoutLife {
        status: PayoutStatus::parse(payout.status.as_deref()?),
        since: payout.status_updated_at.clone(),
        expires_at: payout.expiry_date.clone(),
    })
}

/// What could not be confirmed of a COMPLETED order that holds what was sent.
struct Noted {
    /// Its answer names it as the order sent.
    confirmed: bool,
    /// Why its total could not be checked, when it could not.
    total_unchecked: Option<String>,
}

impl Noted {
    /// The note its rows carry (`error_type`, `error_message`), when something was not
    /// confirmed.
    fn note(&self) -> Option<(&'static str, String)> {
        let unconfirmed = Unconfirmed {
            order: !self.confirmed,
            total: self.total_unchecked.is_some(),
        };
        let mut message = Vec::new();
        if unconfirmed.order {
            message.push(verify::UNCONFIRMED.to_string());
        }
        if let Some(why) = &self.total_unchecked {
            message.push(format!(
                "{}: {why} (optional in the published answer): what left the balance is the order's total_price as answered, unchecked",
                verify::TOTAL_UNCONFIRMED
            ));
        }
        unconfirmed.error_type().map(|t| (t, message.join("; ")))
    }
}

/// Records the ledger's order `order_id` COMPLETED or FAILED, as the service's `order` says,
/// with what it says of each item. A COMPLETED order whose answer could not be confirmed as the
/// order sent, or whose total could not be checked ([`Noted`]), carries a note as its rows'
/// error ([`Unconfirmed`]: `order_unconfirmed`, `total_unconfirmed` or both), which the result
/// file, `status`, the HTML report and the journal show.
fn record_outcome(
    ledger: &mut Ledger,
    order_id: i64,
    order: &Order,
    http: u16,
    items: &[ItemOutcome],
    noted: &Noted,
) -> Result<(), LedgerError> {
    let response = serde_json::to_string(order).ok();
    let (to, error, cause) = match (order.status, noted.note()) {
        (OrderStatus::Completed, Some(note)) => (
            OrderState::Completed,
            Some(note),
            "order completed; its answer could not confirm all of it",
        ),
        (OrderStatus::Completed, None) => (OrderState::Completed, None, "order completed"),
        _ => (
            OrderState::Failed,
            Some((
                "order_failed",
                order
                    .message
                    .clone()
                    .unwrap_or_else(|| "the service reports the order FAILED".into()),
            )),
            "order failed at the service",
        ),
    };
    ledger.transition_order(
        order_id,
        Transition {
            service_order_id: Some(&order.id),
            http_status: Some(http),
            response: response.as_deref(),
            error: error.as_ref().map(|(t, m)| (*t, m.as_str())),
            items,
            completed_at: order.completed_at.as_deref(),
            ..Transition::to(to, cause)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(total: &str) -> Order {
        serde_json::from_value(serde_json::json!({
            "id": "O-1", "status": "COMPLETED", "currency": "USD", "total_price": total,
            "items": []
        }))
        .expect("an order")
    }

    fn usd(amounts: &[&str]) -> Vec<Option<(Decimal, String)>> {
        amounts
            .iter()
            .map(|a| Some((a.parse().expect("amount"), "USD".to_string())))
            .collect()
    }

    /// Each note of what was not confirmed is recorded as one `error_type` and read back as
    /// itself; another type notes nothing.
    #[test]
    fn what_was_not_confirmed_is_recorded_and_read_back() {
        for (order, total) in [(true, false), (false, true), (true, true)] {
            let noted = Unconfirmed { order, total };
            let recorded = noted.error_type();
            assert!(recorded.is_some_and(|t| Unconfirmed::TYPES.contains(&t)));
            assert_eq!(Unconfirmed::of(recorded), noted);
            assert!(!noted.note().is_empty());
        }
        assert_eq!(Unconfirmed::default().error_type(), None);
        assert_eq!(
            Unconfirmed::of(Some("order_failed")),
            Unconfirmed::default()
        );
        assert_eq!(Unconfirmed::of(None).note(), "");
    }

    /// What the rows say left the balance adds up to what the order cost, fees included.
    #[test]
    fn fees_are_spread_over_the_rows_to_the_cent() {
        let mut charged = usd(&["10.00", "20.00", "0.01"]);
        spread_fees(&order("31.51"), &mut charged, "USD");
        let total: Decimal = charged.iter().flatten().map(|(p, _)| *p).sum();
        assert_eq!(total, "31.51".parse::<Decimal>().expect("amount"));
        assert_eq!(
            charged[0].as_ref().map(|c| c.0.to_string()).as_deref(),
            Some("10.50")
        );
        // No fee, nothing changes; a row charged in another currency, nothing is spread.
        let mut same = usd(&["10.00", "20.00"]);
        spread_fees(&order("30.00"), &mut same, "USD");
        assert_eq!(same, usd(&["10.00", "20.00"]));
        let mut mixed = vec![usd(&["10.00"]).remove(0), None];
        spread_fees(&order("31.00"), &mut mixed, "USD");
        assert_eq!(
            mixed[0].as_ref().map(|c| c.0.to_string()).as_deref(),
            Some("10.00")
        );
    }
}
