//! One process per ledger at a time: an OS file lock beside the ledger, released by the kernel
//! when the process dies (a killed run never blocks the next one).
//!
//! The lock belongs to the ledger's canonical path (links resolved), so two spellings of one
//! ledger take one lock; and its file is opened without following a symbolic link, so the lock
//! never truncates a file it was pointed at.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use super::canonical_path;
use crate::files;

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

/// The lock file of a ledger path as given (beside it, `.lock` added).
pub fn lock_path(ledger: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", ledger.display()))
}

impl LedgerLock {
    /// Takes the lock without waiting; `Held` when another process has it.
    pub fn acquire(ledger: &Path) -> Result<Self, LockError> {
        let io_at = |path: &Path, e: std::io::Error| LockError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        if let Some(parent) = ledger.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| io_at(&lock_path(ledger), e))?;
        }
        let canonical = canonical_path(ledger).map_err(|e| {
            io_at(
                &lock_path(ledger),
                std::io::Error::new(e.kind(), format!("the ledger {}: {e}", ledger.display())),
            )
        })?;
        let path = lock_path(&canonical);
        let io = |e: std::io::Error| io_at(&path, e);
        let mut file = files::open_no_follow(&path, true, " (remove it)").map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = Some(holder.trim())
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
        file.rewind().map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(LedgerLock { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn two_spellings_of_one_ledger_take_one_lock() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("paybatch.db");
        std::fs::write(&real, "").unwrap();
        let alias = dir.path().join("alias.db");
        std::os::unix::fs::symlink(&real, &alias).unwrap();
        let linked_dir = dir.path().join("linked");
        std::os::unix::fs::symlink(dir.path(), &linked_dir).unwrap();

        std::fs::create_dir(dir.path().join("x")).unwrap();
        let held = LedgerLock::acquire(&real).expect("first lock");
        for other in [
            alias.clone(),
            linked_dir.join("alias.db"),
            dir.path().join("x/../paybatch.db"),
        ] {
            match LedgerLock::acquire(&other) {
                Err(LockError::Held { ledger, .. }) => assert_eq!(ledger, other),
                got => panic!("{}: {got:?}", other.display()),
            }
        }
        drop(held);
        let again = LedgerLock::acquire(&alias).expect("free again");
        assert_eq!(
            again.path(),
            lock_path(&std::fs::canonicalize(&real).unwrap())
        );
    }

    #[test]
    fn a_symbolic_link_in_place_of_the_lock_file_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("paybatch.db");
        let precious = dir.path().join("precious.txt");
        std::fs::write(&precious, "keep me").unwrap();
        std::os::unix::fs::symlink(&precious, lock_path(&ledger)).unwrap();
        let e = LedgerLock::acquire(&ledger).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
        // A link to nothing is not followed either (it would create the file it names).
        let nowhere = dir.path().join("nowhere.txt");
        let other = dir.path().join("other.db");
        std::os::unix::fs::symlink(&nowhere, lock_path(&other)).unwrap();
        assert!(LedgerLock::acquire(&other).is_err());
        assert!(!nowhere.exists());
    }

    #[test]
    fn the_lock_file_names_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("l.db");
        let _held = LedgerLock::acquire(&ledger).unwrap();
        let e = LedgerLock::acquire(&ledger).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("by process {}", std::process::id())),
            "{e}"
        );
    }
}
