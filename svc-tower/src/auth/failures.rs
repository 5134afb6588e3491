//! Failed authentications per client address: a client that keeps presenting tokens the auth
//! service rejects is answered 429 without a round trip.
//!
//! A PAT's checksum is public (CRC32), so anyone can forge well-formed tokens with random ids,
//! and each would cost the auth service a database read. This limiter caps how many of those
//! one address may cause. It holds nothing about tokens (no negative cache: a token created a
//! moment ago on another replica works at once) and counts only rejections, so a client whose
//! tokens are valid is never limited, however busy. A refusal the client's own traffic earned
//! ([`TokenError::Throttled`](super::TokenError::Throttled): its tenant's share of secret
//! checks is spent, as in a flood of wrong secrets on its own tokens) counts as one too.
//!
//! GCRA per address: `per_minute` rejections per minute, all of them at once if need be. An
//! address with rejections on record reserves its next one before the call (refunded when the
//! token turns out valid or the auth service fails), so a burst of concurrent forgeries from it
//! cannot all slip past the check. IPv6 addresses count per /64, what one subscriber usually
//! holds. The table is bounded: past `max_addresses`, addresses with nothing on record are
//! dropped, and a new address is not tracked until there is room.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::{Extensions, HeaderMap, HeaderName};
use tokio::time::Instant;

/// Default most addresses tracked at once.
pub(crate) const DEFAULT_MAX_ADDRESSES: usize = 100_000;

const MINUTE: Duration = Duration::from_secs(60);

/// Reads the client's socket address from a request's extensions.
pub type AddrFn = fn(&Extensions) -> Option<SocketAddr>;

/// Limits rejected tokens per client address; see the [module docs](crate::auth). Cheap to clone:
/// clones share one table.
#[derive(Clone)]
pub struct AuthFailureLimit {
    per_minute: u32,
    max_addresses: usize,
    trusted_header: Option<HeaderName>,
    socket_addr: AddrFn,
    table: Arc<Mutex<HashMap<IpAddr, Instant>>>,
}

impl std::fmt::Debug for AuthFailureLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthFailureLimit")
            .field("per_minute", &self.per_minute)
            .field("max_addresses", &self.max_addresses)
            .field("trusted_header", &self.trusted_header)
            .finish_non_exhaustive()
    }
}

/// What the limiter decided before a validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Validate. `reserved`: one rejection is already counted, to refund unless rejected.
    Go { key: Option<IpAddr>, reserved: bool },
    /// Over the limit: answer 429 with this `Retry-After`, in whole seconds.
    Refuse { retry_after: u64 },
}

impl AuthFailureLimit {
    /// `per_minute` rejections per address per minute (at least one). The address is the
    /// socket's, read from a [`SocketAddr`] request extension (see
    /// [`socket_addr`](Self::socket_addr) for axum's `ConnectInfo`).
    pub fn per_minute(per_minute: u32) -> AuthFailureLimit {
        AuthFailureLimit {
            per_minute: per_minute.max(1),
            max_addresses: DEFAULT_MAX_ADDRESSES,
            trusted_header: None,
            socket_addr: |extensions| extensions.get::<SocketAddr>().copied(),
            table: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Tracks at most `max` addresses at once.
    pub fn max_addresses(mut self, max: usize) -> AuthFailureLimit {
        self.max_addresses = max.max(1);
        self
    }

    /// Takes the client address from `header` when it holds one (the last address of a
    /// comma-separated list: the one the trusted proxy appended), else from the socket. Only
    /// for a gateway behind a proxy that sets the header: anyone else can write it.
    pub fn trusted_header(mut self, header: HeaderName) -> AuthFailureLimit {
        self.trusted_header = Some(header);
        self
    }

    /// Reads the socket address with `read` instead of from a `SocketAddr` extension; with axum:
    /// `|ext| ext.get::<ConnectInfo<SocketAddr>>().map(|info| info.0)`.
    pub fn socket_addr(mut self, read: AddrFn) -> AuthFailureLimit {
        self.socket_addr = read;
        self
    }

    /// The key of a request's client: its address, an IPv6 one cut to its /64.
    pub(crate) fn key(&self, headers: &HeaderMap, extensions: &Extensions) -> Option<IpAddr> {
        let forwarded = self.trusted_header.as_ref().and_then(|name| {
            let value = headers.get_all(name).iter().next_back()?.to_str().ok()?;
            value.rsplit(',').next()?.trim().parse::<IpAddr>().ok()
        });
        let ip = forwarded.or_else(|| (self.socket_addr)(extensions).map(|addr| addr.ip()))?;
        Some(match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let bits = u128::from(v6) & (u128::MAX << 64);
                    IpAddr::V6(bits.into())
                }
            },
            v4 => v4,
        })
    }

    fn interval(&self) -> Duration {
        MINUTE / self.per_minute
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before validating: refuse an address over its limit, reserve a rejection for one with
    /// rejections on record.
    pub(crate) fn admit(&self, key: Option<IpAddr>) -> Admit {
        let Some(ip) = key else {
            return Admit::Go {
                key: None,
                reserved: false,
            };
        };
        let now = Instant::now();
        let mut table = self.lock();
        let Some(tat) = table.get_mut(&ip).filter(|tat| **tat > now) else {
            return Admit::Go {
                key,
                reserved: false,
            };
        };
        // The next rejection would land at `tat + interval`; GCRA allows it while that is
        // within a minute of now.
        let next = *tat + self.interval();
        if next > now + MINUTE {
            let wait = next - (now + MINUTE);
            return Admit::Refuse {
                retry_after: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
            };
        }
        *tat = next;
        Admit::Go {
            key,
            reserved: true,
        }
    }

    /// After validating: count a rejection, or refund a reservation that was not one.
    pub(crate) fn settle(&self, admit: Admit, rejected: bool) {
        let Admit::Go {
            key: Some(ip),
            reserved,
        } = admit
        else {
            return;
        };
        let now = Instant::now();
        let interval = self.interval();
        let mut table = self.lock();
        match (reserved, rejected) {
            (true, true) => {}
            (true, false) => {
                if let Some(tat) = table.get_mut(&ip) {
                    *tat = (*tat).checked_sub(interval).unwrap_or(now).max(now);
                }
            }
            (false, false) => {}
            (false, true) => {
                if let Some(tat) = table.get_mut(&ip) {
                    *tat = (*tat).max(now) + interval;
                } else if self.has_room(&mut table, now) {
                    table.insert(ip, now + interval);
                }
            }
        }
    }

    /// Room for one more address, after dropping those with nothing left on record.
    fn has_room(&self, table: &mut HashMap<IpAddr, Instant>, now: Instant) -> bool {
        if table.len() >= self.max_addresses {
            table.retain(|_, tat| *tat > now);
        }
        table.len() < self.max_addresses
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests;
