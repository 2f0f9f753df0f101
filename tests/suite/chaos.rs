//! The chaos suite: the simulator runs as its own process with a state file, so it outlives the
//! client; paybatch runs as a child process that is killed with SIGKILL at random instants or
//! aborted at fail points, and restarted with the same command until it exits 0 or 4. Faults are
//! mixed in from the simulator (5xx, created-then-dropped connections, 429 bursts, in-progress
//! answers, slow PROCESSING, FAILED orders, latency), and in about half the default, kept-error
//! and payout scenarios a share of minimal answers (only what the published contract requires: no `transaction_detail`,
//! `description`, `metadata`...). After every scenario the invariants are checked against the
//! simulator's ground truth.
//!
//! `PAYBATCH_CHAOS_SCENARIOS` (default 50) and `PAYBATCH_CHAOS_SEED` (default 1) choose the
//! scenarios; `scripts/chaos.sh N SEED` runs N of them. A failure prints its seed.
//!
//! The default counts are the deep tier's (`PAYBATCH_DEEP_TESTS=1`, which `.ci/run` sets). The
//! fast tier (`cargo test`) runs a fixed share of each kind: of the default scenarios, one per
//! fail point, each scenario's first run aborted at its own point (`armed_point`), then killed
//! at random as in the deep tier.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use paybatch::ledger::{Ledger, OrderState, RowState};
use paybatch::sim::{DEFAULT_KEY, SimOrderRecord};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_decimal::Decimal;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_paybatch");
const START_BALANCE: &str = "100000.00";

/// Products whose price is paid in their own currency (the balance check is exact then).
const PRODUCTS: &[(&str, &str, &[&str])] = &[
    ("AMZ-US", "USD", &["5.00", "10.00", "25.50", "100"]),
    ("STEAM-US", "USD", &["5", "10", "20", "50"]),
    ("AMZ-DE", "EUR", &["5", "15.00", "50"]),
    ("TESCO-GB", "GBP", &["10", "20", "25"]),
    ("PAYPAL-CA", "CAD", &["5", "12.34", "100"]),
];

#[derive(Debug, Default, Clone)]
struct Seen {
    kills: usize,
    aborts: usize,
    runs: usize,
    /// Rows held for a person (MISMATCH) by hostile answers.
    held: usize,
    /// Rows whose expired link was reissued and paid again.
    reissued: usize,
    faults: BTreeMap<String, u64>,
    /// Scenarios per order shape (`async`, `sync`, `items-per-order N`).
    shapes: BTreeMap<String, usize>,
    /// Fail points a scenario's first run was armed with (fast tier) and aborted at.
    points: Vec<String>,
}

impl Seen {
    /// Adds what another scenario saw.
    fn absorb(&mut self, seen: Seen) {
        self.kills += seen.kills;
        self.aborts += seen.aborts;
        self.runs += seen.runs;
        self.held += seen.held;
        self.reissued += seen.reissued;
        for (k, v) in seen.faults {
            *self.faults.entry(k).or_default() += v;
        }
        for (k, v) in seen.shapes {
            *self.shapes.entry(k).or_default() += v;
        }
        self.points.extend(seen.points);
    }

    /// Nothing seen yet but the scenario's order shape (its extra `run` flags).
    fn with_shape(shape: &[String]) -> Seen {
        let name = if shape.is_empty() {
            "async".to_string()
        } else {
            shape.join(" ").trim_start_matches("--").to_string()
        };
        Seen {
            shapes: BTreeMap::from([(name, 1)]),
            ..Seen::default()
        }
    }
}

/// How a scenario's orders are made: one row per async order (half the scenarios), one row per
/// sync order, or several rows per async order. Drawn from a generator of its own, so that the
/// batch, the faults and the kills a seed draws do not depend on it.
fn order_shape(seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5ca1_ab1e_0bde_5eed);
    match rng.gen_range(0..4) {
        0 => vec!["--sync".into()],
        1 => vec!["--items-per-order".into(), rng.gen_range(2..=4).to_string()],
        _ => Vec::new(),
    }
}

/// The share of minimal answers of a scenario's simulator (`--minimal-answers`), in about half
/// the scenarios. Drawn from a generator of its own, so that the batch, the faults and the kills
/// a seed draws do not depend on it.
fn minimal_share(seed: u64) -> Option<String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6d69_6e69_6d61_6c5f);
    rng.gen_bool(0.5)
        .then(|| format!("{:.2}", rng.gen_range(0.2..1.0)))
}

struct SimProcess {
    child: Child,
    base_url: String,
    admin: String,
}

