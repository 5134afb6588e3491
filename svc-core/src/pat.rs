//! The Personal Access Token format: `svc_pat_<token_id>_<secret>`.
//!
//! The secret is 32 random bytes in base62 (43 characters) followed by a 6-character base62
//! CRC32 of everything before it, as GitHub's tokens do. The checksum lets [`Pat::parse`] throw
//! out garbage and typos before any database or hashing work, and lets secret scanners tell a
//! real token from a random string.
//!
//! The middleware refuses what is not even PAT-shaped ([`is_shaped`]) before asking the
//! identity plane, which parses strictly ([`Pat::parse`]); whatever parses is shaped.
//!
//! ```
//! # #[cfg(feature = "generate")] {
//! use svc_core::pat::Pat;
//!
//! let token_id = uuid::Uuid::new_v4();
//! let pat = Pat::generate(token_id);
//! let bearer = pat.expose();
//! assert!(bearer.starts_with("svc_pat_"));
//!
//! let parsed = Pat::parse(&bearer).unwrap();
//! assert_eq!(parsed.token_id(), token_id);
//!
//! // One changed character fails the checksum.
//! let mut tampered = bearer.clone().into_bytes();
//! let i = tampered.len() - 10;
//! tampered[i] = if tampered[i] == b'a' { b'b' } else { b'a' };
//! assert!(Pat::parse(std::str::from_utf8(&tampered).unwrap()).is_err());
//!
//! // Debug never shows the secret.
//! assert!(!format!("{parsed:?}").contains(parsed.secret()));
//! # }
//! ```

use std::fmt;

use uuid::Uuid;

/// Every PAT starts with this.
pub const PREFIX: &str = "svc_pat_";

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
#[cfg(feature = "generate")]
const RANDOM_BYTES: usize = 32;
/// 62^43 > 2^256: 43 base62 digits hold any 32 bytes.
const RANDOM_LEN: usize = 43;
/// 62^6 > 2^32: 6 base62 digits hold any CRC32.
const CHECKSUM_LEN: usize = 6;
const UUID_LEN: usize = 36;
const SECRET_LEN: usize = RANDOM_LEN + CHECKSUM_LEN;
/// The length of every well-formed PAT.
pub const PAT_LEN: usize = PREFIX.len() + UUID_LEN + 1 + SECRET_LEN;

/// Why a string is not a PAT. The messages never repeat the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PatError {
    /// Not `svc_pat_` followed by the right number of characters.
    #[error("not a svc PAT")]
    Shape,
    /// The token id part is not a UUID.
    #[error("the token id is not a UUID")]
    TokenId,
    /// The secret has a character outside base62.
    #[error("the secret is not base62")]
    Secret,
    /// The checksum does not match.
    #[error("the checksum does not match")]
    Checksum,
}

/// A parsed or freshly generated PAT.
#[derive(Clone, PartialEq, Eq)]
pub struct Pat {
    token_id: Uuid,
    secret: String,
}

impl Pat {
    /// A new PAT for `token_id` with a fresh random secret.
    #[cfg(feature = "generate")]
    pub fn generate(token_id: Uuid) -> Pat {
        use rand::RngCore;

        let mut bytes = [0u8; RANDOM_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        let mut secret = String::with_capacity(SECRET_LEN);
        secret.push_str(&base62(&bytes, RANDOM_LEN));
        let head = format!("{PREFIX}{}_{secret}", token_id.hyphenated());
        secret.push_str(&checksum(&head));
        Pat { token_id, secret }
    }

    /// Parses a bearer value; checks shape, id and checksum without any I/O.
    pub fn parse(bearer: &str) -> Result<Pat, PatError> {
        if bearer.len() != PAT_LEN || !bearer.starts_with(PREFIX) || !bearer.is_ascii() {
            return Err(PatError::Shape);
        }
        let rest = &bearer[PREFIX.len()..];
        let (id, secret) = (&rest[..UUID_LEN], &rest[UUID_LEN + 1..]);
        if rest.as_bytes()[UUID_LEN] != b'_' {
            return Err(PatError::Shape);
        }
        let token_id = Uuid::try_parse(id).map_err(|_| PatError::TokenId)?;
        if !secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(PatError::Secret);
        }
        let (head, sum) = bearer.split_at(bearer.len() - CHECKSUM_LEN);
        if checksum(head) != sum {
            return Err(PatError::Checksum);
        }
        Ok(Pat {
            token_id,
            secret: secret.to_owned(),
        })
    }

    /// The token id, the row's primary key.
    pub fn token_id(&self) -> Uuid {
        self.token_id
    }

    /// The secret part (what is hashed). Never log it.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The full bearer value, `svc_pat_<token_id>_<secret>`. Never log it.
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}_{}", self.token_id.hyphenated(), self.secret)
    }
}

/// The longest secret [`is_shaped`] lets through; real secrets are far shorter, this only
/// bounds what is forwarded to a validator.
const MAX_SHAPED_SECRET_LEN: usize = 256;

