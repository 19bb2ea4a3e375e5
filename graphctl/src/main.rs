//! The stock graphctl: [`graphctl::Cli`] with no graph registered. Every command reads a store's runs
//! without the graphs' code except `state` and `diff` of steps stored as deltas, and `resume`, which need
//! the graph: build your own graphctl that registers your graphs for those (docs/graphctl.md).
//!
//! ```text
//! cargo run -p graphctl -- --store data runs
//! ```

fn main() -> std::process::ExitCode {
    graphctl::Cli::new().main()
}