impl SimProcess {
    /// Starts a simulator with faults drawn from `rng`, then `extra` flags (not drawn).
    /// With `hostile`, about one start in three also draws hostile answers (rows they touch are
    /// held for a person, so a scenario that must end with every row paid leaves them off).
    async fn start(
        dir: &Path,
        rng: &mut StdRng,
        seed: u64,
        extra: &[String],
        hostile: bool,
    ) -> (SimProcess, Vec<String>) {
        let mut args: Vec<String> = vec![
            "sim".into(),
            "serve".into(),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--state".into(),
            dir.join("sim.db").display().to_string(),
            "--seed".into(),
            seed.to_string(),
            "--rate-limit".into(),
            "0".into(),
            "--processing-min-ms".into(),
            "20".into(),
            "--processing-max-ms".into(),
            rng.gen_range(100..1500).to_string(),
        ];
        let mut faults = Vec::new();
        // Minimal answers in the default scenarios (those that may draw hostile answers and set
        // no flag themselves).
        let minimal = minimal_share(seed).filter(|_| hostile && extra.is_empty());
        if let Some(share) = &minimal {
            args.extend(["--minimal-answers".to_string(), share.clone()]);
            faults.push(format!("--minimal-answers={share}"));
        }
        // A flag the scenario sets itself (`extra`) is not drawn.
        let mut maybe = |rng: &mut StdRng, flag: &str, value: String| {
            if rng.gen_bool(0.5) && !extra.iter().any(|e| e == flag) {
                args.push(flag.to_string());
                args.push(value.clone());
                faults.push(format!("{flag}={value}"));
            }
        };
        let v = format!("{:.2}", rng.gen_range(0.05..0.4));
        maybe(rng, "--failure-rate", v);
        let v = format!("{:.2}", rng.gen_range(0.05..0.35));
        maybe(rng, "--drop-rate", v);
        let v = format!("{:.2}", rng.gen_range(0.05..0.3));
        maybe(rng, "--error-rate", v);
        let v = format!("{:.2}", rng.gen_range(0.02..0.08));
        maybe(rng, "--burst-429-rate", v);
        let v = rng.gen_range(5..60).to_string();
        maybe(rng, "--latency-ms", v);
        let v = rng.gen_range(5..120).to_string();
        maybe(rng, "--latency-jitter-ms", v);
        let v = rng.gen_range(50..400).to_string();
        maybe(rng, "--in-progress-delay-ms", v);
        // Hostile answers, in about one scenario in three: rows they touch end MISMATCH (held
        // for a person), never COMPLETED wrongly.
        if hostile && rng.gen_bool(0.35) {
            let v = format!("{:.2}", rng.gen_range(0.03..0.15));
            // A swapped order of the same items, answered without its description and metadata,
            // cannot be told from the one sent: no swaps with minimal answers (the draw is kept).
            if minimal.is_some() {
                let _ = rng.gen_bool(0.5);
            } else {
                maybe(rng, "--swap-rate", v);
            }
            let v = format!("{:.2}", rng.gen_range(0.03..0.2));
            maybe(rng, "--unlinked-rate", v);
            let v = format!("{:.2}", rng.gen_range(0.03..0.2));
            maybe(rng, "--inflated-total-rate", v);
            let v = format!("{:.2}", rng.gen_range(0.1..0.6));
            maybe(rng, "--linked-failure-rate", v);
            let v = format!("{:.2}", rng.gen_range(0.2..0.9));
            maybe(rng, "--escape-rate", v);
        }
        args.extend_from_slice(extra);
        faults.extend_from_slice(extra);
        let mut child = Command::new(BIN)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("simulator process starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("simulator prints its address within 20 s")
            .expect("read")
            .expect("a line");
        let base_url = first
            .rsplit(' ')
            .next()
            .expect("address at the end of the line")
            .to_string();
        let admin = base_url.trim_end_matches("/v2").to_string();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        (
            SimProcess {
                child,
                base_url,
                admin,
            },
            faults,
        )
    }

    async fn orders(&self) -> Vec<SimOrderRecord> {
        let url = format!("{}/_sim/orders", self.admin);
        reqwest::get(&url)
            .await
            .expect("ground truth")
            .json()
            .await
            .expect("ground truth JSON")
    }

    async fn stats(&self) -> BTreeMap<String, serde_json::Value> {
        let url = format!("{}/_sim/stats", self.admin);
        reqwest::get(&url)
            .await
            .expect("stats")
            .json()
            .await
            .expect("stats JSON")
    }

    async fn balance(&self, currency: &str) -> Decimal {
        let body: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/balance?currency={currency}", self.base_url))
            .header("X-Api-Key", DEFAULT_KEY)
            .send()
            .await
            .expect("balance")
            .json()
            .await
            .expect("balance JSON");
        body["balance"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .expect("balance amount")
    }
}

fn write_batch(dir: &Path, rng: &mut StdRng) -> (PathBuf, Vec<String>) {
    let rows = rng.gen_range(3..=10);
    let mut csv = String::from("reference,product_code,face_value,currency,email,note\n");
    let mut refs = Vec::new();
    for i in 0..rows {
        let (code, currency, values) = PRODUCTS[rng.gen_range(0..PRODUCTS.len())];
        let value = values[rng.gen_range(0..values.len())];
        let email = if rng.gen_bool(0.5) {
            format!("person{i}@example.com")
        } else {
            String::new()
        };
        let reference = format!("CH-{i:03}");
        csv.push_str(&format!(
            "{reference},{code},{value},{currency},{email},row {i}\n"
        ));
        refs.push(reference);
    }
    let path = dir.join("batch.csv");
    std::fs::write(&path, csv).expect("write batch");
    (path, refs)
}

fn key_file(dir: &Path) -> PathBuf {
    let path = dir.join("api.key");
    std::fs::write(&path, DEFAULT_KEY).expect("key");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    }
    path
}

/// Runs paybatch; maybe kills it after a random delay or arms a fail point. Returns the exit
/// code (None when killed or aborted) and stderr.
async fn one_run(
    dir: &Path,
    base_url: &str,
    shape: &[String],
    rng: &mut StdRng,
    chaos: bool,
    seen: &mut Seen,
    envs: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("PAYBATCH_FAILPOINT");
    // A fail point a scenario arms itself (`envs`) holds unless a drawn one replaces it.
    cmd.envs(envs.iter().copied());
    cmd.current_dir(dir)
        .args([
            "run",
            "batch.csv",
            "--base-url",
            base_url,
            "--api-key-file",
            "api.key",
            "--ledger",
            "ledger.db",
            "--poll-timeout",
            "20",
            // The simulator's own limit is off here: pacing would only slow the suite down.
            "--order-rate",
            "3000",
            "--quiet",
        ])
        .args(shape)
        .env_remove("PAYBATCH_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut kill_after = None;
    if chaos {
        if rng.gen_bool(0.35) {
            let point =
                paybatch::failpoint::POINTS[rng.gen_range(0..paybatch::failpoint::POINTS.len())];
            cmd.env(
                "PAYBATCH_FAILPOINT",
                format!("{point}:{}", rng.gen_range(1..4)),
            );
        } else if rng.gen_bool(0.8) {
            kill_after = Some(Duration::from_millis(rng.gen_range(30..2500)));
        }
    }
    let (status, text) = spawn_until(cmd, kill_after, seen).await;
    if status.code().is_none() && text.contains("fail point") {
        seen.aborts += 1;
    }
    (status.code(), text)
}

async fn scenario(seed: u64) -> Result<Seen, String> {
    scenario_with(seed, Vec::new()).await
}

/// A scenario whose simulator answers every kind of hostile answer, often: swapped orders,
/// completed orders without links, inflated totals, failed orders with links (a third of the
/// orders fail) and escape sequences in messages and server errors.
async fn hostile_scenario(seed: u64) -> Result<Seen, String> {
    let flags = [
        ("--swap-rate", "0.15"),
        ("--unlinked-rate", "0.15"),
        ("--inflated-total-rate", "0.15"),
        ("--linked-failure-rate", "0.5"),
        ("--escape-rate", "0.8"),
        ("--failure-rate", "0.3"),
        ("--error-rate", "0.15"),
    ];
    let extra = flags
        .iter()
        .flat_map(|(f, v)| [f.to_string(), v.to_string()])
        .collect();
    scenario_with(seed, extra).await
}

/// In the fast tier, the fail point the first run of scenario `seed` aborts at: seeds 1 to 7
/// name every point once. None in the deep tier (every run draws its own chaos).
fn armed_point(seed: u64) -> Option<&'static str> {
    let points = paybatch::failpoint::POINTS;
    (!crate::support::deep())
        .then(|| points[(seed.saturating_sub(1) % points.len() as u64) as usize])
}

async fn scenario_with(seed: u64, extra: Vec<String>) -> Result<Seen, String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (_input, refs) = write_batch(dir.path(), &mut rng);
    key_file(dir.path());
    let (mut sim, faults) = SimProcess::start(dir.path(), &mut rng, seed, &extra, true).await;
    let shape = order_shape(seed);
    let mut seen = Seen::with_shape(&shape);
    let deadline = Instant::now() + Duration::from_secs(150);
    let chaos_runs = rng.gen_range(1..6);
    let mut finished = None;
    // Everything the runs printed.
    let mut said = String::new();
    for i in 0..40 {
        if Instant::now() > deadline {
            break;
        }
        let armed = armed_point(seed)
            .filter(|_| i == 0)
            .map(|point| ("PAYBATCH_FAILPOINT", format!("{point}:1")));
        let (code, stderr) = one_run(
            dir.path(),
            &sim.base_url,
            &shape,
            &mut rng,
            i < chaos_runs && armed.is_none(),
            &mut seen,
            &armed
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
        )
        .await;
        if let Some((_, point)) = &armed
            && code.is_none()
            && stderr.contains("fail point")
        {
            seen.points.push(point.clone());
        }
        said.push_str(&stderr);
        match code {
            Some(0) | Some(4) => {
                finished = code;
                break;
            }
            None | Some(5) => {}
            Some(other) => {
                return Err(format!(
                    "seed {seed}: run exited {other} (faults {faults:?}, {shape:?}):\n{stderr}"
                ));
            }
        }
    }
    let Some(final_code) = finished else {
        return Err(format!(
            "seed {seed}: no run finished (faults {faults:?}, {shape:?})"
        ));
    };

    // Invariants against the simulator's ground truth.
    let truth: Vec<SimOrderRecord> = sim.orders().await;
    let (rows, orders) = read_ledger(dir.path(), seed)?;

