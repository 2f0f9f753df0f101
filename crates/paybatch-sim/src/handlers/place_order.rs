//! The work of `POST /order` while its idempotency key is reserved: the refusals kept under
//! the key (stored 500, spending limit, unreadable JSON, the order checks), then the new
//! order's identifiers, timing and outcome, its answer (200 full order or 202 accepted), and
//! its storage with the balance check and debit.

use serde_json::Value;

use super::answers::{error_bytes, json_bytes};
use super::context::Ctx;
use crate::orders::{self, Priced, PricedItem, Refused, Request, Rules};
use crate::store::{
    Answer, BalanceUse, Created, ItemRow, OrderRow, Reservation, Towards, iso_from_ms,
};
use crate::{ApiVersion, Sim};
use paybatch_api::models::{AcceptedOrder, ExecutionMode, OrderStatus, PaymentMethodType};

/// What the work answers: the status, the body (also stored under the key) and whether an
/// order was created.
pub(super) struct Outcome {
    pub status: u16,
    pub body: Vec<u8>,
    pub created: bool,
}

/// Keeps a refusal under the idempotency key, so the same request again gets it back.
struct Keeper<'a> {
    sim: &'a Sim,
    fp: &'a str,
    key: &'a str,
    sha: &'a str,
    now: i64,
}

impl Keeper<'_> {
    fn refuse(&self, status: u16, body: Vec<u8>) -> Result<Outcome, rusqlite::Error> {
        let taken = self.sim.store.record_answer(
            self.fp,
            self.key,
            &Answer {
                body_sha256: self.sha,
                status,
                body: &body,
            },
            self.now,
        )?;
        Ok(match taken {
            Some(taken) => answered_elsewhere(self.sim, taken),
            None => Outcome {
                status,
                body,
                created: false,
            },
        })
    }
}

/// The answer to a key that another simulator sharing the state file answered while this one
/// held it ([`Created::Taken`]): its stored answer for the same body, a refusal for another.
fn answered_elsewhere(sim: &Sim, taken: Reservation) -> Outcome {
    let (status, body) = match taken {
        Reservation::Replay { status, body } => {
            sim.stat(|s| s.replayed += 1);
            (status, body)
        }
        _ => (
            400,
            error_bytes(
                "idempotency_validation_error",
                "This idempotency key was already used with a different request body.",
                None,
            ),
        ),
    };
    Outcome {
        status,
        body,
        created: false,
    }
}

/// Parses, checks, prices and creates an order while its key is reserved.
pub(super) fn place_order(
    sim: &Sim,
    ctx: &Ctx,
    key: &str,
    mode: ExecutionMode,
    body: &[u8],
    sha: &str,
) -> Result<Outcome, rusqlite::Error> {
    let keeper = Keeper {
        sim,
        fp: &ctx.fp,
        key,
        sha,
        now: sim.now_ms()?,
    };
    if let Some((status, body)) = refusal_of_the_service(sim) {
        return keeper.refuse(status, body);
    }
    let (request, priced) = match read_and_check(sim, mode, body) {
        Ok(checked) => checked,
        Err((status, body)) => return keeper.refuse(status, body),
    };
    if let Some((status, body)) = swapped(sim, ctx, mode, &priced)? {
        return keeper.refuse(status, body);
    }
    let row = new_order_row(sim, ctx, key, mode, keeper.now, &request, priced);
    let (status, answer) = creation_answer(sim, &row, mode, ctx.version)?;
    store(sim, &keeper, &row, status, answer)
}

/// A refusal that does not depend on the body: the injected 500 kept under the key, or the
/// account's spending limit.
fn refusal_of_the_service(sim: &Sim) -> Option<(u16, Vec<u8>)> {
    if sim.chance.roll(sim.config.faults.stored_error_rate) {
        sim.stat(|s| s.stored_errors += 1);
        return Some((
            500,
            error_bytes(
                "internal_server_error",
                "The service failed to handle the request (simulated fault, kept under the idempotency key).",
                None,
            ),
        ));
    }
    if sim.config.ordering_restricted {
        return Some((
            403,
            error_bytes(
                "ordering_restricted",
                "You cannot complete this order as you have reached your spending limit.",
                None,
            ),
        ));
    }
    None
}

