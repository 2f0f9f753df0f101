//! The ledger's typed columns: row and order states, the way an order pays and its mode, stored
//! as their text, and JSON stored as text ([`Json`]). A column is read into its type or not at
//! all: text the type does not know (a ledger of a newer paybatch, a file edited by hand) is a
//! conversion error naming it, which the ledger reports as damaged ([`super::LedgerError`]).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rust_decimal::Decimal;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::decimal::parse_decimal_text;
use crate::api::models::ExecutionMode;
use crate::row::{RowContent, UnreadableRow};

use super::state::{OrderState, RowState, UnknownState};

/// How an order was made, as `orders.mode` holds it: sent in either execution mode, or
/// adopted from the service by reconciliation (never sent by this ledger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderMode {
    Sync,
    Async,
    Adopted,
}

impl OrderMode {
    pub const ALL: [OrderMode; 3] = [OrderMode::Sync, OrderMode::Async, OrderMode::Adopted];

    pub fn as_str(self) -> &'static str {
        match self {
            OrderMode::Sync => "sync",
            OrderMode::Async => "async",
            OrderMode::Adopted => "adopted",
        }
    }

    /// The mode an order is sent in: an adopted order as an asynchronous one.
    pub fn execution(self) -> ExecutionMode {
        match self {
            OrderMode::Sync => ExecutionMode::Sync,
            OrderMode::Async | OrderMode::Adopted => ExecutionMode::Async,
        }
    }
}

impl From<ExecutionMode> for OrderMode {
    fn from(mode: ExecutionMode) -> Self {
        match mode {
            ExecutionMode::Sync => OrderMode::Sync,
            ExecutionMode::Async => OrderMode::Async,
        }
    }
}

/// Text a typed column does not know. The way an order pays is a column too; its `FromSql` and
/// `ToSql` are beside its type, in the api crate (`paybatch_api::column`).
pub use crate::api::column::UnknownText;

/// The value of `text` among `all`, by its stored text; else a conversion error naming it.
fn known<T: Copy>(
    value: ValueRef<'_>,
    column: &'static str,
    all: &[T],
    text_of: impl Fn(T) -> Option<&'static str>,
) -> FromSqlResult<T> {
    let text = value.as_str()?;
    all.iter()
        .copied()
        .find(|t| text_of(*t) == Some(text))
        .ok_or_else(|| {
            FromSqlError::Other(Box::new(UnknownText {
                column,
                text: text.to_string(),
            }))
        })
}

impl FromSql for RowState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: UnknownState| FromSqlError::Other(Box::new(e)))
    }
}

impl ToSql for RowState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for OrderState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|e: UnknownState| FromSqlError::Other(Box::new(e)))
    }
}

impl ToSql for OrderState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for OrderMode {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        known(value, "order mode", &OrderMode::ALL, |m| Some(m.as_str()))
    }
}

impl ToSql for OrderMode {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

/// A value stored as its JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromSql for Json<T> {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        serde_json::from_str(value.as_str()?)
            .map(Json)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

impl<T: Serialize> ToSql for Json<T> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        serde_json::to_string(&self.0)
            .map(ToSqlOutput::from)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
    }
}

/// An amount the service answered (a price, a discount, what left a balance), stored as the
/// text of its decimal (`9.80` stays `9.80`). Read back exactly, from text or a number; text
/// that is not a decimal amount is a conversion error naming it, a damaged ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount(pub Decimal);

impl FromSql for Amount {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        // A text (every amount paybatch writes) is read where it lies; a number as its text.
        let number = match value {
            ValueRef::Integer(i) => Some(i.to_string()),
            ValueRef::Real(f) => Some(f.to_string()),
            _ => None,
        };
        let text = match &number {
            Some(number) => number.as_str(),
            None => value.as_str()?,
        };
        parse_decimal_text(text).map(Amount).ok_or_else(|| {
            FromSqlError::Other(Box::new(UnknownText {
                column: "amount",
                text: text.to_string(),
            }))
        })
    }
}

impl ToSql for Amount {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.0.to_string()))
    }
}

/// An optional stored amount ([`Amount`]) of `r`'s column `column`, as its decimal.
pub(super) fn amount(
    r: &rusqlite::Row<'_>,
    column: impl rusqlite::RowIndex,
) -> rusqlite::Result<Option<Decimal>> {
    Ok(r.get::<_, Option<Amount>>(column)?.map(|a| a.0))
}

/// A stored row ([`RowContent`], `rows.spec`) that cannot be read, and where it is: the
/// batch (by its id; by its name once [`super::Ledger::read_error`] has looked it up) and the
/// line of its file.
#[derive(Debug)]
pub struct DamagedRow {
    pub batch_id: i64,
    pub batch: Option<String>,
    pub line: i64,
    pub reason: String,
}

impl std::fmt::Display for DamagedRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let batch = match &self.batch {
            Some(name) => format!("`{name}`"),
            None => format!("#{}", self.batch_id),
        };
        write!(
            f,
            "the stored row of line {} of batch {batch} cannot be read ({})\n\
             help: the ledger was changed outside paybatch: restore it from a backup",
            self.line, self.reason
        )
    }
}

