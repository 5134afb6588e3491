//! Error reports from the real binary to a Sentry stand-in on loopback: with `SENTRY_DSN`, a
//! server fault (the database cut away under a ValidateToken) becomes one event tagged with the
//! method and the caller's trace id and carrying no token; a rejected token becomes none.

use std::time::Duration;

use crate::common::*;
use svc_auth_server::pat::Pat;
use svc_proto::v1;
use svc_testkit::FaultProxy;
use svc_testkit::sentry_sink::{SentrySink, tag};
use tonic::Code;
use uuid::Uuid;

const TRACE_ID: &str = "5bf92f3577b34da6a3ce929d0e0e4736";
const ROUTE: &str = "/svc.auth.v1.AuthService/ValidateToken";

async fn validate_traced(
    client: &mut Client,
    token: &str,
) -> Result<v1::ValidateTokenResponse, tonic::Status> {
    let mut request = tonic::Request::new(v1::ValidateTokenRequest {
        access_token: token.to_owned(),
        agent_id: None,
    });
    let traceparent = format!("00-{TRACE_ID}-00f067aa0ba902b7-00");
    request
        .metadata_mut()
        .insert("traceparent", traceparent.parse().unwrap());
    client
        .validate_token(request)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_server_fault_is_reported_with_its_method_and_trace_and_a_rejection_is_not() {
    let sink = SentrySink::start().await;
    let db = migrated_db().await;
    let seed = seed_org(&svc_auth_server::Config::local(db.url()), None).await;
    let (proxy, dsn) = FaultProxy::for_postgres(db.url()).await;
    let dsn_of_sink = sink.dsn();
    let server = serve_binary(&[
        ("POSTGRES_DSN", &dsn),
        ("SENTRY_DSN", &dsn_of_sink),
        ("SVC_ENV", "staging"),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
        ("SVC_DB_ACQUIRE_TIMEOUT", "300ms"),
        ("SVC_DB_CONNECT_TIMEOUT", "300ms"),
    ])
    .await;
    let mut client = connect(server.grpc_addr).await;

    let chat = seed.chat_token.clone();
    validate_traced(&mut client, &chat).await.unwrap();
    let wrong = Pat::generate(Pat::parse(&chat).unwrap().token_id()).expose();
    let rejected = validate_traced(&mut client, &wrong).await.unwrap_err();
    assert_eq!(rejected.code(), Code::Unauthenticated);
    let forged = Pat::generate(Uuid::new_v4()).expose();
    let rejected = validate_traced(&mut client, &forged).await.unwrap_err();
    assert_eq!(rejected.code(), Code::Unauthenticated);

    proxy.cut();
    let fault = validate_traced(&mut client, &chat).await.unwrap_err();
    assert_eq!(fault.code(), Code::Internal, "{fault:?}");

    let reported = svc_testkit::eventually(Duration::from_secs(20), || async {
        !sink.events().is_empty()
    })
    .await;
    assert!(reported, "the fault was reported");
    let events = sink.events();
    assert_eq!(
        events.len(),
        1,
        "one event, none for the rejections: {events:?}"
    );
    let event = &events[0];
    assert_eq!(tag(event, "route"), Some(ROUTE));
    assert_eq!(tag(event, "trace_id"), Some(TRACE_ID));
    assert_eq!(tag(event, "status"), Some("13"));
    assert_eq!(tag(event, "error_code"), Some("INTERNAL"));
    assert_eq!(event["contexts"]["trace"]["trace_id"], TRACE_ID);
    assert_eq!(
        event["release"],
        concat!("svc-auth-server@", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(event["environment"], "staging");

    for body in sink.bodies() {
        let body = String::from_utf8_lossy(&body);
        for token in [&chat, &wrong, &forged] {
            let secret = Pat::parse(token).unwrap().secret().to_owned();
            assert!(!body.contains(&secret), "a secret was reported");
        }
        assert!(!body.contains(&dsn), "the database DSN was reported");
    }
}
