//! Reads the service's order window (the last 30 days and a margin) once and says how long it
//! took, for `scripts/bench.sh window`:
//!
//!     cargo run --release --example read_window -- http://127.0.0.1:8080/v2 KEY_FILE [BATCH]
//!
//! Prints one line: pages read, seconds, orders kept, whether the window is complete, and how
//! many orders name BATCH (default `seed-1`, a batch of `paybatch sim serve --seed-orders`).

use std::time::Instant;

use paybatch::api::{ApiKey, Client, ClientConfig};
use paybatch::batch::{order_body, window};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(base), Some(key_file)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: read_window BASE_URL KEY_FILE [BATCH]");
    };
    let batch = args.next().unwrap_or_else(|| "seed-1".to_string());
    let key = ApiKey::new(&std::fs::read_to_string(&key_file)?).map_err(anyhow::Error::msg)?;
    let client = Client::new(ClientConfig::new(base, key))?;
    let since = window::window_since(chrono::Utc::now(), None);
    let started = Instant::now();
    let w = window::read_window(&client, since).await?;
    let seconds = started.elapsed().as_secs_f64();
    let naming = w
        .orders
        .iter()
        .filter_map(|o| o.description())
        .filter(|d| order_body::batch_named_by(d, &batch) != order_body::BatchNaming::Other)
        .count();
    let unattributed = w.orders.iter().filter(|o| o.is_unnamed()).count();
    println!(
        "pages={} seconds={seconds:.2} kept={} complete={} batch={batch} naming={} unattributed={}",
        w.pages,
        w.orders.len(),
        w.complete,
        naming,
        unattributed
    );
    Ok(())
}
