//! The org of each token id this process has read, so that a cold call can be charged to its
//! org before its row is read again.
//!
//! A token never changes org, so what a row said once stays true; the map only has to be
//! bounded. An id not in it (never read here, forgotten, or forged) is charged to
//! [`Class::Unread`], which all such ids share.

use std::sync::Mutex;

use uuid::Uuid;

use super::memory::Bounded;
use super::pacer::Class;

/// Token id to org, for at most `capacity` ids, the oldest learned forgotten first.
pub(crate) struct Owners {
    inner: Mutex<Bounded<Uuid>>,
}

impl Owners {
    pub(crate) fn new(capacity: usize) -> Owners {
        Owners {
            inner: Mutex::new(Bounded::new(capacity)),
        }
    }

    pub(crate) fn class(&self, token_id: Uuid) -> Class {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.get_mut(&token_id)
            .map_or(Class::Unread, |org| Class::Org(*org))
    }

    /// Remembers that `token_id` belongs to `org_id`; true when it was not known.
    pub(crate) fn learn(&self, token_id: Uuid, org_id: Uuid) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let new = map.get_mut(&token_id).is_none();
        if new {
            map.insert(token_id, org_id);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_unread_until_learned_and_forgotten_oldest_first() {
        let owners = Owners::new(2);
        let (ids, org) = ([1, 2, 3].map(Uuid::from_u128), Uuid::from_u128(9));
        assert_eq!(owners.class(ids[0]), Class::Unread);
        for id in ids {
            assert!(owners.learn(id, org));
        }
        assert!(!owners.learn(ids[2], org), "known already");
        assert_eq!(owners.class(ids[0]), Class::Unread);
        assert_eq!(owners.class(ids[2]), Class::Org(org));
    }
}
