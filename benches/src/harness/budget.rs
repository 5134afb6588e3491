//! What a money budget costs a call: added p50 and p99 at one connection without a budget and
//! then with an org budget, in the same run. With a budget the gateway learns it from the same
//! ValidateToken answer (one more join in its statement) and holds the call's worst-case cost
//! in the same Redis script as the token limit, so the difference is that script's round trip
//! and the settlement after the answer; both phases print the Redis commands per call
//! (`INFO commandstats`), which count what the scripts cost inside Redis.

use svc_proto::v1::SetBudgetRequest;
use svc_proto::v1::auth_service_client::AuthServiceClient;

use super::redis_stats::CommandStats;
use super::run::{ms, run_phase};
use crate::load::PhaseStats;
use crate::load::client::Target;

/// Sets an org budget (far above what the run spends) as the seeded admin.
async fn set_org_budget(grpc_port: u16, admin_token: &str) -> Result<(), String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{grpc_port}"))
        .map_err(|e| format!("the auth server: {e}"))?
        .connect()
        .await
        .map_err(|e| format!("the auth server: {e}"))?;
    let mut client = AuthServiceClient::new(channel);
    let mut request = tonic::Request::new(SetBudgetRequest {
        scope: "org".to_owned(),
        target_id: String::new(),
        limit_usd_micros: 1_000_000_000_000,
        period: "month".to_owned(),
    });
    let bearer = format!("Bearer {admin_token}")
        .parse()
        .map_err(|_| "the seeded admin token is not a header value".to_owned())?;
    request.metadata_mut().insert("authorization", bearer);
    client
        .set_budget(request)
        .await
        .map_err(|status| format!("SetBudget: {}", status.code()))?;
    Ok(())
}

/// One connection's phase, and the Redis commands the gateway sent during it (its warm-up
/// included: the calls through the gateway are `requests` and a tenth as many).
async fn phase(
    direct: &Target,
    through: &Target,
    requests: usize,
    redis_url: &str,
) -> ((PhaseStats, PhaseStats), Option<CommandStats>) {
    let before = CommandStats::read(redis_url).await;
    let stats = run_phase(direct, through, requests).await;
    let after = CommandStats::read(redis_url).await;
    let redis = before.zip(after).map(|(b, a)| b.until(&a));
    (stats, redis)
}

/// Measures one connection without a budget, sets one, and measures again.
pub(crate) async fn cost_of_budgets(
    requests: usize,
    direct: &Target,
    through: &Target,
    grpc_port: u16,
    admin_token: &str,
    redis_url: &str,
) -> Result<(), String> {
    let (off, off_redis) = phase(direct, through, requests, redis_url).await;
    set_org_budget(grpc_port, admin_token).await?;
    let (on, on_redis) = phase(direct, through, requests, redis_url).await;
    if on.1.ok == 0 {
        return Err("no call passed with a budget set".to_owned());
    }
    println!("budgets (1 connection, {requests} requests each, the same run):");
    for (name, (d, g), redis) in [
        ("no budget", &off, &off_redis),
        ("org budget", &on, &on_redis),
    ] {
        println!(
            "  {name:<10} added p50 {:.3} ms, p99 {:.3} ms",
            ms(g.p50.saturating_sub(d.p50)),
            ms(g.p99.saturating_sub(d.p99)),
        );
        if let Some(redis) = redis {
            println!(
                "             Redis commands per call: {}",
                redis.per_request(requests + requests / 10)
            );
        }
    }
    let p50 = |(d, g): &(PhaseStats, PhaseStats)| ms(g.p50.saturating_sub(d.p50));
    println!("  a budget adds {:.3} ms to the p50", p50(&on) - p50(&off));
    Ok(())
}