    // Rows and orders held for a person: a hostile answer (swapped order, no payout links,
    // inflated total, failed with links) puts its rows in MISMATCH.
    let held: std::collections::HashSet<&str> = rows
        .iter()
        .filter(|r| r.state == RowState::Mismatch)
        .map(|r| r.reference.as_str())
        .collect();
    let ledger_by_key: HashMap<&str, &paybatch::ledger::OrderRecord> = orders
        .iter()
        .map(|o| (o.idempotency_key.as_str(), o))
        .collect();

    // 1. Each row: at most one live service order item; exactly one unless its order failed
    //    or a swapped answer kept it from being created (the row is then held for a person).
    let mut items_per_ref: HashMap<String, Vec<&SimOrderRecord>> = HashMap::new();
    for o in &truth {
        for r in paybatch::batch::order_body::references_in_metadata(&o.metadata) {
            items_per_ref.entry(r).or_default().push(o);
        }
    }
    for r in &refs {
        let list = items_per_ref.get(r).cloned().unwrap_or_default();
        let live: Vec<_> = list
            .iter()
            .filter(|o| o.status != paybatch::api::OrderStatus::Failed)
            .collect();
        if live.len() > 1 {
            return Err(format!(
                "seed {seed}: row {r} paid {} times: {:?}",
                live.len(),
                live.iter().map(|o| &o.id).collect::<Vec<_>>()
            ));
        }
        if list.is_empty() && !held.contains(r.as_str()) {
            return Err(format!("seed {seed}: row {r} has no service order"));
        }
        if list.len() > 1 {
            return Err(format!(
                "seed {seed}: row {r} has {} service orders (no retry was asked)",
                list.len()
            ));
        }
    }
    // 2. No input row missing from the ledger or the result file, and nothing the service said
    //    reaches the result file or the terminal as a control sequence.
    every_row_kept(dir.path(), seed, rows.len(), refs.len())?;
    no_control_sequences(dir.path(), seed, &said)?;
    // 3. The ledger's order ids and statuses equal the service's, and an order believed is the
    //    one its key created (a swapped answer is never COMPLETED).
    let by_id: HashMap<&str, &SimOrderRecord> = truth.iter().map(|o| (o.id.as_str(), o)).collect();
    for o in &orders {
        if o.state == OrderState::Mismatch {
            continue;
        }
        let Some(id) = o.service_order_id.as_deref() else {
            return Err(format!(
                "seed {seed}: ledger order {} has no service id in state {}",
                o.id, o.state
            ));
        };
        let Some(t) = by_id.get(id) else {
            return Err(format!(
                "seed {seed}: ledger order {id} unknown to the service"
            ));
        };
        if t.idempotency_key != o.idempotency_key {
            return Err(format!(
                "seed {seed}: order {id} of key {} believed {} by the intent of key {}",
                t.idempotency_key, o.state, o.idempotency_key
            ));
        }
        let same = matches!(
            (o.state, t.status),
            (OrderState::Completed, paybatch::api::OrderStatus::Completed)
                | (OrderState::Failed, paybatch::api::OrderStatus::Failed)
        );
        if !same {
            return Err(format!(
                "seed {seed}: order {id}: ledger {} vs service {:?}",
                o.state, t.status
            ));
        }
    }
    for t in &truth {
        if !ledger_by_key.contains_key(t.idempotency_key.as_str()) {
            return Err(format!(
                "seed {seed}: service order {} (key {}) unknown to the ledger",
                t.id, t.idempotency_key
            ));
        }
    }
    // A completed row carries the payout link the service issued for it.
    let links: HashMap<&str, &str> = truth
        .iter()
        .flat_map(|o| o.items.iter())
        .filter_map(|i| Some((i.id.as_str(), i.payout_url.as_deref()?)))
        .collect();
    for row in rows.iter().filter(|r| r.state == RowState::Completed) {
        let issued: Option<&str> = row.item_id.as_deref().and_then(|i| links.get(i).copied());
        if issued.is_none() || issued != row.payout_url.as_deref() {
            return Err(format!(
                "seed {seed}: row {} completed with link {:?}, the service issued {issued:?}",
                row.reference, row.payout_url
            ));
        }
    }
    for row in &rows {
        if !matches!(
            row.state,
            RowState::Completed | RowState::Failed | RowState::Mismatch
        ) {
            return Err(format!(
                "seed {seed}: row {} ended {}",
                row.reference, row.state
            ));
        }
    }
    let failed = rows
        .iter()
        .filter(|r| matches!(r.state, RowState::Failed | RowState::Mismatch))
        .count();
    if (failed > 0) != (final_code == 4) {
        return Err(format!(
            "seed {seed}: exit {final_code} with {failed} failed or held rows"
        ));
    }
    seen.held += held.len();
    // 4. The balance moved by exactly the sum of completed prices.
    let charged_held = truth.iter().filter(|t| {
        t.status == paybatch::api::OrderStatus::Completed
            && ledger_by_key
                .get(t.idempotency_key.as_str())
                .is_some_and(|o| o.state == OrderState::Mismatch)
    });
    balances_match(seed, &sim, &rows, charged_held).await?;
    add_fault_counts(&sim, &mut seen).await;
    let _ = sim.child.start_kill();
    let _ = sim.child.wait().await;
    Ok(seen)
}

