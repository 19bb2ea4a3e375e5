//! Fails: randomness in a merge function.

mod chrono {
    pub struct Utc;
    impl Utc {
        pub fn now() -> u64 {
            0
        }
    }
}

mod rand {
    pub fn random<T: Default>() -> T {
        T::default()
    }
    pub fn thread_rng() -> u64 {
        0
    }
    pub fn rng() -> u64 {
        0
    }
}

mod uuid {
    pub struct Uuid;
    impl Uuid {
        pub fn new_v4() -> u128 {
            0
        }
    }
}

use graph_runtime::prelude::*;

#[reducer]
fn merge_log(current: &mut Vec<String>, written: Vec<String>) {
    if crate::rand::random::<bool>() {
        current.extend(written);
    }
}

fn main() {}
