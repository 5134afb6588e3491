//! What the tests of the real binaries' telemetry share: a fake OTLP collector, and building
//! and running the binaries.

pub(crate) mod collector;
pub(crate) mod procs;
