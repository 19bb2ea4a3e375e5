#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| graph_fuzz::graphctl_args(data));
