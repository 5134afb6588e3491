//! Log lines to stdout in batches: a line is appended to a buffer in memory, and a thread of
//! its own writes what gathered at most every [`FLUSH_INTERVAL`], one `write` for many lines,
//! instead of one `write` per line on the thread serving the request.
//!
//! ```
//! use svc_runtime::telemetry::batched::BatchedStdout;
//! use tracing_subscriber::fmt::MakeWriter;
//! use std::io::Write;
//!
//! let (stdout, flush) = BatchedStdout::start();
//! writeln!(stdout.make_writer(), "{{\"message\":\"started\"}}").unwrap();
//! // Dropping (or `finish`ing) the guard writes what is left and stops the thread.
//! flush.finish();
//! ```
//!
//! A WARN or ERROR line is written at once on the caller's thread, with every line before it:
//! what explains a failure is never waiting in memory when the process dies. At most
//! [`MAX_PENDING`] bytes wait; past that a line is dropped and counted, and the next write
//! says how many were (a stdout nobody reads no longer blocks the service; before, it did).
//!
//! The thread parks once nothing came for a while (40 intervals); a line finding it parked
//! wakes it. Under steady traffic no line pays for a wake-up: each interval costs the thread
//! one sleep and one write, however many lines it carries.

use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// How long lines gather before they are written.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(5);
/// Empty intervals after which the thread parks.
const IDLE_ROUNDS: u32 = 40;
/// Bytes waiting at most; a line past it is dropped.
pub const MAX_PENDING: usize = 4 << 20;

/// Where batches go: stdout, or a test's buffer.
type Sink = Box<dyn Write + Send>;

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Lines dropped since the last write, for lack of room.
    dropped: u64,
    /// The thread waits for a line.
    parked: bool,
    stopping: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    /// Held while a batch is taken and written, so batches leave in order.
    sink: Mutex<Sink>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Appends one formatted line (or part of one); `false` when it was dropped.
    fn append(&self, line: &[u8]) -> bool {
        let mut pending = lock(&self.pending);
        if pending.bytes.len() + line.len() > MAX_PENDING {
            pending.dropped += 1;
            return false;
        }
        pending.bytes.extend_from_slice(line);
        if pending.parked {
            pending.parked = false;
            self.wake.notify_one();
        }
        true
    }

    /// Writes everything pending, in one write when the sink takes it.
    fn flush(&self) -> io::Result<()> {
        let mut sink = lock(&self.sink);
        let (bytes, dropped) = {
            let mut pending = lock(&self.pending);
            let dropped = std::mem::take(&mut pending.dropped);
            (std::mem::take(&mut pending.bytes), dropped)
        };
        if dropped > 0 {
            let note = format!(
                "{{\"level\":\"WARN\",\"message\":\"{dropped} log lines dropped: stdout did not keep up\"}}\n"
            );
            sink.write_all(note.as_bytes())?;
        }
        if !bytes.is_empty() {
            sink.write_all(&bytes)?;
        }
        sink.flush()?;
        // Keep the allocation for the next batch when it is of a usual size.
        if bytes.capacity() <= 64 << 10 {
            let mut bytes = bytes;
            bytes.clear();
            let mut pending = lock(&self.pending);
            if pending.bytes.is_empty() && pending.bytes.capacity() < bytes.capacity() {
                pending.bytes = bytes;
            }
        }
        Ok(())
    }

    /// The thread: write what gathered every interval; after [`IDLE_ROUNDS`] intervals with
    /// nothing to write, park until a line comes. Under steady traffic it never parks, so no
    /// line pays for waking it.
    fn run(&self) {
        let mut idle = 0;
        loop {
            {
                let mut pending = lock(&self.pending);
                let empty = |p: &Pending| p.bytes.is_empty() && p.dropped == 0;
                if empty(&pending) {
                    idle += 1;
                }
                while idle >= IDLE_ROUNDS && empty(&pending) && !pending.stopping {
                    pending.parked = true;
                    pending = self
                        .wake
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if !empty(&pending) {
                    idle = 0;
                }
                if pending.stopping {
                    pending.parked = false;
                    drop(pending);
                    let _ = self.flush();
                    return;
                }
            }
            std::thread::sleep(FLUSH_INTERVAL);
            // Nowhere to report a failing stdout; the lines are lost either way.
            let _ = self.flush();
        }
    }
}

/// A [`MakeWriter`] for the log layer: stdout, in batches. Cheap to clone.
#[derive(Clone)]
pub struct BatchedStdout {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BatchedStdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedStdout").finish_non_exhaustive()
    }
}

