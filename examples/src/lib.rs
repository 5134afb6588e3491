//! Integration templates; see the binaries under `examples/`.