/// Two ledgers on one simulator, as two machines of one team: the same file (the same batch),
/// one row an order on one, several on the other, so that their keys differ and only the
/// service's orders, read row by row, keep a row from being paid twice. Each run may be killed
/// at random or aborted at a fail point; a ledger refused because the other one has orders of
/// the batch reconciles them in (`reconcile --rebuild`), as its advice says, and runs again.
/// Every row ends paid exactly once, and both ledgers say so.
async fn two_ledger_scenario(seed: u64) -> Result<Seen, String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x21ed_6e45);
    let top = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dirs = [top.path().join("a"), top.path().join("b")];
    let mut refs = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        std::fs::create_dir(d).map_err(|e| e.to_string())?;
        key_file(d);
        // The same rows on both machines (drawn from a generator of the same seed).
        let mut same = StdRng::seed_from_u64(seed);
        let (_, r) = write_batch(d, &mut same);
        if i == 0 {
            refs = r;
        }
    }
    // No failed orders: a failed row waits for a person's retry, which is not this scenario.
    let extra = vec!["--failure-rate".to_string(), "0".to_string()];
    let (mut sim, faults) = SimProcess::start(top.path(), &mut rng, seed, &extra, false).await;
    let shapes = [
        vec!["--items-per-order".to_string(), "1".to_string()],
        vec![
            "--items-per-order".to_string(),
            rng.gen_range(2..=5).to_string(),
        ],
    ];
    let mut seen = Seen::with_shape(&["two-ledgers".to_string()]);
    let deadline = Instant::now() + Duration::from_secs(150);
    let mut done = [false, false];
    let mut chaos_runs: [u32; 2] = [rng.gen_range(1..4), rng.gen_range(1..4)];
    let mut killed_last: Option<usize> = None;
    for _ in 0..60 {
        if done.iter().all(|d| *d) || Instant::now() > deadline {
            break;
        }
        let mut which = rng.gen_range(0..2);
        if done[which] {
            which = 1 - which;
        }
        let chaos = chaos_runs[which] > 0;
        chaos_runs[which] = chaos_runs[which].saturating_sub(1);
        // A request a killed run had on the wire may still be turned into an order after the
        // other machine read the list: no read can see it. Two machines of one team do not
        // take a batch over from each other within the same second; the scenario waits longer
        // than the simulator's slowest answer before the other ledger starts.
        if killed_last.is_some_and(|k| k != which) {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        let (code, stderr) = one_run(
            &dirs[which],
            &sim.base_url,
            &shapes[which],
            &mut rng,
            chaos,
            &mut seen,
            &[],
        )
        .await;
        killed_last = code.is_none().then_some(which);
        match code {
            Some(0) => done[which] = true,
            None | Some(5) => {}
            Some(3) if stderr.contains("reconcile --batch batch --rebuild") => {
                let args = [
                    "reconcile",
                    "--batch",
                    "batch",
                    "--rebuild",
                    "batch.csv",
                    "--base-url",
                    sim.base_url.as_str(),
                    "--api-key-file",
                    "api.key",
                    "--ledger",
                    "ledger.db",
                ];
                seen.runs += 1;
                let out = Command::new(BIN)
                    .current_dir(&dirs[which])
                    .args(args)
                    .env_remove("PAYBATCH_FAILPOINT")
                    .env_remove("PAYBATCH_API_KEY")
                    .kill_on_drop(true)
                    .output();
                let out = tokio::time::timeout(Duration::from_secs(120), out)
                    .await
                    .map_err(|_| format!("seed {seed}: reconcile did not end within 120 s"))?
                    .map_err(|e| e.to_string())?;
                let rc = out.status.code();
                let said = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                if !matches!(rc, Some(0) | Some(5)) {
                    return Err(format!(
                        "seed {seed}: reconcile of ledger {which} exited {rc:?} (faults {faults:?}):\n{said}"
                    ));
                }
            }
            Some(other) => {
                return Err(format!(
                    "seed {seed}: ledger {which} exited {other} (faults {faults:?}, {:?}):\n{stderr}",
                    shapes[which]
                ));
            }
        }
    }
    if !done.iter().all(|d| *d) {
        return Err(format!(
            "seed {seed}: the two ledgers did not both finish (faults {faults:?}, {shapes:?})"
        ));
    }
    let truth: Vec<SimOrderRecord> = sim.orders().await;
    let mut per_ref: HashMap<String, Vec<&SimOrderRecord>> = HashMap::new();
    for o in &truth {
        for r in paybatch::batch::order_body::references_in_metadata(&o.metadata) {
            per_ref.entry(r).or_default().push(o);
        }
    }
    for r in &refs {
        let live: Vec<&str> = per_ref
            .get(r)
            .map(|l| {
                l.iter()
                    .filter(|o| o.status != paybatch::api::OrderStatus::Failed)
                    .map(|o| o.id.as_str())
                    .collect()
            })
            .unwrap_or_default();
        if live.len() != 1 {
            return Err(format!(
                "seed {seed}: row {r} has {} live orders {live:?} (faults {faults:?}, {shapes:?})",
                live.len()
            ));
        }
    }
    for (i, d) in dirs.iter().enumerate() {
        let (rows, _) = read_ledger(d, seed)?;
        if let Some(r) = rows.iter().find(|r| r.state != RowState::Completed) {
            return Err(format!(
                "seed {seed}: ledger {i} has row {} {}",
                r.reference, r.state
            ));
        }
    }
    add_fault_counts(&sim, &mut seen).await;
    let _ = sim.child.start_kill();
    let _ = sim.child.wait().await;
    Ok(seen)
}

/// The batch's rows and orders in the scenario's ledger.
fn read_ledger(
    dir: &Path,
    seed: u64,
) -> Result<
    (
        Vec<paybatch::ledger::RowRecord>,
        Vec<paybatch::ledger::OrderRecord>,
    ),
    String,
> {
    let ledger = Ledger::open(&dir.join("ledger.db")).map_err(|e| e.to_string())?;
    let batch = ledger
        .batch("batch")
        .map_err(|e| e.to_string())?
        .ok_or(format!("seed {seed}: no batch in the ledger"))?;
    let rows = ledger.rows(batch.id).map_err(|e| e.to_string())?;
    let orders = ledger.orders(batch.id).map_err(|e| e.to_string())?;
    Ok((rows, orders))
}

/// The ledger has a row and the result file a line (after its header) for each input row.
fn every_row_kept(dir: &Path, seed: u64, ledger_rows: usize, rows: usize) -> Result<(), String> {
    if ledger_rows != rows {
        return Err(format!(
            "seed {seed}: ledger has {ledger_rows} rows, input {rows}"
        ));
    }
    let lines = std::fs::read_to_string(dir.join("batch.result.csv"))
        .map_err(|e| format!("seed {seed}: result file: {e}"))?
        .lines()
        .count();
    if lines != rows + 1 {
        return Err(format!(
            "seed {seed}: result file has {lines} lines for {rows} rows"
        ));
    }
    Ok(())
}

