//! The simulator's state in SQLite: orders and their items, idempotency records and balances.
//!
//! With a state file the database is a WAL-mode SQLite file that survives restarts; without one
//! it lives in memory. One connection, guarded by a `Mutex` that is never held across an
//! `.await` (every method here is synchronous). The keys reserved by requests still being
//! handled live beside the connection, under the same lock, so that "look up the idempotency
//! record, else reserve the key" is one atomic step.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use rusqlite_migration::{M, Migrations};
use rust_decimal::Decimal;

use super::life::PayoutLife;
use paybatch_api::files::create_private;
use paybatch_api::models::{OrderStatus, PaymentMethod, PaymentMethodType, ProductSelection};

mod rows;
mod schema;
pub(crate) use rows::iso_from_ms;
use rows::{
    INSERT_ITEM, INSERT_ORDER, ORDER_COLUMNS, conversion, dec_at, insert_item, insert_order,
    items_of, order_from_row, to_json,
};
use schema::{SCHEMA_V1, SCHEMA_V2};

/// How long the service keeps an idempotency record.
pub const IDEMPOTENCY_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// What a new state starts with: the account's balances and payout-link settings, and the
/// seed of the links' lives.
pub(crate) struct Initial<'a> {
    pub balances: &'a [(String, Decimal)],
    pub life: PayoutLife,
    pub life_seed: u64,
}

/// One order as stored.
#[derive(Debug, Clone)]
pub(crate) struct OrderRow {
    pub seq: i64,
    pub id: String,
    pub key_fingerprint: String,
    pub idempotency_key: String,
    pub status: OrderStatus,
    /// The final status, decided at creation.
    pub outcome: OrderStatus,
    pub created_at: String,
    pub created_ms: i64,
    /// When a `PROCESSING` order becomes `outcome` (wall clock, ms since the epoch).
    pub due_ms: i64,
    pub completed_at: Option<String>,
    pub description: Option<String>,
    /// `None` when the order was created without metadata (answered as `null`).
    pub metadata: Option<BTreeMap<String, String>>,
    pub payment_method: PaymentMethod,
    pub currency: String,
    pub total_price: Decimal,
    pub total_discount: Decimal,
    /// The `transaction_detail` of the order, as answered (JSON). Older state files hold only
    /// the `fx` of the payment currency's entry here (null, a rate or an object of rates).
    pub fx: serde_json::Value,
    pub message: Option<String>,
    pub items: Vec<ItemRow>,
}

/// One order item as stored.
#[derive(Debug, Clone)]
pub(crate) struct ItemRow {
    pub id: String,
    /// As accepted (`EMAIL`, `PAYOUT_LINK` or `RECIPIENT` and their fields), answered as is.
    pub distribution_method: serde_json::Value,
    pub products: ProductSelection,
    pub face_value: Decimal,
    pub price: Decimal,
    pub currency: String,
    pub discount_multiplier: Decimal,
    /// Issued at creation, shown once the order is `COMPLETED`.
    pub payout_url: String,
    pub expiry_months: i64,
}

/// Which way a page of the order list goes from its cursor ([`Store::orders_page`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Towards {
    /// The orders just older than the cursor (from the newest when there is none).
    Older,
    /// The orders just newer than the cursor.
    Newer,
}

/// One page of the order list ([`Store::orders_page`]).
pub(crate) struct OrdersPage {
    pub orders: Vec<OrderRow>,
    /// There are orders newer than the page's first.
    pub newer: bool,
    /// There are orders older than the page's last.
    pub older: bool,
}

/// The answer of [`Store::reserve`].
#[derive(Debug, PartialEq)]
pub(crate) enum Reservation {
    /// The key was free: it is now reserved by the caller, who must release it.
    Reserved,
    /// Another request with this key is still being handled.
    InProgress,
    /// A stored answer for the same key and the same body.
    Replay { status: u16, body: Vec<u8> },
    /// A stored answer for the same key and a different body.
    Mismatch,
}

