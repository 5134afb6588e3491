//! The svc benches: criterion benches under `benches/`; [`load`], the in-process end-to-end
//! harness behind the `svc-load` binary; and [`harness`], the real binaries as separate
//! processes behind `svc-harness`.

pub mod harness;
pub mod load;
pub mod soak;
