//! Deterministic instances of JSON schemas: what the mock puts in a tool call's arguments and
//! in a structured answer, so a client that validates them (`parse()`, `output_type`,
//! `with_structured_output`) accepts them.
//!
//! The instance is the simplest value the schema admits, built from its keywords: `const`,
//! then `enum` (the first value), `$ref` (to `#/$defs/…`, `#/definitions/…` or any JSON
//! pointer in the same document), `allOf` (merged), `anyOf` / `oneOf` (the first branch),
//! then the type (the first non-null one of a list; guessed from the keywords when absent).
//! Objects get their required properties (and optional ones up to `minProperties`), arrays
//! `minItems` items (at least one unless `maxItems` forbids it; distinct ones under
//! `uniqueItems`), numbers the lowest value in range (one when unbounded), strings a word or,
//! under a `format`, a sensible value of it, padded to `minLength` and cut at `maxLength`.
//! A `pattern` is not followed.

use serde_json::{Map, Value, json};

/// Deeper than this, `$ref` cycles are cut: a nullable branch is preferred and an object gets
/// no more properties than it must have.
const MAX_DEPTH: usize = 12;
/// Deeper than this, nothing more is made: a schema whose every instance is infinite.
const HARD_DEPTH: usize = 4 * MAX_DEPTH;

/// The word every unformatted string starts from.
const WORD: &str = "mock";

/// An instance of `schema`.
pub(crate) fn instance(schema: &Value) -> Value {
    Generator { root: schema }.value(schema, 0, 0)
}

/// An instance of `schema` that is a JSON object, as tool arguments must be: `{}` when the
/// schema is missing or describes something else.
pub(crate) fn object(schema: Option<&Value>) -> Value {
    match schema.map(instance) {
        Some(value @ Value::Object(_)) => value,
        _ => json!({}),
    }
}

struct Generator<'a> {
    /// The document `$ref`s point into.
    root: &'a Value,
}