/// Reads the body as JSON and checks it as an order; a refusal is its status and body.
fn read_and_check(
    sim: &Sim,
    mode: ExecutionMode,
    body: &[u8],
) -> Result<(Request, Priced), (u16, Vec<u8>)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            400,
            error_bytes(
                "bad_request",
                format!("There is a problem with your request payload or JSON format: {e}."),
                None,
            ),
        )
    })?;
    let rules = Rules {
        mode,
        catalog: &sim.catalog,
        cards_accepted: sim.config.cards_accepted,
        cards: &sim.config.cards,
    };
    let checked = orders::check_order(&value, &rules).map_err(|refused| match refused {
        Refused::Invalid(problems) => {
            let details = serde_json::to_value(&problems).unwrap_or(Value::Null);
            (
                422,
                error_bytes(
                    "validation_error",
                    "There was an issue with the request payload: see details.",
                    Some(details),
                ),
            )
        }
        Refused::BadRequest { kind, message } => (400, error_bytes(kind, message, None)),
    })?;
    match refused_addresses(sim, &checked.0) {
        Some(details) => Err((
            422,
            error_bytes(
                "validation_error",
                "There was an issue with the request payload: see details.",
                Some(details),
            ),
        )),
        None => Ok(checked),
    }
}

/// The items whose address the simulator is set to refuse (`SimConfig::refuse_emails`), as the
/// details of a `422 validation_error`: one entry an item, located at its address.
fn refused_addresses(sim: &Sim, request: &Request) -> Option<Value> {
    if sim.config.refuse_emails.is_empty() {
        return None;
    }
    let details: Vec<Value> = request
        .items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let address = item.distribution_method.get("email_address")?.as_str()?;
            sim.config
                .refuse_emails
                .contains(&address.to_lowercase())
                .then(|| {
                    serde_json::json!({
                        "type": "value_error",
                        "message": format!("'{address}' is not a valid email address"),
                        "location": ["items", i.to_string(), "distribution_method", "email_address"],
                    })
                })
        })
        .collect();
    (!details.is_empty()).then_some(Value::Array(details))
}

/// The stored items of a new order, each with its id and payout link.
fn item_rows(sim: &Sim, items: Vec<PricedItem>) -> Vec<ItemRow> {
    items
        .into_iter()
        .map(|it| ItemRow {
            id: format!("E-{}", sim.ids.token(9)),
            payout_url: format!(
                "https://playground.example/redeem/{}",
                sim.ids.token(24).to_ascii_lowercase()
            ),
            distribution_method: it.distribution_method,
            products: it.products,
            face_value: it.face_value,
            price: it.price,
            currency: it.currency,
            discount_multiplier: it.discount_multiplier,
            expiry_months: it.expiry_months,
        })
        .collect()
}

/// When a new order finishes and how: its outcome (drawn), its status now, the time it is due
/// and, for a sync order, its completion time.
struct Timing {
    outcome: OrderStatus,
    status: OrderStatus,
    due_ms: i64,
    completed_at: Option<String>,
}

fn timing(sim: &Sim, mode: ExecutionMode, now: i64, created_at: &str) -> Timing {
    let outcome = if sim.chance.roll(sim.config.failure_rate) {
        OrderStatus::Failed
    } else {
        OrderStatus::Completed
    };
    let (status, due_ms, completed_at) = match mode {
        ExecutionMode::Sync => (outcome, now, Some(created_at.to_string())),
        ExecutionMode::Async => {
            let wait = sim
                .chance
                .between(sim.config.processing_min, sim.config.processing_max);
            (OrderStatus::Processing, now + wait.as_millis() as i64, None)
        }
    };
    Timing {
        outcome,
        status,
        due_ms,
        completed_at,
    }
}

/// The new order as it will be stored.
fn new_order_row(
    sim: &Sim,
    ctx: &Ctx,
    key: &str,
    mode: ExecutionMode,
    now: i64,
    request: &Request,
    priced: Priced,
) -> OrderRow {
    let id = format!(
        "O-{}",
        ulid::Ulid::from_parts(now.max(0) as u64, sim.ids.ulid_random())
    );
    let items = item_rows(sim, priced.items);
    let created_at = iso_from_ms(now);
    let timing = timing(sim, mode, now, &created_at);
    let mut row = OrderRow {
        seq: 0,
        id,
        key_fingerprint: ctx.fp.clone(),
        idempotency_key: key.to_string(),
        status: timing.status,
        outcome: timing.outcome,
        created_at,
        created_ms: now,
        due_ms: timing.due_ms,
        completed_at: timing.completed_at,
        description: request.description.clone(),
        metadata: request.metadata.clone(),
        payment_method: priced.payment_method,
        currency: priced.currency,
        total_price: priced.total_price,
        total_discount: priced.total_discount,
        fx: priced.transaction_detail,
        message: None,
        items,
    };
    if row.status == OrderStatus::Failed {
        row.message = Some(crate::store::failure_message(&row));
    }
    row
}

