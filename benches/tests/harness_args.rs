//! `svc-harness` refuses what it cannot run, before starting anything: exit status 2 and a
//! line saying why. `--env NAME=VALUE` is accepted; a value without `=` is not.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_svc-harness");

fn run(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(BIN)
        .args(args)
        .output()
        .expect("run svc-harness");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_service_variable_needs_a_name_and_a_value() {
    let (code, stderr) = run(&["--env", "SVC_WORKER_THREADS"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with("error: --env: NAME=VALUE"), "{stderr}");
}

#[test]
fn service_variables_are_accepted_and_the_binaries_are_looked_for() {
    let (code, stderr) = run(&[
        "--env",
        "SVC_WORKER_THREADS=2",
        "--env",
        "SVC_AUTH_REFUSAL_DELAY=0s",
        "--bin-dir",
        "/nonexistent/svc-harness-test",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: /nonexistent/svc-harness-test: no svc-auth-server here"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_argument_is_refused() {
    let (code, stderr) = run(&["--threads", "2"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(r#"unknown argument "--threads""#),
        "{stderr}"
    );
}
