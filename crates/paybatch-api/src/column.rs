//! The way an order pays as a column of the tool's SQLite ledger (the `rusqlite` feature): stored
//! as its text, `ACCOUNT_BALANCE` or `CARD`. The impls live beside the type because the type is
//! this crate's; text the column does not know is a conversion error naming it ([`UnknownText`]),
//! which the ledger reports as damaged.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::models::PaymentMethodType;

/// Text a typed column does not know.
#[derive(Debug, thiserror::Error)]
#[error("unknown {column} `{text}` in the ledger")]
pub struct UnknownText {
    pub column: &'static str,
    pub text: String,
}

/// The stored text of a way of paying; `None` for one paybatch does not know, never recorded.
fn payment_method_text(kind: PaymentMethodType) -> Option<&'static str> {
    (kind != PaymentMethodType::Other).then(|| kind.as_str())
}

/// `orders.payment_method`: `ACCOUNT_BALANCE` or `CARD`.
impl FromSql for PaymentMethodType {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let text = value.as_str()?;
        [PaymentMethodType::AccountBalance, PaymentMethodType::Card]
            .into_iter()
            .find(|m| payment_method_text(*m) == Some(text))
            .ok_or_else(|| {
                FromSqlError::Other(Box::new(UnknownText {
                    column: "payment method",
                    text: text.to_string(),
                }))
            })
    }
}

/// A way of paying paybatch does not know is read in answers only: recording it is refused.
impl ToSql for PaymentMethodType {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        payment_method_text(*self)
            .map(ToSqlOutput::from)
            .ok_or_else(|| {
                rusqlite::Error::ToSqlConversionFailure(Box::new(UnknownText {
                    column: "payment method",
                    text: "OTHER".to_string(),
                }))
            })
    }
}
