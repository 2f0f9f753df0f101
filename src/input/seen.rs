//! What the rows before a row held: the first line of each value seen (a reference, what makes
//! two rows likely duplicates), in a fixed number of bytes a row.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

/// The first line of each value seen, remembered by a 96-bit keyed hash instead of the value:
/// 16 bytes a row (and the table's own byte) whatever the value's length, so a million-row
/// file costs tens of megabytes. Two values share a hash with a probability of about
/// n² / 2⁹⁷ (10⁻¹⁷ for a million rows); two rows that did would only be refused as repeated,
/// never paid twice.
///
/// The 96 bits are a 64-bit key, the table's, and a 32-bit tag. A value is looked up by both
/// ([`Seen::first_or_insert`]); a value of a kind (a reference of a fold,
/// [`crate::reference::Folded`]) by the kind as key and the value as tag
/// ([`Seen::first_of_kind`]), which tells whether the first value of the kind was this one.
#[derive(Debug, Default)]
pub struct Seen {
    keys: (RandomState, RandomState),
    /// By key: the first line and the tag of the first value.
    lines: HashMap<Key, (u32, u32), BuildHasherDefault<KeyHasher>>,
}

/// A 64-bit keyed hash; it is its own hash in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key(u64);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

/// Passes a [`Key`]'s bits through: they are a keyed hash already.
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
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

    fn key(&self, kind: &impl Hash) -> Key {
        Key(self.keys.0.hash_one(kind))
    }

    fn tag(&self, value: &impl Hash) -> u32 {
        (self.keys.1.hash_one(value) >> 32) as u32
    }

    /// The line `value` was first seen on, or `None` after remembering `line` for it.
    pub fn first_or_insert(&mut self, value: &impl Hash, line: u64) -> Option<u64> {
        self.first_of_kind(value, value, line)
            .and_then(|(first, same)| same.then_some(first))
    }

    /// The line a value of `kind` was first seen on, and whether that value was `value`; or
    /// `None` after remembering `line` and `value` for the kind.
    pub fn first_of_kind(
        &mut self,
        kind: &impl Hash,
        value: &impl Hash,
        line: u64,
    ) -> Option<(u64, bool)> {
        let key = self.key(kind);
        let tag = self.tag(value);
        match self.lines.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let (first, first_tag) = *e.get();
                Some((u64::from(first), first_tag == tag))
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((u32::try_from(line).unwrap_or(u32::MAX), tag));
                None
            }
        }
    }

    /// The line `value` was first seen on.
    pub fn get(&self, value: &impl Hash) -> Option<u64> {
        self.get_kind(value, value)
            .and_then(|(first, same)| same.then_some(first))
    }

    /// The line a value of `kind` was first seen on, and whether that value was `value`.
    pub fn get_kind(&self, kind: &impl Hash, value: &impl Hash) -> Option<(u64, bool)> {
        self.lines
            .get(&self.key(kind))
            .map(|(l, t)| (u64::from(*l), *t == self.tag(value)))
    }
}
