//! A deploy while refunds wait for a person, told in one process on a sled store: build 1 (version 1
//! of the refund graph) parks three refunds at their question; build 2 (version 2, which serves
//! version 1 too) checks that it replays every stored run, answers one refund on version 1, moves the
//! other two to version 2 and answers them there, and starts a new refund on version 2.
//!
//! ```text
//! cargo run -p graph-examples --example versioning
//! ```
//!
//! The graphs are in `graph_examples::versioning`. The store is left in a temp folder for graphctl
//! (the command is printed at the end).

use graph_examples::versioning::{self, RefundV1, RefundV2, refund_v1, refund_v2};
use graph_runtime::prelude::*;
use graph_runtime::store::RunFilter;
use graph_runtime::{ReplayVerdict, Store};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("graph-runtime-versioning-{}", std::process::id()));
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(SledStore::open(&dir)?);

    // Build 1: version 1 only.
    let build1 = Engine::builder(refund_v1::graph()).shared_store(store.clone()).build();
    for (run, customer, amount) in [("refund-1", "ada", 40), ("refund-2", "bob", 700), ("refund-3", "cy", 5)]
    {
        let out = build1.run(run, versioning::request(customer, amount)).await?;
        println!("build 1: {run} asks {}", out.interrupts()[0].payload);
    }
    drop(build1);

    // Build 2: version 2, serving version 1, with the migration.
    let build2 = Engine::builder(refund_v2::graph())
        .serves(refund_v1::graph())
        .migration(versioning::migration())
        .shared_store(store.clone())
        .build();
    println!("build 2 serves versions {:?}", build2.versions());
    // The gate before the deploy: does this build replay what is stored?
    for check in build2.check_replays(&RunFilter::all()).await? {
        let same = matches!(check.verdict, ReplayVerdict::Same { .. });
        println!(
            "replay check: {} (version {}): {}",
            check.run_id,
            check.version,
            if same { "same" } else { "DIFFERS" }
        );
    }
    // refund-1 stays on version 1: answered through version 1's typed engine.
    let v1 = build2.version::<RefundV1>(1).ok_or("version 1 is served")?;
    let out = v1.resume_with_input("refund-1", &true).await?;
    println!("refund-1 on version 1: {}", out.state.log.join("; "));
    // refund-2 and refund-3 move to version 2 (a dry run first), then are answered there.
    let dry = build2.migrate_dry_run("refund-2", 2).await?;
    println!(
        "dry run: refund-2 would wait at {:?}, amount_cents = {}",
        dry.frontier.1, dry.state_after["amount_cents"]
    );
    for run in ["refund-2", "refund-3"] {
        let m = build2.migrate(run, 2).await?;
        println!(
            "migrated {run}: version {} → {} at step {} ({:?} → {:?})",
            m.from, m.to, m.step, m.frontier.0, m.frontier.1
        );
        let out: RunOutcome<RefundV2> = build2.resume_with_input(run, &true).await?;
        println!("{run} on version 2: {}", out.state.log.join("; "));
    }
    // New runs start on version 2.
    let out = build2
        .run("refund-4", RefundV2 { customer: "dee".into(), amount_cents: 1_250, ..Default::default() })
        .await?;
    println!("refund-4 starts on version 2 and asks {}", out.interrupts()[0].payload);
    drop(build2);
    drop(store);
    println!("\nlook at the runs (version column) and replay them with this build's graphs:");
    println!("  cargo run -p graphctl-examples -- --store {} runs", dir.display());
    println!("  cargo run -p graphctl-examples -- --store {} replay --all", dir.display());
    Ok(())
}
