use super::*;

const A: Class = Class::Org(Uuid::from_u128(0xa));
const B: Class = Class::Org(Uuid::from_u128(0xb));
/// The token id of every call here but those a test names.
const ID: Uuid = Uuid::from_u128(1);

/// Starts a wait for a turn charged to `class`; answers when it was decided, and how.
fn wait(
    pacer: &Arc<Pacer>,
    class: Class,
) -> tokio::task::JoinHandle<(Duration, Result<(), Refusal>)> {
    let pacer = Arc::clone(pacer);
    let started = Instant::now();
    tokio::spawn(async move {
        let answer = pacer.turn(class, ID).await;
        (started.elapsed(), answer)
    })
}

/// Lets spawned waiters run up to their first wait, without moving the paused clock.
async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn turns_are_spaced_by_the_rate_and_the_queue_is_bounded() {
    let pacer = Pacer::new(100, Duration::from_millis(25));
    assert_eq!(pacer.turn(A, ID).await, Ok(()), "the first turn is free");
    let waiters: Vec<_> = (0..2).map(|_| wait(&pacer, A)).collect();
    settle().await;
    // Two more turns fit in 25 ms at 10 ms each; a third caller is refused at once.
    assert_eq!(pacer.turn(A, ID).await, Err(Refusal::OwnShare));
    let mut waited = Vec::new();
    for waiter in waiters {
        let (elapsed, answer) = waiter.await.unwrap();
        assert_eq!(answer, Ok(()));
        waited.push(elapsed.as_millis());
    }
    assert_eq!(waited, [10, 20]);
    // Once the turns are out and time passes, the next is free again.
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(pacer.turn(A, ID).await, Ok(()));
}

#[tokio::test(start_paused = true)]
async fn another_class_is_served_within_two_turns_of_a_full_queue() {
    // Five turns fit in the wait; it ends between turns, so no turn ties with a deadline.
    let pacer = Pacer::new(100, Duration::from_millis(55));
    assert_eq!(pacer.turn(A, ID).await, Ok(()));
    // A fills the queue.
    let flood: Vec<_> = (0..5).map(|_| wait(&pacer, A)).collect();
    settle().await;
    assert_eq!(pacer.turn(A, ID).await, Err(Refusal::OwnShare));

    let other = wait(&pacer, B);
    let unread = wait(&pacer, Class::Unread);
    settle().await;
    // With three classes waiting, A's share is one waiting call: it holds five.
    assert_eq!(pacer.turn(A, ID).await, Err(Refusal::OwnShare));

    let (b_waited, b) = other.await.unwrap();
    let (unread_waited, unread) = unread.await.unwrap();
    assert_eq!((b, unread), (Ok(()), Ok(())));
    assert!(b_waited <= Duration::from_millis(20), "{b_waited:?}");
    assert!(
        unread_waited <= Duration::from_millis(30),
        "{unread_waited:?}"
    );

    // A's calls pushed past 55 ms are refused as busy when the turn they missed is due.
    let mut answers = Vec::new();
    for waiter in flood {
        let (waited, answer) = waiter.await.unwrap();
        assert!(waited <= Duration::from_millis(60), "{waited:?}");
        answers.push(answer);
    }
    assert_eq!(
        answers.iter().filter(|a| a.is_ok()).count(),
        3,
        "{answers:?}"
    );
    assert!(answers[3..].iter().all(|a| *a == Err(Refusal::Busy)));
    assert!(pacer.lock().waiting.is_empty());
}

#[tokio::test(start_paused = true)]
async fn unread_ids_are_refused_as_busy_not_as_anyones_share() {
    let pacer = Pacer::new(100, Duration::from_millis(15));
    assert_eq!(pacer.turn(Class::Unread, ID).await, Ok(()));
    let waiter = wait(&pacer, Class::Unread);
    settle().await;
    assert_eq!(pacer.turn(Class::Unread, ID).await, Err(Refusal::Busy));
    assert_eq!(waiter.await.unwrap().1, Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_turn_is_given_by_when_it_was_due_not_when_the_server_got_to_it() {
    let pacer = Pacer::new(100, Duration::from_millis(15));
    assert_eq!(pacer.turn(A, ID).await, Ok(()));
    let waiter = wait(&pacer, A);
    settle().await;
    // The machine stalls for 50 ms: every timer fires late, the waiter's deadline long past.
    std::thread::sleep(Duration::from_millis(1));
    tokio::time::advance(Duration::from_millis(50)).await;
    let (_, answer) = waiter.await.unwrap();
    assert_eq!(
        answer,
        Ok(()),
        "its turn was due at 10 ms, within its 15 ms"
    );
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_gives_up_leaves_the_queue_and_takes_no_turn() {
    let pacer = Pacer::new(100, Duration::from_millis(50));
    assert_eq!(pacer.turn(A, ID).await, Ok(()));
    let gone = wait(&pacer, A);
    settle().await;
    assert_eq!(pacer.lock().waiting.len_of(A), 1);
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    assert!(pacer.lock().waiting.is_empty());
    // The turn it would have had, 10 ms on, goes to the next caller.
    let (waited, answer) = wait(&pacer, B).await.unwrap();
    assert_eq!(answer, Ok(()));
    assert_eq!(waited.as_millis(), 10);
}

#[tokio::test(start_paused = true)]
async fn calls_waiting_unread_are_charged_to_their_org_once_it_is_read() {
    let pacer = Pacer::new(100, Duration::from_millis(50));
    let (flooded, other) = (Uuid::from_u128(2), Uuid::from_u128(3));
    assert_eq!(pacer.turn(Class::Unread, flooded).await, Ok(()));
    // Five slots; a flood on one unread id fills them.
    let flood: Vec<_> = (0..5)
        .map(|_| {
            let pacer = Arc::clone(&pacer);
            tokio::spawn(async move { pacer.turn(Class::Unread, flooded).await })
        })
        .collect();
    settle().await;
    assert_eq!(pacer.turn(Class::Unread, other).await, Err(Refusal::Busy));
    // The flooded id's row is read: its calls are A's from now on, and the unread class is
    // free for another id's first call.
    let Class::Org(org) = A else { unreachable!() };
    pacer.reclassify(flooded, org);
    assert_eq!(pacer.lock().waiting.len_of(Class::Unread), 0);
    assert_eq!(pacer.lock().waiting.len_of(A), 5);
    let first_use = wait(&pacer, Class::Unread);
    let (waited, answer) = first_use.await.unwrap();
    assert_eq!(answer, Ok(()));
    assert!(waited <= Duration::from_millis(20), "{waited:?}");
    for call in flood {
        let _ = call.await.unwrap();
    }
}
