//! The playground simulator: an HTTP server that answers like the playground environment of the
//! payout ordering service (interface document: `GET /ping`, the catalog, orders, balances), with
//! its state in SQLite and faults that can be switched on (latency, 5xx answers, dropped
//! connections, 429 bursts, a longer in-progress window).
//!
//! It shares the wire models of [`paybatch_api::models`] with the client, and takes from the
//! api crate its exact decimals and its private files; it depends on nothing of the tool.
//! Besides the service's endpoints under `/v2` it serves ground truth for tests, outside `/v2`
//! and without a key: `GET /_sim/orders` and `GET /_sim/stats`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), paybatch_sim::SimError> {
//! use paybatch_sim::{SimConfig, start};
//! let sim = start(SimConfig::default(), "127.0.0.1:0".parse().unwrap()).await?;
//! println!("{} (key {})", sim.base_url(), paybatch_sim::DEFAULT_KEY);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod catalog;
mod disguise;
mod faults;
mod flip;
mod handlers;
pub(crate) mod life;
mod minimal;
mod orders;
pub use orders::shape_problems;
mod seed;
mod server;
mod store;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use paybatch_api::models::{OrderStatus, PaymentMethod, ProductSelection};

pub use catalog::PAYMENT_CURRENCIES;
pub use disguise::{Hostile, KeySpelling};
pub use flip::Flips;
pub use life::{
    DEFAULT_CANCEL_SHARE, DEFAULT_CLAIM_SHARE, DEFAULT_CLAIM_WITHIN_DAYS, DEFAULT_LINK_EXPIRY_DAYS,
    FIRST_CLAIM, PayoutCensus, PayoutLife, PayoutRecord, PayoutStatus,
};
pub use seed::SeedOrders;

/// The API key the simulator accepts unless told otherwise. It is a simulator key (it starts
/// with `xx`, the playground prefix) and no secret: the simulator prints it at start.
pub const DEFAULT_KEY: &str = "xx_sim_default_key";

/// The card id accepted for `CARD` payments when cards are taken and no other is configured.
pub const DEFAULT_CARD: &str = "card_sim_visa";

/// Everything a simulator run is made of.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Accepted API keys (default: [`DEFAULT_KEY`]).
    pub keys: Vec<String>,
    /// Seed of the one random source of the run.
    pub seed: u64,
    /// SQLite state file; `None` keeps the state in memory.
    pub state: Option<PathBuf>,
    /// Order creations admitted per API key in any 60 s (default 300, the published limit; 0
    /// turns the limit off).
    pub rate_limit_per_minute: u32,
    /// How long an async order stays `PROCESSING`: drawn uniformly in `[min, max]`.
    pub processing_min: Duration,
    pub processing_max: Duration,
    /// Probability that an order ends `FAILED`.
    pub failure_rate: f64,
    /// Initial account balances, written only when the state is new.
    pub balances: Vec<(String, Decimal)>,
    /// Whether `CARD` payments are taken, as the interface document describes them (false: they
    /// are answered `400 payment_method_unavailable`, as the published contract lists only
    /// `ACCOUNT_BALANCE`).
    pub cards_accepted: bool,
    /// Card ids accepted for `CARD` payments when `cards_accepted`.
    pub cards: Vec<String>,
    /// Whether the order list carries each finished order's `metadata` (and a `PROCESSING` order
    /// its summary fields), as the older simulator did. False (the default) answers the published
    /// list: basic details of finished orders, `{id, status, message}` for processing ones.
    pub list_metadata: bool,
    /// Whether `X-Api-Version: 2023-07-27` is still served with that version's shapes. False
    /// (the default): it answers `410 version_removed`, as the service has since 2025-11-14.
    pub version_2023: bool,
    /// Whether the account has reached its spending limit: every order creation is answered
    /// `403 ordering_restricted`.
    pub ordering_restricted: bool,
    /// Whether `POST /order/estimate` prices orders, as the service does in production (true,
    /// the default), or answers `404 not_found`, as its playground does.
    pub estimates: bool,
    /// Finished orders of the first key stored at the start, spread over the time before it
    /// (see [`SeedOrders`]); only into a state that holds no order yet.
    pub seed_orders: Option<SeedOrders>,
    /// With `seed_orders`: every seeded order is paybatch's (of another ledger), COMPLETED, with
    /// this many items (1 to 200), each row named in its metadata (see [`SeedOrders`]).
    /// `None` (the default): the mix of kinds `seed_orders` describes.
    pub seed_paybatch_items: Option<usize>,
    /// The account's payout-link settings and its recipients' behaviour, written only when the
    /// state is new (or has none yet), with `seed` as the seed of the links' lives.
    pub payout_life: PayoutLife,
    /// Moves the state's clock this far ahead of the wall clock at the start (never back: a
    /// state whose clock is already further is refused).
    pub clock_offset: Option<Duration>,
    /// The first page of the order list made odd in a way the published contract does not
    /// describe (`None`: as documented).
    pub odd_list: Option<OddList>,
    pub faults: Faults,
    /// Share of answers (0 to 1) holding only what the published contract requires: every
    /// optional field left out, or `null` where the schema allows it (see `minimal.rs`).
    pub minimal_answers: f64,
    /// Addresses the service refuses by item (`sim serve --refuse-emails FILE`): an order with
    /// one of them is answered `422 validation_error` naming each such item
    /// (`items.N.distribution_method.email_address`), as the service answers an address it does
    /// not take. Compared in lower case.
    pub refuse_emails: std::collections::BTreeSet<String>,
}

