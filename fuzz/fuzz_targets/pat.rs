#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| svc_core::pat::fuzz_parse(data));
