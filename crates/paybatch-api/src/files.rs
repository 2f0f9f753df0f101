//! Files only their owner may read: the ledger, its lock, the result files and the simulator's
//! state hold payout links or keys, so each is created with mode 0600 and narrowed to it when
//! it exists already, the mode set on the file opened, never through its path.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Owner read and write only.
pub const PRIVATE_MODE: u32 = 0o600;

/// What a symbolic link is refused with where paybatch does not follow one.
pub const LINK_REFUSED: &str = "it is a symbolic link; paybatch does not follow one there";

/// Opens `path` for reading and writing without following a symbolic link, creating it with
/// [`PRIVATE_MODE`] if `create` (an existing file keeps its mode and its content); refuses
/// anything but a regular file. A link is refused with [`LINK_REFUSED`], then `advice`.
pub fn open_no_follow(path: &Path, create: bool, advice: &str) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if create {
        options.create(true).truncate(false);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(PRIVATE_MODE).custom_flags(libc::O_NOFOLLOW);
    }
    #[cfg(not(unix))]
    let _ = advice;
    let file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return io::Error::other(format!("{LINK_REFUSED}{advice}"));
        }
        e
    })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// Creates `path` for appending with [`PRIVATE_MODE`] when it is missing, and narrows an
/// existing file to it.
pub fn create_private(path: &Path) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(PRIVATE_MODE);
    }
    set_private(&options.open(path)?)
}

/// Sets [`PRIVATE_MODE`] on an open file.
pub fn set_private(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}