/// An odd first page of the order list (`sim serve --odd-first-page`), for a client's read of
/// the list to be tried against: it must read on, or say that it could not reach an end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OddList {
    /// The first page holds no entry, with an `after` cursor to the newest order.
    Empty,
    /// The first page starts with the account's oldest order, out of the documented order
    /// (newest first).
    OldFirst,
}

impl Default for SimConfig {
    fn default() -> Self {
        let hundred_thousand = Decimal::new(10_000_000, 2);
        SimConfig {
            keys: vec![DEFAULT_KEY.to_string()],
            seed: 0,
            state: None,
            rate_limit_per_minute: 300,
            processing_min: Duration::from_secs(1),
            processing_max: Duration::from_secs(4),
            failure_rate: 0.0,
            balances: PAYMENT_CURRENCIES
                .iter()
                .map(|c| ((*c).to_string(), hundred_thousand))
                .collect(),
            cards_accepted: false,
            cards: vec![DEFAULT_CARD.to_string()],
            list_metadata: false,
            version_2023: false,
            ordering_restricted: false,
            estimates: true,
            seed_orders: None,
            seed_paybatch_items: None,
            payout_life: PayoutLife::default(),
            clock_offset: None,
            odd_list: None,
            faults: Faults::default(),
            minimal_answers: 0.0,
            refuse_emails: std::collections::BTreeSet::new(),
        }
    }
}

