//! A queue that serves whoever it charges in fair turns: start-time fair queueing with every
//! item costing one unit.
//!
//! Items are charged to a key (an org). Each gets a start tag, the later of the queue's clock
//! (the tag last served) and the end of its key's previous item, and the smallest tag is served
//! first. A key that has queued a thousand items has tagged them a thousand turns ahead; a key
//! arriving now is tagged with the clock, so its item is served next, whatever the backlog of
//! the others. Among keys that all keep items waiting, turns alternate.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// Items charged to keys, served smallest start tag first (ties: first come).
#[derive(Debug)]
pub(crate) struct FairQueue<K, T> {
    /// Keys with items waiting, or with an item served at the current clock (whose finish
    /// tag is still ahead of it and must not be forgotten).
    flows: HashMap<K, Flow<T>>,
    /// The start tag of the item served last; it never goes back.
    clock: u64,
    /// Arrivals so far: the tie-break between equal tags.
    arrivals: u64,
    /// Items waiting, all keys together.
    len: usize,
}

#[derive(Debug)]
struct Flow<T> {
    /// (start tag, arrival, item), tags increasing.
    items: VecDeque<(u64, u64, T)>,
    /// The tag after the key's last item's.
    finish: u64,
}

impl<K: Eq + Hash + Copy, T> Default for FairQueue<K, T> {
    fn default() -> Self {
        FairQueue::new()
    }
}

impl<K: Eq + Hash + Copy, T> FairQueue<K, T> {
    pub(crate) fn new() -> FairQueue<K, T> {
        FairQueue {
            flows: HashMap::new(),
            clock: 0,
            arrivals: 0,
            len: 0,
        }
    }

    /// Queues `item`, charged to `key`.
    pub(crate) fn push(&mut self, key: K, item: T) {
        let clock = self.clock;
        let flow = self.flows.entry(key).or_insert_with(|| Flow {
            items: VecDeque::new(),
            finish: clock,
        });
        let start = flow.finish.max(clock);
        flow.finish = start + 1;
        flow.items.push_back((start, self.arrivals, item));
        self.arrivals += 1;
        self.len += 1;
    }

    /// The item to serve now, and its key.
    pub(crate) fn pop(&mut self) -> Option<(K, T)> {
        let key = self
            .flows
            .iter()
            .filter_map(|(key, flow)| flow.items.front().map(|(tag, at, _)| ((*tag, *at), *key)))
            .min_by_key(|(order, _)| *order)
            .map(|(_, key)| key)?;
        let (tag, _, item) = self.flows.get_mut(&key)?.items.pop_front()?;
        self.len -= 1;
        self.clock = tag;
        // A key with nothing waiting and its finish tag reached owes nothing: a new arrival
        // starts at the clock either way.
        let clock = self.clock;
        self.flows
            .retain(|_, flow| !flow.items.is_empty() || flow.finish > clock);
        Some((key, item))
    }

    /// Takes back the newest item charged to `key`, which then owes nothing for it.
    pub(crate) fn pop_newest(&mut self, key: K) -> Option<T> {
        let flow = self.flows.get_mut(&key)?;
        let (tag, _, item) = flow.items.pop_back()?;
        flow.finish = tag;
        self.len -= 1;
        self.forget_if_empty(key);
        Some(item)
    }

    /// Takes out the first item charged to `key` that `matches`, which then owes nothing for
    /// it. (Items behind it keep their tags: a small cost to the key, never to the others.)
    pub(crate) fn remove(&mut self, key: K, matches: impl Fn(&T) -> bool) -> Option<T> {
        let flow = self.flows.get_mut(&key)?;
        let at = flow.items.iter().position(|(_, _, item)| matches(item))?;
        let (_, _, item) = flow.items.remove(at)?;
        self.len -= 1;
        self.forget_if_empty(key);
        Some(item)
    }

    /// Takes out the first item that `matches`, whatever its key.
    pub(crate) fn remove_any(&mut self, matches: impl Fn(&T) -> bool) -> Option<T> {
        let key = self
            .flows
            .iter()
            .find(|(_, flow)| flow.items.iter().any(|(_, _, item)| matches(item)))
            .map(|(key, _)| *key)?;
        self.remove(key, matches)
    }

    /// A key whose items were all taken back owes nothing: its next arrival starts at the
    /// clock.
    fn forget_if_empty(&mut self, key: K) {
        if self
            .flows
            .get(&key)
            .is_some_and(|flow| flow.items.is_empty())
        {
            self.flows.remove(&key);
        }
    }

    /// Items waiting, charged to `key`.
    pub(crate) fn len_of(&self, key: K) -> usize {
        self.flows.get(&key).map_or(0, |flow| flow.items.len())
    }

    /// Keys with items waiting.
    pub(crate) fn keys(&self) -> usize {
        self.flows
            .values()
            .filter(|flow| !flow.items.is_empty())
            .count()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(queue: &mut FairQueue<char, u32>) -> String {
        std::iter::from_fn(|| queue.pop())
            .map(|(key, _)| key)
            .collect()
    }

    #[test]
    fn a_key_arriving_behind_a_backlog_is_served_next() {
        let mut queue = FairQueue::new();
        // The backlog's first item is served before the rest arrive.
        queue.push('a', 0);
        assert_eq!(queue.pop(), Some(('a', 0)));
        for n in 1..5 {
            queue.push('a', n);
        }
        queue.push('b', 0);
        assert_eq!(queue.pop(), Some(('b', 0)));
        assert_eq!(drain(&mut queue), "aaaa");
        assert!(queue.is_empty());
    }

    #[test]
    fn keys_with_backlogs_take_turns() {
        let mut queue = FairQueue::new();
        for n in 0..4 {
            queue.push('a', n);
        }
        for n in 0..2 {
            queue.push('b', n);
            queue.push('c', n);
        }
        assert_eq!(drain(&mut queue), "abcabcaa");
        assert!(queue.is_empty());
    }

    #[test]
    fn within_a_key_items_are_first_come_first_served() {
        let mut queue = FairQueue::new();
        for n in 0..3 {
            queue.push('a', n);
        }
        let served: Vec<u32> = std::iter::from_fn(|| queue.pop()).map(|(_, n)| n).collect();
        assert_eq!(served, [0, 1, 2]);
    }

    #[test]
    fn items_taken_back_leave_no_debt() {
        let mut queue = FairQueue::new();
        for n in 0..3 {
            queue.push('a', n);
        }
        assert_eq!(queue.pop_newest('a'), Some(2));
        assert_eq!(queue.remove('a', |n| *n == 0), Some(0));
        assert_eq!(queue.len_of('a'), 1);
        queue.push('a', 3);
        queue.push('b', 0);
        assert_eq!(queue.keys(), 2);
        assert_eq!(drain(&mut queue), "baa");
        assert_eq!(queue.pop_newest('a'), None);
        assert_eq!(queue.remove('b', |_| true), None);
        queue.push('c', 7);
        assert_eq!(queue.remove_any(|n| *n == 7), Some(7));
        assert!(queue.is_empty());
    }
}
