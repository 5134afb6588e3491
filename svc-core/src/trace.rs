//! W3C trace context: the trace id of a request and the `traceparent` of each call it causes.
//!
//! ```
//! use svc_core::trace::{TraceId, TraceParent};
//!
//! let trace = TraceId::from_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
//! let parent = TraceParent::child_of(trace);
//! let text = parent.to_string();
//! assert!(text.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
//! assert!(text.ends_with("-01"));
//! assert_eq!(TraceId::from_traceparent(text.as_bytes()), Some(trace));
//! ```

use std::fmt;

use http::{HeaderName, HeaderValue};

/// The W3C trace context header.
pub static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The W3C trace id of one request (16 bytes, shown as 32 lower-case hex digits), in the
/// request extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(u128);

impl TraceId {
    /// A fresh random trace id (never zero), drawn without a system call.
    pub fn random() -> TraceId {
        TraceId(crate::id::random_u128())
    }

    /// The trace id of a valid `traceparent` header value, or `None`.
    ///
    /// Follows W3C Trace Context level 1: lower-case hex only, the all-zero trace and parent
    /// ids and version `ff` are invalid, version `00` is exactly 55 bytes long, and later
    /// versions may append fields after a `-`.
    pub fn from_traceparent(value: &[u8]) -> Option<TraceId> {
        if value.len() < 55 || value[2] != b'-' || value[35] != b'-' || value[52] != b'-' {
            return None;
        }
        let version = hex(&value[0..2])?;
        let trace = hex(&value[3..35])?;
        let parent = hex(&value[36..52])?;
        hex(&value[53..55])?;
        let tail_ok = match version {
            0 => value.len() == 55,
            0xff => false,
            _ => value.len() == 55 || value[55] == b'-',
        };
        (tail_ok && trace != 0 && parent != 0).then_some(TraceId(trace))
    }

    /// The id as a number.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    /// The id as a header value: 32 lower-case hex digits.
    pub fn header_value(self) -> HeaderValue {
        let mut digits = [0; 32];
        put_hex(&mut digits, self.0);
        header_value(&digits)
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut digits = [0; 32];
        put_hex(&mut digits, self.0);
        f.write_str(ascii(&digits))
    }
}

/// Writes `value`'s low hex digits into all of `out`, lower-case, the most significant first.
/// Every proxied request writes two or three of these ids, and `{:x}` goes through `fmt`'s
/// machinery for each.
fn put_hex(out: &mut [u8], mut value: u128) {
    for digit in out.iter_mut().rev() {
        *digit = b"0123456789abcdef"[(value & 0xf) as usize];
        value >>= 4;
    }
}

/// `bytes` (hex digits and dashes) as text.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// `bytes` (hex digits and dashes) as a header value.
fn header_value(bytes: &[u8]) -> HeaderValue {
    HeaderValue::from_bytes(bytes).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Parses lower-case hex (at most 32 digits).
fn hex(digits: &[u8]) -> Option<u128> {
    digits.iter().try_fold(0u128, |acc, &d| {
        let nibble = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => return None,
        };
        Some(acc << 4 | u128::from(nibble))
    })
}

/// One outbound call's `traceparent`: version `00`, the request's trace id, a parent (span) id
/// and the `sampled` flag.
///
/// Without a tracer, each call gets its own parent id from [`child_of`](TraceParent::child_of),
/// so the downstream spans of two calls of one request are siblings under the same trace
/// rather than one span reported twice. With one, [`new`](TraceParent::new) carries the
/// tracer's span id and decision. As a request extension it is the parent every call of the
/// request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    trace_id: TraceId,
    parent_id: u64,
    sampled: bool,
}

impl TraceParent {
    /// A fresh parent id in `trace_id`, sampled.
    pub fn child_of(trace_id: TraceId) -> TraceParent {
        TraceParent {
            trace_id,
            parent_id: crate::id::random_u64(),
            sampled: true,
        }
    }

    /// A tracer's span: its trace, its span id and its sampling decision; `None` for the
    /// all-zero span id, which W3C trace context forbids.
    pub fn new(trace_id: TraceId, parent_id: u64, sampled: bool) -> Option<TraceParent> {
        (parent_id != 0).then_some(TraceParent {
            trace_id,
            parent_id,
            sampled,
        })
    }

    /// The trace the call belongs to.
    pub fn trace_id(self) -> TraceId {
        self.trace_id
    }

    /// The parent id the downstream service sees (never zero).
    pub fn parent_id(self) -> u64 {
        self.parent_id
    }

    /// Whether the caller recorded its span, the flag a parent-based sampler follows.
    pub fn sampled(self) -> bool {
        self.sampled
    }

    /// The header value, `00-<32 hex>-<16 hex>-01` when sampled, else `...-00`.
    pub fn header_value(self) -> HeaderValue {
        header_value(&self.encode())
    }

    /// The header value's 55 bytes.
    pub fn encode(self) -> [u8; 55] {
        let mut out = *b"00-00000000000000000000000000000000-0000000000000000-00";
        put_hex(&mut out[3..35], self.trace_id.0);
        put_hex(&mut out[36..52], u128::from(self.parent_id));
        if self.sampled {
            out[54] = b'1';
        }
        out
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(ascii(&self.encode()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_valid_w3c_and_keeps_the_trace() {
        let trace = TraceId::random();
        let parent = TraceParent::child_of(trace);
        let value = parent.header_value();
        let text = value.to_str().unwrap();
        assert_eq!(text.len(), 55);
        assert_eq!(TraceId::from_traceparent(text.as_bytes()), Some(trace));
        assert_eq!(&text[36..52], format!("{:016x}", parent.parent_id()));
        assert_eq!(parent.trace_id(), trace);
    }

    #[test]
    fn each_call_gets_its_own_parent_id() {
        let trace = TraceId::random();
        let ids: std::collections::HashSet<u64> = (0..64)
            .map(|_| TraceParent::child_of(trace).parent_id())
            .collect();
        assert_eq!(ids.len(), 64);
        assert!(!ids.contains(&0));
    }

    #[test]
    fn the_flags_carry_the_sampling_decision() {
        let trace = TraceId::random();
        let kept = TraceParent::new(trace, 0x00f067aa0ba902b7, true).unwrap();
        let dropped = TraceParent::new(trace, 0x00f067aa0ba902b7, false).unwrap();
        assert_eq!(kept.to_string(), format!("00-{trace}-00f067aa0ba902b7-01"));
        assert_eq!(
            dropped.header_value(),
            format!("00-{trace}-00f067aa0ba902b7-00").as_str()
        );
        assert!(kept.sampled() && !dropped.sampled());
        assert!(TraceParent::child_of(trace).sampled());
        assert_eq!(TraceParent::new(trace, 0, true), None);
    }

    #[test]
    fn ids_are_written_as_fmt_writes_them() {
        for value in [0, 1, 0xabc, u128::MAX, 0x4bf92f3577b34da6a3ce929d0e0e4736] {
            let trace = TraceId(value);
            assert_eq!(trace.to_string(), format!("{value:032x}"));
            assert_eq!(trace.header_value(), format!("{value:032x}").as_str());
            let parent_id = (value as u64).max(1);
            let parent = TraceParent::new(trace, parent_id, value % 2 == 0).unwrap();
            let flags = u8::from(value % 2 == 0);
            assert_eq!(
                parent.to_string(),
                format!("00-{value:032x}-{parent_id:016x}-{flags:02x}")
            );
            assert_eq!(parent.header_value(), parent.to_string().as_str());
        }
    }
}
