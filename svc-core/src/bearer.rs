//! The PAT of a request's `Authorization: Bearer ...` header.

use http::{HeaderMap, HeaderValue, header};

use crate::pat;

/// Why a request carries no usable PAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    /// No `Authorization` header (401 `MISSING_TOKEN`).
    #[error("no Authorization header")]
    Missing,
    /// A repeated header, another scheme, or a value that is not PAT-shaped (401
    /// `INVALID_TOKEN`).
    #[error("the Authorization header holds no svc PAT")]
    Invalid,
}

/// The PAT-shaped bearer token of `headers`; the scheme is matched in any case.
pub fn token(headers: &HeaderMap) -> Result<&str, BearerError> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(BearerError::Missing);
    };
    if values.next().is_some() {
        return Err(BearerError::Invalid);
    }
    token_of(value)
}

/// The PAT-shaped bearer token of one `Authorization` value.
pub fn token_of(value: &HeaderValue) -> Result<&str, BearerError> {
    let value = value.to_str().map_err(|_| BearerError::Invalid)?;
    let (scheme, token) = value.split_once(' ').ok_or(BearerError::Invalid)?;
    let token = token.trim();
    if scheme.eq_ignore_ascii_case("bearer") && pat::is_shaped(token) {
        Ok(token)
    } else {
        Err(BearerError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const GOOD: &str = "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_AbC123xyz";

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn accepts_a_bearer_pat_in_any_scheme_case() {
        for value in [
            format!("Bearer {GOOD}"),
            format!("bearer {GOOD}"),
            format!("BEARER  {GOOD} "),
        ] {
            assert_eq!(token(&headers(&[&value])), Ok(GOOD), "{value}");
        }
    }

    #[test]
    fn no_header_is_missing() {
        assert_eq!(token(&HeaderMap::new()), Err(BearerError::Missing));
    }

    #[test]
    fn anything_else_is_invalid() {
        let cases = [
            String::new(),
            "Bearer".to_owned(),
            format!("Basic {GOOD}"),
            "Bearer sk-live-abcdef".to_owned(),
            "Bearer svc_pat_not-a-uuid_secret".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b-secret".to_owned(),
            "Bearer svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_sec ret".to_owned(),
            format!("Bearer {GOOD}{}", "x".repeat(300)),
        ];
        for value in cases {
            assert_eq!(
                token(&headers(&[&value])),
                Err(BearerError::Invalid),
                "{value}"
            );
        }
        let twice = format!("Bearer {GOOD}");
        assert_eq!(
            token(&headers(&[&twice, &twice])),
            Err(BearerError::Invalid)
        );
    }
}