/// Nothing the service said reaches the result file or the runs' output as a control
/// sequence: no ESC, BEL, C1 control or bidirectional override, raw.
fn no_control_sequences(dir: &Path, seed: u64, said: &str) -> Result<(), String> {
    let raw = |c: char| matches!(c, '\u{1b}' | '\u{7}' | '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let result = std::fs::read_to_string(dir.join("batch.result.csv"))
        .map_err(|e| format!("seed {seed}: result file: {e}"))?;
    for (what, text) in [("result file", result.as_str()), ("output", said)] {
        if let Some(line) = text.lines().find(|l| l.chars().any(raw)) {
            return Err(format!(
                "seed {seed}: a control sequence reached the {what}: {line:?}"
            ));
        }
    }
    Ok(())
}

/// Each balance moved by exactly the sum of the completed rows' prices.
async fn balances_match(
    seed: u64,
    sim: &SimProcess,
    rows: &[paybatch::ledger::RowRecord],
    charged_held: impl Iterator<Item = &SimOrderRecord>,
) -> Result<(), String> {
    let mut spent: BTreeMap<String, Decimal> = BTreeMap::new();
    // Orders the service completed whose answers were not believed: their rows are held for a
    // person, the money left all the same.
    for t in charged_held {
        *spent.entry(t.currency.clone()).or_default() += t.total_price;
    }
    for row in rows.iter().filter(|r| r.state == RowState::Completed) {
        let currency = row
            .spec
            .as_ref()
            .map_or("?", |s| s.payment_currency.as_str())
            .to_string();
        let price: Decimal = row.price.ok_or(format!(
            "seed {seed}: completed row {} has no price",
            row.reference
        ))?;
        *spent.entry(currency).or_default() += price;
    }
    let start: Decimal = START_BALANCE.parse().expect("decimal");
    for currency in ["USD", "EUR", "GBP", "CAD"] {
        let now = sim.balance(currency).await;
        let expected = start - spent.get(currency).copied().unwrap_or_default();
        if now != expected {
            return Err(format!(
                "seed {seed}: {currency} balance {now}, expected {expected}"
            ));
        }
    }
    Ok(())
}

/// Adds the simulator's fault counters to `seen`.
async fn add_fault_counts(sim: &SimProcess, seen: &mut Seen) {
    let stats = sim.stats().await;
    for key in [
        "answered_429",
        "injected_5xx",
        "dropped",
        "stored_errors",
        "in_progress",
        "replayed",
        "swapped",
        "disguised",
        "escaped_errors",
        "minimal_answers",
    ] {
        if let Some(n) = stats.get(key).and_then(|v| v.as_u64()) {
            *seen.faults.entry(key.to_string()).or_default() += n;
        }
    }
}

/// Kept server errors: the service answers some keys with a 500 that it keeps under them, so
/// those keys can never create their order. Runs here use a short in-doubt window (1.8 s), a
/// settling time of 1 s and two sends an order, so reconciliation soon gives such keys up (REJECTED), and every exit 4 is
/// followed by `paybatch retry`, as a person would do, until a run pays everything (exit 0). With
/// the kills, fail points and other faults of the suite, this tries the one path where a row
/// gets a new key while it was in doubt: each row must still end with exactly one live order.
async fn kept_error_scenario(seed: u64) -> Result<Seen, String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b65_7074_6572_7273);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (_input, refs) = write_batch(dir.path(), &mut rng);
    key_file(dir.path());
    let mut kept = vec![
        "--stored-error-rate".to_string(),
        format!("{:.2}", rng.gen_range(0.1..0.3)),
    ];
    // The order list is as the service publishes it (a processing order shows only its id and
    // status, and holds every give-up back); half the time as the older simulator listed it,
    // with each order's metadata.
    if rng.gen_bool(0.5) {
        kept.push("--list-with-metadata".to_string());
    }
    // Half the scenarios also answer a share with only what the published contract requires.
    if let Some(share) = minimal_share(seed) {
        kept.extend(["--minimal-answers".to_string(), share]);
    }
    let (mut sim, faults) = SimProcess::start(dir.path(), &mut rng, seed, &kept, false).await;
    let mut args = order_shape(seed);
    let mut seen = Seen::with_shape(&args);
    args.extend(["--in-doubt-hours", "0.0005", "--send-tries", "2"].map(String::from));
    let deadline = Instant::now() + Duration::from_secs(240);
    let chaos_runs = rng.gen_range(1..6);
    let mut retries = 0;
    let mut paid = false;
    for i in 0..60 {
        if Instant::now() > deadline {
            break;
        }
        let (code, stderr) = one_run(
            dir.path(),
            &sim.base_url,
            &args,
            &mut rng,
            i < chaos_runs,
            &mut seen,
            // Keys may be given up 1 s after their last send (the simulator finishes a
            // request within its in-progress delay and latency, well under that).
            &[("PAYBATCH_SETTLE_SECONDS", "1")],
        )
        .await;
        match code {
            Some(0) => {
                paid = true;
                break;
            }
            Some(4) => {
                retries += 1;
                let out = Command::new(BIN)
                    .current_dir(dir.path())
                    .args(["retry", "--batch", "batch", "--ledger", "ledger.db"])
                    .output()
                    .await
                    .map_err(|e| e.to_string())?;
                if !out.status.success() {
                    return Err(format!(
                        "seed {seed}: retry failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
            // Let the keys left in doubt grow older than the window (and settle).
            None | Some(5) => tokio::time::sleep(Duration::from_millis(2000)).await,
            Some(other) => {
                return Err(format!(
                    "seed {seed}: run exited {other} (faults {faults:?}, {args:?}):\n{stderr}"
                ));
            }
        }
    }
    if !paid {
        return Err(format!(
            "seed {seed}: no run paid everything after {retries} retries (faults {faults:?}, {args:?})"
        ));
    }

    let truth: Vec<SimOrderRecord> = sim.orders().await;
    let (rows, orders) = read_ledger(dir.path(), seed)?;
    // 1. Each row: exactly one live service order, the one its ledger row names.
    for row in &rows {
        let live: Vec<&SimOrderRecord> = truth
            .iter()
            .filter(|o| o.status != paybatch::api::OrderStatus::Failed)
            .filter(|o| {
                paybatch::batch::order_body::references_in_metadata(&o.metadata)
                    .contains(&row.reference)
            })
            .collect();
        if live.len() != 1 {
            return Err(format!(
                "seed {seed}: row {} has {} live orders (faults {faults:?}, {args:?})",
                row.reference,
                live.len()
            ));
        }
        let named = orders
            .iter()
            .find(|o| Some(o.id) == row.order_id)
            .and_then(|o| o.service_order_id.as_deref());
        if row.state != RowState::Completed || named != Some(live[0].id.as_str()) {
            return Err(format!(
                "seed {seed}: row {} is {} with order {named:?}, the service paid it with {}",
                row.reference, row.state, live[0].id
            ));
        }
    }
    // 2. Every service order is known to the ledger; every ledger order the service never
    //    created was given up (REJECTED), and the service has nothing under its key.
    for t in &truth {
        if !orders
            .iter()
            .any(|o| o.service_order_id.as_deref() == Some(t.id.as_str()))
        {
            return Err(format!("seed {seed}: service order {} unknown", t.id));
        }
    }
    for o in orders.iter().filter(|o| o.service_order_id.is_none()) {
        if o.state != OrderState::Rejected
            || truth.iter().any(|t| t.idempotency_key == o.idempotency_key)
        {
            return Err(format!(
                "seed {seed}: ledger order {} ({}) has no service id",
                o.id, o.state
            ));
        }
    }
    // 3. The ledger and the result file have every row; the balances moved by the completed
    //    prices.
    every_row_kept(dir.path(), seed, rows.len(), refs.len())?;
    balances_match(seed, &sim, &rows, std::iter::empty()).await?;
    add_fault_counts(&sim, &mut seen).await;
    *seen.faults.entry("retries".into()).or_default() += retries;
    *seen.faults.entry("keys_given_up".into()).or_default() += orders
        .iter()
        .filter(|o| o.error_type.as_deref() == Some("idempotency_key_spent"))
        .count() as u64;
    let _ = sim.child.start_kill();
    let _ = sim.child.wait().await;
    Ok(seen)
}

/// `payouts` is killed within this many milliseconds of its start: within the time its first
/// run takes on the scenario's small batch (about 210 ms in a debug build; a run after a kill
/// reads less, 70 to 100 ms), so that the first run given a kill is killed before it ends (at
/// 600 ms, then 250 ms, the first scenario's first run ended first as the code got faster).
const PAYOUTS_KILL_WITHIN_MS: u64 = 120;

/// Runs `paybatch ARGS` in `dir` (the scenario's key and ledger added by the caller); with
/// `kill_within`, SIGKILLs it after a random delay below it. Returns the exit code (None when
/// killed) and stdout.
async fn one_command(
    dir: &Path,
    args: &[&str],
    rng: &mut StdRng,
    kill_within: Option<u64>,
    seen: &mut Seen,
) -> (Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir)
        .args(args)
        .env_remove("PAYBATCH_FAILPOINT")
        .env_remove("PAYBATCH_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let delay = kill_within.map(|ms| Duration::from_millis(rng.gen_range(1..ms.max(2))));
    let (status, text) = spawn_until(cmd, delay, seen).await;
    (status.code(), text)
}

/// Starts `cmd` (its one piped output read whole) and counts it as a run; SIGKILLs it after
/// `kill_after` when given (unless it ended before), else waits for it at most 120 s. Returns
/// how it ended and what its piped output said.
async fn spawn_until(
    mut cmd: Command,
    kill_after: Option<Duration>,
    seen: &mut Seen,
) -> (std::process::ExitStatus, String) {
    seen.runs += 1;
    let mut child = cmd.spawn().expect("paybatch starts");
    let piped: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>> =
        match (child.stdout.take(), child.stderr.take()) {
            (Some(out), _) => Some(Box::new(out)),
            (None, Some(err)) => Some(Box::new(err)),
            (None, None) => None,
        };
    let collect = tokio::spawn(async move {
        let mut text = String::new();
        if let Some(mut piped) = piped {
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut piped, &mut text).await;
        }
        text
    });
    let status = match kill_after {
        Some(delay) => match tokio::time::timeout(delay, child.wait()).await {
            Ok(status) => status.expect("wait"),
            Err(_) => {
                child.start_kill().expect("SIGKILL");
                seen.kills += 1;
                child.wait().await.expect("wait after kill")
            }
        },
        None => tokio::time::timeout(Duration::from_secs(120), child.wait())
            .await
            .expect("a command ends within 120 s")
            .expect("wait"),
    };
    (status, collect.await.unwrap_or_default())
}

/// The simulator's own account of every payout link: (order id, item id) -> status.
async fn census(sim: &SimProcess) -> HashMap<(String, String), String> {
    let body: serde_json::Value = reqwest::get(format!("{}/_sim/payouts", sim.admin))
        .await
        .expect("payouts")
        .json()
        .await
        .expect("payouts JSON");
    body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                (
                    i["order_id"].as_str().unwrap_or("").to_string(),
                    i["item_id"].as_str().unwrap_or("").to_string(),
                ),
                i["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Each COMPLETED row's payout link as the ledger last read it (status, and the history of its
/// changes as events), against the simulator's `census`: the same status, and a history that
/// goes from nothing to it one change at a time.
fn links_as_the_service_says(
    dir: &Path,
    seed: u64,
    census: &HashMap<(String, String), String>,
) -> Result<usize, String> {
    let db = rusqlite::Connection::open(dir.join("ledger.db")).map_err(|e| e.to_string())?;
    let mut read = db
        .prepare(
            "SELECT r.id, r.reference, o.service_order_id, r.item_id, p.status FROM rows r
             JOIN orders o ON o.id = r.order_id
             LEFT JOIN payouts p ON p.row_id = r.id AND p.attempt = r.attempt
             WHERE r.state = 'COMPLETED'",
        )
        .map_err(|e| e.to_string())?;
    let rows: Vec<(i64, String, String, String, Option<String>)> = read
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .and_then(|m| m.collect())
        .map_err(|e| e.to_string())?;
    let mut history = db
        .prepare(
            "SELECT from_state, to_state FROM events
             WHERE subject = 'payout' AND subject_id = ?1 ORDER BY id",
        )
        .map_err(|e| e.to_string())?;
    for (id, reference, order, item, status) in &rows {
        let truth = census.get(&(order.clone(), item.clone()));
        if truth != status.as_ref() {
            return Err(format!(
                "seed {seed}: row {reference}: ledger says {status:?}, the service {truth:?}"
            ));
        }
        let changes: Vec<(Option<String>, Option<String>)> = history
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|m| m.collect())
            .map_err(|e| e.to_string())?;
        // The status the completion recorded (ACTIVE) is not an event; the reads' are.
        let mut last: Option<String> = match changes.first() {
            Some((Some(first), _)) if first == "ACTIVE" => Some(first.clone()),
            _ => None,
        };
        for (from, to) in &changes {
            if *from != last || from == to {
                return Err(format!(
                    "seed {seed}: row {reference}: payout history {changes:?} does not follow"
                ));
            }
            last = to.clone();
        }
        if last != *status && !(changes.is_empty() && status.as_deref() == Some("ACTIVE")) {
            return Err(format!(
                "seed {seed}: row {reference}: payout history {changes:?} ends elsewhere than {status:?}"
            ));
        }
    }
    Ok(rows.len())
}

/// The life of payouts after payment, under kills: a batch is paid (faults, no kills), the
/// simulated clock moves past the links' expiry, `paybatch payouts` is killed at random instants
/// and run again until it finishes; every paid row's link must then be as the simulator says,
/// with a history that follows, and a further call reads nothing. Then `retry --expired` (killed
/// at random too) and runs killed at random until the batch finishes: every row whose link
/// expired is paid exactly once more, every other row never again, and the balances moved by
/// exactly what both attempts cost.
async fn payout_life_scenario(seed: u64) -> Result<Seen, String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7061_796f_7574_7321);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (_input, refs) = write_batch(dir.path(), &mut rng);
    key_file(dir.path());
    let life: Vec<String> = [
        "--link-expiry-days",
        "10",
        "--claim-share",
        "0.4",
        "--cancel-share",
        "0.1",
        "--claim-within-days",
        "8",
    ]
    .map(String::from)
    .to_vec();
    let mut life = life;
    // Half the scenarios read the links through a share of minimal answers (no `expiry_date`).
    if let Some(share) = minimal_share(seed) {
        life.extend(["--minimal-answers".to_string(), share]);
    }
    let (mut sim, faults) = SimProcess::start(dir.path(), &mut rng, seed, &life, false).await;
    let shape = order_shape(seed);
    let mut seen = Seen::with_shape(&shape);
    let until_done = |code: Option<i32>| matches!(code, Some(0) | Some(4));
    let mut paid = false;
    for _ in 0..20 {
        let (code, _) = one_run(
            dir.path(),
            &sim.base_url,
            &shape,
            &mut rng,
            false,
            &mut seen,
            &[],
        )
        .await;
        if until_done(code) {
            paid = true;
            break;
        }
    }
    if !paid {
        return Err(format!(
            "seed {seed}: the batch was not paid (faults {faults:?})"
        ));
    }
    let state = dir.path().join("sim.db").display().to_string();
    let (moved, _) = one_command(
        dir.path(),
        &["sim", "clock", "--state", &state, "--advance", "12d"],
        &mut rng,
        None,
        &mut seen,
    )
    .await;
    if moved != Some(0) {
        return Err(format!("seed {seed}: the simulated clock did not move"));
    }
    let base = sim.base_url.clone();
    let service = [
        "--base-url",
        base.as_str(),
        "--api-key-file",
        "api.key",
        "--ledger",
        "ledger.db",
    ];
    let mut payouts: Vec<&str> = vec!["payouts", "--batch", "batch", "--json", "--timeout", "20"];
    payouts.extend_from_slice(&service);
    let kills = rng.gen_range(1..5);
    let mut read = false;
    for i in 0..30 {
        let kill = (i < kills).then_some(PAYOUTS_KILL_WITHIN_MS);
        let (code, _) = one_command(dir.path(), &payouts, &mut rng, kill, &mut seen).await;
        match code {
            Some(0) | Some(7) => {
                read = true;
                break;
            }
            None | Some(5) => {}
            Some(other) => return Err(format!("seed {seed}: payouts exited {other}")),
        }
    }
    if !read {
        return Err(format!(
            "seed {seed}: payouts never finished (faults {faults:?})"
        ));
    }
    let truth = census(&sim).await;
    links_as_the_service_says(dir.path(), seed, &truth)?;
    // Every link is final 12 days on: a further call reads no order.
    let (_, again) = one_command(dir.path(), &payouts, &mut rng, None, &mut seen).await;
    let again: serde_json::Value = serde_json::from_str(again.trim())
        .map_err(|e| format!("seed {seed}: payouts JSON: {e}: {again}"))?;
    if again["orders_read"] != 0 {
        return Err(format!(
            "seed {seed}: a call after every link was final read orders: {again}"
        ));
    }

    // The rows whose link expired, and the orders that paid them first.
    let (rows, _) = read_ledger(dir.path(), seed)?;
    let expired_links: std::collections::HashSet<String> = rows
        .iter()
        .filter(|r| r.state == RowState::Completed)
        .filter(|r| {
            let order = truth
                .iter()
                .find(|((_, item), _)| Some(item) == r.item_id.as_ref());
            order.is_some_and(|(_, status)| status == "EXPIRED")
        })
        .map(|r| r.reference.clone())
        .collect();
    let mut retry: Vec<&str> = vec!["retry", "--batch", "batch", "--expired", "--json"];
    // It reads the expired rows' orders once more: the batch's service and key.
    retry.extend_from_slice(&service);
    let mut reissued = None;
    let mut last = String::new();
    for i in 0..10 {
        let kill = (i == 0 && rng.gen_bool(0.5)).then_some(40);
        let (code, out) = one_command(dir.path(), &retry, &mut rng, kill, &mut seen).await;
        if code == Some(0) {
            reissued = Some(out);
            break;
        }
        last = format!("exit {code:?}: {out}");
    }
    if reissued.is_none() {
        return Err(format!(
            "seed {seed}: retry --expired never finished (last: {last})"
        ));
    }
    let (rows, _) = read_ledger(dir.path(), seed)?;
    let pending: std::collections::HashSet<String> = rows
        .iter()
        .filter(|r| r.attempt > 1 && r.state == RowState::Pending)
        .map(|r| r.reference.clone())
        .collect();
    if pending != expired_links {
        return Err(format!(
            "seed {seed}: reissued {pending:?}, the links that expired {expired_links:?}"
        ));
    }
    let chaos_runs = rng.gen_range(1..4);
    let mut finished = false;
    for i in 0..40 {
        let (code, _) = one_run(
            dir.path(),
            &sim.base_url,
            &shape,
            &mut rng,
            i < chaos_runs,
            &mut seen,
            &[],
        )
        .await;
        if until_done(code) {
            finished = true;
            break;
        }
    }
    if !finished {
        return Err(format!(
            "seed {seed}: the reissue was not paid (faults {faults:?})"
        ));
    }
    // Each reissued row is paid once more, every other row never again.
    let orders: Vec<SimOrderRecord> = sim.orders().await;
    let (rows, _) = read_ledger(dir.path(), seed)?;
    for r in &refs {
        let live = orders
            .iter()
            .filter(|o| o.status != paybatch::api::OrderStatus::Failed)
            .filter(|o| {
                paybatch::batch::order_body::references_in_metadata(&o.metadata).contains(r)
            })
            .count();
        let row = rows.iter().find(|row| &row.reference == r);
        let completed = row.is_some_and(|row| row.state == RowState::Completed);
        let expected_at_most = if expired_links.contains(r) { 2 } else { 1 };
        if live > expected_at_most || (expired_links.contains(r) && completed && live != 2) {
            return Err(format!(
                "seed {seed}: row {r} has {live} live orders (link expired: {})",
                expired_links.contains(r)
            ));
        }
    }
    // The balances moved by what every completed row cost, both attempts of a reissued one.
    let db = rusqlite::Connection::open(dir.path().join("ledger.db")).map_err(|e| e.to_string())?;
    let earlier: Vec<(paybatch::ledger::Amount, paybatch::row::RowContent)> = db
        .prepare(
            "SELECT p.price, r.spec FROM payouts p JOIN rows r ON r.id = p.row_id
             WHERE p.reissued_at IS NOT NULL",
        )
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|m| m.collect())
        })
        .map_err(|e| e.to_string())?;
    let mut with_earlier = rows.clone();
    for (price, spec) in earlier {
        with_earlier.push(paybatch::ledger::RowRecord {
            state: RowState::Completed,
            price: Some(price.0),
            spec: Some(spec),
            ..rows[0].clone()
        });
    }
    balances_match(seed, &sim, &with_earlier, std::iter::empty()).await?;
    seen.reissued += expired_links.len();
    add_fault_counts(&sim, &mut seen).await;
    let _ = sim.child.start_kill();
    let _ = sim.child.wait().await;
    Ok(seen)
}

