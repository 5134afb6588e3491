//! The gateway and the auth server are siblings: the production gateway binary links none of
//! the auth server's machinery (Argon2, the embedded SQLite store, gRPC server reflection).
//! Both speak TLS through rustls on ring only: no OpenSSL, no native-tls, no aws-lc.

use std::process::Command;

/// Crates only the auth server (or its dev mode) may bring in.
const AUTH_SERVER_CRATES: [&str; 4] = [
    "argon2",
    "libsqlite3-sys",
    "tonic-reflection",
    "svc-auth-server",
];

/// TLS stacks neither binary may link: every TLS connection (auth channel, provider, trace
/// export, error reports) goes through rustls with ring.
const OTHER_TLS_CRATES: [&str; 5] = [
    "openssl",
    "openssl-sys",
    "native-tls",
    "aws-lc-rs",
    "aws-lc-sys",
];

fn normal_tree(package: &str) -> String {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", package, "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}"])
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn crate_names(tree: &str) -> Vec<&str> {
    tree.lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect()
}

#[test]
fn the_gateway_links_no_auth_server_machinery() {
    let tree = normal_tree("svc-gateway");
    let crates = crate_names(&tree);
    assert!(
        crates.contains(&"svc-gateway") && crates.contains(&"svc-runtime"),
        "{tree}"
    );
    for banned in AUTH_SERVER_CRATES {
        assert!(
            !crates.contains(&banned),
            "{banned} is in the tree:\n{tree}"
        );
    }
}

#[test]
fn the_auth_server_does_bring_them() {
    // The check above is only meaningful if the same command sees them where they belong.
    let tree = normal_tree("svc-auth-server");
    let crates = crate_names(&tree);
    for expected in ["argon2", "libsqlite3-sys", "tonic-reflection"] {
        assert!(crates.contains(&expected), "{expected} missing:\n{tree}");
    }
}

#[test]
fn both_binaries_use_rustls_on_ring_only() {
    for package in ["svc-gateway", "svc-auth-server"] {
        let tree = normal_tree(package);
        let crates = crate_names(&tree);
        assert!(
            crates.contains(&"rustls") && crates.contains(&"ring"),
            "{tree}"
        );
        for banned in OTHER_TLS_CRATES {
            assert!(
                !crates.contains(&banned),
                "{banned} is in the tree of {package}:\n{tree}"
            );
        }
    }
    // Error reports are the gateway's, over the same stack.
    assert!(crate_names(&normal_tree("svc-gateway")).contains(&"sentry"));
}
