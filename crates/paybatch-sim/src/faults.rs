//! Chance and limits: the one seeded random source of a simulator run, the per-key rate limit
//! and the 429 bursts.
//!
//! Every random decision of a run (latency jitter, injected faults, processing times, order
//! outcomes) is drawn from the same seeded generator, so a seed reproduces a run as long as the
//! requests arrive in the same order. Identifiers and payout tokens come from a second generator,
//! seeded with the seed and the generation of the state (see [`id_seed`]): reproducible on a new
//! state, and different in every process that opens a shared state file.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Faults;

/// Crockford's base-32 alphabet (the one ULIDs use): no I, L, O or U.
const CROCKFORD: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The seed of the identifier source of a run: the run's seed mixed with the generation of its
/// state (how many times the state was opened), so that each process opening a shared state
/// file draws its own identifiers while a run on a new state stays reproducible.
pub(crate) fn id_seed(seed: u64, generation: u64) -> u64 {
    // SplitMix64's finaliser: distinct generations give unrelated seeds.
    let mut z = seed ^ generation.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A number in `[0, 1)` fixed by the seed, a name (an order or item id) and a salt that tells
/// the decisions about one name apart: the same arguments always give the same number, without
/// drawing from a run's random source.
pub(crate) fn fixed_draw(seed: u64, name: &str, salt: u64) -> f64 {
    // FNV-1a over the name, then SplitMix64's finaliser with the seed and the salt mixed in.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = h ^ seed.rotate_left(17) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A seeded random source.
pub(crate) struct Chance {
    rng: Mutex<StdRng>,
}

impl Chance {
    pub fn new(seed: u64) -> Self {
        Chance {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut StdRng) -> T) -> T {
        let mut guard = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut guard)
    }

    /// True with probability `p` (never draws when `p <= 0`).
    pub fn roll(&self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.with(|r| r.r#gen::<f64>() < p)
    }

    /// A duration drawn uniformly in `[min, max]`.
    pub fn between(&self, min: Duration, max: Duration) -> Duration {
        if max <= min {
            return min;
        }
        let (lo, hi) = (min.as_micros() as u64, max.as_micros() as u64);
        Duration::from_micros(self.with(|r| r.gen_range(lo..=hi)))
    }

    /// Fixed latency plus uniform jitter, for one request.
    pub fn latency(&self, faults: &Faults) -> Duration {
        if faults.latency_jitter.is_zero() {
            return faults.latency;
        }
        faults.latency + self.between(Duration::ZERO, faults.latency_jitter)
    }

    /// `len` characters of Crockford base 32 (upper case).
    pub fn token(&self, len: usize) -> String {
        self.with(|r| {
            (0..len)
                .map(|_| CROCKFORD[r.gen_range(0..CROCKFORD.len())] as char)
                .collect()
        })
    }

    /// 80 random bits for a ULID.
    pub fn ulid_random(&self) -> u128 {
        self.with(|r| r.r#gen::<u128>() & ((1u128 << 80) - 1))
    }

    /// Picks 500 or 503 for an injected server error.
    pub fn server_error_status(&self) -> u16 {
        if self.with(|r| r.r#gen::<bool>()) {
            500
        } else {
            503
        }
    }
}

/// The order-creation rate limit: at most `per_minute` admitted requests per API key in any
/// sliding 60-second window. Requests answered with 429 are not counted (they were not admitted);
/// every admitted request counts, whatever its answer.
pub(crate) struct RateLimiter {
    per_minute: u32,
    windows: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> Self {
        RateLimiter {
            per_minute,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Admits (and counts) one request of `key`, or refuses it.
    pub fn admit(&self, key: &str, now: Instant) -> bool {
        if self.per_minute == 0 {
            return true;
        }
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let window = windows.entry(key.to_string()).or_default();
        while let Some(&first) = window.front() {
            if now.duration_since(first) >= Duration::from_secs(60) {
                window.pop_front();
            } else {
                break;
            }
        }
        if window.len() >= self.per_minute as usize {
            return false;
        }
        window.push_back(now);
        true
    }
}

/// The state of a 429 burst: how many more order creations get a 429.
pub(crate) struct Burst {
    remaining: Mutex<u32>,
}

impl Burst {
    pub fn new() -> Self {
        Burst {
            remaining: Mutex::new(0),
        }
    }

    /// Whether this order creation is answered 429: inside a running burst, or because it starts
    /// a new one (probability `rate`, length `len`, at least 1).
    pub fn hit(&self, chance: &Chance, rate: f64, len: u32) -> bool {
        let mut remaining = self.remaining.lock().unwrap_or_else(|p| p.into_inner());
        if *remaining > 0 {
            *remaining -= 1;
            return true;
        }
        if chance.roll(rate) {
            *remaining = len.max(1) - 1;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws() {
        let (a, b) = (Chance::new(7), Chance::new(7));
        assert_eq!(a.token(12), b.token(12));
        assert_eq!(a.ulid_random(), b.ulid_random());
        assert_ne!(Chance::new(8).token(12), Chance::new(7).token(12));
    }

    #[test]
    fn id_seeds_differ_per_generation() {
        assert_eq!(id_seed(7, 1), id_seed(7, 1));
        assert_ne!(id_seed(7, 1), id_seed(7, 2));
        assert_ne!(id_seed(7, 1), id_seed(8, 1));
    }

    #[test]
    fn rate_limiter_slides() {
        let limiter = RateLimiter::new(2);
        let t0 = Instant::now();
        assert!(limiter.admit("k", t0));
        assert!(limiter.admit("k", t0));
        assert!(!limiter.admit("k", t0 + Duration::from_secs(59)));
        assert!(limiter.admit("other", t0));
        assert!(limiter.admit("k", t0 + Duration::from_secs(60)));
    }

    #[test]
    fn bursts_have_their_length() {
        let chance = Chance::new(1);
        let burst = Burst::new();
        assert!(burst.hit(&chance, 1.0, 3));
        assert!(burst.hit(&chance, 0.0, 3));
        assert!(burst.hit(&chance, 0.0, 3));
        assert!(!burst.hit(&chance, 0.0, 3));
    }
}
