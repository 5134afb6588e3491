use std::fmt;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// SHA-256 of a request's method, route and canonical body.
///
/// The body counts by meaning, not by bytes: when it is JSON it is parsed and re-serialised
/// canonically (object keys sorted at every depth, no whitespace, numbers and strings as
/// serde_json prints them), so key order and formatting do not change the fingerprint. A body
/// that is not JSON counts by its raw bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of a request.
    pub fn compute(method: &http::Method, route: &str, body: &[u8]) -> Fingerprint {
        match serde_json::from_slice::<Value>(body) {
            Ok(json) => Fingerprint::of_json(method, route, &json),
            Err(_) => {
                let mut hasher = head(method, route);
                hasher.update(b"R");
                hasher.update(body);
                Fingerprint(hasher.finalize().into())
            }
        }
    }

    /// The fingerprint of a request whose body was already parsed as `json`: equal to
    /// [`compute`](Self::compute) of its bytes. A caller that parsed the body puts this in the
    /// request extensions, and [`Idempotency`](super::Idempotency) uses it without parsing the
    /// body again.
    pub fn of_json(method: &http::Method, route: &str, json: &Value) -> Fingerprint {
        let mut hasher = head(method, route);
        hasher.update(b"J");
        let mut canonical = Vec::with_capacity(256);
        write_canonical(json, &mut canonical);
        hasher.update(&canonical);
        Fingerprint(hasher.finalize().into())
    }

    /// As [`of_json`](Self::of_json), for a body that is a JSON object.
    pub fn of_object(
        method: &http::Method,
        route: &str,
        object: &Map<String, Value>,
    ) -> Fingerprint {
        let mut hasher = head(method, route);
        hasher.update(b"J");
        let mut canonical = Vec::with_capacity(256);
        write_object(object, &mut canonical);
        hasher.update(&canonical);
        Fingerprint(hasher.finalize().into())
    }

    /// A fingerprint from its 32 bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Fingerprint {
        Fingerprint(bytes)
    }

    /// The 32 bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint(")?;
        for byte in &self.0[..8] {
            write!(f, "{byte:02x}")?;
        }
        write!(f, "..)")
    }
}

/// The method and route, length-prefixed: no method/route split can collide.
fn head(method: &http::Method, route: &str) -> Sha256 {
    let mut hasher = Sha256::new();
    for field in [method.as_str().as_bytes(), route.as_bytes()] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field);
    }
    hasher
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_canonical(value, out);
    }
    out.push(b'}');
}

/// Writes `value` with sorted object keys and no whitespace, whatever map order serde_json
/// was built with.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_object(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // Serialising a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(route: &str, body: &str) -> Fingerprint {
        Fingerprint::compute(&http::Method::POST, route, body.as_bytes())
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = post(
            "/v1/chat",
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
        );
        let b = post(
            "/v1/chat",
            "{ \"messages\": [ {\"content\": \"hi\", \"role\": \"user\"} ],\n \"model\": \"m\" }",
        );
        assert_eq!(a, b);
    }

    #[test]
    fn values_routes_and_methods_matter() {
        let base = post("/v1/chat", r#"{"model":"m"}"#);
        assert_ne!(base, post("/v1/chat", r#"{"model":"n"}"#));
        assert_ne!(base, post("/v2/chat", r#"{"model":"m"}"#));
        assert_ne!(
            base,
            Fingerprint::compute(&http::Method::PUT, "/v1/chat", br#"{"model":"m"}"#)
        );
        // Array order is meaning: messages are a conversation.
        assert_ne!(post("/", "[1,2]"), post("/", "[2,1]"));
    }

    #[test]
    fn canonical_form_is_sorted_and_compact() {
        let value: Value =
            serde_json::from_str(r#"{"b": {"d": 1, "c": [true, null]}, "a": "x\"y"}"#).unwrap();
        let mut out = Vec::new();
        write_canonical(&value, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":"x\"y","b":{"c":[true,null],"d":1}}"#
        );
    }

    #[test]
    fn non_json_bodies_count_by_their_bytes() {
        assert_eq!(post("/", "not json"), post("/", "not json"));
        assert_ne!(post("/", "not json"), post("/", "not  json"));
        assert_eq!(post("/", "1"), post("/", " 1 "));
    }

    #[test]
    fn a_parsed_body_has_the_fingerprint_of_its_bytes() {
        let body = r#"{"b": [1, {"z": null, "a": "x"}], "a": 2.5}"#;
        let json: Value = serde_json::from_str(body).unwrap();
        let method = http::Method::POST;
        assert_eq!(Fingerprint::of_json(&method, "/r", &json), post("/r", body));
        let Value::Object(object) = json else {
            panic!("an object")
        };
        assert_eq!(
            Fingerprint::of_object(&method, "/r", &object),
            post("/r", body)
        );
    }
}
