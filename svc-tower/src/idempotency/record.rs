//! The byte layout of idempotency records in Redis.
//!
//! Pending: `P`, the token id (16 bytes), the fingerprint (32 bytes). Committed: `C`, the
//! fingerprint, the status (u16), the header count (u16), each header as a u16-length-prefixed
//! name and value, then the body to the end. Binary and length-prefixed so a body is stored
//! as is, without an encoding pass.

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::fingerprint::Fingerprint;
use super::store::{ClaimToken, StoredResponse};

const PENDING: u8 = b'P';
const COMMITTED: u8 = b'C';

/// A decoded record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Pending {
        token_id: [u8; 16],
        fingerprint: Fingerprint,
    },
    Committed {
        fingerprint: Fingerprint,
        response: StoredResponse,
    },
}

pub(crate) fn encode_pending(token: &ClaimToken) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 16 + 32);
    out.push(PENDING);
    out.extend_from_slice(token.id().as_bytes());
    out.extend_from_slice(token.fingerprint().as_bytes());
    out
}

pub(crate) fn encode_committed(fingerprint: &Fingerprint, response: &StoredResponse) -> Vec<u8> {
    let mut out = BytesMut::with_capacity(1 + 32 + 4 + 64 + response.body.len());
    out.put_u8(COMMITTED);
    out.put_slice(fingerprint.as_bytes());
    out.put_u16(response.status.as_u16());
    let headers: Vec<_> = response
        .headers
        .iter()
        .filter(|(name, value)| name.as_str().len() <= 0xFFFF && value.len() <= 0xFFFF)
        .take(0xFFFF)
        .collect();
    out.put_u16(headers.len() as u16);
    for (name, value) in headers {
        out.put_u16(name.as_str().len() as u16);
        out.put_slice(name.as_str().as_bytes());
        out.put_u16(value.len() as u16);
        out.put_slice(value.as_bytes());
    }
    out.put_slice(&response.body);
    out.to_vec()
}

/// Decodes a record; `None` when the bytes are not one (a foreign or corrupted value).
pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
    let mut reader = Reader(bytes);
    match reader.u8()? {
        PENDING => {
            let token_id = reader.array::<16>()?;
            let fingerprint = Fingerprint::from_bytes(reader.array::<32>()?);
            reader.0.is_empty().then_some(Record::Pending {
                token_id,
                fingerprint,
            })
        }
        COMMITTED => {
            let fingerprint = Fingerprint::from_bytes(reader.array::<32>()?);
            let status = StatusCode::from_u16(reader.u16()?).ok()?;
            let count = reader.u16()?;
            let mut headers = HeaderMap::with_capacity(usize::from(count));
            for _ in 0..count {
                let name = reader.prefixed()?;
                let value = reader.prefixed()?;
                headers.append(
                    HeaderName::from_bytes(name).ok()?,
                    HeaderValue::from_bytes(value).ok()?,
                );
            }
            let body = Bytes::copy_from_slice(reader.0);
            Some(Record::Committed {
                fingerprint,
                response: StoredResponse {
                    status,
                    headers,
                    body,
                },
            })
        }
        _ => None,
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.array::<2>().map(u16::from_be_bytes)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn prefixed(&mut self) -> Option<&'a [u8]> {
        let len = self.u16()?;
        self.take(usize::from(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_records_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let response = StoredResponse {
            status: StatusCode::CREATED,
            headers,
            body: Bytes::from_static(b"{\"id\":1}\x00\xff"),
        };
        let fingerprint = Fingerprint::from_bytes([7; 32]);
        let bytes = encode_committed(&fingerprint, &response);
        assert_eq!(
            decode(&bytes),
            Some(Record::Committed {
                fingerprint,
                response
            })
        );
    }

    #[test]
    fn pending_records_round_trip() {
        let token = ClaimToken::new(Fingerprint::from_bytes([3; 32]));
        assert_eq!(
            decode(&encode_pending(&token)),
            Some(Record::Pending {
                token_id: *token.id().as_bytes(),
                fingerprint: token.fingerprint(),
            })
        );
    }

    #[test]
    fn garbage_is_not_a_record() {
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"X123"), None);
        assert_eq!(decode(b"P\x01\x02"), None);
        let token = ClaimToken::new(Fingerprint::from_bytes([3; 32]));
        let mut long = encode_pending(&token);
        long.push(0);
        assert_eq!(decode(&long), None);
        let mut truncated = encode_committed(
            &Fingerprint::from_bytes([1; 32]),
            &StoredResponse {
                status: StatusCode::OK,
                headers: HeaderMap::new(),
                body: Bytes::new(),
            },
        );
        truncated.truncate(34);
        assert_eq!(decode(&truncated), None);
    }
}
