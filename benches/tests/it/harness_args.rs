//! `svc-harness` refuses what it cannot run, before starting anything: exit status 2 and a
//! line saying why. `--env NAME=VALUE` is accepted; a value without `=` is not. Every bench
//! binary answers `--help` and `--version` with 0 and refuses an unknown flag with 2.

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

#[test]
fn every_bench_binary_answers_help_and_version_and_refuses_an_unknown_flag() {
    let binaries = [
        ("svc-harness", env!("CARGO_BIN_EXE_svc-harness")),
        ("svc-soak", env!("CARGO_BIN_EXE_svc-soak")),
        ("svc-load", env!("CARGO_BIN_EXE_svc-load")),
    ];
    for (name, bin) in binaries {
        let output = Command::new(bin).arg("--help").output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{name}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!("usage: {name}")),
            "{name}: {stdout}"
        );
        // The variables it reads, declared with the flags they stand for.
        assert!(stdout.contains("SVC_TEST_POSTGRES_URL"), "{name}: {stdout}");
        assert!(stdout.contains("REDIS_URL"), "{name}: {stdout}");

        let output = Command::new(bin).arg("--version").output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{name}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            stdout.trim(),
            format!("{name} {}", env!("CARGO_PKG_VERSION"))
        );

        let output = Command::new(bin).arg("--fast").output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with(r#"error: unknown argument "--fast""#),
            "{name}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{name}");
    }
}
