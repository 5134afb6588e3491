//! svc-tower in a plain hyper 1 server: the same layers as a `ServiceBuilder` stack, handed
//! to hyper through hyper-util's `TowerToHyperService`.
//!
//! Run: `cargo run -p svc-examples --example hyper_app` (see that file for requests to try).

use std::convert::Infallible;
use std::io;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use serde_json::json;
use svc_tower::agent::AgentCheckLayer;
use svc_tower::auth::{PatAuthLayer, RequirePermissionLayer};
use svc_tower::body::ResponseBody;
use svc_tower::body_limit::BodyLimitLayer;
use svc_tower::body_limit::{self, LimitedBody};
use svc_tower::context::OrgContext;
use svc_tower::envelope::ErrorEnvelopeLayer;
use svc_tower::error::{ApiError, ErrorCode};
use svc_tower::request_id::RequestIdLayer;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, service_fn};

use crate::demo::{Demo, MAX_BODY_BYTES};

/// The response body: the handler's, wrapped once by each layer that can answer on its own
/// (ErrorEnvelope, BodyLimit, PatAuth, AgentCheck, RequirePermission). No boxing.
pub type AppBody =
    ResponseBody<ResponseBody<ResponseBody<ResponseBody<ResponseBody<Full<Bytes>>>>>>;

/// The app: `POST /v1/chat/completions` behind the whole stack, `CHAT_COMPLETIONS` required.
pub fn app(
    demo: &Demo,
) -> impl Service<
    Request<Incoming>,
    Response = Response<AppBody>,
    Error = Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ 'static {
    ServiceBuilder::new()
        .layer(RequestIdLayer::new())
        .layer(ErrorEnvelopeLayer::new())
        .layer(BodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(PatAuthLayer::new(demo.tokens()))
        .layer(AgentCheckLayer::new(demo.agents()))
        .layer(RequirePermissionLayer::chat_completions())
        .service(service_fn(route))
}

/// Accepts connections on `listener` and serves [`app`] on each, HTTP/1.1.
pub async fn serve(listener: TcpListener, demo: &Demo) -> io::Result<()> {
    let app = app(demo);
    loop {
        let (stream, _peer) = listener.accept().await?;
        // Without TCP_NODELAY a response written as head then body waits on the delayed ACK.
        stream.set_nodelay(true)?;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            // A connection error (the client went away) concerns that connection only.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(req: Request<LimitedBody<Incoming>>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::POST || req.uri().path() != "/v1/chat/completions" {
        return Ok(ApiError::new(ErrorCode::NotFound).into_response());
    }
    let Some(context) = req.extensions().get::<OrgContext>().cloned() else {
        return Ok(ApiError::new(ErrorCode::MissingToken).into_response());
    };
    let bytes = match body_limit::collect(req.into_body(), MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Ok(ApiError::new(ErrorCode::InvalidJson).into_response());
    };
    let body = json!({
        "object": "chat.completion",
        "model": request["model"],
        "org_id": context.org_id,
        "agent_id": context.agent_id,
    });
    let mut response = Response::new(Full::from(body.to_string()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
