//! The macros' pass cases: each file of `tests/pass/` is a graph written with the macros, a module of
//! this test crate, that must compile warning-free and run to its assertions. (The cases that test
//! crate-level attributes or items at a crate's root are crates of their own: `tests/crate_level/`.)

#![deny(warnings)]

#[path = "pass/breakpoints.rs"]
mod breakpoints;
#[path = "pass/conditional.rs"]
mod conditional;
#[path = "pass/custom_reducer.rs"]
mod custom_reducer;
#[path = "pass/effect_io_zone.rs"]
mod effect_io_zone;
#[path = "pass/fan_out_fan_in.rs"]
mod fan_out_fan_in;
#[path = "pass/fork_with_inputs.rs"]
mod fork_with_inputs;
#[path = "pass/linear.rs"]
mod linear;
#[path = "pass/loop_with_exit.rs"]
mod loop_with_exit;
#[path = "pass/macro_rules_nodes.rs"]
mod macro_rules_nodes;
#[path = "pass/router.rs"]
mod router;
#[path = "pass/subgraph.rs"]
mod subgraph;
#[path = "pass/versions.rs"]
mod versions;
#[path = "pass/wait_for.rs"]
mod wait_for;

#[tokio::test(flavor = "current_thread")]
async fn breakpoints() {
    breakpoints::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn conditional() {
    conditional::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn custom_reducer() {
    custom_reducer::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn fan_out_fan_in() {
    fan_out_fan_in::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn fork_with_inputs() {
    fork_with_inputs::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn linear() {
    linear::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn loop_with_exit() {
    loop_with_exit::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn macro_rules_nodes() {
    macro_rules_nodes::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn router() {
    router::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn wait_for() {
    wait_for::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn subgraph() {
    subgraph::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn effect_io_zone() {
    effect_io_zone::main().await;
}

#[tokio::test(flavor = "current_thread")]
async fn versions() {
    versions::main().await;
}
