//! The command line itself: help and version exit 0 with the text on stdout, bad usage is one
//! line and exit 2, and the admin token never shows in help.

use super::{one_line, svc};

/// Every command and subcommand.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["dev"],
    &["token"],
    &["token", "create"],
    &["token", "list"],
    &["token", "revoke"],
    &["usage"],
    &["agent"],
    &["agent", "create"],
    &["agent", "list"],
    &["agent", "get"],
    &["agent", "pause"],
    &["agent", "resume"],
    &["agent", "suspend"],
    &["agent", "archive"],
    &["user"],
    &["user", "create"],
    &["user", "list"],
    &["audit"],
];

#[tokio::test]
async fn every_command_has_help_on_stdout() {
    let secret = "svc_pat_00000000-0000-0000-0000-000000000000_secretpart";
    let env = [("SVC_ADMIN_TOKEN", secret.to_owned())];
    for command in COMMANDS {
        let args: Vec<&str> = command.iter().copied().chain(["--help"]).collect();
        let output = svc(&args, &env).await;
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        let usage = format!(
            "Usage: {}",
            ["svc"]
                .iter()
                .chain(*command)
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        );
        assert!(help.contains(&usage), "{args:?}: {help}");
        assert!(
            !help.contains("secretpart"),
            "{args:?} shows the token: {help}"
        );
        assert!(output.stderr.is_empty(), "{args:?}");
        // Every command that prints data takes --json.
        let prints_data =
            !command.is_empty() && !matches!(*command, ["dev"] | ["token"] | ["agent"] | ["user"]);
        let takes_json = help
            .lines()
            .any(|line| line.trim_start().starts_with("--json"));
        assert_eq!(takes_json, prints_data, "{args:?}: {help}");
    }
    let output = svc(&["help", "agent"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[tokio::test]
async fn version_exits_0() {
    let output = svc(&["--version"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let version = String::from_utf8(output.stdout).unwrap();
    assert_eq!(version.trim(), format!("svc {}", env!("CARGO_PKG_VERSION")));
}

#[tokio::test]
async fn bad_usage_is_one_line_and_exit_2() {
    for bad in [
        &[][..],
        &["frobnicate"],
        &["dev", "extra"],
        &["token", "create", "--name", "--json"],
        &["usage", "--by", "week"],
        &["user"],
        &["user", "create", "--name"],
        &["audit", "--since", "yesterday"],
        &["audit", "extra"],
    ] {
        one_line(&svc(bad, &[]).await, 2);
    }
    // Configuration is checked once the command is known to be well formed.
    let stderr = one_line(&svc(&["agent", "list"], &[]).await, 2);
    assert!(stderr.contains("SVC_AUTH_GRPC_ADDR"), "{stderr}");
}
