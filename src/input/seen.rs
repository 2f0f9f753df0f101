//! What the rows before a row held: the first line of each value seen (a reference, what makes
//! two rows likely duplicates), in a fixed number of bytes a row.

use std::hash::{BuildHasher, Hash, RandomState};

/// The first line of each value seen, remembered by a 96-bit keyed hash instead of the value:
/// 16 bytes a row (20 with the table's free slots) whatever the value's length, so a
/// million-row file costs tens of megabytes. Two values share a hash with a probability of
/// about n² / 2⁹⁷ (10⁻¹⁷ for a million rows); two rows that did would only be refused as
/// repeated, never paid twice.
///
/// The 96 bits are a 64-bit key, the table's, and a 32-bit tag. A value is looked up by both
/// ([`Seen::first_or_insert`]); a value of a kind (a reference of a fold,
/// [`crate::reference::Folded`]) by the kind as key and the value as tag
/// ([`Seen::first_of_kind`]), which tells whether the first value of the kind was this one.
#[derive(Debug, Default)]
pub struct Seen {
    keys: (RandomState, RandomState),
    table: Table,
}

/// The keys seen, each with the first line and the tag of its first value: open addressing
/// with linear probing, in as many slots as the values expected and a quarter more (not the
/// next power of two: a million values take 20 MB, not 32), doubled when four fifths are
/// taken. A slot is `[key, line << 32 | tag]`; key 0 marks a free slot (a key that hashes to
/// 0 is kept as 1).
#[derive(Debug, Default)]
struct Table {
    slots: Vec<[u64; 2]>,
    len: usize,
}

impl Table {
    /// Room for `values` values before the table grows.
    fn for_values(values: usize) -> Table {
        Table {
            // Zeroed: the memory is the system's until a slot is written.
            slots: vec![[0; 2]; values.max(8).saturating_add(values / 4) + 1],
            len: 0,
        }
    }

    /// The slot holding `key`, or the free one where it goes.
    fn find(&self, key: u64) -> Result<usize, usize> {
        let n = self.slots.len();
        // The key's place among the slots: its high bits scaled to their number.
        let mut at = ((u128::from(key) * n as u128) >> 64) as usize;
        loop {
            match self.slots[at][0] {
                0 => return Err(at),
                k if k == key => return Ok(at),
                _ => at = if at + 1 == n { 0 } else { at + 1 },
            }
        }
    }

    fn get(&self, key: u64) -> Option<(u32, u32)> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(key).ok().map(|at| unpack(self.slots[at][1]))
    }

    /// The line and tag kept for `key`, or `None` after keeping `line` and `tag` for it.
    fn first_or_insert(&mut self, key: u64, line: u32, tag: u32) -> Option<(u32, u32)> {
        let mut found = if self.slots.is_empty() {
            Err(0)
        } else {
            self.find(key)
        };
        if found.is_err() && (self.len + 1) * 5 > self.slots.len() * 4 {
            self.grow();
            found = self.find(key);
        }
        match found {
            Ok(at) => Some(unpack(self.slots[at][1])),
            Err(at) => {
                self.slots[at] = [key, (u64::from(line) << 32) | u64::from(tag)];
                self.len += 1;
                None
            }
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let mut bigger = Table::for_values(self.len.max(8) * 2);
        for slot in old.into_iter().filter(|s| s[0] != 0) {
            if let Err(at) = bigger.find(slot[0]) {
                bigger.slots[at] = slot;
            }
        }
        bigger.len = self.len;
        *self = bigger;
    }
}

fn unpack(value: u64) -> (u32, u32) {
    ((value >> 32) as u32, value as u32)
}

impl Seen {
    pub fn new() -> Self {
        Seen::default()
    }

    /// A `Seen` with room for `values` values before its table grows.
    pub fn for_values(values: usize) -> Self {
        Seen {
            keys: Default::default(),
            table: Table::for_values(values),
        }
    }

    /// The bytes its table takes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(self.table.slots.as_slice())
    }

    fn key(&self, kind: &impl Hash) -> u64 {
        self.keys.0.hash_one(kind).max(1)
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
        let line = u32::try_from(line).unwrap_or(u32::MAX);
        let tag = self.tag(value);
        self.table
            .first_or_insert(self.key(kind), line, tag)
            .map(|(first, first_tag)| (u64::from(first), first_tag == tag))
    }

    /// The line `value` was first seen on.
    pub fn get(&self, value: &impl Hash) -> Option<u64> {
        self.get_kind(value, value)
            .and_then(|(first, same)| same.then_some(first))
    }

    /// The line a value of `kind` was first seen on, and whether that value was `value`.
    pub fn get_kind(&self, kind: &impl Hash, value: &impl Hash) -> Option<(u64, bool)> {
        self.table
            .get(self.key(kind))
            .map(|(l, t)| (u64::from(l), t == self.tag(value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table made for its values at once stays in 20 bytes a value (a power-of-two table would take up
    /// to twice that); a table grown from nothing keeps every value as well. Each value keeps
    /// its first line, and a value of a kind tells whether it was the first of its kind.
    #[test]
    fn every_value_keeps_its_first_line_in_20_bytes_a_value() {
        let values = 120_000u64;
        let mut sized = Seen::for_values(values as usize + 1);
        let mut grown = Seen::new();
        for seen in [&mut sized, &mut grown] {
            for v in 0..values {
                assert_eq!(seen.first_or_insert(&v, v + 2), None, "{v}");
            }
            for v in 0..values {
                assert_eq!(seen.first_or_insert(&v, 1), Some(v + 2), "{v}");
                assert_eq!(seen.get(&v), Some(v + 2));
            }
            assert_eq!(seen.get(&values), None);
            assert_eq!(seen.first_of_kind(&"kind", &"first", 7), None);
            assert_eq!(seen.first_of_kind(&"kind", &"other", 9), Some((7, false)));
            assert_eq!(seen.get_kind(&"kind", &"first"), Some((7, true)));
        }
        assert!(
            sized.bytes() <= 20 * values as usize + 64,
            "{} bytes for {values} values",
            sized.bytes()
        );
        assert!(grown.bytes() <= 40 * values as usize, "{}", grown.bytes());
    }
}