impl std::error::Error for DamagedRow {}

/// The stored row of `r`'s column `spec`, read where `r` has its `batch_id` and `line`
/// columns too: a row that cannot be read is a [`DamagedRow`], never left out.
pub(super) fn stored_row(
    r: &rusqlite::Row<'_>,
    spec: impl rusqlite::RowIndex,
) -> rusqlite::Result<Option<RowContent>> {
    match r.get(spec) {
        Err(rusqlite::Error::FromSqlConversionFailure(i, kind, e))
            if e.downcast_ref::<UnreadableRow>().is_some() =>
        {
            let damage = DamagedRow {
                batch_id: r.get("batch_id")?,
                batch: None,
                line: r.get("line")?,
                reason: e.to_string(),
            };
            Err(rusqlite::Error::FromSqlConversionFailure(
                i,
                kind,
                Box::new(damage),
            ))
        }
        read => read,
    }
}

/// As [`stored_row`], for a row in `state`: a row that passed validation always has its stored
/// row, so none stored is damage too. Only a row that failed validation (INVALID), or one that
/// left the file or was left out (REMOVED, SKIPPED), which may have failed it, has none.
pub(super) fn stored_row_in(
    r: &rusqlite::Row<'_>,
    spec: impl rusqlite::RowIndex + Copy,
    state: RowState,
) -> rusqlite::Result<Option<RowContent>> {
    let read = stored_row(r, spec)?;
    let may_have_none = matches!(
        state,
        RowState::Invalid | RowState::Removed | RowState::Skipped
    );
    if read.is_none() && !may_have_none {
        let damage = DamagedRow {
            batch_id: r.get("batch_id")?,
            batch: None,
            line: r.get("line")?,
            reason: format!("none is stored for a {} row", state.as_str()),
        };
        return Err(rusqlite::Error::FromSqlConversionFailure(
            spec.idx(r.as_ref())?,
            rusqlite::types::Type::Null,
            Box::new(damage),
        ));
    }
    Ok(read)
}

/// A statement read by name at no cost a row: `columns` names its select list, in order, so
/// that [`position`] finds a column's place as the code is built; a test checks that the
/// statement's columns are those names.
pub(super) struct Named {
    pub sql: &'static str,
    pub columns: &'static [&'static str],
}

/// The position of `name` among `columns` (the names of a select list, in order), for reads
/// by name that cost nothing a row: evaluated as the code is built (in a `const` block), where
/// a name the list does not have stops the build.
pub(super) const fn position(columns: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < columns.len() {
        let (a, b) = (columns[i].as_bytes(), name.as_bytes());
        let mut same = a.len() == b.len();
        let mut j = 0;
        while same && j < a.len() {
            same = a[j] == b[j];
            j += 1;
        }
        if same {
            return i;
        }
        i += 1;
    }
    panic!("a column the select list does not have");
}

/// The stored row that cannot be read a conversion error stands for, when it is one.
pub(super) fn damaged_row(source: &rusqlite::Error) -> Option<&DamagedRow> {
    let rusqlite::Error::FromSqlConversionFailure(_, _, e) = source else {
        return None;
    };
    e.downcast_ref::<DamagedRow>()
}

