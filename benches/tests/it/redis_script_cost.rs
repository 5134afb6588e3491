//! `scripts/redis-script-cost` counts the instructions of every shape of the Redis scripts the
//! gateway sends, and the figures benches/README.md gives for them hold: a call under an org
//! budget, and one under a token limit and a budget, each one script that counts the request
//! with the reservation carrying the previous call's settlement, cost no more inside Redis than
//! the limiter of 3904d4b alone (64,098); the limiter alone costs under 41,000, and the limiter
//! of an org and its token under 66,000. And what the scripts are made of: a call with a token
//! limit and a budget cannot cost 64,098 in two scripts, whatever their Lua, since the commands
//! and arguments alone cost more: hence one.
//!
//! Instructions, not seconds: callgrind's counts move by less than 1% between runs whatever
//! else the machine does, so the bounds hold on a loaded CI machine. They are Redis 7.0's
//! counts; another version, or a machine without valgrind or Redis, is said and passes.

use std::path::Path;
use std::process::Command;

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The output of `scripts/redis-script-cost ARGS`; `None` (said) without valgrind or Redis, or
/// with a Redis other than 7.0, whose counts the bounds are.
fn script_cost(args: &[&str]) -> Option<String> {
    for tool in ["valgrind", "callgrind_annotate", "redis-server", "python3"] {
        if !has(tool) {
            eprintln!("{tool} is not installed: the scripts' instructions are not counted");
            return None;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(root.join("scripts/redis-script-cost"))
        .args(args)
        .current_dir(&root)
        .output()
        .expect("run scripts/redis-script-cost");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    if !stdout.contains("(v=7.0.") {
        eprintln!("not Redis 7.0, whose counts the bounds are: {stdout}");
        return None;
    }
    Some(stdout)
}

/// The count on the row of `stdout` that opens with `row`.
fn count(stdout: &str, row: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(row))
        .unwrap_or_else(|| panic!("no row {row:?} in {stdout}"));
    line.rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

#[test]
fn a_budgeted_call_costs_redis_what_the_readme_says() {
    let Some(stdout) = script_cost(&[]) else {
        return;
    };
    let count = |row: &str| count(&stdout, row);
    // What the limiter of 3904d4b took for one request, before token limits and budgets.
    const BEFORE: u64 = 64_098;
    let limiter = count("limiter, one key");
    assert!(limiter < 41_000, "{stdout}");
    assert!(
        count("org budget: both, and the request") <= BEFORE,
        "{stdout}"
    );
    assert!(
        count("tokens per minute and budget: both, request") <= BEFORE,
        "{stdout}"
    );
    assert!(count("limiter, an org and its token") < 66_000, "{stdout}");
    // Every shape runs the script to its end: an error reply costs a few hundred.
    for row in [
        "org tokens per minute: reservation",
        "org tokens per minute: settlement",
        "tokens per minute and budget: reservation",
        "tokens per minute and budget: settlement",
        "tokens per minute and budget: both",
        "org budget: both, and the request",
        "tokens per minute and budget: both, request",
    ] {
        assert!(count(row) > 20_000, "{row}: {stdout}");
    }
}

#[test]
fn two_scripts_cannot_count_a_token_limit_and_a_budget_for_what_the_limiter_took() {
    let Some(stdout) = script_cost(&["--pieces"]) else {
        return;
    };
    let count = |row: &str| count(&stdout, row);
    // What the limiter and the token script do for a call under a token limit and a budget,
    // with no Lua between the commands and a number for each reply.
    let tat = count("GET of a key") + count("SET ... KEEPTTL");
    let limiter = count("returns at once: the limiter's") + count("the clock") + tat;
    let tokens =
        count("returns at once: tokens per minute") + count("the clock") + tat + count("INCRBY");
    assert!(limiter + tokens > 64_098, "{stdout}");
    // Even were the token script given the limiter's clock.
    assert!(limiter + tokens - count("the clock") > 64_098, "{stdout}");
    // Each command is thousands: a piece that measured nothing did not run.
    for row in [
        "the clock",
        "GET",
        "SET",
        "PSETEX",
        "INCRBY",
        "a reply of two",
    ] {
        assert!(count(row) > 1_000, "{row}: {stdout}");
    }
    assert!(
        count("returns at once: no key") < count("returns at once: the limiter's"),
        "{stdout}"
    );
}