/// A scenario whose simulator refuses some of the batch's addresses by item
/// (`--refuse-emails`), several rows an order: each order with such an address is refused
/// naming it, the row is REJECTED and the order's other rows are planned again and paid. The
/// first run is aborted between the refusal and its record, or just after it (`before_replan`,
/// `after_replan`), the next ones may be killed at random. Every refused row ends REJECTED with
/// no order at the service, every other row in exactly one order, and the balances move by the
/// completed rows' prices.
async fn refused_items_scenario(seed: u64) -> Result<Seen, String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7265_6675_7365_6421);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (input, refs) = write_batch(dir.path(), &mut rng);
    key_file(dir.path());
    let text = std::fs::read_to_string(&input).map_err(|e| e.to_string())?;
    let emails: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(4))
        .filter(|e| !e.is_empty())
        .collect();
    let mut refused: Vec<String> = emails
        .iter()
        .filter(|_| rng.gen_bool(0.4))
        .map(|e| e.to_string())
        .collect();
    if refused.is_empty()
        && let Some(first) = emails.first()
    {
        refused.push(first.to_string());
    }
    let list = dir.path().join("refused.txt");
    std::fs::write(&list, refused.join("\n")).map_err(|e| e.to_string())?;
    let extra = vec!["--refuse-emails".to_string(), list.display().to_string()];
    let (mut sim, faults) = SimProcess::start(dir.path(), &mut rng, seed, &extra, false).await;
    let shape = vec![
        "--items-per-order".to_string(),
        rng.gen_range(2..=4).to_string(),
    ];
    let mut seen = Seen::with_shape(&shape);
    let point = format!(
        "{}:{}",
        ["before_replan", "after_replan"][rng.gen_range(0..2)],
        rng.gen_range(1..3)
    );
    let deadline = Instant::now() + Duration::from_secs(150);
    let chaos_runs = rng.gen_range(1..4);
    let mut finished = None;
    for i in 0..40 {
        if Instant::now() > deadline {
            break;
        }
        let armed = [("PAYBATCH_FAILPOINT", point.as_str())];
        let envs: &[(&str, &str)] = if i == 0 { &armed } else { &[] };
        let chaos = i > 0 && i <= chaos_runs;
        let (code, stderr) = one_run(
            dir.path(),
            &sim.base_url,
            &shape,
            &mut rng,
            chaos,
            &mut seen,
            envs,
        )
        .await;
        match code {
            Some(0) | Some(4) => {
                finished = code;
                break;
            }
            None | Some(5) => {}
            Some(other) => {
                return Err(format!(
                    "seed {seed}: run exited {other} (faults {faults:?}, {point}):\n{stderr}"
                ));
            }
        }
    }
    if finished != Some(4) {
        return Err(format!(
            "seed {seed}: no run ended with the refused rows (faults {faults:?}, {point}): {finished:?}"
        ));
    }
    let truth: Vec<SimOrderRecord> = sim.orders().await;
    let (rows, orders) = read_ledger(dir.path(), seed)?;
    let mut per_ref: HashMap<String, usize> = HashMap::new();
    for o in &truth {
        for r in paybatch::batch::order_body::references_in_metadata(&o.metadata) {
            *per_ref.entry(r).or_default() += 1;
        }
    }
    let by_line: HashMap<&str, &str> = text
        .lines()
        .skip(1)
        .filter_map(|l| Some((l.split(',').next()?, l.split(',').nth(4)?)))
        .collect();
    for row in &rows {
        let email = by_line.get(row.reference.as_str()).copied().unwrap_or("");
        let orders_of_row = per_ref.get(&row.reference).copied().unwrap_or(0);
        let refused_row = refused.iter().any(|e| e == email);
        let ok = if refused_row {
            row.state == RowState::Rejected && orders_of_row == 0
        } else {
            matches!(row.state, RowState::Completed | RowState::Failed) && orders_of_row == 1
        };
        if !ok {
            return Err(format!(
                "seed {seed}: row {} ({email}, refused: {refused_row}) ended {} with {orders_of_row} service orders ({point}, faults {faults:?})",
                row.reference, row.state
            ));
        }
    }
    let known: std::collections::HashSet<&str> =
        orders.iter().map(|o| o.idempotency_key.as_str()).collect();
    if let Some(t) = truth
        .iter()
        .find(|t| !known.contains(t.idempotency_key.as_str()))
    {
        return Err(format!(
            "seed {seed}: service order {} unknown to the ledger",
            t.id
        ));
    }
    every_row_kept(dir.path(), seed, rows.len(), refs.len())?;
    balances_match(seed, &sim, &rows, std::iter::empty()).await?;
    add_fault_counts(&sim, &mut seen).await;
    let _ = sim.child.start_kill();
    let _ = sim.child.wait().await;
    Ok(seen)
}