impl BatchedStdout {
    /// Starts the writing thread on stdout. Keep the guard for the life of the process and
    /// [`finish`](FlushGuard::finish) it on the way out; the lines still pending are written
    /// then.
    pub fn start() -> (BatchedStdout, FlushGuard) {
        BatchedStdout::start_on(Box::new(io::stdout()))
    }

    /// [`start`](BatchedStdout::start) on another sink.
    fn start_on(sink: Sink) -> (BatchedStdout, FlushGuard) {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            sink: Mutex::new(sink),
        });
        let runner = shared.clone();
        let thread = std::thread::Builder::new()
            .name("log-writer".to_owned())
            .spawn(move || runner.run())
            .ok();
        let writer = BatchedStdout {
            shared: shared.clone(),
        };
        (writer, FlushGuard { shared, thread })
    }
}

/// One event's writer.
#[derive(Debug)]
pub struct LineWriter<'a> {
    owner: &'a BatchedStdout,
    /// WARN and ERROR lines are written at once.
    urgent: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.owner.shared.append(buf);
        // A dropped line is still "written": the log layer has nowhere better to put it.
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        // The whole event has been written once its writer goes.
        if self.urgent {
            let _ = self.owner.shared.flush();
        }
    }
}

impl<'a> MakeWriter<'a> for BatchedStdout {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter {
            owner: self,
            urgent: false,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter<'a> {
        LineWriter {
            owner: self,
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

/// Stops the writing thread and writes what is pending, on [`finish`](FlushGuard::finish) or
/// drop. Without a thread (it could not start) every line waits for this.
#[derive(Debug)]
pub struct FlushGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl FlushGuard {
    /// Writes what is pending and stops the thread.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        lock(&self.shared.pending).stopping = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = self.shared.flush();
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A sink that records each write it was given.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<u8>>>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Writes {
        fn text(&self) -> String {
            String::from_utf8(lock(&self.0).concat()).unwrap()
        }
        fn count(&self) -> usize {
            lock(&self.0).len()
        }
    }

    fn wait_for(writes: &Writes, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while writes.text() != text {
            assert!(Instant::now() < deadline, "still {:?}", writes.text());
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn lines_written_together_leave_in_one_write() {
        let writes = Writes::default();
        let (stdout, guard) = BatchedStdout::start_on(Box::new(writes.clone()));
        for i in 0..100 {
            writeln!(stdout.make_writer(), "line {i}").unwrap();
        }
        let expected: String = (0..100).map(|i| format!("line {i}\n")).collect();
        wait_for(&writes, &expected);
        assert!(writes.count() <= 2, "{} writes", writes.count());
        guard.finish();
    }

    #[test]
    fn a_line_logged_alone_still_goes_out() {
        let writes = Writes::default();
        let (stdout, _guard) = BatchedStdout::start_on(Box::new(writes.clone()));
        writeln!(stdout.make_writer(), "first").unwrap();
        wait_for(&writes, "first\n");
        std::thread::sleep(FLUSH_INTERVAL * 4);
        writeln!(stdout.make_writer(), "second").unwrap();
        wait_for(&writes, "first\nsecond\n");
    }

    #[test]
    fn finishing_writes_what_is_pending() {
        let writes = Writes::default();
        let (stdout, guard) = BatchedStdout::start_on(Box::new(writes.clone()));
        writeln!(stdout.make_writer(), "last words").unwrap();
        guard.finish();
        assert_eq!(writes.text(), "last words\n");
    }

    #[test]
    fn a_warning_is_written_at_once_after_the_lines_before_it() {
        let writes = Writes::default();
        let (stdout, _guard) = BatchedStdout::start_on(Box::new(writes.clone()));
        let subscriber = crate::telemetry::subscriber(
            &crate::telemetry::LogSettings {
                level: crate::telemetry::LogLevel::Info,
                format: crate::telemetry::LogFormat::Text,
            },
            stdout,
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("calm");
            tracing::warn!("trouble");
            // No wait: the warning took the info line with it.
            let text = writes.text();
            assert!(text.contains("calm") && text.contains("trouble"), "{text}");
            assert!(text.find("calm") < text.find("trouble"));
        });
    }

    #[test]
    fn lines_past_the_limit_are_dropped_and_counted() {
        let writes = Writes::default();
        let shared = Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            sink: Mutex::new(Box::new(writes.clone())),
        };
        let big = vec![b'x'; MAX_PENDING / 2];
        assert!(shared.append(&big));
        assert!(shared.append(&big));
        assert!(!shared.append(b"one too many\n"));
        shared.flush().unwrap();
        let text = writes.text();
        assert!(text.starts_with("{\"level\":\"WARN\",\"message\":\"1 log lines dropped"));
        assert_eq!(text.len() - text.find('}').unwrap() - 2, MAX_PENDING);
    }
}
