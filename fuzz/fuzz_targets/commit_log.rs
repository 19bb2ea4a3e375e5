#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_fuzz::commit_log(data));
