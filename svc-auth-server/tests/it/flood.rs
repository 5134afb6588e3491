//! A wrong-secret flood cannot lock out or starve a real token: wrong secrets on its id and
//! random well-formed ids, from many connections, while the real token (never verified by this
//! server before the flood) keeps validating. Prints the real token's p99 with and without the
//! flood, measured in this one run.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;
use svc_auth_server::pat::Pat;
use tonic::Code;
use uuid::Uuid;

/// Connections flooding the real token's id with wrong secrets.
const ON_THE_ID: usize = 8;
/// Connections flooding random, well-formed, unknown ids.
const ON_RANDOM_IDS: usize = 8;
/// Real calls measured with and without the flood.
const SAMPLES: usize = 200;

#[derive(Default)]
struct Tally {
    refused: AtomicUsize,
    busy: AtomicUsize,
}

/// One flooding connection: sends `next()` back to back until `stop`.
fn flood(
    client: Client,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    next: impl Fn() -> String + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = client;
        while !stop.load(Ordering::Relaxed) {
            let answer = validate(&mut client, &next()).await;
            // Stopped meanwhile: the test is over (or failed), and its database may be gone.
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match answer {
                Ok(_) => panic!("a flood token was accepted"),
                Err(status) if status.code() == Code::Unauthenticated => {
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                }
                Err(status) if status.code() == Code::Unavailable => {
                    tally.busy.fetch_add(1, Ordering::Relaxed);
                }
                Err(status) => panic!("unexpected answer to the flood: {status:?}"),
            }
        }
    })
}

/// Stops the flood when dropped, so a failing test's floods end with it instead of
/// reporting the teardown of its database.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Validates `token` `SAMPLES` times; every call must succeed. Returns the p99.
async fn p99_of(client: &mut Client, token: &str) -> Duration {
    let mut latencies = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let answer = validate(client, token).await;
        latencies.push(started.elapsed());
        answer.expect("the real token was refused");
    }
    latencies.sort();
    latencies[SAMPLES * 99 / 100 - 1]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_token_keeps_validating_through_a_wrong_secret_flood() {
    let _turn = flood_turn().await;
    let mut h = start().await;
    let real = fresh_token(&mut h).await;
    let real_id = Pat::parse(&real).unwrap().token_id();
    let runs_before = h.server.argon2_runs();

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_failure = StopOnDrop(stop.clone());
    let tally = Arc::new(Tally::default());
    let mut floods = Vec::new();
    for i in 0..ON_THE_ID + ON_RANDOM_IDS {
        let client = connect(h.server.grpc_addr).await;
        let (stop, tally) = (stop.clone(), tally.clone());
        floods.push(if i < ON_THE_ID {
            flood(client, stop, tally, move || Pat::generate(real_id).expose())
        } else {
            flood(client, stop, tally, || {
                Pat::generate(Uuid::new_v4()).expose()
            })
        });
    }
    // The flood is under way before the real token is first used. Argon2 runs at the lowest
    // CPU priority, so on a machine busy with other work (tests side by side) it starts slowly.
    let flooding = svc_testkit::eventually(Duration::from_secs(60), || async {
        h.server.argon2_runs() - runs_before >= 10
    })
    .await;
    assert!(flooding, "the flood never reached Argon2");

    // Its first use ever on this server, in the middle of a flood on its own id.
    let started = Instant::now();
    let first = validate(&mut h.client, &real).await;
    let first_use = started.elapsed();
    first.expect("the real token's first use was refused during the flood");

    let flooded = p99_of(&mut h.client, &real).await;
    stop.store(true, Ordering::Relaxed);
    for flood in floods {
        flood.await.expect("a flood connection failed");
    }
    let wrong_runs = h.server.argon2_runs() - runs_before;
    let quiet = p99_of(&mut h.client, &real).await;

    let refused = tally.refused.load(Ordering::Relaxed);
    let busy = tally.busy.load(Ordering::Relaxed);
    println!(
        "flood: {refused} refused, {busy} busy, {wrong_runs} Argon2 runs; real token: first \
         use {first_use:?} during the flood, p99 {flooded:?} with the flood, {quiet:?} without \
         ({:.1}x)",
        flooded.as_secs_f64() / quiet.as_secs_f64()
    );
    assert!(refused > 0);
}