/// Runs `count` scenarios from seed `first`, two at a time; panics with the seed of the first
/// that fails; returns what they saw together.
async fn run_scenarios<F, Fut>(first: u64, count: u64, scenario: F) -> Seen
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = Result<Seen, String>> + Send + 'static,
{
    let parallel = 2;
    let mut total = Seen::default();
    let seeds: Vec<u64> = (first..first + count).collect();
    for chunk in seeds.chunks(parallel) {
        let runs = chunk.iter().map(|&seed| tokio::spawn(scenario(seed)));
        for run in runs.collect::<Vec<_>>() {
            match run.await.expect("scenario task") {
                Ok(seen) => total.absorb(seen),
                Err(e) => panic!(
                    "chaos scenario failed (repeat with PAYBATCH_CHAOS_SEED and PAYBATCH_CHAOS_SCENARIOS=1, in the same tier): {e}"
                ),
            }
        }
    }
    eprintln!(
        "chaos: {count} scenarios (seeds {first}..{}), {} runs, {} SIGKILLs, {} fail-point aborts, {} rows held for a person, {} rows reissued, faults seen {:?}, order shapes {:?}",
        first + count - 1,
        total.runs,
        total.kills,
        total.aborts,
        total.held,
        total.reissued,
        total.faults,
        total.shapes
    );
    total
}

