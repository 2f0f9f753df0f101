//! How the simulator state's orders and items are read from and written to their rows.

use rusqlite::{Connection, Row, Statement, params};
use rust_decimal::Decimal;
use std::str::FromStr;

use super::{ItemRow, OrderRow, Result};
use paybatch_api::models::OrderStatus;

pub(super) fn conversion(e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
}

pub(super) fn dec_at(row: &Row<'_>, idx: usize) -> Result<Decimal> {
    let text: String = row.get(idx)?;
    Decimal::from_str(&text).map_err(conversion)
}

fn json_at<T: serde::de::DeserializeOwned>(row: &Row<'_>, idx: usize) -> Result<T> {
    let text: String = row.get(idx)?;
    serde_json::from_str(&text).map_err(conversion)
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn status_from(text: &str) -> OrderStatus {
    match text {
        "PROCESSING" => OrderStatus::Processing,
        "COMPLETED" => OrderStatus::Completed,
        "FAILED" => OrderStatus::Failed,
        _ => OrderStatus::Unknown,
    }
}

/// ISO 8601 UTC with milliseconds, from ms since the epoch.
pub(crate) fn iso_from_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(super) const ORDER_COLUMNS: &str = "seq, id, key_fingerprint, idempotency_key, status, outcome, \
     created_at, created_ms, due_ms, completed_at, description, metadata, payment_method, \
     currency, total_price, total_discount, fx, message";

pub(super) fn order_from_row(row: &Row<'_>) -> Result<OrderRow> {
    let status: String = row.get(4)?;
    let outcome: String = row.get(5)?;
    let fx: String = row.get(16)?;
    Ok(OrderRow {
        seq: row.get(0)?,
        id: row.get(1)?,
        key_fingerprint: row.get(2)?,
        idempotency_key: row.get(3)?,
        status: status_from(&status),
        outcome: status_from(&outcome),
        created_at: row.get(6)?,
        created_ms: row.get(7)?,
        due_ms: row.get(8)?,
        completed_at: row.get(9)?,
        description: row.get(10)?,
        metadata: json_at(row, 11)?,
        payment_method: json_at(row, 12)?,
        currency: row.get(13)?,
        total_price: dec_at(row, 14)?,
        total_discount: dec_at(row, 15)?,
        fx: serde_json::from_str(&fx).map_err(conversion)?,
        message: row.get(17)?,
        items: Vec::new(),
    })
}

pub(super) const INSERT_ORDER: &str = "INSERT INTO orders (id, key_fingerprint, idempotency_key, status, \
     outcome, created_at, created_ms, due_ms, completed_at, description, metadata, payment_method, \
     currency, total_price, total_discount, fx, message) VALUES \
     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

pub(super) const INSERT_ITEM: &str = "INSERT INTO items (order_id, position, id, distribution_method, \
     products, face_value, price, currency, discount_multiplier, payout_url, expiry_months) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

pub(super) fn insert_order(stmt: &mut Statement<'_>, order: &OrderRow) -> Result<()> {
    stmt.execute(params![
        order.id,
        order.key_fingerprint,
        order.idempotency_key,
        order.status.as_str(),
        order.outcome.as_str(),
        order.created_at,
        order.created_ms,
        order.due_ms,
        order.completed_at,
        order.description,
        to_json(&order.metadata)?,
        to_json(&order.payment_method)?,
        order.currency,
        order.total_price.to_string(),
        order.total_discount.to_string(),
        to_json(&order.fx)?,
        order.message,
    ])?;
    Ok(())
}

pub(super) fn insert_item(
    stmt: &mut Statement<'_>,
    order_id: &str,
    position: usize,
    item: &ItemRow,
) -> Result<()> {
    stmt.execute(params![
        order_id,
        position as i64,
        item.id,
        to_json(&item.distribution_method)?,
        to_json(&item.products)?,
        item.face_value.to_string(),
        item.price.to_string(),
        item.currency,
        item.discount_multiplier.to_string(),
        item.payout_url,
        item.expiry_months,
    ])?;
    Ok(())
}

pub(super) fn items_of(conn: &Connection, order_id: &str) -> Result<Vec<ItemRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, distribution_method, products, face_value, price, currency, \
         discount_multiplier, payout_url, expiry_months FROM items WHERE order_id = ?1 \
         ORDER BY position",
    )?;
    let rows = stmt.query_map([order_id], |row| {
        Ok(ItemRow {
            id: row.get(0)?,
            distribution_method: json_at(row, 1)?,
            products: json_at(row, 2)?,
            face_value: dec_at(row, 3)?,
            price: dec_at(row, 4)?,
            currency: row.get(5)?,
            discount_multiplier: dec_at(row, 6)?,
            payout_url: row.get(7)?,
            expiry_months: row.get(8)?,
        })
    })?;
    rows.collect()
}
