#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| svc_auth_server::pat::fuzz_parse(data));