impl<'a> Generator<'a> {
    /// The instance of `schema`; `variant` tells items of one array apart.
    fn value(&self, schema: &Value, depth: usize, variant: usize) -> Value {
        let Some(map) = schema.as_object().filter(|_| depth <= HARD_DEPTH) else {
            // `true` admits anything; `false` nothing, so any value is as good; and a schema
            // that only has infinite instances has none to make.
            return Value::Null;
        };
        if let Some(value) = map.get("const") {
            return value.clone();
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array)
            && !values.is_empty()
        {
            return values[variant % values.len()].clone();
        }
        if let Some(target) = map
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| self.resolve(r))
        {
            return self.value(target, depth + 1, variant);
        }
        if let Some(parts) = map.get("allOf").and_then(Value::as_array) {
            let merged = self.merge(map, parts, depth);
            return self.value(&Value::Object(merged), depth + 1, variant);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branch) = map
                .get(key)
                .and_then(Value::as_array)
                .and_then(|branches| self.branch(branches, depth))
            {
                return self.value(branch, depth + 1, variant);
            }
        }
        match type_of(map) {
            "object" => self.object(map, depth, variant),
            "array" => self.array(map, depth),
            "string" => Value::String(string(map, variant)),
            "integer" => integer(map, variant),
            "number" => number(map, variant),
            "boolean" => Value::Bool(variant.is_multiple_of(2)),
            _ => Value::Null,
        }
    }

    /// The target of a local `$ref` (`#`, `#/$defs/Name`, any JSON pointer).
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        let root: &'a Value = self.root;
        if pointer.is_empty() {
            return Some(root);
        }
        root.pointer(pointer)
    }

    /// The branch of an `anyOf` or `oneOf` to follow: the first, or past [`MAX_DEPTH`] a
    /// `null` one when there is one (it ends a recursion).
    fn branch<'s>(&self, branches: &'s [Value], depth: usize) -> Option<&'s Value> {
        if depth > MAX_DEPTH
            && let Some(null) = branches
                .iter()
                .find(|b| b.get("type") == Some(&json!("null")))
        {
            return Some(null);
        }
        branches.first()
    }

    /// `allOf`'s parts and the schema around them as one schema: properties and required
    /// names unioned, any other keyword from the first that has it.
    fn merge(
        &self,
        outer: &Map<String, Value>,
        parts: &[Value],
        depth: usize,
    ) -> Map<String, Value> {
        let mut merged = outer.clone();
        merged.remove("allOf");
        for part in parts {
            let part = self.dereference(part, depth);
            let Some(part) = part.as_object() else {
                continue;
            };
            for (key, value) in part {
                match (key.as_str(), merged.get_mut(key)) {
                    ("properties", Some(Value::Object(properties))) => {
                        if let Some(more) = value.as_object() {
                            for (name, schema) in more {
                                properties
                                    .entry(name.clone())
                                    .or_insert_with(|| schema.clone());
                            }
                        }
                    }
                    ("required", Some(Value::Array(required))) => {
                        for name in value.as_array().into_iter().flatten() {
                            if !required.contains(name) {
                                required.push(name.clone());
                            }
                        }
                    }
                    (_, Some(_)) => {}
                    (_, None) => {
                        merged.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        merged
    }

    /// `schema`, or what its `$ref` points to (followed a few times at most).
    fn dereference<'s>(&self, mut schema: &'s Value, depth: usize) -> &'s Value
    where
        'a: 's,
    {
        for _ in depth..=MAX_DEPTH {
            match schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| self.resolve(r))
            {
                Some(target) => schema = target,
                None => break,
            }
        }
        schema
    }

    fn object(&self, map: &Map<String, Value>, depth: usize, variant: usize) -> Value {
        let empty = Map::new();
        let properties = map
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let extra = map.get("additionalProperties");
        let mut names: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let wanted = count(map, "minProperties").unwrap_or(0);
        for name in properties.keys() {
            if names.len() >= wanted {
                break;
            }
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let mut out = Map::new();
        for name in names {
            let schema = properties.get(name).or(extra.filter(|e| e.is_object()));
            let value = schema.map_or(Value::Null, |s| self.value(s, depth + 1, variant));
            out.insert(name.to_owned(), value);
        }
        // Still short of `minProperties`: invent names, when other names are allowed.
        if extra != Some(&Value::Bool(false)) {
            let schema = extra.filter(|e| e.is_object());
            let mut next = 0;
            while out.len() < wanted {
                let name = format!("{WORD}{next}");
                next += 1;
                if !out.contains_key(&name) {
                    let value = schema.map_or(Value::Null, |s| self.value(s, depth + 1, variant));
                    out.insert(name, value);
                }
            }
        }
        Value::Object(out)
    }

    fn array(&self, map: &Map<String, Value>, depth: usize) -> Value {
        // A tuple: `prefixItems` (2020-12) or `items` as a list (earlier drafts).
        let tuple = map
            .get("prefixItems")
            .or_else(|| map.get("items").filter(|i| i.is_array()))
            .and_then(Value::as_array);
        let rest = match map.get("prefixItems") {
            Some(_) => map.get("items"),
            None => map
                .get("items")
                .filter(|i| i.is_object())
                .or_else(|| map.get("additionalItems")),
        }
        .or_else(|| map.get("contains"));
        let at_most = count(map, "maxItems").unwrap_or(usize::MAX);
        let at_least = count(map, "minItems").unwrap_or(0);
        let wanted = if depth > MAX_DEPTH {
            at_least
        } else {
            at_least.max(1).min(at_most)
        };
        let wanted = wanted.max(tuple.map_or(0, Vec::len).min(at_most));
        let items = (0..wanted)
            .map(|i| {
                let schema = tuple.and_then(|t| t.get(i)).or(rest);
                schema.map_or(Value::Null, |s| self.value(s, depth + 1, i))
            })
            .collect();
        Value::Array(items)
    }
}

/// The type to make: `type` (the first non-null of a list), else what the keywords suggest.
fn type_of(map: &Map<String, Value>) -> &str {
    match map.get("type") {
        Some(Value::String(kind)) => return kind,
        Some(Value::Array(kinds)) => {
            let mut names = kinds.iter().filter_map(Value::as_str);
            if let Some(kind) = names
                .clone()
                .find(|k| *k != "null")
                .or_else(|| names.next())
            {
                return kind;
            }
        }
        _ => {}
    }
    let has = |keys: &[&str]| keys.iter().any(|k| map.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
    ]) {
        "object"
    } else if has(&["items", "prefixItems", "minItems", "maxItems", "contains"]) {
        "array"
    } else if has(&["minLength", "maxLength", "pattern", "format"]) {
        "string"
    } else if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        "number"
    } else {
        "null"
    }
}