/// How an order creation uses the account balance.
pub(crate) struct BalanceUse<'a> {
    pub currency: &'a str,
    pub amount: Decimal,
    /// Debit now (false for an order that fails at once: checked, not charged).
    pub debit: bool,
}

/// The answer of [`Store::create_order`].
#[derive(Debug, PartialEq)]
pub(crate) enum Created {
    Ok,
    InsufficientBalance {
        available: Decimal,
    },
    /// Another simulator sharing the state file answered the key meanwhile (its reservation
    /// is its own): its answer stands, [`Reservation::Replay`] or [`Reservation::Mismatch`],
    /// and nothing was stored.
    Taken(Reservation),
}

/// The answer to store with the order, under its idempotency key.
pub(crate) struct Answer<'a> {
    pub body_sha256: &'a str,
    pub status: u16,
    pub body: &'a [u8],
}

struct Inner {
    conn: Connection,
    reserved: HashSet<(String, String)>,
}

pub(crate) struct Store {
    inner: Mutex<Inner>,
    /// How many times the state has been opened, this opening included (1 for a state in
    /// memory): the identifiers this process draws are seeded with it, so that two processes
    /// sharing one state file never draw the same ones.
    generation: u64,
}

pub(super) type Result<T> = std::result::Result<T, rusqlite::Error>;

fn balance_in(tx: &Connection, currency: &str) -> Result<Decimal> {
    let text: Option<String> = tx
        .query_row(
            "SELECT amount FROM balances WHERE currency = ?1",
            [currency],
            |r| r.get(0),
        )
        .optional()?;
    match text {
        Some(t) => Decimal::from_str(&t).map_err(conversion),
        None => Ok(Decimal::ZERO),
    }
}

fn set_balance(tx: &Transaction<'_>, currency: &str, amount: Decimal) -> Result<()> {
    let mut amount = amount.round_dp(2);
    amount.rescale(2);
    tx.execute(
        "INSERT INTO balances (currency, amount) VALUES (?1, ?2) \
         ON CONFLICT (currency) DO UPDATE SET amount = excluded.amount",
        params![currency, amount.to_string()],
    )?;
    Ok(())
}

/// The newest `created_ms` of a record that has expired at `now_ms`: one created later is live.
fn expired_by(now_ms: i64) -> i64 {
    now_ms.saturating_sub(IDEMPOTENCY_TTL_MS)
}

