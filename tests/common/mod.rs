//! Shared helpers of the integration tests: a real simulator on a loopback port, a real SQLite
//! ledger in a temporary directory, the real binary.
#![allow(dead_code)]

mod catalog_fixture;
#[allow(unused_imports)]
pub use catalog_fixture::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use paybatch::sim::{self, SimConfig, SimHandle};

pub const SAMPLE: &str = "samples/recipients.csv";
pub const SAMPLE_MISTAKES: &str = "samples/recipients-with-mistakes.csv";

/// A temporary working directory with a key file and a copy of the inputs.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn ledger(&self) -> PathBuf {
        self.path("ledger.db")
    }

    pub fn sim_state(&self) -> PathBuf {
        self.path("sim-state.db")
    }

    /// Copies a file of the repository into the workspace.
    pub fn copy(&self, repo_path: &str, name: &str) -> PathBuf {
        let target = self.path(name);
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join(repo_path),
            &target,
        )
        .expect("copy sample");
        target
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let target = self.path(name);
        std::fs::write(&target, content).expect("write file");
        target
    }

    /// A key file of mode 0600 holding the simulator's key.
    pub fn key_file(&self) -> PathBuf {
        let path = self.path("api.key");
        std::fs::write(&path, format!("{}\n", sim::DEFAULT_KEY)).expect("key file");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        path
    }
}

/// Simulator settings for fast tests: short processing, no rate limit surprises.
pub fn fast_config(state: Option<PathBuf>) -> SimConfig {
    SimConfig {
        state,
        seed: 7,
        processing_min: Duration::from_millis(50),
        processing_max: Duration::from_millis(300),
        ..SimConfig::default()
    }
}

pub async fn start_sim(config: SimConfig) -> SimHandle {
    sim::start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("simulator starts")
}

/// Reads a CSV file into rows of cells (header first).
pub fn read_csv(path: &Path) -> Vec<Vec<String>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .expect("open csv");
    reader
        .records()
        .map(|r| r.expect("record").iter().map(str::to_string).collect())
        .collect()
}

/// The index of a column in a header row.
pub fn col(header: &[String], name: &str) -> usize {
    header
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
}

/// Rows of an input CSV file (excluding the header).
pub fn input_rows(path: &Path) -> usize {
    read_csv(path).len() - 1
}