/// The number in `name`, else `deep` in the deep tier and `fast` in the fast tier.
fn env_number(name: &str, fast: u64, deep: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| match fast == deep {
            true => deep,
            false => crate::support::tiered(name, fast, deep),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_row_is_paid_at_most_once_and_the_books_balance() {
    let points = paybatch::failpoint::POINTS.len() as u64;
    let count = env_number("PAYBATCH_CHAOS_SCENARIOS", points, 50);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let total = run_scenarios(first, count, scenario).await;
    if !crate::support::deep() && first == 1 && count >= points {
        let mut aborted = total.points.clone();
        aborted.sort();
        aborted.dedup();
        assert_eq!(
            aborted.len(),
            paybatch::failpoint::POINTS.len(),
            "every fail point aborts a first run: {aborted:?}"
        );
    }
    assert!(
        total.kills + total.aborts > 0,
        "the suite must actually kill runs"
    );
    let drawn = (first..first + count).any(|seed| minimal_share(seed).is_some());
    assert!(
        total.faults.get("minimal_answers").copied().unwrap_or(0) > 0 || !drawn,
        "the scenarios must answer minimal answers: {:?}",
        total.faults
    );
}

/// `PAYBATCH_CHAOS_HOSTILE_SCENARIOS` (default 10) of [`hostile_scenario`], from
/// `PAYBATCH_CHAOS_SEED`: every row paid once or held for a person, never COMPLETED wrongly,
/// nothing the service says reaching the result file or the terminal as a control sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_hostile_answers_hold_rows_for_a_person_and_are_never_believed() {
    let count = env_number("PAYBATCH_CHAOS_HOSTILE_SCENARIOS", 4, 10);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let mut total = run_scenarios(first, count, hostile_scenario).await;
    // A swap is drawn at an order's creation, in the order the requests reach the simulator,
    // and never for an account's first order: the few creations of a handful of scenarios may
    // draw none (one fast-tier run in about eight). More seeds are run, one at a time and as
    // many as `count` at most, until one swaps: each checked as the others.
    let mut next = first + count;
    while total.faults.get("swapped").copied().unwrap_or(0) == 0 && next < first + 2 * count {
        total.absorb(run_scenarios(next, 1, hostile_scenario).await);
        next += 1;
    }
    assert!(total.held > 0, "hostile answers must hold rows: {total:?}");
    for fault in ["swapped", "disguised"] {
        assert!(
            total.faults.get(fault).copied().unwrap_or(0) > 0,
            "the scenarios must answer {fault}: {:?}",
            total.faults
        );
    }
}

/// `PAYBATCH_CHAOS_KEPT_SCENARIOS` (default 10) of [`kept_error_scenario`], from
/// `PAYBATCH_CHAOS_SEED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_keys_answered_with_kept_server_errors_are_given_up_and_each_row_paid_once() {
    let count = env_number("PAYBATCH_CHAOS_KEPT_SCENARIOS", 2, 10);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let total = run_scenarios(first, count, kept_error_scenario).await;
    assert!(
        total.faults.get("keys_given_up").copied().unwrap_or(0) > 0,
        "the scenarios must give keys up: {:?}",
        total.faults
    );
    assert!(total.kills + total.aborts > 0, "and kill runs");
}

/// `PAYBATCH_CHAOS_PAYOUT_SCENARIOS` (default 6) of [`payout_life_scenario`], from
/// `PAYBATCH_CHAOS_SEED`: `payouts` and the reissue of expired links killed at random; every
/// link as the service says, every expired row paid once more and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_payouts_and_reissues_killed_at_random_leave_every_link_right_and_pay_once_more() {
    let count = env_number("PAYBATCH_CHAOS_PAYOUT_SCENARIOS", 1, 6);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let total = run_scenarios(first, count, payout_life_scenario).await;
    assert!(total.kills > 0, "the suite must kill payouts: {total:?}");
    assert!(
        total.reissued > 0,
        "some links must expire and be reissued: {total:?}"
    );
}

/// `PAYBATCH_CHAOS_TWO_LEDGER_SCENARIOS` (default 6) of [`two_ledger_scenario`], from
/// `PAYBATCH_CHAOS_SEED`: two ledgers of one batch on one simulator, grouped differently,
/// killed at random, reconciling each other's orders in: every row paid exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_two_ledgers_on_one_simulator_pay_every_row_exactly_once() {
    let count = env_number("PAYBATCH_CHAOS_TWO_LEDGER_SCENARIOS", 2, 6);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let total = run_scenarios(first, count, two_ledger_scenario).await;
    assert!(
        total.kills + total.aborts > 0,
        "the suite must actually kill runs: {total:?}"
    );
}

/// `PAYBATCH_CHAOS_REFUSED_SCENARIOS` (default 6) of [`refused_items_scenario`], from
/// `PAYBATCH_CHAOS_SEED`: addresses refused by item, runs aborted around the re-plan and killed
/// at random; every refused row REJECTED, every other row paid exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_refused_items_replan_the_others_and_pay_each_once() {
    let count = env_number("PAYBATCH_CHAOS_REFUSED_SCENARIOS", 2, 6);
    let first = env_number("PAYBATCH_CHAOS_SEED", 1, 1);
    let total = run_scenarios(first, count, refused_items_scenario).await;
    assert!(
        total.aborts > 0,
        "the suite must abort runs around the re-plan: {total:?}"
    );
}
