//! Both example apps over real loopback HTTP: 200 with a good token and agent, the JSON error
//! envelope otherwise.

use crate::common;

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use common::Reply;
use futures_util::stream;
use http::{Method, Request, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use svc_examples::demo::{Demo, MAX_BODY_BYTES};
use svc_examples::{axum_app, hyper_app};
use uuid::Uuid;

#[derive(Debug, Clone, Copy)]
enum App {
    Axum,
    Hyper,
}

const APPS: [App; 2] = [App::Axum, App::Hyper];

/// Serves `app` for `demo` on a fresh loopback port for the rest of the test.
async fn start(app: App, demo: &Demo) -> SocketAddr {
    let demo = demo.clone();
    common::start(move |listener| async move {
        match app {
            App::Axum => axum_app::serve(listener, &demo).await,
            App::Hyper => hyper_app::serve(listener, &demo).await,
        }
    })
    .await
}

/// A request to `/v1/chat/completions` with the given token and agent.
struct Call<'a> {
    path: &'static str,
    token: Option<&'a str>,
    agent: Option<String>,
    body: BoxBody<Bytes, Infallible>,
}

impl<'a> Call<'a> {
    fn new(token: Option<&'a str>, agent: Option<Uuid>) -> Call<'a> {
        let body = Full::from(r#"{"model":"svc-mock-1","messages":[]}"#);
        Call {
            path: "/v1/chat/completions",
            token,
            agent: agent.map(|a| a.to_string()),
            body: body.boxed(),
        }
    }

    fn path(mut self, path: &'static str) -> Call<'a> {
        self.path = path;
        self
    }

    fn body(mut self, body: BoxBody<Bytes, Infallible>) -> Call<'a> {
        self.body = body;
        self
    }

    async fn send(self, addr: SocketAddr) -> Reply {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}{}", self.path))
            .header("content-type", "application/json");
        if let Some(token) = self.token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if let Some(agent) = self.agent {
            request = request.header("x-svc-agent-id", agent);
        }
        let method = if self.path == "/v1/whoami" {
            Method::GET
        } else {
            Method::POST
        };
        let request = request.method(method);
        common::send(request.body(self.body).unwrap()).await
    }
}

#[tokio::test]
async fn a_good_token_and_active_agent_get_the_completion() {
    for app in APPS {
        let demo = Demo::random();
        let addr = start(app, &demo).await;
        let reply = Call::new(Some(&demo.chat_token), Some(demo.active_agent))
            .send(addr)
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{app:?}");
        assert_eq!(reply.json["org_id"], demo.org_id.to_string(), "{app:?}");
        assert_eq!(reply.json["agent_id"], demo.active_agent.to_string());
        assert_eq!(reply.json["model"], "svc-mock-1");
        for header in ["x-request-id", "x-trace-id", "x-response-time"] {
            assert!(reply.headers.contains_key(header), "{app:?} {header}");
        }
    }
}

#[tokio::test]
async fn no_token_is_a_401_envelope_with_the_request_headers() {
    for app in APPS {
        let demo = Demo::random();
        let addr = start(app, &demo).await;
        let reply = Call::new(None, Some(demo.active_agent)).send(addr).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{app:?}");
        assert_eq!(reply.code(), Some("MISSING_TOKEN"), "{app:?}");
        assert_eq!(reply.headers["content-type"], "application/json");
        let request_id = reply.headers["x-request-id"].to_str().unwrap();
        assert_eq!(reply.json["error"]["request_id"], request_id);
        assert!(reply.headers.contains_key("x-trace-id"));
        let ms: u64 = reply.headers["x-response-time"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(ms < 60_000);
    }
}

#[tokio::test]
async fn each_refusal_has_its_status_and_code() {
    for app in APPS {
        let demo = Demo::random();
        let addr = start(app, &demo).await;
        let unknown = format!("svc_pat_{}_unknownSecret", Uuid::new_v4());
        let cases = [
            (
                Call::new(Some(&unknown), Some(demo.active_agent)),
                401,
                "INVALID_TOKEN",
            ),
            (
                Call::new(Some("not-a-pat"), Some(demo.active_agent)),
                401,
                "INVALID_TOKEN",
            ),
            (
                Call::new(Some(&demo.list_only_token), Some(demo.active_agent)),
                403,
                "INSUFFICIENT_PERMISSIONS",
            ),
            (
                Call::new(Some(&demo.chat_token), None),
                400,
                "MISSING_AGENT_ID",
            ),
            (
                Call::new(Some(&demo.chat_token), Some(demo.paused_agent)),
                403,
                "AGENT_SUSPENDED",
            ),
            (
                Call::new(Some(&demo.chat_token), Some(demo.foreign_agent)),
                403,
                "AGENT_NOT_AUTHORIZED",
            ),
        ];
        for (call, status, code) in cases {
            let reply = call.send(addr).await;
            assert_eq!(reply.status.as_u16(), status, "{app:?} {code}");
            assert_eq!(reply.code(), Some(code), "{app:?}");
            assert_eq!(
                reply.json["error"]["request_id"],
                reply.headers["x-request-id"].to_str().unwrap()
            );
        }
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_413_declared_or_streamed() {
    for app in APPS {
        let demo = Demo::random();
        let addr = start(app, &demo).await;
        let declared = Full::from(vec![b' '; MAX_BODY_BYTES + 1]).boxed();
        let chunks: Vec<Result<Frame<Bytes>, Infallible>> = (0..=MAX_BODY_BYTES / 1024)
            .map(|_| Ok(Frame::data(Bytes::from(vec![b' '; 1024]))))
            .collect();
        let streamed = StreamBody::new(stream::iter(chunks)).boxed();
        for body in [declared, streamed] {
            let reply = Call::new(Some(&demo.chat_token), Some(demo.active_agent))
                .body(body)
                .send(addr)
                .await;
            assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{app:?}");
            assert_eq!(reply.code(), Some("PAYLOAD_TOO_LARGE"));
        }
    }
}

#[tokio::test]
async fn a_route_without_a_permission_guard_needs_only_token_and_agent() {
    let demo = Demo::random();
    let addr = start(App::Axum, &demo).await;
    let reply = Call::new(Some(&demo.list_only_token), Some(demo.active_agent))
        .path("/v1/whoami")
        .body(Full::default().boxed())
        .send(addr)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json["org_id"], demo.org_id.to_string());
    assert_eq!(reply.json["permissions"], 8);
}