/// A non-negative count keyword (`minItems`, `maxLength`, …).
fn count(map: &Map<String, Value>, key: &str) -> Option<usize> {
    map.get(key)
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn string(map: &Map<String, Value>, variant: usize) -> String {
    let formatted = match map.get("format").and_then(Value::as_str) {
        Some("date-time") => Some(format!("2024-01-{:02}T00:00:00Z", 1 + variant % 28)),
        Some("date") => Some(format!("2024-01-{:02}", 1 + variant % 28)),
        Some("time") => Some(format!("00:00:{:02}Z", variant % 60)),
        Some("duration") => Some(format!("P{}D", 1 + variant)),
        Some("email" | "idn-email") => Some(format!("{WORD}{}@example.com", suffix(variant))),
        Some("hostname" | "idn-hostname") => Some(format!("{WORD}{}.example.com", suffix(variant))),
        Some("uri" | "url" | "iri" | "uri-reference" | "iri-reference") => {
            Some(format!("https://example.com/{WORD}{}", suffix(variant)))
        }
        Some("uri-template") => Some("https://example.com/{id}".to_owned()),
        Some("ipv4") => Some(format!("192.0.2.{}", 1 + variant % 254)),
        Some("ipv6") => Some(format!("2001:db8::{:x}", 1 + variant)),
        Some("uuid") => Some(format!("00000000-0000-4000-8000-{:012x}", variant)),
        Some("json-pointer") => Some(format!("/{WORD}{}", suffix(variant))),
        Some("regex") => Some(".*".to_owned()),
        _ => None,
    };
    if let Some(value) = formatted {
        return value;
    }
    let mut value = format!("{WORD}{}", suffix(variant));
    let at_least = count(map, "minLength").unwrap_or(0);
    let pad = at_least.saturating_sub(value.chars().count());
    value.extend(std::iter::repeat_n('x', pad));
    if let Some(at_most) = count(map, "maxLength") {
        // Distinct items of a short string differ in their last character.
        value = value.chars().take(at_most).collect();
        if variant > 0 && at_most > 0 && value.chars().count() == at_most {
            value.pop();
            value.push(char::from(b'a' + (variant % 26) as u8));
        }
    }
    value
}

/// What tells the `variant`th of several strings from the first.
fn suffix(variant: usize) -> String {
    if variant == 0 {
        String::new()
    } else {
        variant.to_string()
    }
}

/// A bound and whether it is exclusive: `exclusive` as a number (draft 6 on), or `inclusive`
/// with `exclusive: true` (draft 4), or `inclusive` alone.
fn limit(map: &Map<String, Value>, exclusive: &str, inclusive: &str) -> Option<(f64, bool)> {
    let inclusive = map.get(inclusive).and_then(Value::as_f64);
    match map.get(exclusive) {
        Some(Value::Bool(true)) => inclusive.map(|b| (b, true)),
        Some(Value::Number(n)) => n.as_f64().map(|b| (b, true)),
        _ => inclusive.map(|b| (b, false)),
    }
}

fn integer(map: &Map<String, Value>, variant: usize) -> Value {
    let bound = |key: &str| map.get(key).and_then(Value::as_f64);
    let low = limit(map, "exclusiveMinimum", "minimum").map(|(b, strict)| {
        if strict { b.floor() + 1.0 } else { b.ceil() }
    });
    let high = limit(map, "exclusiveMaximum", "maximum").map(|(b, strict)| {
        if strict { b.ceil() - 1.0 } else { b.floor() }
    });
    let step = bound("multipleOf")
        .filter(|m| *m >= 1.0 && m.fract() == 0.0)
        .unwrap_or(1.0);
    let start = low.unwrap_or_else(|| high.map_or(1.0, |h| h.min(1.0)));
    let mut value = (start / step).ceil() * step + step * variant as f64;
    if let Some(high) = high
        && value > high
    {
        value = (high / step).floor() * step;
    }
    json!(value as i64)
}

fn number(map: &Map<String, Value>, variant: usize) -> Value {
    let bound = |key: &str| map.get(key).and_then(Value::as_f64);
    if map.contains_key("multipleOf") {
        // Multiples are easiest hit by an integer multiple of the step.
        let step = bound("multipleOf").unwrap_or(1.0);
        let low = bound("minimum")
            .or(bound("exclusiveMinimum"))
            .map_or(step, |b| ((b / step).floor() + 1.0) * step);
        return json!(low + step * variant as f64);
    }
    let low = limit(map, "exclusiveMinimum", "minimum");
    let high = limit(map, "exclusiveMaximum", "maximum");
    let value = match (low, high) {
        (Some((l, false)), _) => l + variant as f64,
        (Some((l, true)), None) => l + 1.0 + variant as f64,
        (Some((l, true)), Some((h, _))) => l + (h - l) / 2.0,
        (None, Some((h, strict))) => {
            let h = if strict { h - 1.0 } else { h };
            h.min(1.0) - variant as f64
        }
        (None, None) => 1.0 + variant as f64,
    };
    let value = match high {
        Some((h, false)) if value > h => h,
        _ => value,
    };
    // Whole numbers print as integers, which every validator takes for numbers.
    if value.fract() == 0.0 && value.abs() < 1e15 {
        json!(value as i64)
    } else {
        json!(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_required_properties_only() {
        let schema = json!({"type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"]});
        assert_eq!(instance(&schema), json!({"city": "mock"}));
        let loose = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        assert_eq!(instance(&loose), json!({}));
    }

    #[test]
    fn makes_every_scalar_type() {
        let schema = json!({"type": "object", "required": ["s", "i", "n", "b", "z", "e", "c"],
        "properties": {
            "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
            "b": {"type": "boolean"}, "z": {"type": "null"},
            "e": {"enum": ["celsius", "fahrenheit"]}, "c": {"const": 7},
        }});
        assert_eq!(
            instance(&schema),
            json!({"s": "mock", "i": 1, "n": 1, "b": true, "z": null, "e": "celsius", "c": 7})
        );
    }

    #[test]
    fn respects_bounds() {
        assert_eq!(
            instance(&json!({"type": "integer", "minimum": 5})),
            json!(5)
        );
        assert_eq!(
            instance(&json!({"type": "integer", "maximum": -3})),
            json!(-3)
        );
        assert_eq!(
            instance(&json!({"type": "integer", "exclusiveMinimum": 5})),
            json!(6)
        );
        assert_eq!(
            instance(&json!({"type": "integer", "minimum": 5, "exclusiveMinimum": true})),
            json!(6)
        );
        assert_eq!(
            instance(&json!({"type": "integer", "minimum": 3, "multipleOf": 5})),
            json!(5)
        );
        assert_eq!(
            instance(&json!({"type": "number", "minimum": 0.5})),
            json!(0.5)
        );
        assert_eq!(
            instance(&json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})),
            json!(0.5)
        );
        assert_eq!(
            instance(&json!({"type": "number", "maximum": 0.25})),
            json!(0.25)
        );
        assert_eq!(
            instance(&json!({"type": "number", "multipleOf": 0.5, "minimum": 1})),
            json!(1.5)
        );
        assert_eq!(
            instance(&json!({"type": "string", "minLength": 8})),
            json!("mockxxxx")
        );
        assert_eq!(
            instance(&json!({"type": "string", "maxLength": 2})),
            json!("mo")
        );
    }

    #[test]
    fn formats_get_sensible_strings() {
        for (format, expected) in [
            ("date-time", "2024-01-01T00:00:00Z"),
            ("date", "2024-01-01"),
            ("email", "mock@example.com"),
            ("uri", "https://example.com/mock"),
            ("uuid", "00000000-0000-4000-8000-000000000000"),
            ("ipv4", "192.0.2.1"),
        ] {
            assert_eq!(
                instance(&json!({"type": "string", "format": format})),
                json!(expected),
                "{format}"
            );
        }
        assert!(
            chrono::DateTime::parse_from_rfc3339(
                instance(&json!({"type": "string", "format": "date-time"}))
                    .as_str()
                    .unwrap()
            )
            .is_ok()
        );
    }

    #[test]
    fn arrays_have_their_minimum_and_distinct_items() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(instance(&schema), json!(["mock"]));
        let schema = json!({"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": true});
        assert_eq!(instance(&schema), json!([1, 2, 3]));
        let schema =
            json!({"type": "array", "items": {"type": "string", "maxLength": 1}, "minItems": 2});
        assert_eq!(instance(&schema), json!(["m", "b"]));
        let schema = json!({"type": "array", "maxItems": 0});
        assert_eq!(instance(&schema), json!([]));
        let tuple =
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]});
        assert_eq!(instance(&tuple), json!(["mock", false]));
    }

    #[test]
    fn follows_refs_and_combinators() {
        // What pydantic makes of a model with a nested model, an optional and a literal.
        let schema = json!({
            "$defs": {
                "Address": {"type": "object", "title": "Address",
                    "properties": {"city": {"type": "string"}, "zip": {"type": "string", "minLength": 5}},
                    "required": ["city", "zip"], "additionalProperties": false},
            },
            "type": "object",
            "properties": {
                "address": {"$ref": "#/$defs/Address"},
                "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "kind": {"oneOf": [{"const": "person"}, {"const": "company"}]},
                "tags": {"type": "array", "items": {"$ref": "#/definitions/Tag"}},
                "both": {"allOf": [
                    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "boolean"}}, "required": ["b"]},
                ]},
            },
            "definitions": {"Tag": {"type": "string", "format": "email"}},
            "required": ["address", "nickname", "kind", "tags", "both"],
        });
        assert_eq!(
            instance(&schema),
            json!({
                "address": {"city": "mock", "zip": "mockx"},
                "nickname": "mock",
                "kind": "person",
                "tags": ["mock@example.com"],
                "both": {"a": 1, "b": true},
            })
        );
    }

    #[test]
    fn nullable_types_take_the_other_type() {
        assert_eq!(instance(&json!({"type": ["null", "integer"]})), json!(1));
        assert_eq!(
            instance(&json!({"type": "string", "nullable": true})),
            json!("mock")
        );
    }

    #[test]
    fn recursion_ends() {
        let schema = json!({
            "$defs": {"Node": {"type": "object", "required": ["children", "parent"],
                "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    "parent": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                }}},
            "$ref": "#/$defs/Node",
        });
        let node = instance(&schema);
        assert!(node["children"].is_array());
    }

    #[test]
    fn min_properties_adds_names() {
        let schema = json!({"type": "object", "minProperties": 2,
            "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}});
        assert_eq!(instance(&schema), json!({"a": 1, "mock0": true}));
    }

    #[test]
    fn tool_arguments_are_objects() {
        assert_eq!(object(None), json!({}));
        assert_eq!(object(Some(&json!({}))), json!({}));
        assert_eq!(object(Some(&json!({"type": "string"}))), json!({}));
        assert_eq!(
            object(Some(
                &json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
            )),
            json!({"q": "mock"})
        );
    }
}
