//! [`Secret`]: a value that never prints (DSNs, API keys, URLs with passwords).
//!
//! ```
//! use svc_runtime::Secret;
//!
//! let dsn = Secret::new("postgres://app:hunter2@db/svc");
//! assert!(!format!("{dsn:?}").contains("hunter2"));
//! assert_eq!(dsn.expose(), "postgres://app:hunter2@db/svc");
//! ```

use std::fmt;

/// A value that must never be printed; `Debug` shows `Secret(omitted)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the one place that must use it (a driver, an outgoing header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(omitted)")
    }
}