/// The live answer stored under `(fp, key)`: replayed for the same body (`sha`), refused for
/// another, as the service answers a key once; `None` when there is none or it has expired.
/// Read before a key is reserved, and again inside the transaction that stores an answer: a
/// reservation holds in its own process only, and another simulator sharing the state file
/// may have answered the key meanwhile.
fn stored_answer(
    conn: &Connection,
    fp: &str,
    key: &str,
    sha: &str,
    now_ms: i64,
) -> rusqlite::Result<Option<Reservation>> {
    let record: Option<(String, u16, Vec<u8>, i64)> = conn
        .query_row(
            "SELECT body_sha256, status_code, response, created_ms FROM idempotency \
             WHERE key_fingerprint = ?1 AND idempotency_key = ?2",
            params![fp, key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    Ok(match record {
        Some((stored_sha, status, body, created_ms)) if created_ms > expired_by(now_ms) => {
            Some(if stored_sha == sha {
                Reservation::Replay { status, body }
            } else {
                Reservation::Mismatch
            })
        }
        _ => None,
    })
}

/// A transaction that reads, then writes: it takes the state's write lock when it begins
/// (`IMMEDIATE`). Begun as a read, it could not take it later once another simulator sharing
/// the state file had written since its read began: SQLite refuses that at once, without
/// waiting, and the request would have failed with a 500.
fn writing(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
}

/// The state's connection: a private file in WAL mode (or memory), foreign keys on. Commits
/// write the log without waiting for the disk (`synchronous=NORMAL`): a killed simulator
/// restarts with every order it answered, which is what its restarts rehearse; only a power cut
/// could lose the last ones. Waiting for the disk on every order made the simulator create a
/// burst of orders one fsync at a time, slower than the service it stands for.
fn connect(path: Option<&Path>) -> std::result::Result<Connection, String> {
    if let Some(p) = path {
        // The state holds payout links (bearer instruments): private file, and SQLite gives
        // its WAL and shared-memory files the same mode.
        create_private(p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let conn = match path {
        Some(p) => Connection::open(p),
        None => Connection::open_in_memory(),
    }
    .map_err(|e| e.to_string())?;
    conn.busy_timeout(Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    if path.is_some() {
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!(
                "cannot switch the state file to WAL mode (got {mode})"
            ));
        }
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

impl Store {
    /// Opens (or creates) the state with the default payout-link settings.
    #[cfg(test)]
    pub fn open(
        path: Option<&Path>,
        balances: &[(String, Decimal)],
    ) -> std::result::Result<Store, String> {
        let initial = Initial {
            balances,
            life: PayoutLife::default(),
            life_seed: 0,
        };
        Store::open_with(path, &initial, true)
    }

    /// Opens (or creates) the state. Balances are written only when the state is new, the
    /// payout-link settings and the seed of the links' lives when the state has none yet (a
    /// new state, or one made before links had a life). A state opened to serve it counts as
    /// an opening (its identifiers are seeded with the count); one opened to read or set its
    /// clock and settings does not.
    pub fn open_with(
        path: Option<&Path>,
        initial: &Initial<'_>,
        serving: bool,
    ) -> std::result::Result<Store, String> {
        let mut conn = connect(path)?;
        let generation: u64;
        Migrations::new(vec![M::up(SCHEMA_V1), M::up(SCHEMA_V2)])
            .to_latest(&mut conn)
            .map_err(|e| format!("cannot prepare the state schema: {e}"))?;
        {
            let tx = writing(&mut conn).map_err(|e| e.to_string())?;
            let initialised: Option<String> = tx
                .query_row(
                    "SELECT value FROM meta WHERE key = 'balances_initialised'",
                    [],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| e.to_string())?;
            let opened: Option<String> = tx
                .query_row("SELECT value FROM meta WHERE key = 'opened'", [], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(|e| e.to_string())?;
            generation = opened
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0)
                .saturating_add(u64::from(serving));
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('opened', ?1) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [generation.to_string()],
            )
            .map_err(|e| e.to_string())?;
            let life = serde_json::to_string(&initial.life).map_err(|e| e.to_string())?;
            for (key, value) in [
                ("payout_life", life),
                ("payout_seed", initial.life_seed.to_string()),
                ("clock_offset_ms", "0".to_string()),
            ] {
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
                    [key, value.as_str()],
                )
                .map_err(|e| e.to_string())?;
            }
            if initialised.is_none() {
                for (currency, amount) in initial.balances {
                    set_balance(&tx, currency, *amount).map_err(|e| e.to_string())?;
                }
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('balances_initialised', ?1)",
                    [iso_from_ms(super::wall_clock_ms())],
                )
                .map_err(|e| e.to_string())?;
            }
            tx.commit().map_err(|e| e.to_string())?;
        }
        Ok(Store {
            inner: Mutex::new(Inner {
                conn,
                reserved: HashSet::new(),
            }),
            generation,
        })
    }

    /// How many times the state has been opened, this opening included.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn meta(&self, key: &str) -> Result<Option<String>> {
        self.lock()
            .conn
            .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
            .query_row([key], |r| r.get(0))
            .optional()
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.lock().conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )?;
        Ok(())
    }

    /// How far the state's clock is ahead of the wall clock, in milliseconds. Read at every
    /// use: another process (`paybatch sim clock`) may move it while the state is served.
    pub fn clock_offset_ms(&self) -> Result<i64> {
        match self.meta("clock_offset_ms")? {
            Some(text) => text.parse::<i64>().map_err(conversion),
            None => Ok(0),
        }
    }

    /// Moves the state's clock to `offset_ms` ahead of the wall clock, never back: the
    /// offset after the call, the larger of the stored one and `offset_ms`.
    pub fn raise_clock_offset(&self, offset_ms: i64) -> Result<i64> {
        let mut inner = self.lock();
        let tx = writing(&mut inner.conn)?;
        let stored: Option<String> = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'clock_offset_ms'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let stored = match stored {
            Some(text) => text.parse::<i64>().map_err(conversion)?,
            None => 0,
        };
        let offset = stored.max(offset_ms);
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('clock_offset_ms', ?1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [offset.to_string()],
        )?;
        tx.commit()?;
        Ok(offset)
    }

    /// The account's payout-link settings.
    pub fn payout_life(&self) -> Result<PayoutLife> {
        match self.meta("payout_life")? {
            Some(text) => serde_json::from_str(&text).map_err(conversion),
            None => Ok(PayoutLife::default()),
        }
    }

    pub fn set_payout_life(&self, life: &PayoutLife) -> Result<()> {
        self.set_meta("payout_life", &to_json(life)?)
    }

    /// The seed of the links' lives, fixed when the state was made.
    pub fn payout_seed(&self) -> Result<u64> {
        match self.meta("payout_seed")? {
            Some(text) => text.parse::<u64>().map_err(conversion),
            None => Ok(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies the transitions whose time has come: `PROCESSING` orders due at or before `now_ms`
    /// take their decided outcome; a failed order paid from the balance is refunded.
    pub fn settle(&self, now_ms: i64) -> Result<usize> {
        let mut inner = self.lock();
        let tx = writing(&mut inner.conn)?;
        let due: Vec<OrderRow> = {
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders WHERE status = 'PROCESSING' AND due_ms <= ?1"
            ))?;
            let rows = stmt.query_map([now_ms], order_from_row)?;
            rows.collect::<Result<_>>()?
        };
        for order in &due {
            let message = (order.outcome == OrderStatus::Failed).then(|| failure_message(order));
            tx.execute(
                "UPDATE orders SET status = ?2, completed_at = ?3, message = ?4 WHERE id = ?1",
                params![
                    order.id,
                    order.outcome.as_str(),
                    iso_from_ms(order.due_ms),
                    message
                ],
            )?;
            if order.outcome == OrderStatus::Failed
                && order.payment_method.kind == PaymentMethodType::AccountBalance
            {
                let now = balance_in(&tx, &order.currency)?;
                set_balance(&tx, &order.currency, now + order.total_price)?;
            }
        }
        tx.commit()?;
        Ok(due.len())
    }

    /// Looks up the idempotency record of `(fingerprint, key)`, or reserves the key.
    pub fn reserve(&self, fp: &str, key: &str, sha: &str, now_ms: i64) -> Result<Reservation> {
        let mut inner = self.lock();
        let slot = (fp.to_string(), key.to_string());
        if inner.reserved.contains(&slot) {
            return Ok(Reservation::InProgress);
        }
        if let Some(live) = stored_answer(&inner.conn, fp, key, sha, now_ms)? {
            return Ok(live);
        }
        // An expired record gives its key up. Only an expired one: another simulator sharing
        // the state file may have stored a live answer under the key since the look above, and
        // deleting it would let this one make a second order for the key.
        inner.conn.execute(
            "DELETE FROM idempotency WHERE key_fingerprint = ?1 AND idempotency_key = ?2 \
             AND created_ms <= ?3",
            params![fp, key, expired_by(now_ms)],
        )?;
        inner.reserved.insert(slot);
        Ok(Reservation::Reserved)
    }

    /// Frees a key reserved by [`Store::reserve`].
    pub fn release(&self, fp: &str, key: &str) {
        self.lock()
            .reserved
            .remove(&(fp.to_string(), key.to_string()));
    }

    /// Stores an answer that created no order (a 400, a 422, a kept 500) under its key; or,
    /// when another simulator sharing the state file answered the key meanwhile, stores nothing
    /// and returns that answer ([`stored_answer`]).
    pub fn record_answer(
        &self,
        fp: &str,
        key: &str,
        answer: &Answer<'_>,
        now_ms: i64,
    ) -> Result<Option<Reservation>> {
        let mut inner = self.lock();
        let tx = writing(&mut inner.conn)?;
        if let Some(taken) = stored_answer(&tx, fp, key, answer.body_sha256, now_ms)? {
            return Ok(Some(taken));
        }
        tx.execute(
            "INSERT OR REPLACE INTO idempotency (key_fingerprint, idempotency_key, body_sha256, \
             status_code, response, created_ms, order_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
            params![
                fp,
                key,
                answer.body_sha256,
                answer.status,
                answer.body,
                now_ms
            ],
        )?;
        tx.commit()?;
        Ok(None)
    }

    /// Creates an order in one transaction: balance check and debit, the order and its items,
    /// and the answer under its idempotency key.
    pub fn create_order(
        &self,
        order: &OrderRow,
        balance: Option<BalanceUse<'_>>,
        answer: &Answer<'_>,
    ) -> Result<Created> {
        let mut inner = self.lock();
        let tx = writing(&mut inner.conn)?;
        let (fp, key) = (&order.key_fingerprint, &order.idempotency_key);
        if let Some(taken) = stored_answer(&tx, fp, key, answer.body_sha256, order.created_ms)? {
            return Ok(Created::Taken(taken));
        }
        if let Some(b) = &balance {
            let available = balance_in(&tx, b.currency)?;
            if b.amount > available {
                return Ok(Created::InsufficientBalance { available });
            }
            if b.debit {
                set_balance(&tx, b.currency, available - b.amount)?;
            }
        }
        {
            let mut order_stmt = tx.prepare_cached(INSERT_ORDER)?;
            insert_order(&mut order_stmt, order)?;
            let mut item_stmt = tx.prepare_cached(INSERT_ITEM)?;
            for (position, item) in order.items.iter().enumerate() {
                insert_item(&mut item_stmt, &order.id, position, item)?;
            }
        }
        tx.execute(
            "INSERT OR REPLACE INTO idempotency (key_fingerprint, idempotency_key, body_sha256, \
             status_code, response, created_ms, order_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                order.key_fingerprint,
                order.idempotency_key,
                answer.body_sha256,
                answer.status,
                answer.body,
                order.created_ms,
                order.id
            ],
        )?;
        tx.commit()?;
        Ok(Created::Ok)
    }

    /// One order of one API key, with its items.
    pub fn order(&self, fp: &str, id: &str) -> Result<Option<OrderRow>> {
        let inner = self.lock();
        let order = inner
            .conn
            .query_row(
                &format!(
                    "SELECT {ORDER_COLUMNS} FROM orders WHERE id = ?1 AND key_fingerprint = ?2"
                ),
                params![id, fp],
                order_from_row,
            )
            .optional()?;
        match order {
            Some(mut o) => {
                o.items = items_of(&inner.conn, &o.id)?;
                Ok(Some(o))
            }
            None => Ok(None),
        }
    }

    /// One page of the orders of one API key, newest first, without their items: the `limit`
    /// orders just older than the order `at` (from the newest when `at` is none), or with
    /// [`Towards::Newer`] the `limit` orders just newer than it. Also whether there are newer
    /// orders than the page's first and older ones than its last (false for an empty page).
    pub fn orders_page(
        &self,
        fp: &str,
        at: Option<i64>,
        towards: Towards,
        limit: usize,
    ) -> Result<OrdersPage> {
        let towards_newer = towards == Towards::Newer;
        let inner = self.lock();
        let take = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
        let mut orders: Vec<OrderRow> = if towards_newer {
            let mut stmt = inner.conn.prepare_cached(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders WHERE key_fingerprint = ?1 AND seq > ?2 \
                 ORDER BY seq ASC LIMIT ?3"
            ))?;
            let rows = stmt.query_map(params![fp, at.unwrap_or(i64::MIN), take], order_from_row)?;
            rows.collect::<Result<_>>()?
        } else {
            let mut stmt = inner.conn.prepare_cached(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders WHERE key_fingerprint = ?1 AND seq < ?2 \
                 ORDER BY seq DESC LIMIT ?3"
            ))?;
            let rows = stmt.query_map(params![fp, at.unwrap_or(i64::MAX), take], order_from_row)?;
            rows.collect::<Result<_>>()?
        };
        let beyond = orders.len() > limit;
        orders.truncate(limit);
        if towards_newer {
            orders.reverse();
        }
        let any = |sql: &str, seq: i64| -> Result<bool> {
            inner
                .conn
                .prepare_cached(sql)?
                .query_row(params![fp, seq], |r| r.get(0))
        };
        let (newer, older) = match (orders.first().map(|o| o.seq), orders.last().map(|o| o.seq)) {
            (Some(first), Some(last)) => {
                let newer = towards_newer && beyond
                    || any(
                        "SELECT EXISTS (SELECT 1 FROM orders WHERE key_fingerprint = ?1 AND seq > ?2)",
                        first,
                    )?;
                let older = !towards_newer && beyond
                    || any(
                        "SELECT EXISTS (SELECT 1 FROM orders WHERE key_fingerprint = ?1 AND seq < ?2)",
                        last,
                    )?;
                (newer, older)
            }
            _ => (false, false),
        };
        Ok(OrdersPage {
            orders,
            newer,
            older,
        })
    }

    /// Whether the state holds any order.
    pub fn has_orders(&self) -> Result<bool> {
        self.lock()
            .conn
            .query_row("SELECT EXISTS (SELECT 1 FROM orders)", [], |r| r.get(0))
    }

    /// Stores finished orders as they are, in this order, in one transaction: no balance is
    /// touched and no answer is kept under their keys. `orders` may be made one at a time.
    pub fn seed_orders<I>(&self, orders: I) -> Result<()>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<OrderRow>,
    {
        use std::borrow::Borrow;
        let mut inner = self.lock();
        let tx = writing(&mut inner.conn)?;
        {
            let mut order_stmt = tx.prepare_cached(INSERT_ORDER)?;
            let mut item_stmt = tx.prepare_cached(INSERT_ITEM)?;
            for order in orders {
                let order: &OrderRow = order.borrow();
                insert_order(&mut order_stmt, order)?;
                for (position, item) in order.items.iter().enumerate() {
                    insert_item(&mut item_stmt, &order.id, position, item)?;
                }
            }
        }
        tx.commit()
    }

    /// Every order ever created, oldest first, with items.
    pub fn all_orders(&self) -> Result<Vec<OrderRow>> {
        let inner = self.lock();
        let mut stmt = inner
            .conn
            .prepare_cached(&format!("SELECT {ORDER_COLUMNS} FROM orders ORDER BY seq"))?;
        let mut orders: Vec<OrderRow> =
            stmt.query_map([], order_from_row)?.collect::<Result<_>>()?;
        for o in &mut orders {
            o.items = items_of(&inner.conn, &o.id)?;
        }
        Ok(orders)
    }

    /// The balance of one currency (zero when the account has none).
    pub fn balance(&self, currency: &str) -> Result<Decimal> {
        let inner = self.lock();
        let mut amount = balance_in(&inner.conn, currency)?;
        amount.rescale(2);
        Ok(amount)
    }

    /// Every balance, by currency.
    pub fn balances(&self) -> Result<Vec<(String, Decimal)>> {
        let inner = self.lock();
        let mut stmt = inner
            .conn
            .prepare_cached("SELECT currency, amount FROM balances ORDER BY currency")?;
        let rows = stmt.query_map([], |r| {
            let mut amount = dec_at(r, 1)?;
            amount.rescale(2);
            Ok((r.get::<_, String>(0)?, amount))
        })?;
        rows.collect()
    }
}

