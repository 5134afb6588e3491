//! A gateway in process whose provider registry is a TOML file the test writes.

use svc_testkit::TempDir;

use crate::support::Env;

/// A gateway whose `SVC_PROVIDERS_FILE` holds `file`, with `extra` variables (the keys the
/// file names), and the directory that holds the file: keep it for the gateway's lifetime.
pub(crate) async fn gateway(file: &str, extra: &[(&str, &str)]) -> (Env, TempDir) {
    let dir = TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(&path, file).expect("write the registry file");
    let path = path.to_str().expect("a UTF-8 temp path").to_owned();
    let mut vars = vec![("SVC_PROVIDERS_FILE", path.as_str())];
    vars.extend_from_slice(extra);
    (Env::mock(&vars).await, dir)
}
