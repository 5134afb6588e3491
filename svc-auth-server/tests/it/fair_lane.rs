//! One org's wrong-secret flood on its own token ids cannot keep other orgs' tokens out of the
//! cold lane: while the flood keeps more checks in flight than the whole hashing budget, every
//! never-verified token of two other orgs validates on its first call, and hashes right after
//! the run under way. The same on a second server started over the same database during the
//! flood (a restart: every token is cold there, the flood's ids included). The flood's refusals
//! say that its own org's share is spent, which the gateway counts against its address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use svc_auth_server::grpc::status::COLD_SHARE_SPENT;
use svc_auth_server::pat::Pat;
use svc_auth_server::{RunningServer, Server};
use tonic::Code;
use uuid::Uuid;

/// Flooding connections, each with `CALLS_PER_CONNECTION` calls in flight: 288 at once, more
/// than the 256 pending checks of the hashing budget.
const CONNECTIONS: usize = 24;
const CALLS_PER_CONNECTION: usize = 12;
/// The flooding org's own token ids.
const FLOOD_IDS: usize = 2;
/// How long a flooding call waits for its answer before giving up and sending the next. The
/// checks it gives up go on and keep their places, as behind a gateway's deadline.
const DEADLINE: Duration = Duration::from_millis(250);
/// Refusals the flood must draw before the other orgs' first calls: the budget is full.
const SATURATED: usize = 200;
/// Bound on saturating, and on each first call's answer.
const WITHIN: Duration = Duration::from_secs(20);
/// Argon2 runs that may start while another org's first call waits: its own, the one after
/// it, and those that start while it waits for its turn and its row; a few, where behind the
/// flood's queue it would be up to 256.
const RUNS_PER_FIRST_CALL: u64 = 8;

#[derive(Default)]
struct Tally {
    wrong: AtomicUsize,
    busy: AtomicUsize,
    own_share: AtomicUsize,
    gave_up: AtomicUsize,
}

impl Tally {
    fn load(&self) -> [usize; 4] {
        [&self.wrong, &self.busy, &self.own_share, &self.gave_up].map(|n| n.load(Ordering::Relaxed))
    }
}

/// Wrong secrets on `ids`, back to back, from many connections until stopped.
struct Flood {
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Flood {
    async fn start(addr: SocketAddr, ids: &[Uuid]) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let mut tasks = Vec::new();
        for n in 0..CONNECTIONS {
            let client = connect(addr).await;
            for m in 0..CALLS_PER_CONNECTION {
                let (client, stop, tally) = (client.clone(), stop.clone(), tally.clone());
                let id = ids[(n + m) % ids.len()];
                tasks.push(tokio::spawn(flood_calls(client, id, stop, tally)));
            }
        }
        Flood { stop, tally, tasks }
    }

    async fn saturate(&self) {
        let saturated = svc_testkit::eventually(WITHIN, || async {
            let [_, busy, own_share, _] = self.tally.load();
            busy + own_share >= SATURATED
        })
        .await;
        assert!(saturated, "the flood never filled the cold lane");
    }

    /// Stops, and says how the flood was answered.
    async fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.expect("a flood connection failed");
        }
        Arc::into_inner(self.tally).expect("every flood task has ended")
    }
}