/// The answer of a hostile service that swaps orders (`hostile.swap_rate`): an earlier order of
/// the account (of the same items when there is one), as if this request had created it;
/// nothing is created. `None` when no swap is drawn or the account has no order yet.
fn swapped(
    sim: &Sim,
    ctx: &Ctx,
    mode: ExecutionMode,
    priced: &Priced,
) -> Result<Option<(u16, Vec<u8>)>, rusqlite::Error> {
    if !sim.chance.roll(sim.config.faults.hostile.swap_rate) {
        return Ok(None);
    }
    let page = sim.store.orders_page(&ctx.fp, None, Towards::Older, 20)?;
    let mut candidates = Vec::with_capacity(page.orders.len());
    for o in &page.orders {
        if let Some(full) = sim.store.order(&ctx.fp, &o.id)? {
            candidates.push(full);
        }
    }
    let items: Vec<_> = priced
        .items
        .iter()
        .map(|it| {
            (
                it.distribution_method.clone(),
                serde_json::to_value(&it.products).unwrap_or(Value::Null),
                it.face_value,
            )
        })
        .collect();
    let Some(other) = crate::disguise::swap_target(&items, &candidates) else {
        return Ok(None);
    };
    sim.stat(|s| s.swapped += 1);
    Ok(Some(creation_answer(sim, other, mode, ctx.version)?))
}

/// The answer to a created order: 200 and the full order (sync), or 202 accepted (async).
fn creation_answer(
    sim: &Sim,
    row: &OrderRow,
    mode: ExecutionMode,
    version: ApiVersion,
) -> Result<(u16, Vec<u8>), rusqlite::Error> {
    Ok(match mode {
        ExecutionMode::Sync if row.status == OrderStatus::Processing => (
            200,
            json_bytes(&AcceptedOrder {
                id: row.id.clone(),
                status: OrderStatus::Processing,
            }),
        ),
        ExecutionMode::Sync => (
            200,
            json_bytes(&super::orders::disguised_full_order(
                sim,
                row,
                version,
                &sim.payout_clock()?,
            )),
        ),
        ExecutionMode::Async => (
            202,
            json_bytes(&AcceptedOrder {
                id: row.id.clone(),
                status: OrderStatus::Processing,
            }),
        ),
    })
}

/// Stores the order and its answer under the key, checking (and debiting) the balance it is
/// paid from; an order the balance does not cover is refused instead.
fn store(
    sim: &Sim,
    keeper: &Keeper<'_>,
    row: &OrderRow,
    status: u16,
    answer: Vec<u8>,
) -> Result<Outcome, rusqlite::Error> {
    let balance =
        (row.payment_method.kind == PaymentMethodType::AccountBalance).then(|| BalanceUse {
            currency: &row.currency,
            amount: row.total_price,
            // A sync order that fails at once is checked against the balance but not charged.
            debit: row.status != OrderStatus::Failed,
        });
    let stored = sim.store.create_order(
        row,
        balance,
        &Answer {
            body_sha256: keeper.sha,
            status,
            body: &answer,
        },
    )?;
    match stored {
        Created::Ok => {
            sim.stat(|s| s.orders_created += 1);
            Ok(Outcome {
                status,
                body: answer,
                created: true,
            })
        }
        Created::Taken(taken) => Ok(answered_elsewhere(sim, taken)),
        Created::InsufficientBalance { available } => keeper.refuse(
            400,
            error_bytes(
                "insufficient_funds",
                format!(
                    "Insufficient funds in {cur} balance to create order: it costs {need} {cur}, the balance is {available} {cur}.",
                    cur = row.currency,
                    need = row.total_price,
                ),
                None,
            ),
        ),
    }
}
