use uuid::Uuid;

use super::*;

fn identity() -> DevIdentity {
    DevIdentity {
        org_id: Uuid::new_v4(),
        user_id: Uuid::new_v4(),
        agent_id: Uuid::new_v4(),
        admin_token: "svc_pat_admin".into(),
        chat_token: "svc_pat_chat".into(),
        reused: false,
    }
}

#[test]
fn the_curl_command_carries_every_required_header() {
    let identity = identity();
    let text = curl("127.0.0.1:18080".parse().unwrap(), &identity, "svc-mock-1");
    assert!(text.starts_with(CURL_PREFIX));
    assert!(text.contains("'http://127.0.0.1:18080/v1/chat/completions'"));
    assert!(text.contains("'Authorization: Bearer svc_pat_chat'"));
    assert!(text.contains(&format!("'X-SVC-Agent-ID: {}'", identity.agent_id)));
    assert!(text.contains("'Content-Type: application/json'"));
    assert!(text.contains(r#""model":"svc-mock-1""#));
    // Every line but the last continues the command.
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[..lines.len() - 1].iter().all(|l| l.ends_with('\\')));
    assert!(!lines[lines.len() - 1].ends_with('\\'));
}

#[test]
fn an_unspecified_bind_address_prints_loopback() {
    let text = curl("0.0.0.0:8080".parse().unwrap(), &identity(), "m");
    assert!(text.contains("http://127.0.0.1:8080/v1/chat/completions"));
}

#[test]
fn the_python_snippet_points_the_sdk_at_the_gateway() {
    let identity = identity();
    let text = python("127.0.0.1:8080".parse().unwrap(), &identity, "svc-mock-1");
    assert!(text.contains(r#"base_url="http://127.0.0.1:8080/v1""#));
    assert!(text.contains(r#"api_key="svc_pat_chat""#));
    assert!(text.contains(&format!(
        r#"default_headers={{"X-SVC-Agent-ID": "{}"}}"#,
        identity.agent_id
    )));
    assert!(text.contains(r#"model="svc-mock-1""#));
}

#[test]
fn single_quotes_survive_the_shell() {
    assert_eq!(shell_quote("it's"), r"'it'\''s'");
    let text = curl("127.0.0.1:1".parse().unwrap(), &identity(), "o'model");
    assert!(text.contains(r"o'\''model"));
}
