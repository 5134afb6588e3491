//! A fake OTLP gRPC collector on loopback that records every span it receives, in plaintext or
//! over TLS with the test server certificate.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use tokio::sync::oneshot;
use tokio_stream::wrappers::TcpListenerStream;

/// One received span, flattened.
#[derive(Debug, Clone)]
pub(crate) struct Exported {
    pub(crate) service: String,
    pub(crate) environment: String,
    pub(crate) name: String,
    /// 32 lower-case hex digits, as `X-Trace-ID` shows it.
    pub(crate) trace_id: String,
    /// 16 lower-case hex digits, as a `traceparent` shows it.
    pub(crate) span_id: String,
    /// The parent's span id in the same form; empty for a root span.
    pub(crate) parent_span_id: String,
    pub(crate) attributes: Vec<(String, String)>,
}

impl Exported {
    pub(crate) fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Exported>>>);

#[tonic::async_trait]
impl TraceService for Recorder {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default();
            let service = find(&resource, "service.name").unwrap_or_default();
            let environment = find(&resource, "deployment.environment").unwrap_or_default();
            for span in resource_spans
                .scope_spans
                .into_iter()
                .flat_map(|scope| scope.spans)
            {
                spans.push(Exported {
                    service: service.clone(),
                    environment: environment.clone(),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn find(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| text(kv.value.as_ref()))
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

pub(crate) struct Collector {
    pub(crate) addr: SocketAddr,
    spans: Arc<Mutex<Vec<Exported>>>,
    _stop: oneshot::Sender<()>,
}

impl Collector {
    pub(crate) async fn start() -> Collector {
        Collector::serve(None).await
    }

    /// Served over TLS with the test server certificate (for `127.0.0.1`, signed by the test
    /// CA `svc_testkit::tls_fixture("ca.pem")`).
    pub(crate) async fn start_tls() -> Collector {
        let read = |name| std::fs::read(svc_testkit::tls_fixture(name)).expect("a TLS fixture");
        let identity = tonic::transport::Identity::from_pem(read("server.pem"), read("server.key"));
        Collector::serve(Some(
            tonic::transport::ServerTlsConfig::new().identity(identity),
        ))
        .await
    }

    async fn serve(tls: Option<tonic::transport::ServerTlsConfig>) -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let recorder = Recorder::default();
        let spans = recorder.0.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let mut server = tonic::transport::Server::builder();
        if let Some(tls) = tls {
            server = server.tls_config(tls).expect("a usable TLS config");
        }
        tokio::spawn(
            server
                .add_service(TraceServiceServer::new(recorder))
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stopped.await;
                }),
        );
        Collector {
            addr,
            spans,
            _stop: stop,
        }
    }

    pub(crate) fn spans(&self) -> Vec<Exported> {
        self.spans.lock().unwrap().clone()
    }

    /// The spans of `service` in trace `trace_id`.
    pub(crate) fn in_trace(&self, service: &str, trace_id: &str) -> Vec<Exported> {
        self.spans()
            .into_iter()
            .filter(|s| s.service == service && s.trace_id == trace_id)
            .collect()
    }
}
