//! What a request will cost in tokens, estimated high before the provider sees it.
//!
//! Every part a provider bills is counted:
//!
//! - text, wherever it sits in `messages`, `input` (Responses items included), `system`,
//!   `instructions` and `prompt`: a token per 3 bytes of UTF-8, rounded up (English runs
//!   about 4 bytes a token, code about 3, CJK about one 3-byte character), plus 4 per message
//!   or input item for its role and framing;
//! - token ids (`input: [[1, 2], ...]`): one token each;
//! - `tools`, `functions`, `tool_choice`, `response_format` and `text` (its JSON schema): their
//!   JSON, keys included, a token per 3 bytes;
//! - images at the providers' documented cost: OpenAI's 85 plus 170 per 512 px tile of the
//!   image scaled to fit 2048 px and then 768 px on its short side (85 alone at `detail:
//!   low`), Anthropic's width times height over 750 for an image scaled to fit 1568 px; the
//!   larger of the two. When the size is not in the request (a URL, a format other than PNG)
//!   the most either charges: [`MAX_IMAGE_TOKENS`];
//! - the completion: `n` times the cap the request names, else the configured default.
//!
//! What a request still uses beyond the estimate (text that tokenizes worse than 3 bytes a
//! token, audio, files) is charged when the call settles.
//!
//! ```
//! use serde_json::json;
//! use svc_gateway::token_estimate::{MAX_IMAGE_TOKENS, prompt_tokens};
//!
//! let text_only = json!({"messages": [{"role": "user", "content": "hi"}]});
//! assert_eq!(prompt_tokens(text_only.as_object().unwrap(), 1), 1 + 4);
//!
//! let with_image = json!({"messages": [{"role": "user", "content": [
//!     {"type": "text", "text": "hi"},
//!     {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]}]});
//! assert_eq!(prompt_tokens(with_image.as_object().unwrap(), 1), 1 + MAX_IMAGE_TOKENS + 4);
//! ```

use base64::Engine;
use serde_json::{Map, Value};

/// Bytes of text counted as one token.
pub const BYTES_PER_TOKEN: u64 = 3;
/// Tokens of framing per message or input item.
pub const TOKENS_PER_ITEM: u64 = 4;
/// The most an image costs at either provider when its size is unknown: Anthropic's 1568 px
/// square, 1568 * 1568 / 750, above OpenAI's 2048 x 768 (85 + 170 * 8 = 1445).
pub const MAX_IMAGE_TOKENS: u64 = 3279;
/// OpenAI's cost of an image at `detail: low`.
pub const LOW_DETAIL_IMAGE_TOKENS: u64 = 85;
/// The most `n` counts for (OpenAI's own maximum).
pub const MAX_N: u64 = 128;

/// The fields whose text is the prompt.
const TEXT_FIELDS: [&str; 5] = ["messages", "input", "system", "instructions", "prompt"];
/// The fields billed as their whole JSON.
const SCHEMA_FIELDS: [&str; 5] = [
    "tools",
    "functions",
    "tool_choice",
    "response_format",
    "text",
];

/// The prompt tokens of a request body with `items` messages or input items.
pub fn prompt_tokens(body: &Map<String, Value>, items: usize) -> u64 {
    let mut count = Count::default();
    for field in TEXT_FIELDS {
        if let Some(value) = body.get(field) {
            count.text(value);
        }
    }
    for field in SCHEMA_FIELDS {
        if let Some(value) = body.get(field) {
            count.bytes += value.to_string().len() as u64;
        }
    }
    count
        .bytes
        .div_ceil(BYTES_PER_TOKEN)
        .saturating_add(count.tokens)
        .saturating_add(TOKENS_PER_ITEM.saturating_mul(items as u64))
}

/// The completion tokens of a request body whose cap is `max_tokens` (else `default`): `n`
/// completions of it.
pub fn completion_tokens(body: &Map<String, Value>, max_tokens: Option<u64>, default: u64) -> u64 {
    let n = body
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, MAX_N);
    max_tokens.unwrap_or(default).saturating_mul(n)
}

#[derive(Default)]
struct Count {
    /// Text bytes.
    bytes: u64,
    /// Tokens counted as such (token ids, images).
    tokens: u64,
}

