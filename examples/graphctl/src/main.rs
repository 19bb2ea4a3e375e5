//! The workspace's example graphctl: [`graphctl::Cli`] with the example graphs of graph-examples'
//! library registered (review, approval, escalation, checkout, word_count, research, composition's writer, scout and
//! translate, and both versions of versioning's refund with the migration between them), so it rebuilds
//! their runs' states and resumes them.
//!
//! ```text
//! cargo run -p graphctl-examples -- --store "$TMPDIR/graph-runtime-approval" runs
//! ```
//!
//! See docs/graphctl.md for every command, and for building a graphctl that registers your own graphs.

use graph_examples::{approval, composition, escalation, map_reduce, payments, research, review, versioning};

fn main() -> std::process::ExitCode {
    graphctl::Cli::new()
        .graph(review::review::graph())
        .graph(approval::approval_flow::graph())
        .graph(escalation::escalation_flow::graph())
        .graph(payments::checkout::graph())
        .graph(map_reduce::word_count::graph())
        .graph(research::agent::graph())
        .graph(composition::writer::graph())
        .graph(composition::scout::graph())
        .graph(composition::translate::graph())
        .migration(versioning::migration())
        .main()
}
