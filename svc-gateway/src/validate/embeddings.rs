//! `POST /v1/embeddings`: `input` is a string, an array of strings, an array of token ids, or
//! an array of token-id arrays.

use serde_json::{Map, Value};
use svc_tower::error::FieldErrorCode;

use super::schema::{Kind, Path, one_of, optional};
use super::{Errors, Fields, MAX_EMBEDDING_INPUTS};

pub(super) fn validate(object: &Map<String, Value>, errors: &mut Errors) -> Fields {
    let message_count = input(object, errors);
    let format = Path::Root("encoding_format");
    if let Some(value) = optional(object, &format, Kind::String, errors).and_then(Value::as_str) {
        one_of(value, &["float", "base64"], &format, errors);
    }
    optional(object, &Path::Root("dimensions"), Kind::Integer(1), errors);
    optional(object, &Path::Root("user"), Kind::String, errors);
    Fields {
        message_count,
        ..Fields::default()
    }
}

/// Checks `input`; returns how many inputs it holds.
fn input(object: &Map<String, Value>, errors: &mut Errors) -> usize {
    let path = Path::Root("input");
    let invalid = |errors: &mut Errors, field: String| {
        errors.push(
            field,
            FieldErrorCode::InvalidFormat,
            "input must be a string, an array of strings, or an array of token arrays",
        );
    };
    let items = match object.get("input") {
        None | Some(Value::Null) => {
            errors.push("input", FieldErrorCode::Required, "input is required");
            return 0;
        }
        Some(Value::String(_)) => return 1,
        Some(Value::Array(items)) => items,
        Some(_) => {
            invalid(errors, path.to_string());
            return 0;
        }
    };
    if items.is_empty() {
        errors.push("input", FieldErrorCode::Required, "input must not be empty");
        return 0;
    }
    if items.len() > MAX_EMBEDDING_INPUTS {
        errors.push(
            "input",
            FieldErrorCode::TooMany,
            "input has more than 2048 items",
        );
        return 0;
    }
    // One array is all strings, all token ids, or all token arrays.
    let token = |v: &Value| v.as_u64().is_some();
    let ok = items.iter().all(Value::is_string)
        || items.iter().all(token)
        || items.iter().all(|v| {
            v.as_array()
                .is_some_and(|t| !t.is_empty() && t.iter().all(token))
        });
    if !ok {
        let bad = items
            .iter()
            .position(|v| !(v.is_string() || token(v) || v.is_array()))
            .unwrap_or(0);
        invalid(errors, path.index(bad).to_string());
        return 0;
    }
    items.len()
}
