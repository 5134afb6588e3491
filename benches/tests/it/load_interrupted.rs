//! `svc-load` stopped by Ctrl-C while it measures removes the database and Redis keys it made,
//! as a finished run does.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_svc-load");
/// Long enough that the run is still measuring when the signal arrives.
const REQUESTS: &str = "1000000";

/// The value of `name=` in a text log line, without its quotes.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}="))? + name.len() + 1;
    Some(line[start..].split_whitespace().next()?.trim_matches('"'))
}

#[tokio::test]
async fn ctrl_c_while_measuring_removes_the_database_and_the_keys() {
    let mut child = Command::new(BIN)
        .args(["--requests", REQUESTS, "--max-seconds", "600"])
        .env("SVC_TEST_POSTGRES_URL", svc_testkit::postgres_admin_url())
        .env("REDIS_URL", svc_testkit::redis_url())
        .env("SVC_LOG_LEVEL", "INFO")
        .env("SVC_LOG_FORMAT", "text")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start svc-load");
    let stderr = child.stderr.take().expect("stderr");
    // Reads stderr to its end, so the child never blocks on a full pipe, and hands over the
    // line that names the run's database.
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("the stack is up") {
                let _ = tx.send(line.clone());
            }
            lines.push(line);
        }
        lines
    });
    let up = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("svc-load reports its stack up");
    let database = field(&up, "database").expect("database=").to_owned();
    let prefix = field(&up, "redis_prefix")
        .expect("redis_prefix=")
        .to_owned();
    assert!(database.starts_with("svc_load_"), "{up}");

    let mut admin =
        <sqlx::PgConnection as sqlx::Connection>::connect(&svc_testkit::postgres_admin_url())
            .await
            .expect("PostgreSQL");
    let there: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_database WHERE datname = $1")
        .bind(&database)
        .fetch_one(&mut admin)
        .await
        .expect("query pg_database");
    assert_eq!(there, 1, "{database} exists while the run measures");

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let exit = child.wait().expect("svc-load exits");
    let lines = reader.join().expect("stderr reader");
    assert_eq!(exit.code(), Some(2), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("interrupted")),
        "{lines:#?}"
    );

    common::assert_removed(&database, &prefix).await;
}