impl Count {
    fn text(&mut self, value: &Value) {
        match value {
            Value::String(text) => self.bytes += text.len() as u64,
            // A token id.
            Value::Number(_) => self.tokens += 1,
            Value::Array(items) => items.iter().for_each(|item| self.text(item)),
            Value::Object(object) => {
                if let Some(image) = image_tokens(object) {
                    self.tokens = self.tokens.saturating_add(image);
                    return;
                }
                for (key, value) in object {
                    // Framing the per-item allowance covers.
                    if key != "role" && key != "type" {
                        self.text(value);
                    }
                }
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
}

/// The cost of an image part (OpenAI's `image_url`, the Responses API's `input_image`,
/// Anthropic's `image`); `None` for anything else.
fn image_tokens(part: &Map<String, Value>) -> Option<u64> {
    let (url, detail) = match part.get("type").and_then(Value::as_str)? {
        "image_url" => {
            let image = part.get("image_url")?;
            let url = image.get("url").or(Some(image)).and_then(Value::as_str);
            (url, image.get("detail").and_then(Value::as_str))
        }
        "input_image" => (
            part.get("image_url").and_then(Value::as_str),
            part.get("detail").and_then(Value::as_str),
        ),
        "image" => {
            let source = part.get("source");
            let data = source.and_then(|s| s.get("data")).and_then(Value::as_str);
            return Some(cost(data.and_then(png_size_of_base64), None));
        }
        _ => return None,
    };
    let size = url
        .and_then(|url| url.strip_prefix("data:image/png;base64,"))
        .and_then(png_size_of_base64);
    Some(cost(size, detail))
}

/// The larger of the two providers' prices for an image of `size` (unknown: the most).
fn cost(size: Option<(u64, u64)>, detail: Option<&str>) -> u64 {
    let Some((width, height)) = size.filter(|&(w, h)| w > 0 && h > 0) else {
        return MAX_IMAGE_TOKENS;
    };
    let openai = if detail == Some("low") {
        LOW_DETAIL_IMAGE_TOKENS
    } else {
        openai_high_detail(width, height)
    };
    openai.max(anthropic(width, height))
}

/// OpenAI: fit in 2048 x 2048, then the short side to 768 (never enlarged), then 85 plus
/// 170 per 512 px tile.
fn openai_high_detail(width: u64, height: u64) -> u64 {
    let (mut w, mut h) = (width as f64, height as f64);
    let fit = (2048.0 / w.max(h)).min(1.0);
    (w, h) = (w * fit, h * fit);
    let short = (768.0 / w.min(h)).min(1.0);
    (w, h) = (w * short, h * short);
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as u64
}

/// Anthropic: fit in 1568 px on the long side, then width times height over 750.
fn anthropic(width: u64, height: u64) -> u64 {
    let (w, h) = (width as f64, height as f64);
    let fit = (1568.0 / w.max(h)).min(1.0);
    ((w * fit) * (h * fit) / 750.0).ceil() as u64
}

/// Width and height from the IHDR chunk of a base64 PNG: its first 24 bytes.
fn png_size_of_base64(data: &str) -> Option<(u64, u64)> {
    // 32 base64 characters are 24 bytes.
    let head = base64::engine::general_purpose::STANDARD
        .decode(data.get(..32)?)
        .ok()?;
    if !head.starts_with(b"\x89PNG\r\n\x1a\n") || &head[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(head[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(head[20..24].try_into().ok()?);
    Some((u64::from(width), u64::from(height)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn prompt(body: Value, items: usize) -> u64 {
        prompt_tokens(body.as_object().unwrap(), items)
    }

    #[test]
    fn openai_tiles_follow_the_documented_examples() {
        // OpenAI's worked examples: 1024 x 1024 is 765, 2048 x 4096 is 1105.
        assert_eq!(openai_high_detail(1024, 1024), 765);
        assert_eq!(openai_high_detail(2048, 4096), 1105);
        assert_eq!(openai_high_detail(4096, 8192), 1105);
        assert!(MAX_IMAGE_TOKENS >= openai_high_detail(768, 2048));
        assert_eq!(anthropic(1000, 1000), 1334);
        assert!(MAX_IMAGE_TOKENS >= anthropic(1568, 1568));
    }

    #[test]
    fn a_png_is_priced_by_its_size_and_detail() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&512u32.to_be_bytes());
        png.extend_from_slice(&512u32.to_be_bytes());
        png.extend_from_slice(&[0; 16]);
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        let part = |detail: &str| {
            json!({"input": [{"type": "input_image", "detail": detail,
                              "image_url": format!("data:image/png;base64,{data}")}]})
        };
        assert_eq!(prompt(part("high"), 0), (85 + 170).max(anthropic(512, 512)));
        assert_eq!(prompt(part("low"), 0), anthropic(512, 512).max(85));
        let claude = json!({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}]}]});
        assert_eq!(prompt(claude, 1), anthropic(512, 512).max(255) + 4);
    }

    #[test]
    fn tools_token_ids_system_and_n_count() {
        let tools = json!([{"type": "function", "function": {"name": "f", "parameters":
            {"type": "object", "properties": {"x": {"type": "string", "description": "y"}}}}}]);
        let bytes = tools.to_string().len() as u64;
        let body = json!({"tools": tools, "messages": []});
        assert_eq!(prompt(body, 0), bytes.div_ceil(3));

        let ids = json!({"input": [[1, 2, 3], [4, 5]]});
        assert_eq!(prompt(ids, 2), 5 + 8);

        let claude = json!({"system": [{"type": "text", "text": "abcdef"}], "messages": []});
        assert_eq!(prompt(claude, 0), 2);

        let body = json!({"n": 3});
        assert_eq!(
            completion_tokens(body.as_object().unwrap(), Some(100), 7),
            300
        );
        let body = json!({"n": 100000});
        assert_eq!(
            completion_tokens(body.as_object().unwrap(), None, 7),
            7 * MAX_N
        );
    }

    #[test]
    fn every_message_part_counts_but_roles_and_types_do_not() {
        let body = json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
             "function": {"name": "get", "arguments": "{\"q\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"}]});
        // "c1" "get" "{\"q\":1}" "c1" "done": 2 + 3 + 7 + 2 + 4 = 18 bytes.
        assert_eq!(prompt(body, 2), 6 + 8);
    }
}