/// The damage a conversion error of a typed column stands for, when it is one: text a column
/// does not know, or a stored row that cannot be read (no query reads a stored row's text in
/// SQL: each is read through its column).
pub(super) fn unknown_text(source: &rusqlite::Error) -> Option<String> {
    let rusqlite::Error::FromSqlConversionFailure(_, _, e) = source else {
        return None;
    };
    if let Some(u) = e.downcast_ref::<UnknownState>() {
        return Some(u.to_string());
    }
    if let Some(d) = e.downcast_ref::<DamagedRow>() {
        return Some(d.to_string());
    }
    if let Some(u) = e.downcast_ref::<UnreadableRow>() {
        return Some(format!("a stored row cannot be read ({u})"));
    }
    e.downcast_ref::<UnknownText>().map(UnknownText::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::api::models::PaymentMethodType;

    use rusqlite::Connection;

    /// `value` written to a column and read back, and the text the column holds.
    fn stored<T: ToSql + FromSql>(value: &T) -> (T, String) {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (v TEXT)")
            .expect("table");
        conn.execute("INSERT INTO t (v) VALUES (?1)", [value])
            .expect("insert");
        conn.query_row("SELECT v AS value, v AS text FROM t", [], |r| {
            Ok((r.get("value")?, r.get("text")?))
        })
        .expect("read")
    }

    /// `text` read from a column as a `T`.
    fn read<T: FromSql>(text: &str) -> rusqlite::Result<T> {
        let conn = Connection::open_in_memory().expect("open");
        conn.query_row("SELECT ?1 AS v", [text], |r| r.get("v"))
    }

    /// The message of the conversion error reading `text` as a `T` gives, as the ledger
    /// reports it.
    fn refusal<T: FromSql + std::fmt::Debug>(text: &str) -> String {
        let e = read::<T>(text).expect_err("unknown text refused");
        unknown_text(&e).unwrap_or_else(|| panic!("not a typed refusal: {e}"))
    }

    #[test]
    fn states_are_stored_as_their_text_and_read_back() {
        for s in RowState::ALL {
            assert_eq!(stored(&s), (s, s.as_str().to_string()));
        }
        for s in OrderState::ALL {
            assert_eq!(stored(&s), (s, s.as_str().to_string()));
        }
        assert_eq!(
            refusal::<RowState>("PAID"),
            "unknown state `PAID` in the ledger"
        );
        assert_eq!(
            refusal::<OrderState>("completed"),
            "unknown state `completed` in the ledger"
        );
    }

    #[test]
    fn order_modes_are_stored_as_their_text_and_read_back() {
        for (m, text) in OrderMode::ALL.into_iter().zip(["sync", "async", "adopted"]) {
            assert_eq!(stored(&m), (m, text.to_string()));
        }
        assert_eq!(OrderMode::Adopted.execution(), ExecutionMode::Async);
        assert_eq!(OrderMode::Sync.execution(), ExecutionMode::Sync);
        assert_eq!(OrderMode::from(ExecutionMode::Sync), OrderMode::Sync);
        assert_eq!(
            refusal::<OrderMode>("SYNC"),
            "unknown order mode `SYNC` in the ledger"
        );
    }

    #[test]
    fn ways_of_paying_are_stored_as_their_text_and_read_back() {
        for (m, text) in [
            (PaymentMethodType::AccountBalance, "ACCOUNT_BALANCE"),
            (PaymentMethodType::Card, "CARD"),
        ] {
            assert_eq!(stored(&m), (m, text.to_string()));
        }
        assert_eq!(
            refusal::<PaymentMethodType>("OTHER"),
            "unknown payment method `OTHER` in the ledger"
        );
        assert!(matches!(
            PaymentMethodType::Other.to_sql(),
            Err(rusqlite::Error::ToSqlConversionFailure(_))
        ));
    }

    /// Each statement read by the places of its named columns has those columns, in that
    /// order, in the ledger's schema.
    #[test]
    fn named_statements_have_their_columns_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let ledger = super::super::Ledger::open(&dir.path().join("l.db")).expect("ledger");
        for named in [
            super::super::merge::KNOWN_ROW,
            super::super::repeats::EARLIER_ROW,
        ] {
            let st = ledger.conn.prepare(named.sql).expect("prepare");
            assert_eq!(st.column_names(), named.columns, "{}", named.sql);
        }
    }

    #[test]
    fn a_number_in_a_typed_column_is_refused_too() {
        let conn = Connection::open_in_memory().expect("open");
        let read: rusqlite::Result<RowState> = conn.query_row("SELECT 7 AS v", [], |r| r.get("v"));
        assert!(matches!(read, Err(rusqlite::Error::InvalidColumnType(..))));
    }

    /// Text a typed column does not know (a newer paybatch, a hand edit) is a damaged ledger,
    /// said as such by whichever read meets it.
    #[test]
    fn unknown_text_in_a_ledger_is_damage() {
        let dir = tempfile::tempdir().expect("dir");
        let ledger = super::super::Ledger::open(&dir.path().join("l.db")).expect("ledger");
        ledger
            .conn
            .execute_batch(
                "INSERT INTO batches (id, name, input_path, input_hash, headers, environment,
                                      base_url, key_fingerprint, created_at, updated_at)
                 VALUES (1, 'nov', 'nov.csv', '', '[]', 'sim', 'embedded-simulator', '', '', '');
                 INSERT INTO orders (id, batch_id, idempotency_key, body, mode, payment_currency,
                                     state, created_at)
                 VALUES (1, 1, 'k1', x'', 'later', 'USD', 'INTENT', '');
                 INSERT INTO rows (batch_id, reference, position, line, fields, spec,
                                   content_hash, state)
                 VALUES (1, 'R-1', 0, 2, '[]', NULL, '', 'PAID');",
            )
            .expect("ledger rows");
        let damage = |read: super::super::Result<()>| match read {
            Err(super::super::LedgerError::Corrupt(message)) => message,
            other => panic!("not a damaged ledger: {other:?}"),
        };
        let state = "unknown state `PAID` in the ledger";
        assert_eq!(damage(ledger.rows(1).map(drop)), state);
        assert_eq!(damage(ledger.row_counts(1).map(drop)), state);
        assert_eq!(damage(ledger.row_state(1, "R-1").map(drop)), state);
        assert_eq!(
            damage(ledger.order_heads(1).map(drop)),
            "unknown order mode `later` in the ledger"
        );
    }

    #[test]
    fn json_is_stored_as_its_text_and_read_back() {
        let headers = Json(vec!["reference".to_string(), "face \"value\"".to_string()]);
        assert_eq!(
            stored(&headers),
            (
                headers.clone(),
                r#"["reference","face \"value\""]"#.to_string()
            )
        );
        assert!(matches!(
            read::<Json<Vec<String>>>("[\"cut"),
            Err(rusqlite::Error::FromSqlConversionFailure(..))
        ));
    }
}
