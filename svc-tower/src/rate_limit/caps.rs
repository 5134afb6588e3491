//! Spend caps: counters over fixed periods that a reservation may not push past their limits,
//! taken in the same atomic step as the tokens-per-minute buckets.
//!
//! A cap is any amount a service meters per period (the svc gateway counts money budgets in
//! micro-dollars). Its counter lives in the org's slot beside the token buckets, so one script
//! (one round trip, one slot of a cluster) checks and takes the tokens and every cap, or
//! nothing: however many requests race on however many replicas, a cap's counter never passes
//! its limit by a reservation.
//!
//! A counter is named by the caller, period included (`budget:agent:<id>:day:20261125`), so a
//! new period is a new counter and the old one expires. A counter that is missing (the store
//! was flushed, failed over, or is new) is not taken as zero: the reservation answers
//! `CappedDecision::Missing` and takes nothing, until the caller reserves again with the
//! counter's `seed` from its durable record (a usage ledger). Settling corrects a counter by
//! what the call really used, and leaves a missing counter alone: the record it is rebuilt from
//! counts the call already.

use std::collections::HashMap;

use tokio::time::Instant;
use uuid::Uuid;

/// One cap a reservation draws on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendCap {
    /// The counter's name, unique within the org and naming its period.
    pub name: String,
    /// The most the counter may reach.
    pub limit: u64,
    /// What the reservation takes.
    pub amount: u64,
    /// How long a counter created now lives, in seconds: the rest of its period and a margin.
    pub ttl_secs: u64,
    /// The counter's value when it is missing, from the durable record; `None` to learn that
    /// it is missing instead.
    pub seed: Option<u64>,
}

/// One cap's correction when its call is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapCharge {
    /// The counter's name, as reserved.
    pub name: String,
    /// What the reservation took.
    pub reserved: u64,
    /// What the call used.
    pub used: u64,
}

/// A cap's counter after a reservation (before it, when the reservation was refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapState {
    /// Whether the reservation fitted under this cap.
    pub fits: bool,
    /// The cap's limit.
    pub limit: u64,
    /// The counter.
    pub spent: u64,
}

impl CapState {
    /// What is left under the cap.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.spent)
    }
}

/// Caps kept in one process, for [`MemoryTokenBudgetStore`](super::MemoryTokenBudgetStore).
#[derive(Debug, Default)]
pub(crate) struct MemoryCaps {
    counters: HashMap<(Uuid, String), (u64, Instant)>,
}

impl MemoryCaps {
    /// The counters of `caps`, seeded where missing; `Err` with the missing ones that had no
    /// seed.
    pub(crate) fn read(
        &mut self,
        org_id: Uuid,
        caps: &[SpendCap],
        now: Instant,
    ) -> Result<Vec<u64>, Vec<usize>> {
        self.counters.retain(|_, (_, expires)| *expires > now);
        let mut missing = Vec::new();
        let mut values = Vec::with_capacity(caps.len());
        for (i, cap) in caps.iter().enumerate() {
            let key = (org_id, cap.name.clone());
            match (self.counters.get(&key), cap.seed) {
                (Some((value, _)), _) => values.push(*value),
                (None, Some(seed)) => {
                    let expires = now + std::time::Duration::from_secs(cap.ttl_secs);
                    self.counters.insert(key, (seed, expires));
                    values.push(seed);
                }
                (None, None) => missing.push(i),
            }
        }
        if missing.is_empty() {
            Ok(values)
        } else {
            Err(missing)
        }
    }

    /// Adds each cap's amount to its counter.
    pub(crate) fn take(&mut self, org_id: Uuid, caps: &[SpendCap]) {
        for cap in caps {
            if let Some((value, _)) = self.counters.get_mut(&(org_id, cap.name.clone())) {
                *value = value.saturating_add(cap.amount);
            }
        }
    }

    /// Corrects each counter that is still there by what its call used.
    pub(crate) fn settle(&mut self, org_id: Uuid, charges: &[CapCharge]) {
        for charge in charges {
            if let Some((value, _)) = self.counters.get_mut(&(org_id, charge.name.clone())) {
                *value = value
                    .saturating_add(charge.used)
                    .saturating_sub(charge.reserved);
            }
        }
    }
}

/// Each cap's state given its counter before the reservation, and whether all fit.
pub(crate) fn states(caps: &[SpendCap], values: &[u64], taken: bool) -> Vec<CapState> {
    caps.iter()
        .zip(values)
        .map(|(cap, value)| CapState {
            fits: value.saturating_add(cap.amount) <= cap.limit,
            limit: cap.limit,
            spent: if taken {
                value.saturating_add(cap.amount)
            } else {
                *value
            },
        })
        .collect()
}

/// Whether every cap fits its counter.
pub(crate) fn all_fit(caps: &[SpendCap], values: &[u64]) -> bool {
    caps.iter()
        .zip(values)
        .all(|(cap, value)| value.saturating_add(cap.amount) <= cap.limit)
}
