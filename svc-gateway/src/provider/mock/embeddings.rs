//! Embeddings: a deterministic unit vector per input, as floats or as base64 of
//! little-endian f32 (what the official SDKs ask for by default).

use base64::Engine;
use serde_json::{Value, json};

use super::tokens;
use crate::request::ApiRequest;

/// Dimensions when the request names none.
pub(super) const DEFAULT_DIMENSIONS: usize = 8;
/// The most dimensions the mock makes, whatever is asked.
const MAX_DIMENSIONS: usize = 4096;

pub(super) fn answer(request: &ApiRequest) -> Value {
    let dimensions = request
        .json
        .get("dimensions")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_DIMENSIONS, |d| {
            (d as usize).clamp(1, MAX_DIMENSIONS)
        });
    let base64 = request.json.get("encoding_format") == Some(&json!("base64"));
    let inputs: Vec<String> = match request.json.get("input") {
        Some(Value::Array(items)) => items.iter().map(ToString::to_string).collect(),
        Some(other) => vec![other.to_string()],
        None => Vec::new(),
    };
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let vector = vector(input, dimensions);
            let embedding = if base64 {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let prompt: u64 = inputs.iter().map(|i| tokens(i)).sum();
    json!({
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    })
}

/// A unit vector that depends only on `input` (FNV-1a seeded xorshift).
pub(super) fn vector(input: &str, dimensions: usize) -> Vec<f32> {
    let mut state = input.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    }) | 1;
    let raw: Vec<f32> = (0..dimensions)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let norm = raw
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    raw.into_iter().map(|x| x / norm).collect()
}
