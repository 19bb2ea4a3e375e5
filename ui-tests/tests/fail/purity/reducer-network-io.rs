//! Fails: network I/O in a merge function.

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    let _s = std::net::TcpStream::connect("127.0.0.1:9");
    current.extend(written);
}

fn main() {}