/// True when `token` has the PAT shape `svc_pat_<uuid>_<secret>` (hyphenated UUID, ASCII
/// alphanumeric secret of at most 256 characters), without the checksum: what the middleware
/// checks before any I/O, so a validator of another secret format still gets its tokens.
pub fn is_shaped(token: &str) -> bool {
    let Some(rest) = token.strip_prefix(PREFIX) else {
        return false;
    };
    let (Some(id), Some(tail)) = (rest.get(..UUID_LEN), rest.get(UUID_LEN..)) else {
        return false;
    };
    let Some(secret) = tail.strip_prefix('_') else {
        return false;
    };
    Uuid::try_parse(id).is_ok()
        && (1..=MAX_SHAPED_SECRET_LEN).contains(&secret.len())
        && secret.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// What the `pat` fuzz target and its property twin check: whatever parses is also a token the
/// gateway's shape check lets through (else valid tokens would be refused before they reach
/// this server), and its parts are the input's. Not an API.
#[cfg(feature = "fuzzing")]
pub fn fuzz_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(pat) = Pat::parse(text) {
        assert!(is_shaped(text), "{pat:?}");
        assert!(text.ends_with(pat.secret()));
        let id = &text[PREFIX.len()..PREFIX.len() + UUID_LEN];
        assert!(id.eq_ignore_ascii_case(&pat.token_id().hyphenated().to_string()));
    }
}

impl fmt::Debug for Pat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pat")
            .field("token_id", &self.token_id)
            .field("secret", &"<omitted>")
            .finish()
    }
}

fn checksum(head: &str) -> String {
    base62(
        &crc32fast::hash(head.as_bytes()).to_be_bytes(),
        CHECKSUM_LEN,
    )
}

/// Big-endian base62 of `bytes`, left-padded with '0' to `width` digits.
fn base62(bytes: &[u8], width: usize) -> String {
    let mut number = bytes.to_vec();
    let mut digits = vec![b'0'; width];
    for slot in digits.iter_mut().rev() {
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 62) as u8;
            remainder = value % 62;
        }
        *slot = ALPHABET[remainder as usize];
    }
    // Only ASCII digits were written.
    String::from_utf8(digits).unwrap_or_default()
}

#[cfg(all(test, feature = "generate"))]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_parse_back() {
        for _ in 0..200 {
            let id = Uuid::new_v4();
            let pat = Pat::generate(id);
            let bearer = pat.expose();
            assert_eq!(bearer.len(), PAT_LEN);
            let parsed = Pat::parse(&bearer).unwrap();
            assert_eq!(parsed, pat);
        }
    }

    #[test]
    fn secrets_differ() {
        let id = Uuid::new_v4();
        assert_ne!(Pat::generate(id).secret(), Pat::generate(id).secret());
    }

    #[test]
    fn base62_is_fixed_width_big_endian() {
        assert_eq!(base62(&[0, 0, 0, 0], 6), "000000");
        assert_eq!(base62(&[0, 0, 0, 61], 6), "00000z");
        assert_eq!(base62(&[0, 0, 0, 62], 6), "000010");
        assert_eq!(base62(&[0xff; 4], 6), "4gfFC3");
        assert_eq!(base62(&[0xff; 32], RANDOM_LEN).len(), RANDOM_LEN);
    }

    #[test]
    fn rejects_malformed_values() {
        let good = Pat::generate(Uuid::new_v4()).expose();
        assert_eq!(Pat::parse(""), Err(PatError::Shape));
        assert_eq!(Pat::parse("svc_pat_"), Err(PatError::Shape));
        assert_eq!(Pat::parse(&good[1..]), Err(PatError::Shape));
        assert_eq!(Pat::parse(&format!("{good}x")), Err(PatError::Shape));
        assert_eq!(
            Pat::parse(&good.replacen("svc_pat_", "xyz_pat_", 1)),
            Err(PatError::Shape)
        );
        let no_underscore = format!("{}-{}", &good[..44], &good[45..]);
        assert_eq!(Pat::parse(&no_underscore), Err(PatError::Shape));
        let bad_id = format!("{}g{}", &good[..8], &good[9..]);
        assert_eq!(Pat::parse(&bad_id), Err(PatError::TokenId));
        let bad_char = format!("{}!{}", &good[..50], &good[51..]);
        assert_eq!(Pat::parse(&bad_char), Err(PatError::Secret));
        let non_ascii = format!("{}é{}", &good[..50], &good[52..]);
        assert_eq!(Pat::parse(&non_ascii), Err(PatError::Shape));
    }

    #[test]
    fn any_single_change_fails_the_checksum() {
        let good = Pat::generate(Uuid::new_v4()).expose();
        for i in (PREFIX.len() + UUID_LEN + 1)..good.len() {
            let mut bytes = good.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            assert_eq!(
                Pat::parse(&changed),
                Err(PatError::Checksum),
                "position {i}"
            );
        }
        // The token id is covered too.
        let id_changed = format!("{}{}", &good[..9].replace('0', "1"), &good[9..]);
        if id_changed != good {
            assert!(Pat::parse(&id_changed).is_err());
        }
    }

    #[test]
    fn non_ascii_tokens_are_not_shaped() {
        assert!(!is_shaped("svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5é_x"));
        assert!(!is_shaped("svc_pat_é"));
        assert!(is_shaped(&Pat::generate(Uuid::new_v4()).expose()));
        assert!(is_shaped(
            "svc_pat_0190f5a4-8e2c-7b7e-a1a4-3c1d2e3f4a5b_AbC123xyz"
        ));
    }

    #[test]
    fn debug_omits_the_secret() {
        let pat = Pat::generate(Uuid::new_v4());
        let shown = format!("{pat:?}");
        assert!(shown.contains(&pat.token_id().to_string()));
        assert!(!shown.contains(pat.secret()));
    }
}