/// Faults to inject. All off by default.
#[derive(Debug, Clone)]
pub struct Faults {
    /// Added to every request.
    pub latency: Duration,
    /// Uniform extra latency in `[0, latency_jitter]` on every request.
    pub latency_jitter: Duration,
    /// Probability of a 500 or 503 answer on `POST /order` and `GET /order/{id}` (answered before
    /// the idempotency layer: nothing is created or stored).
    pub error_rate: f64,
    /// Probability that `POST /order` creates the order, stores its answer under the
    /// idempotency key, then closes the connection without answering.
    pub drop_rate: f64,
    /// Probability that `POST /order` fails inside the service with a 500 and keeps that answer
    /// under the idempotency key, as the real service does: every later request with the same
    /// key and body gets the same 500 back, and no order is ever created under that key.
    pub stored_error_rate: f64,
    /// Probability that a `POST /order` is answered `504 timeout` although the service went on
    /// and finished it: the order is created (or refused) and its real answer kept under the
    /// idempotency key, so the same request again gets that answer.
    pub timeout_rate: f64,
    /// Probability that a `POST /order` starts a burst of `burst_429_len` consecutive 429s.
    pub burst_429_rate: f64,
    pub burst_429_len: u32,
    /// Extra time a `POST /order` spends with its idempotency key reserved (a second request
    /// with that key meanwhile gets the in-progress answer).
    pub in_progress_delay: Duration,
    /// Hostile answers: swapped orders, missing payout links, inflated totals, failed orders
    /// with links, escape sequences in messages (see [`Hostile`]).
    pub hostile: Hostile,
    /// Payout answers that contradict themselves or change a final status (see [`Flips`]).
    pub flips: Flips,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            latency: Duration::ZERO,
            latency_jitter: Duration::ZERO,
            error_rate: 0.0,
            drop_rate: 0.0,
            stored_error_rate: 0.0,
            timeout_rate: 0.0,
            burst_429_rate: 0.0,
            burst_429_len: 3,
            in_progress_delay: Duration::ZERO,
            hostile: Hostile::default(),
            flips: Flips::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("the simulator cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the simulator state {path} cannot be opened: {reason}")]
    State { path: String, reason: String },
    #[error("invalid simulator configuration: {0}")]
    Config(String),
}

/// Ground truth about one order: what the simulator created, whatever the client saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimOrderRecord {
    pub id: String,
    pub idempotency_key: String,
    /// `sha256:` and 16 hex digits of the API key that created the order (never the key).
    pub api_key_fingerprint: String,
    pub status: OrderStatus,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub description: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub payment_method: PaymentMethod,
    /// Payment currency.
    pub currency: String,
    #[serde(with = "paybatch_api::decimal::flexible")]
    pub total_price: Decimal,
    #[serde(with = "paybatch_api::decimal::flexible")]
    pub total_discount: Decimal,
    pub items: Vec<SimItemRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimItemRecord {
    pub id: String,
    #[serde(with = "paybatch_api::decimal::flexible")]
    pub face_value: Decimal,
    #[serde(with = "paybatch_api::decimal::flexible")]
    pub price: Decimal,
    /// Product currency.
    pub currency: String,
    pub products: ProductSelection,
    /// The payout link, once the order is `COMPLETED`.
    pub payout_url: Option<String>,
}

/// Counters of a simulator run (since this start; not kept in the state file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    /// Requests per endpoint, e.g. `"POST /order"`, `"GET /order/{id}"`.
    pub requests: BTreeMap<String, u64>,
    /// 429 answers (rate limit and bursts).
    pub answered_429: u64,
    /// Injected 500/503 answers.
    pub injected_5xx: u64,
    /// Connections dropped after creating an order.
    pub dropped: u64,
    /// 500 answers kept under an idempotency key (`stored_error_rate`), first answers only.
    pub stored_errors: u64,
    /// 504 answers sent instead of the real answer (`timeout_rate`).
    #[serde(default)]
    pub timeouts: u64,
    /// In-progress answers (`idempotency_in_progress`).
    pub in_progress: u64,
    /// Stored answers replayed for a repeated idempotency key.
    pub replayed: u64,
    pub orders_created: u64,
    /// New keys answered with an earlier order (`hostile.swap_rate`); nothing was created.
    #[serde(default)]
    pub swapped: u64,
    /// Answers of finished orders disguised by a hostile rate (each answer counted).
    #[serde(default)]
    pub disguised: u64,
    /// Server errors answered with escape sequences in their message.
    #[serde(default)]
    pub escaped_errors: u64,
    /// Answers holding only what the published contract requires (`minimal_answers`).
    #[serde(default)]
    pub minimal_answers: u64,
}

/// The dated API versions the simulator knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiVersion {
    V2023,
    V2024,
}

