//! What the rows before a row held: the first line of each value seen (a reference, what makes
//! two rows likely duplicates), in a fixed number of bytes a row.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

/// The first line of each value seen, remembered by a 96-bit keyed hash instead of the value:
/// 16 bytes a row (and the table's own byte) whatever the value's length, so a million-row
/// file costs tens of megabytes. Two values share a hash with a probability of about
/// n² / 2⁹⁷ (10⁻¹⁷ for a million rows); two rows that did would only be refused as repeated,
/// never paid twice.
#[derive(Debug, Default)]
pub struct Seen {
    keys: (RandomState, RandomState),
    lines: HashMap<Fingerprint, u32, BuildHasherDefault<FingerprintHasher>>,
}

/// A 96-bit hash of a value; its own first 64 bits are its hash in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint([u32; 3]);

impl Hash for Fingerprint {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.0[0]) << 32 | u64::from(self.0[1]));
    }
}

/// Passes a [`Fingerprint`]'s bits through: they are a keyed hash already.
#[derive(Debug, Default)]
struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Seen {
    pub fn new() -> Self {
        Seen::default()
    }

    fn fingerprint(&self, value: &impl Hash) -> Fingerprint {
        let a = self.keys.0.hash_one(value);
        let b = self.keys.1.hash_one(value);
        Fingerprint([(a >> 32) as u32, a as u32, (b >> 32) as u32])
    }

    /// The line `value` was first seen on, or `None` after remembering `line` for it.
    pub fn first_or_insert(&mut self, value: &impl Hash, line: u64) -> Option<u64> {
        let key = self.fingerprint(value);
        match self.lines.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => Some(u64::from(*e.get())),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(u32::try_from(line).unwrap_or(u32::MAX));
                None
            }
        }
    }

    /// The line `value` was first seen on.
    pub fn get(&self, value: &impl Hash) -> Option<u64> {
        self.lines
            .get(&self.fingerprint(value))
            .map(|l| u64::from(*l))
    }
}