async fn flood_calls(mut client: Client, id: Uuid, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    while !stop.load(Ordering::Relaxed) {
        let wrong = Pat::generate(id).expose();
        let Ok(answer) = tokio::time::timeout(DEADLINE, validate(&mut client, &wrong)).await else {
            tally.gave_up.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let status = answer.expect_err("a wrong secret was accepted");
        let counter = match status.code() {
            Code::Unauthenticated => &tally.wrong,
            Code::Unavailable if error_reason(&status).as_deref() == Some(COLD_SHARE_SPENT) => {
                &tally.own_share
            }
            Code::Unavailable => &tally.busy,
            _ => panic!("unexpected answer to the flood: {status:?}"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// How the first calls went.
#[derive(Debug, Default)]
struct FirstCalls {
    passed: usize,
    slowest: Duration,
    /// The most Argon2 runs started while one of them waited.
    most_runs: u64,
}

/// Each token's first call on `server`, on a connection of its own.
async fn first_calls(server: &RunningServer, tokens: &[String]) -> FirstCalls {
    let mut client = connect(server.grpc_addr).await;
    let mut calls = FirstCalls::default();
    for token in tokens {
        let (started, runs) = (Instant::now(), server.argon2_runs());
        let answer = tokio::time::timeout(WITHIN, validate(&mut client, token))
            .await
            .expect("a first call got no answer");
        calls.slowest = calls.slowest.max(started.elapsed());
        calls.most_runs = calls.most_runs.max(server.argon2_runs() - runs);
        match answer {
            Ok(_) => calls.passed += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::Unavailable, "{status:?}");
                assert_ne!(
                    error_reason(&status).as_deref(),
                    Some(COLD_SHARE_SPENT),
                    "another org's flood was charged to this org"
                );
            }
        }
    }
    calls
}

/// Two tokens of a new org, never validated.
async fn other_org_tokens(h: &mut Harness) -> [String; 2] {
    let org = seed_org(&h.config, None).await;
    let mut create = async || {
        let request = create_request(org.org_id, 1);
        create_token(&mut h.client, &org.admin_token, request)
            .await
            .expect("create a token")
            .token
    };
    [create().await, create().await]
}

fn report(server: &str, tokens: usize, calls: &FirstCalls, flood: &Tally) {
    let [wrong, busy, own_share, gave_up] = flood.load();
    println!(
        "{server}: {} of {tokens} first calls of other orgs' tokens passed, slowest {:?}, at \
         most {} Argon2 runs started during one; flood of {CONNECTIONS}x{CALLS_PER_CONNECTION} \
         calls on {FLOOD_IDS} ids: {wrong} wrong secret, {busy} busy, {own_share} own share \
         spent, {gave_up} given up after {DEADLINE:?}",
        calls.passed, calls.slowest, calls.most_runs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_orgs_first_calls_pass_one_orgs_flood_before_and_after_a_restart() {
    let _turn = flood_turn().await;
    let mut h = start().await;
    let mut flood_ids = Vec::new();
    for _ in 0..FLOOD_IDS {
        flood_ids.push(Pat::parse(&fresh_token(&mut h).await).unwrap().token_id());
    }
    // Two other orgs; the second token of each is first used after the restart.
    let [b_first, b_later] = other_org_tokens(&mut h).await;
    let [c_first, c_later] = other_org_tokens(&mut h).await;
    let before = [b_first, c_first];

    let flood = Flood::start(h.server.grpc_addr, &flood_ids).await;
    flood.saturate().await;
    let first = first_calls(&h.server, &before).await;

    // The restart: a second server over the same database, which has verified nothing; the
    // flood moves to it before the first one's stops.
    let restarted = Server::start(h.config.clone())
        .await
        .expect("server starts");
    let second = Flood::start(restarted.grpc_addr, &flood_ids).await;
    let flood = flood.stop().await;
    report("flooded server", before.len(), &first, &flood);
    second.saturate().await;
    // Every token is cold here: those first used on the first server, and the others.
    let all = [&before[..], &[b_later, c_later]].concat();
    let after = first_calls(&restarted, &all).await;
    let second = second.stop().await;
    report("restarted server", all.len(), &after, &second);

    assert_eq!(
        first.passed,
        before.len(),
        "first calls refused while flooded"
    );
    assert_eq!(
        after.passed,
        all.len(),
        "first calls refused after the restart"
    );
    for (calls, flood) in [(&first, &flood), (&after, &second)] {
        assert!(calls.most_runs <= RUNS_PER_FIRST_CALL, "{calls:?}");
        let [_, busy, own_share, _] = flood.load();
        assert!(
            own_share > busy,
            "the flood was not told its share was spent"
        );
    }
}
