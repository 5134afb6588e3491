//! The property-test twin of each fuzz target in `fuzz/`: the same checks
//! (`svc_gateway::fuzzing`), run in CI over seeded inputs, mutated from a small corpus of
//! realistic ones. `SVC_PROPERTY_SEED` replays a failure; `cargo fuzz` explores further.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use svc_gateway::fuzzing;

const CASES: usize = 1500;

const CORPUS: &[&[u8]] = &[
    br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#,
    br#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"stream":true,"max_tokens":5}"#,
    br#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}]}"#,
    br#"{"model":"e","input":["a","b"],"encoding_format":"base64"}"#,
    br#"{"model":"r","input":[{"role":"user","content":"x"}],"stream":true}"#,
    br#"{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\ndata: [DONE]\n\n",
    b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":3}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
    br#"{"id":"m","type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}"#,
    b"Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_S3cret",
];

fn rng() -> StdRng {
    let seed = std::env::var("SVC_PROPERTY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xf022);
    println!("seed {seed} (SVC_PROPERTY_SEED replays it)");
    StdRng::seed_from_u64(seed)
}

/// A corpus entry with a few random edits, or plain random bytes.
fn input(rng: &mut StdRng) -> Vec<u8> {
    if rng.random_ratio(1, 8) {
        let len = rng.random_range(0..64);
        return (0..len).map(|_| rng.random()).collect();
    }
    let mut data = CORPUS[rng.random_range(0..CORPUS.len())].to_vec();
    // A leading byte: some targets read it as a route or a chunk size.
    data.insert(0, rng.random());
    for _ in 0..rng.random_range(0..4) {
        if data.is_empty() {
            break;
        }
        let at = rng.random_range(0..data.len());
        match rng.random_range(0..4) {
            0 => data[at] = rng.random(),
            1 => data.truncate(at),
            2 => {
                let end = rng.random_range(at..=data.len());
                let copy = data[at..end].to_vec();
                data.splice(at..at, copy);
            }
            _ => {
                data.remove(at);
            }
        }
    }
    data
}

fn twin(target: fn(&[u8])) {
    let mut rng = rng();
    for entry in CORPUS {
        target(entry);
        // Without the leading byte too: corpus entries are also whole inputs.
        target(&[&[0u8][..], entry].concat());
    }
    for _ in 0..CASES {
        target(&input(&mut rng));
    }
}

#[test]
fn validate_body() {
    twin(fuzzing::validate_body);
}

#[test]
fn fingerprint() {
    twin(fuzzing::fingerprint);
}

#[test]
fn envelope() {
    twin(fuzzing::envelope);
}

#[test]
fn bearer() {
    twin(fuzzing::bearer);
}

#[test]
fn sse() {
    twin(fuzzing::sse);
}

#[test]
fn anthropic() {
    twin(fuzzing::anthropic);
}

#[test]
fn a_broken_property_is_caught() {
    // The twins only mean something if a target's assertion reaches the test.
    let caught = std::panic::catch_unwind(|| {
        twin(|data| assert!(!data.starts_with(b"{\"model\"")));
    });
    assert!(caught.is_err());
}
