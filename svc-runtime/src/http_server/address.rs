//! Connections per client address: past the cap a new connection from the same address is
//! closed at accept, so one client cannot take every slot of a listener.
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use svc_runtime::http_server::PerAddress;
//!
//! let cap = PerAddress::new(2);
//! let client = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
//! let first = cap.admit(client).unwrap();
//! let _second = cap.admit(client).unwrap();
//! assert!(cap.admit(client).is_none());
//! drop(first);
//! assert!(cap.admit(client).is_some());
//! ```
//!
//! Hand-written: tower's limits count requests, not connections, and hyper-util has no
//! per-peer accounting.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Live connections per client address, at most `max` each. Cheap to clone; clones share
/// the counts.
#[derive(Clone)]
pub struct PerAddress {
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl fmt::Debug for PerAddress {
    /// The cap only: the addresses are the clients'.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerAddress")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl PerAddress {
    /// At most `max` connections from one address.
    pub fn new(max: usize) -> PerAddress {
        PerAddress {
            max,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection from `address`, held until dropped; `None` when the
    /// address already has `max`.
    pub fn admit(&self, address: IpAddr) -> Option<AddressSlot> {
        let address = canonical(address);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(address).or_default();
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            address,
            open: self.open.clone(),
        })
    }
}

/// An IPv4 client reached over an IPv6 socket counts as its IPv4 address.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// One connection's place in its address's count, given back on drop.
pub struct AddressSlot {
    address: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl fmt::Debug for AddressSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressSlot").finish_non_exhaustive()
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            // The map holds only addresses with a connection open.
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn addresses_are_counted_apart_and_forgotten_when_closed() {
        let cap = PerAddress::new(1);
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
        let slot = cap.admit(a).unwrap();
        assert!(cap.admit(a).is_none());
        assert!(cap.admit(b).is_some());
        drop(slot);
        assert!(cap.open.lock().unwrap().is_empty());
    }

    #[test]
    fn a_mapped_ipv4_client_is_its_ipv4_address() {
        let cap = PerAddress::new(1);
        let v4 = Ipv4Addr::new(192, 0, 2, 1);
        let _slot = cap.admit(IpAddr::V4(v4)).unwrap();
        let mapped: Ipv6Addr = v4.to_ipv6_mapped();
        assert!(cap.admit(IpAddr::V6(mapped)).is_none());
    }
}
