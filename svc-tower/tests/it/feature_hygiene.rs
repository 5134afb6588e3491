//! `default-features = false` must leave tonic and redis out of the build entirely, so a user
//! who only wants RequestId and ErrorEnvelope compiles neither.

use std::process::Command;

/// Crates only the `grpc` and `redis` features may bring in.
const BACKEND_CRATES: [&str; 6] = [
    "tonic",
    "tonic-types",
    "svc-proto",
    "redis",
    "bb8",
    "bb8-redis",
];

#[test]
fn no_default_features_pulls_in_no_backend_crate() {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", "svc-tower", "--no-default-features"])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        crates.contains(&"svc-tower") && crates.contains(&"http"),
        "{tree}"
    );
    for banned in BACKEND_CRATES {
        assert!(
            !crates.contains(&banned),
            "{banned} is in the tree:\n{tree}"
        );
    }
}

#[test]
fn default_features_do_bring_the_backends() {
    // The check above is only meaningful if the same command does see them by default.
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args([
            "-p",
            "svc-tower",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .output()
        .expect("run cargo tree");
    assert!(output.status.success());
    let tree = String::from_utf8(output.stdout).unwrap();
    assert!(tree.lines().any(|l| l.starts_with("tonic ")), "{tree}");
    assert!(tree.lines().any(|l| l.starts_with("redis ")), "{tree}");
}