/// Wall-clock milliseconds since the epoch. The simulated clock is this plus the state's clock
/// offset ([`Sim::now_ms`]).
pub(crate) fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `sha256:` and the first 16 hex digits of the key's SHA-256 (the same fingerprint the client
/// shows).
pub(crate) fn fingerprint(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("sha256:{}", &hex::encode(digest)[..16])
}

/// The shared state of a running simulator.
pub(crate) struct Sim {
    pub config: SimConfig,
    pub store: store::Store,
    pub catalog: catalog::Catalog,
    /// Every random decision but identifiers: seeded with the configured seed.
    pub chance: faults::Chance,
    /// Order ids, item ids and payout tokens: seeded with the configured seed and the state's
    /// generation, so a run on a new state is reproducible and two processes sharing one state
    /// file never draw the same identifiers.
    pub ids: faults::Chance,
    pub limiter: faults::RateLimiter,
    pub burst: faults::Burst,
    pub stats: Mutex<SimStats>,
    /// When each "expired once" link was first answered EXPIRED ([`Flips`]).
    pub(crate) first_expired: flip::FirstExpired,
    /// Orders being placed at once, at most ([`PLACING_AT_ONCE`]), each on a thread of the
    /// blocking pool.
    pub placing: tokio::sync::Semaphore,
}

/// Orders placed at once at most, each on a thread of its own: their bodies are read, checked
/// and priced side by side while one of them is stored (the state takes one writer at a time),
/// and the runtime's workers stay free to take requests and answer them.
pub(crate) const PLACING_AT_ONCE: usize = 4;

