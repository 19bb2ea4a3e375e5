#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_fuzz::http_api(data));
