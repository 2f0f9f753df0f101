//! A compact set of 32-bit hashes ([`Hashes`]): what [`super::Earlier`] keeps of every row of
//! the other batches.

/// A set of 32-bit hashes: sorted, with where each value of the top 16 bits starts, so that a
/// look-up reads two places of memory, not twenty (4 bytes a value and 256 KiB).
pub(super) struct Hashes {
    values: Vec<u32>,
    /// `starts[p]..starts[p + 1]`: the values whose top 16 bits are `p`.
    starts: Vec<u32>,
}

impl Hashes {
    pub(super) fn new(mut values: Vec<u32>) -> Self {
        values.sort_unstable();
        values.dedup();
        if values.is_empty() {
            return Hashes {
                values,
                starts: Vec::new(),
            };
        }
        let mut starts = Vec::with_capacity((1 << 16) + 1);
        let mut at = 0usize;
        for p in 0..=(1u32 << 16) {
            while at < values.len() && (values[at] >> 16) < p {
                at += 1;
            }
            starts.push(at as u32);
        }
        Hashes { values, starts }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    pub(super) fn contains(&self, h: u32) -> bool {
        let p = (h >> 16) as usize;
        match (self.starts.get(p), self.starts.get(p + 1)) {
            (Some(&a), Some(&b)) => self.values[a as usize..b as usize]
                .binary_search(&h)
                .is_ok(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_hold_exactly_the_values_given_across_every_bucket() {
        let values: Vec<u32> = (0..5000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .chain([0, u32::MAX, 0x0001_0000, 0xffff_0000])
            .collect();
        let set = Hashes::new(values.clone());
        for v in &values {
            assert!(set.contains(*v), "{v:#x}");
        }
        for v in [1u32, 0x0000_ffff, 0xfffe_ffff, 12345] {
            assert_eq!(set.contains(v), values.contains(&v), "{v:#x}");
        }
        assert!(!Hashes::new(Vec::new()).contains(0));
    }
}
