//! The operations layer without the command line or a terminal: a library caller runs, previews,
//! retries and reports a batch and reads its status, and gets typed outcomes and the progress
//! it asked for.

use std::sync::{Arc, Mutex};

use crate::support::*;
use paybatch::batch::options::RunOptions;
use paybatch::batch::outcome::Outcome;
use paybatch::batch::progress::{Progress, Reporter};
use paybatch::environment::Environment;
use paybatch::ledger::{Ledger, RowState};
use paybatch::ops::error::Failure;

/// A progress that keeps what it was told.
#[derive(Default)]
struct Recorded {
    lines: Mutex<Vec<String>>,
    phases: Mutex<Vec<(&'static str, u64, u64)>>,
}

impl Progress for Recorded {
    fn line(&self, msg: &str) {
        self.lines.lock().expect("lock").push(msg.to_string());
    }
    fn warn(&self, msg: &str) {
        self.line(msg);
    }
    fn alert(&self, msg: &str) {
        self.line(msg);
    }
    fn phase(&self, what: &'static str, len: u64) {
        self.phases.lock().expect("lock").push((what, len, 0));
    }
    fn advance(&self, what: &'static str, n: u64) {
        let mut phases = self.phases.lock().expect("lock");
        if let Some(p) = phases.iter_mut().rev().find(|p| p.0 == what) {
            p.2 += n;
        }
    }
    fn grow(&self, _: &'static str, _: u64) {}
    fn phase_end(&self, _: &'static str) {}
}

fn options(ws: &Workspace, base: &str, file: &str) -> RunOptions {
    let mut opts = RunOptions::new(ws.path(file));
    opts.environment = Environment::Custom(base.to_string());
    opts.api_key_file = Some(ws.key_file());
    opts.ledger = ws.ledger();
    opts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_caller_previews_runs_retries_and_reports_a_batch() {
    let ws = Workspace::new();
    let mut config = fast_config(None);
    config.failure_rate = 0.0;
    let sim = start_sim(config).await;
    ws.write(
        "lib.csv",
        "reference,product_code,face_value,currency,email\n\
         L-1,AMZ-US,10.00,USD,\n\
         L-2,AMZ-US,20.00,USD,\n",
    );
    let opts = options(&ws, &sim.base_url(), "lib.csv");

    let preview = paybatch::ops::preview::preview(&opts)
        .await
        .expect("preview");
    assert!(preview.is_valid());
    assert_eq!(preview.valid_rows, 2);
    assert!(preview.digest.is_some());

    let progress = Arc::new(Recorded::default());
    let summary = paybatch::ops::run::run(&opts, Reporter::new(progress.clone()))
        .await
        .expect("run");
    assert_eq!(summary.outcome(), Outcome::Completed);
    assert_eq!(summary.count(RowState::Completed), 2);
    let lines = progress.lines.lock().expect("lock").clone();
    assert!(
        lines.iter().any(|l| l.starts_with("submitting 2 orders")),
        "{lines:?}"
    );
    let phases = progress.phases.lock().expect("lock").clone();
    assert!(
        phases
            .iter()
            .any(|(what, _, done)| *what == "submit" && *done == 2),
        "{phases:?}"
    );

    // Nothing to retry; a batch the ledger does not have is a usage error.
    let retried = paybatch::ops::retry::retry(&ws.ledger(), "lib", &[]).expect("retry");
    assert!(retried.references.is_empty());
    let e = paybatch::ops::retry::retry(&ws.ledger(), "nope", &[]).expect_err("no such batch");
    assert_eq!(e.failure(), Failure::Usage);

    // The result file, to any writer.
    let ledger = Ledger::open(&ws.ledger()).expect("ledger");
    let batch = ledger.batch("lib").expect("read").expect("batch");
    let mut csv = Vec::new();
    paybatch::ops::report::copy_result_file(&ledger, &batch, &mut csv).expect("csv");
    let csv = String::from_utf8(csv).expect("utf-8");
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.lines().skip(1).all(|l| l.contains("COMPLETED")),
        "{csv}"
    );

    // What the ledger says: every batch, one in detail, a name it does not have.
    let batches = paybatch::ops::status::batches(&ledger).expect("status");
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].counts, [(RowState::Completed, 2)]);
    let detail = paybatch::ops::status::batch(&ledger, "lib").expect("status of lib");
    assert_eq!(detail.rows(), 2);
    assert!(detail.in_flight().is_empty());
    assert!(detail.unconfirmed().is_empty());
    assert!(!detail.events.is_empty());
    assert_eq!(detail.events.len(), detail.subjects.len());
    match paybatch::ops::status::batch(&ledger, "nope") {
        Err(paybatch::ops::status::StatusError::NoBatch { known, .. }) => {
            assert_eq!(known, ["lib"])
        }
        other => panic!("no such batch: {other:?}"),
    }
    let nowhere = ws.path("none.db");
    assert!(matches!(
        paybatch::ops::status::open_existing(&nowhere),
        Err(paybatch::ops::status::StatusError::NoLedger(_))
    ));
    assert!(!nowhere.exists(), "status never creates a ledger");

    // A missing input file: a usage error before anything is made.
    let missing = options(&ws, &sim.base_url(), "missing.csv");
    let e = paybatch::ops::run::run(&missing, Reporter::silent())
        .await
        .expect_err("missing file");
    assert_eq!(e.failure(), Failure::Usage);
}
