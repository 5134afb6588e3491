//! Fresh ids on the request path (UUIDs, trace and span ids) from a user-space generator
//! seeded once per thread, so that minting one is not a `getrandom` system call.
//!
//! ```
//! use svc_core::id;
//!
//! let (first, second) = (id::uuid_v7(), id::uuid_v7());
//! assert_eq!(first.get_version_num(), 7);
//! assert!(first < second, "time-ordered within the process");
//! assert_eq!(id::uuid_v4().get_version_num(), 4);
//! assert_ne!(id::random_u64(), 0);
//! ```
//!
//! The generator is `rand`'s thread-local one: ChaCha12 seeded from the operating system when
//! a thread first uses it and reseeded every 64 KiB of output, unpredictable to a caller. That
//! matters for ids a client sees and could otherwise guess; none of these ids is a secret, and
//! secrets (`Pat::generate`) draw from the same generator.

use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;
use uuid::{Builder, Uuid};

/// Bits of the v7 counter, as `uuid`'s own `ContextV7` keeps: 12 in `rand_a`, 30 atop `rand_b`.
const COUNTER_BITS: u32 = 42;
/// A reseeded counter leaves its top bit clear, so it can count 2^41 ids in one millisecond
/// before it wraps.
const RESEED_MASK: u64 = (1 << (COUNTER_BITS - 1)) - 1;
const COUNTER_MAX: u64 = (1 << COUNTER_BITS) - 1;

/// The last v7 timestamp and counter, process-wide, so ids stay ordered across threads.
static V7: Mutex<(u64, u64)> = Mutex::new((0, 0));

/// A random (version 4) UUID.
pub fn uuid_v4() -> Uuid {
    Builder::from_random_bytes(rand::rng().random()).into_uuid()
}

/// A time-ordered (version 7) UUID: the Unix time in milliseconds, then a counter reseeded at
/// random each millisecond and incremented within it, then random bits. Ids minted in this
/// process sort in the order they were minted, as `Uuid::now_v7` promises.
pub fn uuid_v7() -> Uuid {
    let mut rng = rand::rng();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let (millis, counter) = {
        let mut last = V7.lock().unwrap_or_else(PoisonError::into_inner);
        let (last_millis, last_counter) = *last;
        *last = if now > last_millis {
            (now, rng.random::<u64>() & RESEED_MASK)
        } else if last_counter < COUNTER_MAX {
            // The same millisecond, or the clock stepped back: count on from the last id.
            (last_millis, last_counter + 1)
        } else {
            (last_millis + 1, rng.random::<u64>() & RESEED_MASK)
        };
        *last
    };
    let low: u32 = rng.random();
    // | unix_ts_ms (48) | ver (4) | counter high (12) | var (2) | counter low (30) | random (32) |
    let bits = u128::from(millis & 0xFFFF_FFFF_FFFF) << 80
        | 0x7 << 76
        | u128::from(counter >> 30) << 64
        | 0b10 << 62
        | u128::from(counter & 0x3FFF_FFFF) << 32
        | u128::from(low);
    Uuid::from_u128(bits)
}

/// A random, non-zero 128-bit number (a W3C trace id).
pub fn random_u128() -> u128 {
    rand::rng().random::<u128>().max(1)
}

/// A random, non-zero 64-bit number (a W3C span or parent id).
pub fn random_u64() -> u64 {
    rand::rng().random::<u64>().max(1)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use uuid::{Variant, Version};

    use super::*;

    #[test]
    fn v7_ids_are_valid_ordered_and_carry_the_time() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ids: Vec<Uuid> = (0..10_000).map(|_| uuid_v7()).collect();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in [ids[0], ids[9_999]] {
            assert_eq!(id.get_version(), Some(Version::SortRand));
            assert_eq!(id.get_variant(), Variant::RFC4122);
            let (secs, nanos) = id.get_timestamp().unwrap().to_unix();
            let at = std::time::Duration::new(secs, nanos);
            // The counter may run a millisecond ahead of the clock, never behind it.
            assert!(at.as_millis() >= before.as_millis());
            assert!(at.as_millis() <= after.as_millis() + 1);
        }
    }

    #[test]
    fn v7_ids_stay_ordered_across_threads() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..1_000).map(|_| uuid_v7()).collect::<Vec<_>>()))
            .collect();
        let mut all = HashSet::new();
        for thread in threads {
            let ids = thread.join().unwrap();
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            all.extend(ids);
        }
        assert_eq!(all.len(), 4_000);
    }

    #[test]
    fn v4_ids_are_valid_and_distinct() {
        let ids: HashSet<Uuid> = (0..1_000).map(|_| uuid_v4()).collect();
        assert_eq!(ids.len(), 1_000);
        assert!(
            ids.iter()
                .all(|id| id.get_version() == Some(Version::Random))
        );
        assert!(ids.iter().all(|id| id.get_variant() == Variant::RFC4122));
    }
}
