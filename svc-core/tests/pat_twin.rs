//! The property-test twin of the `pat` fuzz target (`fuzz/`): `Pat::parse` over fresh tokens
//! and seeded edits of them (`SVC_PROPERTY_SEED` replays a failure).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_core::pat::{Pat, fuzz_parse};
use uuid::Uuid;

#[test]
fn parse_agrees_with_the_gateway_shape_check() {
    let seed = std::env::var("SVC_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9a7);
    println!("seed {seed} (SVC_PROPERTY_SEED replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut parsed = 0;
    for _ in 0..3000 {
        let mut token = Pat::generate(Uuid::new_v4()).expose().into_bytes();
        for _ in 0..rng.random_range(0..3) {
            if token.is_empty() {
                break;
            }
            let at = rng.random_range(0..token.len());
            match rng.random_range(0..3) {
                0 => token[at] = rng.random(),
                1 => token[at] = token[at].to_ascii_uppercase(),
                _ => token.truncate(at),
            }
        }
        parsed +=
            usize::from(std::str::from_utf8(&token).is_ok_and(|text| Pat::parse(text).is_ok()));
        fuzz_parse(&token);
    }
    // Untouched tokens parse: the check above was not vacuous.
    assert!(parsed > 500, "{parsed}");
}
