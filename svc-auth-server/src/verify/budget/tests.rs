use super::*;

const A: Uuid = Uuid::from_u128(0xa);
const B: Uuid = Uuid::from_u128(0xb);
const C: Uuid = Uuid::from_u128(0xc);

fn budget(max_pending: usize, per_id: usize, hashing: usize) -> Arc<Budget> {
    Budget::new(Bounds {
        max_pending,
        per_id,
        hashing,
    })
}

/// A fresh token id each call.
fn id() -> Uuid {
    Uuid::new_v4()
}

fn admit_n(budget: &Arc<Budget>, org: Uuid, n: usize) -> Vec<Ticket> {
    (0..n)
        .map(|_| budget.admit(id(), org).expect("admitted"))
        .collect()
}

/// Which of `tickets` have their turn to hash.
fn hashing(tickets: &mut [Ticket]) -> Vec<bool> {
    tickets
        .iter_mut()
        .map(|ticket| ticket.try_turn() == Some(Ok(())))
        .collect()
}

#[test]
fn one_org_alone_may_hold_the_whole_budget_and_no_more() {
    let budget = budget(4, 4, 1);
    let mut held = admit_n(&budget, A, 4);
    assert_eq!(budget.admit(id(), A).err(), Some(Refusal::OwnShare));
    assert_eq!(hashing(&mut held), [true, false, false, false]);
}

#[test]
fn another_org_takes_the_place_of_the_newest_waiting_check_and_hashes_next() {
    let budget = budget(4, 4, 1);
    let mut a = admit_n(&budget, A, 4);
    let mut b = budget.admit(id(), B).expect("another org is admitted");
    assert_eq!(budget.pending(), 4, "the global bound holds");
    assert_eq!(a[3].try_turn(), Some(Err(Refusal::OwnShare)));
    // Two orgs now: A's share is two, and it holds three.
    assert_eq!(budget.admit(id(), A).err(), Some(Refusal::OwnShare));
    // B hashes right after the check hashing now, ahead of A's waiting ones.
    assert_eq!(b.try_turn(), None);
    drop(a.remove(0));
    assert_eq!(b.try_turn(), Some(Ok(())));
    assert_eq!(hashing(&mut a[..2]), [false, false]);
}

#[test]
fn waiting_checks_hash_in_fair_turns() {
    let budget = budget(16, 16, 1);
    let mut order = Vec::new();
    let mut tickets: Vec<(char, Ticket)> = admit_n(&budget, A, 3)
        .into_iter()
        .map(|t| ('a', t))
        .chain(admit_n(&budget, B, 2).into_iter().map(|t| ('b', t)))
        .chain(admit_n(&budget, C, 1).into_iter().map(|t| ('c', t)))
        .collect();
    while !tickets.is_empty() {
        let now: Vec<usize> = (0..tickets.len())
            .filter(|&i| tickets[i].1.try_turn() == Some(Ok(())))
            .collect();
        assert_eq!(now.len(), 1, "one check hashes at a time");
        let (org, done) = tickets.remove(now[0]);
        order.push(org);
        drop(done);
    }
    assert_eq!(order.into_iter().collect::<String>(), "abcaba");
}

#[test]
fn one_token_id_holds_at_most_its_bound() {
    let budget = budget(8, 2, 1);
    let token = id();
    let _held: Vec<Ticket> = (0..2).map(|_| budget.admit(token, A).unwrap()).collect();
    assert_eq!(budget.admit(token, A).err(), Some(Refusal::OwnShare));
    assert!(budget.admit(id(), A).is_ok());
}

#[test]
fn a_full_budget_with_nothing_waiting_to_give_up_is_busy() {
    let budget = budget(2, 2, 2);
    let _a = admit_n(&budget, A, 2);
    assert_eq!(budget.admit(id(), B).err(), Some(Refusal::Busy));
}

#[test]
fn ended_checks_leave_nothing() {
    let budget = budget(4, 4, 1);
    let a = admit_n(&budget, A, 3);
    let b = admit_n(&budget, B, 2);
    drop(b);
    drop(a);
    let state = budget.lock();
    assert!(state.charges.is_empty() && state.by_id.is_empty() && state.by_org.is_empty());
    assert!(state.waiting.is_empty());
    assert_eq!(state.hashing, 0);
}
