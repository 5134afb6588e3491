//! The svc benches: criterion benches under `benches/`, and [`load`], the end-to-end harness
//! behind the `svc-load` binary.

pub mod load;
