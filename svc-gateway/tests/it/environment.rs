//! The gateway reads its environment through the shared map, which skips values that are not
//! UTF-8: such a variable (none of ours) neither panics nor hides a real configuration error.
#![cfg(unix)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

#[test]
fn a_non_utf8_variable_is_skipped_and_the_real_problem_is_named() {
    let output = Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
        .env_clear()
        .env("SVC_UNRELATED", OsStr::from_bytes(b"caf\xe9"))
        .env("SVC_PORT", "abc")
        .env("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091")
        .output()
        .expect("run svc-gateway");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: SVC_PORT: "), "{stderr}");
}

#[test]
fn dev_points_to_the_svc_command() {
    let output = Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
        .arg("dev")
        .output()
        .expect("run svc-gateway");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("svc dev"), "{stderr}");
}