impl Sim {
    pub fn stat(&self, f: impl FnOnce(&mut SimStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The simulated now: the wall clock plus the state's clock offset, in milliseconds since
    /// the epoch. Everything the simulator dates uses it: orders' times, processing, the
    /// idempotency records' age and the payout links' lives.
    pub fn now_ms(&self) -> Result<i64, rusqlite::Error> {
        now_of(&self.store)
    }

    /// What the payout links' lives are read against now.
    pub fn payout_clock(&self) -> Result<life::PayoutClock, rusqlite::Error> {
        payout_clock(&self.store)
    }

    /// Settles the orders whose time has come (logged, never fatal for the caller).
    pub fn settle(&self) -> Result<(), rusqlite::Error> {
        self.store.settle(self.now_ms()?).map(|_| ())
    }

    pub fn records(&self) -> Vec<SimOrderRecord> {
        if let Err(e) = self.settle() {
            tracing::error!("simulator state: {e}");
        }
        match self.store.all_orders() {
            Ok(orders) => orders
                .into_iter()
                .map(|o| SimOrderRecord {
                    items: o
                        .items
                        .iter()
                        .map(|it| SimItemRecord {
                            id: it.id.clone(),
                            face_value: it.face_value,
                            price: it.price,
                            currency: it.currency.clone(),
                            products: it.products.clone(),
                            payout_url: (o.status == OrderStatus::Completed)
                                .then(|| it.payout_url.clone()),
                        })
                        .collect(),
                    id: o.id,
                    idempotency_key: o.idempotency_key,
                    api_key_fingerprint: o.key_fingerprint,
                    status: o.status,
                    created_at: o.created_at,
                    completed_at: o.completed_at,
                    description: o.description,
                    metadata: o.metadata.unwrap_or_default(),
                    payment_method: o.payment_method,
                    currency: o.currency,
                    total_price: o.total_price,
                    total_discount: o.total_discount,
                })
                .collect(),
            Err(e) => {
                tracing::error!("simulator state: {e}");
                Vec::new()
            }
        }
    }

    pub fn census(&self) -> Result<PayoutCensus, rusqlite::Error> {
        self.settle()?;
        census(&self.store)
    }

    pub fn stats_snapshot(&self) -> SimStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn check(config: &SimConfig) -> Result<(), SimError> {
    let bad = |m: String| Err(SimError::Config(m));
    if config.keys.is_empty() || config.keys.iter().any(|k| k.trim().is_empty()) {
        return bad("at least one non-empty API key is needed".into());
    }
    if let Some(problem) = config.payout_life.problem() {
        return bad(problem);
    }
    if config.processing_min > config.processing_max {
        return bad(format!(
            "processing_min ({:?}) is greater than processing_max ({:?})",
            config.processing_min, config.processing_max
        ));
    }
    let f = &config.faults;
    for (name, p) in [
        ("failure_rate", config.failure_rate),
        ("error_rate", f.error_rate),
        ("drop_rate", f.drop_rate),
        ("stored_error_rate", f.stored_error_rate),
        ("timeout_rate", f.timeout_rate),
        ("burst_429_rate", f.burst_429_rate),
        ("minimal_answers", config.minimal_answers),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return bad(format!("{name} must be between 0 and 1, found {p}"));
        }
    }
    for (currency, amount) in &config.balances {
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return bad(format!(
                "balance currency `{currency}` is not an ISO 4217 code"
            ));
        }
        if amount.is_sign_negative() {
            return bad(format!("balance {currency} {amount} is negative"));
        }
    }
    if let Some(n) = config.seed_paybatch_items
        && !(1..=orders::MAX_ITEMS).contains(&n)
    {
        return bad(format!(
            "seed_paybatch_items must be between 1 and {}, found {n}",
            orders::MAX_ITEMS
        ));
    }
    Ok(())
}

/// Stores the seeded orders of the first key ([`SeedOrders`]) into a state without orders.
fn seed_store(store: &store::Store, seed: &SeedOrders, config: &SimConfig) -> Result<(), String> {
    if seed.count == 0 {
        return Ok(());
    }
    if store.has_orders().map_err(|e| e.to_string())? {
        return Err("orders can be seeded only into a state that holds none".into());
    }
    let fp = fingerprint(config.keys.first().map(String::as_str).unwrap_or_default());
    // Identifiers of their own: the requests of the run draw theirs as without seeding.
    let ids = faults::Chance::new(faults::id_seed(config.seed ^ 0x5eed, store.generation()));
    let now = now_of(store).map_err(|e| e.to_string())?;
    let orders = seed::orders(seed, config.seed_paybatch_items, &fp, &ids, now);
    store.seed_orders(orders).map_err(|e| e.to_string())
}

/// A running simulator.
pub struct SimHandle {
    sim: Arc<Sim>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// The simulated now of a state, in milliseconds since the epoch.
fn now_of(store: &store::Store) -> Result<i64, rusqlite::Error> {
    Ok(wall_clock_ms().saturating_add(store.clock_offset_ms()?))
}

fn payout_clock(store: &store::Store) -> Result<life::PayoutClock, rusqlite::Error> {
    Ok(life::PayoutClock {
        seed: store.payout_seed()?,
        life: store.payout_life()?,
        now_ms: now_of(store)?,
    })
}

/// When a finished order finished, in milliseconds since the epoch.
pub(crate) fn done_ms(o: &store::OrderRow) -> i64 {
    o.completed_at
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp_millis())
        .unwrap_or(o.created_ms)
}

/// Every completed item's link at the state's simulated now.
fn census(store: &store::Store) -> Result<PayoutCensus, rusqlite::Error> {
    let clock = payout_clock(store)?;
    let mut payouts: BTreeMap<PayoutStatus, u64> =
        PayoutStatus::ALL.iter().map(|s| (*s, 0)).collect();
    let mut items = Vec::new();
    for o in store.all_orders()? {
        if o.status != OrderStatus::Completed {
            continue;
        }
        let done = done_ms(&o);
        for it in &o.items {
            let link = clock.link(&it.id, done);
            *payouts.entry(link.status).or_default() += 1;
            items.push(PayoutRecord {
                order_id: o.id.clone(),
                item_id: it.id.clone(),
                status: link.status,
                status_updated_at: store::iso_from_ms(link.since_ms),
                expiry_date: link.expires_ms.map(store::iso_from_ms),
            });
        }
    }
    Ok(PayoutCensus {
        now: store::iso_from_ms(clock.now_ms),
        clock_offset_seconds: store.clock_offset_ms()? / 1000,
        life: clock.life,
        payouts,
        items,
    })
}

fn state_error(config: &SimConfig, reason: String) -> SimError {
    SimError::State {
        path: config
            .state
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(in memory)".into()),
        reason,
    }
}

/// Opens the state of `config`, with its balances, payout-link settings and seed for a new
/// state.
fn open_store(config: &SimConfig, serving: bool) -> Result<store::Store, SimError> {
    let initial = store::Initial {
        balances: &config.balances,
        life: config.payout_life,
        life_seed: config.seed,
    };
    store::Store::open_with(config.state.as_deref(), &initial, serving)
        .map_err(|reason| state_error(config, reason))
}

/// Moves the clock of `store` to `offset` ahead of the wall clock; refused when its clock is
/// already further ahead (the clock never goes back).
fn set_clock_offset(
    store: &store::Store,
    offset: Duration,
    config: &SimConfig,
) -> Result<(), SimError> {
    let wanted = i64::try_from(offset.as_millis())
        .map_err(|_| SimError::Config(format!("clock offset {offset:?} is too large")))?;
    let now = store
        .raise_clock_offset(wanted)
        .map_err(|e| state_error(config, e.to_string()))?;
    if now > wanted {
        return Err(SimError::Config(format!(
            "the state's clock is already {} s ahead of the wall clock, more than the {} s asked for: the simulated clock never goes back",
            now / 1000,
            wanted / 1000
        )));
    }
    Ok(())
}

/// Starts a simulator listening on `addr` (port 0 picks a free port). It binds exactly the
/// address given.
pub async fn start(config: SimConfig, addr: SocketAddr) -> Result<SimHandle, SimError> {
    check(&config)?;
    let store = open_store(&config, true)?;
    if let Some(offset) = config.clock_offset {
        set_clock_offset(&store, offset, &config)?;
    }
    if let Some(seed) = &config.seed_orders {
        seed_store(&store, seed, &config).map_err(|reason| state_error(&config, reason))?;
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| SimError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| SimError::Bind { addr, source })?;
    let sim = Arc::new(Sim {
        chance: faults::Chance::new(config.seed),
        ids: faults::Chance::new(faults::id_seed(config.seed, store.generation())),
        limiter: faults::RateLimiter::new(config.rate_limit_per_minute),
        burst: faults::Burst::new(),
        catalog: catalog::Catalog::new(),
        stats: Mutex::new(SimStats::default()),
        first_expired: flip::FirstExpired::default(),
        placing: tokio::sync::Semaphore::new(PLACING_AT_ONCE),
        store,
        config,
    });
    let (tx, rx) = watch::channel(false);
    let router = handlers::router(sim.clone());
    let task = tokio::spawn(server::serve(listener, router, rx));
    Ok(SimHandle {
        sim,
        addr: bound,
        shutdown: tx,
        task,
    })
}

impl SimHandle {
    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/v2`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v2", self.addr)
    }

    /// Every order ever created (ground truth), oldest first.
    pub fn orders(&self) -> Vec<SimOrderRecord> {
        self.sim.records()
    }

    pub fn stats(&self) -> SimStats {
        self.sim.stats_snapshot()
    }

    /// Every completed item's payout link at the simulated now (ground truth).
    pub fn payouts(&self) -> Result<PayoutCensus, SimError> {
        self.sim
            .census()
            .map_err(|e| state_error(&self.sim.config, e.to_string()))
    }

    /// Moves the simulated clock forward by `by`; the simulated now after the move.
    pub fn advance_clock(&self, by: Duration) -> Result<String, SimError> {
        advance(&self.sim.store, by, &self.sim.config)
    }

    /// The simulated now as a clock others can hold (RFC 3339, UTC, milliseconds; `None` when
    /// the state cannot be read): the embedded simulator's clock for the books.
    pub fn clock(&self) -> impl Fn() -> Option<String> + Send + Sync + 'static {
        let sim = Arc::clone(&self.sim);
        move || sim.now_ms().ok().map(store::iso_from_ms)
    }

    /// The account balance of `currency` (zero when there is none).
    pub fn balance(&self, currency: &str) -> Decimal {
        if let Err(e) = self.sim.settle() {
            tracing::error!("simulator state: {e}");
        }
        self.sim
            .store
            .balance(currency)
            .unwrap_or(Decimal::new(0, 2))
    }

    /// Stops listening, closes every connection and waits until the server has stopped.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Moves the clock of `store` forward by `by`; the simulated now after the move.
fn advance(store: &store::Store, by: Duration, config: &SimConfig) -> Result<String, SimError> {
    let by = i64::try_from(by.as_millis())
        .map_err(|_| SimError::Config(format!("{by:?} is too far to move the clock")))?;
    let fail = |e: rusqlite::Error| state_error(config, e.to_string());
    let offset = store.clock_offset_ms().map_err(fail)?;
    store
        .raise_clock_offset(offset.saturating_add(by))
        .map_err(fail)?;
    now_of(store).map(store::iso_from_ms).map_err(fail)
}

/// A simulator's state file opened without serving it: to read and move its clock, to read and
/// change the account's payout-link settings, and to count its payout links by status
/// (`paybatch sim clock`, `sim account`, `sim payouts`). Opening it does not count as an
/// opening of the state (the identifiers of the next run are the same as without it).
pub struct SimState {
    store: store::Store,
    config: SimConfig,
}

impl SimState {
    /// Opens the state of `config` (`config.state`), creating it with `config`'s balances,
    /// payout-link settings and seed when it does not exist.
    pub fn open(config: SimConfig) -> Result<SimState, SimError> {
        check(&config)?;
        let store = open_store(&config, false)?;
        Ok(SimState { store, config })
    }

    fn fail(&self, e: rusqlite::Error) -> SimError {
        state_error(&self.config, e.to_string())
    }

    /// The simulated now (ISO 8601 UTC).
    pub fn now(&self) -> Result<String, SimError> {
        now_of(&self.store)
            .map(store::iso_from_ms)
            .map_err(|e| self.fail(e))
    }

    /// How far the simulated clock is ahead of the wall clock.
    pub fn clock_offset(&self) -> Result<Duration, SimError> {
        let ms = self.store.clock_offset_ms().map_err(|e| self.fail(e))?;
        Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
    }

    /// Moves the simulated clock forward by `by`; the simulated now after the move.
    pub fn advance_clock(&self, by: Duration) -> Result<String, SimError> {
        advance(&self.store, by, &self.config)
    }

    /// The account's payout-link settings.
    pub fn payout_life(&self) -> Result<PayoutLife, SimError> {
        self.store.payout_life().map_err(|e| self.fail(e))
    }

    /// Changes the account's payout-link settings. Lives are not stored: the new settings
    /// apply to every link, those already issued included.
    pub fn set_payout_life(&self, life: PayoutLife) -> Result<(), SimError> {
        if let Some(problem) = life.problem() {
            return Err(SimError::Config(problem));
        }
        self.store.set_payout_life(&life).map_err(|e| self.fail(e))
    }

    /// Every completed item's payout link at the simulated now, after settling the orders whose
    /// time has come.
    pub fn payouts(&self) -> Result<PayoutCensus, SimError> {
        let now = now_of(&self.store).map_err(|e| self.fail(e))?;
        self.store.settle(now).map_err(|e| self.fail(e))?;
        census(&self.store).map_err(|e| self.fail(e))
    }
}