/// The `message` of a failed order.
pub(crate) fn failure_message(order: &OrderRow) -> String {
    match order.payment_method.kind {
        PaymentMethodType::AccountBalance | PaymentMethodType::Other => format!(
            "The order failed: the simulated provider declined it. {} {} was returned to the account balance.",
            order.total_price, order.currency
        ),
        PaymentMethodType::Card => {
            "The order failed: the simulated provider declined it. The card was not charged."
                .to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn order(id: &str, status: OrderStatus, outcome: OrderStatus, due_ms: i64) -> OrderRow {
        OrderRow {
            seq: 0,
            id: id.into(),
            key_fingerprint: "fp".into(),
            idempotency_key: format!("key-{id}"),
            status,
            outcome,
            created_at: iso_from_ms(0),
            created_ms: 0,
            due_ms,
            completed_at: None,
            description: Some("d".into()),
            metadata: None,
            payment_method: PaymentMethod {
                kind: PaymentMethodType::AccountBalance,
                card_id: None,
                currency: Some("USD".into()),
            },
            currency: "USD".into(),
            total_price: dec("9.80"),
            total_discount: dec("0.20"),
            fx: serde_json::Value::Null,
            message: None,
            items: vec![],
        }
    }

    /// A state made before the items lost their unique index on the id is migrated with its
    /// items, and takes an item whose id another item has.
    #[test]
    fn a_state_of_the_first_schema_keeps_its_items_and_takes_an_id_again() {
        let dir = std::env::temp_dir().join(format!(
            "paybatch-sim-v1-{}-{}",
            std::process::id(),
            crate::wall_clock_ms()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            Migrations::new(vec![M::up(SCHEMA_V1)])
                .to_latest(&mut conn)
                .unwrap();
            let o = order("O-1", OrderStatus::Completed, OrderStatus::Completed, 0);
            insert_order(&mut conn.prepare(INSERT_ORDER).unwrap(), &o).unwrap();
            insert_item(
                &mut conn.prepare(INSERT_ITEM).unwrap(),
                "O-1",
                0,
                &item("E-SAME00001"),
            )
            .unwrap();
        }
        let store = Store::open(Some(&path), &[("USD".into(), dec("100.00"))]).unwrap();
        let kept = store.order("fp", "O-1").unwrap().unwrap();
        assert_eq!(kept.items.len(), 1);
        assert_eq!(kept.items[0].id, "E-SAME00001");
        let mut again = order("O-2", OrderStatus::Completed, OrderStatus::Completed, 0);
        again.items = vec![item("E-SAME00001")];
        let answer = Answer {
            body_sha256: "s",
            status: 200,
            body: b"{}",
        };
        assert_eq!(
            store.create_order(&again, None, &answer).unwrap(),
            Created::Ok
        );
        let stored = store.order("fp", "O-2").unwrap().unwrap();
        assert_eq!(stored.items[0].id, "E-SAME00001");
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn item(id: &str) -> ItemRow {
        ItemRow {
            id: id.into(),
            distribution_method: serde_json::json!({"type": "PAYOUT_LINK"}),
            products: serde_json::from_value(serde_json::json!({"type": "SINGLE", "value": "P-1"}))
                .unwrap(),
            face_value: dec("10.00"),
            price: dec("9.80"),
            currency: "USD".into(),
            discount_multiplier: dec("0.98"),
            payout_url: format!("https://playground.example/redeem/{id}"),
            expiry_months: 12,
        }
    }

    #[test]
    fn debit_then_refund_on_failure() {
        let store = Store::open(None, &[("USD".into(), dec("100.00"))]).unwrap();
        let o = order("O-1", OrderStatus::Processing, OrderStatus::Failed, 10);
        let answer = Answer {
            body_sha256: "s",
            status: 202,
            body: b"{}",
        };
        let use_balance = BalanceUse {
            currency: "USD",
            amount: o.total_price,
            debit: true,
        };
        assert_eq!(
            store.create_order(&o, Some(use_balance), &answer).unwrap(),
            Created::Ok
        );
        assert_eq!(store.balance("USD").unwrap().to_string(), "90.20");
        assert_eq!(store.settle(5).unwrap(), 0);
        assert_eq!(store.settle(10).unwrap(), 1);
        assert_eq!(store.balance("USD").unwrap().to_string(), "100.00");
        let back = store.order("fp", "O-1").unwrap().unwrap();
        assert_eq!(back.status, OrderStatus::Failed);
        assert!(back.message.is_some());
        assert!(store.order("other", "O-1").unwrap().is_none());
    }

    /// Pages of the order list, newest first, with the cursors the whole list gives: the
    /// orders of one key only, forward from the start and from a cursor, and back.
    #[test]
    fn the_order_list_is_read_page_by_page() {
        let store = Store::open(None, &[]).unwrap();
        assert!(!store.has_orders().unwrap());
        let mut orders: Vec<OrderRow> = (1..=7)
            .map(|i| {
                order(
                    &format!("O-{i}"),
                    OrderStatus::Completed,
                    OrderStatus::Completed,
                    0,
                )
            })
            .collect();
        orders[2].key_fingerprint = "other".into();
        store.seed_orders(&orders).unwrap();
        assert!(store.has_orders().unwrap());
        let ids = |p: &OrdersPage| p.orders.iter().map(|o| o.id.clone()).collect::<Vec<_>>();
        let seq_of = |p: &OrdersPage, i: usize| p.orders[i].seq;
        let first = store.orders_page("fp", None, Towards::Older, 2).unwrap();
        assert_eq!(ids(&first), ["O-7", "O-6"]);
        assert!(!first.newer && first.older);
        let second = store
            .orders_page("fp", Some(seq_of(&first, 1)), Towards::Older, 2)
            .unwrap();
        assert_eq!(ids(&second), ["O-5", "O-4"]);
        assert!(second.newer && second.older);
        let last = store
            .orders_page("fp", Some(seq_of(&second, 1)), Towards::Older, 2)
            .unwrap();
        assert_eq!(ids(&last), ["O-2", "O-1"]);
        assert!(last.newer && !last.older);
        let back = store
            .orders_page("fp", Some(seq_of(&last, 0)), Towards::Newer, 2)
            .unwrap();
        assert_eq!(ids(&back), ["O-5", "O-4"]);
        assert!(back.newer && back.older);
        let top = store
            .orders_page("fp", Some(seq_of(&back, 0)), Towards::Newer, 5)
            .unwrap();
        assert_eq!(ids(&top), ["O-7", "O-6"]);
        assert!(!top.newer && top.older);
        let beyond = store
            .orders_page("fp", Some(seq_of(&last, 1)), Towards::Older, 2)
            .unwrap();
        assert!(beyond.orders.is_empty() && !beyond.newer && !beyond.older);
        let all = store.orders_page("fp", None, Towards::Older, 500).unwrap();
        assert_eq!(all.orders.len(), 6);
        assert!(!all.newer && !all.older);
    }

    #[test]
    fn insufficient_balance_creates_nothing() {
        let store = Store::open(None, &[("USD".into(), dec("5.00"))]).unwrap();
        let o = order("O-2", OrderStatus::Processing, OrderStatus::Completed, 10);
        let answer = Answer {
            body_sha256: "s",
            status: 202,
            body: b"{}",
        };
        let use_balance = BalanceUse {
            currency: "USD",
            amount: o.total_price,
            debit: true,
        };
        assert_eq!(
            store.create_order(&o, Some(use_balance), &answer).unwrap(),
            Created::InsufficientBalance {
                available: dec("5.00")
            }
        );
        assert!(store.all_orders().unwrap().is_empty());
    }

    #[test]
    fn reservation_and_replay() {
        let store = Store::open(None, &[]).unwrap();
        assert_eq!(
            store.reserve("fp", "k", "a", 0).unwrap(),
            Reservation::Reserved
        );
        assert_eq!(
            store.reserve("fp", "k", "a", 0).unwrap(),
            Reservation::InProgress
        );
        let answer = Answer {
            body_sha256: "a",
            status: 422,
            body: b"{\"type\":\"validation_error\"}",
        };
        store.record_answer("fp", "k", &answer, 0).unwrap();
        store.release("fp", "k");
        assert!(matches!(
            store.reserve("fp", "k", "a", 1).unwrap(),
            Reservation::Replay { status: 422, .. }
        ));
        assert_eq!(
            store.reserve("fp", "k", "b", 1).unwrap(),
            Reservation::Mismatch
        );
        // After 30 days the key is free again.
        assert_eq!(
            store.reserve("fp", "k", "b", IDEMPOTENCY_TTL_MS).unwrap(),
            Reservation::Reserved
        );
    }
}
