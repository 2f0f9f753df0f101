//! One process per ledger at a time: an OS file lock beside the ledger, released by the kernel
//! when the process dies (a killed run never blocks the next one).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another paybatch process is running with the ledger {ledger} (lock {lock} held{holder})"
    )]
    Held {
        ledger: PathBuf,
        lock: PathBuf,
        holder: String,
    },
    #[error("cannot create the lock file {path}: {message}")]
    Io { path: PathBuf, message: String },
}

/// Held for as long as the value lives.
#[derive(Debug)]
pub struct LedgerLock {
    _file: File,
    path: PathBuf,
}

pub fn lock_path(ledger: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", ledger.display()))
}

impl LedgerLock {
    /// Takes the lock without waiting; `Held` when another process has it.
    pub fn acquire(ledger: &Path) -> Result<Self, LockError> {
        let path = lock_path(ledger);
        let io = |e: std::io::Error| LockError::Io {
            path: path.clone(),
            message: e.to_string(),
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).read(true).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = std::fs::read_to_string(&path)
                    .ok()
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .map(|s| format!(" by process {s}"))
                    .unwrap_or_default();
                return Err(LockError::Held {
                    ledger: ledger.to_path_buf(),
                    lock: path,
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(LedgerLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
