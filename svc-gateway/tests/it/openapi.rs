//! `GET /openapi.json`: served without authentication, and true to the gateway: every route of
//! the route table, every provider-backed route's error statuses, and every code of the
//! envelope. A schemathesis run holds the running gateway to it as well.

use crate::support;

use serde_json::Value;
use support::Env;
use svc_tower::error::ErrorCode;

#[tokio::test]
async fn the_document_is_served_without_a_token() {
    let env = Env::mock(&[]).await;
    let reply = env.get("/openapi.json").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let served: Value = reply.json();
    let checked_in: Value =
        serde_json::from_str(svc_gateway::routes::OPENAPI_DOCUMENT).expect("the document is JSON");
    assert_eq!(served, checked_in);
    assert_eq!(served["openapi"], "3.1.0");
}

#[test]
fn every_route_and_every_code_is_documented() {
    let doc: Value = serde_json::from_str(svc_gateway::routes::OPENAPI_DOCUMENT).unwrap();
    let paths = doc["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/v1/chat/completions", "post"),
        ("/proxy/v1/chat/completions", "post"),
        ("/v1/embeddings", "post"),
        ("/proxy/v1/embeddings", "post"),
        ("/v1/responses", "post"),
        ("/proxy/v1/responses", "post"),
        ("/v1/messages", "post"),
        ("/proxy/v1/messages", "post"),
        ("/v1/messages/count_tokens", "post"),
        ("/proxy/v1/messages/count_tokens", "post"),
        ("/v1/models", "get"),
        ("/proxy/v1/models", "get"),
        ("/v1/models/{model}", "get"),
        ("/proxy/v1/models/{model}", "get"),
        ("/v1/orgs/{org_id}/auth-probe", "get"),
        ("/mcp/{server}", "post"),
        ("/mcp/{server}", "get"),
        ("/mcp/{server}", "delete"),
        ("/proxy/mcp/{server}", "post"),
        ("/proxy/mcp/{server}", "get"),
        ("/proxy/mcp/{server}", "delete"),
        ("/health", "get"),
        ("/ready", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ] {
        assert!(paths[path][method].is_object(), "{method} {path}");
    }
    let documented: Vec<&str> =
        doc["components"]["schemas"]["ErrorEnvelope"]["properties"]["error"]["properties"]["code"]
            ["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
    for code in ErrorCode::ALL {
        assert!(documented.contains(&code.as_str()), "{}", code.as_str());
    }
    // Every status a provider-backed route can answer is declared, so a client generated from
    // the document knows each.
    for path in ["/v1/chat/completions", "/v1/embeddings", "/v1/responses"] {
        let responses = paths[path]["post"]["responses"].as_object().unwrap();
        for status in [
            "200", "400", "401", "403", "409", "413", "415", "429", "500", "501", "503", "504",
        ] {
            assert!(responses.contains_key(status), "{path} {status}");
        }
    }
}
