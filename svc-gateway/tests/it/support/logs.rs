//! The `svc-gateway` binary with its logs captured: started with a cleared environment and
//! the given variables, stdout and stderr read line by line into one buffer, killed when the
//! handle is dropped.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Request;
use http_body_util::Full;

use super::client;

/// A running gateway binary and everything it has logged so far.
pub struct LoggedGateway {
    child: Child,
    logs: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl LoggedGateway {
    /// Starts the binary on a free port with `vars` (and nothing else from the environment);
    /// returns once it serves `/health`.
    pub async fn start(vars: &[(&str, &str)]) -> LoggedGateway {
        let port = svc_testkit::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_svc-gateway"))
            .env_clear()
            .env("SVC_PORT", port.to_string())
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the binary");
        let logs = Arc::new(Mutex::new(String::new()));
        let pipes: [Option<Box<dyn Read + Send>>; 2] = [
            child.stdout.take().map(|p| Box::new(p) as _),
            child.stderr.take().map(|p| Box::new(p) as _),
        ];
        let readers = pipes
            .into_iter()
            .flatten()
            .map(|pipe| {
                let logs = logs.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                        let mut logs = logs.lock().unwrap();
                        logs.push_str(&line);
                        logs.push('\n');
                    }
                })
            })
            .collect();
        let gateway = LoggedGateway {
            child,
            logs,
            readers,
            base: format!("http://127.0.0.1:{port}"),
        };
        let http = client();
        let up = svc_testkit::eventually(Duration::from_secs(10), || async {
            let request = Request::get(format!("{}/health", gateway.base))
                .body(Full::default())
                .unwrap();
            matches!(http.request(request).await, Ok(r) if r.status() == 200)
        })
        .await;
        assert!(up, "the binary serves /health:\n{}", gateway.logs());
        gateway
    }

    /// Stops the binary with SIGTERM and returns everything it logged, to its last line.
    pub async fn stop(mut self) -> String {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
        let exited = svc_testkit::eventually(Duration::from_secs(10), || {
            std::future::ready(matches!(self.child.try_wait(), Ok(Some(_))))
        })
        .await;
        assert!(exited, "the binary exits on SIGTERM");
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        self.logs()
    }

    /// Everything logged so far.
    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// The JSON log lines so far that `keep` accepts.
    pub fn lines(&self, keep: impl Fn(&serde_json::Value) -> bool) -> Vec<serde_json::Value> {
        self.logs()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .filter(|line| keep(line))
            .collect()
    }

    /// Waits (bounded) for a JSON log line `keep` accepts.
    pub async fn line(&self, keep: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let mut found = None;
        svc_testkit::eventually(Duration::from_secs(5), || {
            found = self.lines(&keep).into_iter().next();
            std::future::ready(found.is_some())
        })
        .await;
        found.unwrap_or_else(|| panic!("no such log line in:\n{}", self.logs()))
    }
}

impl Drop for LoggedGateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
