//! Payments that happen once, even when the process is killed mid-run.
//!
//! Three orders, one durable run each on a sled store: check → charge → ship. `charge` calls a payment
//! provider that is not idempotent (each call is a line in its ledger file) through `ctx.effect`. This
//! example re-runs itself as child processes: the first is told to abort right after an order's charge
//! returned, before the step committed; the next resumes every order. The provider's ledger then shows
//! exactly one charge per order, and the outbox one receipt per order. `--crash inside-charge` aborts
//! inside the call instead, before the response is journaled: that run pauses for a person
//! (`NeedsConfirmation`), who is answered from the provider's records. The graph and the story are in
//! `graph_examples::payments`.
//!
//! ```text
//! cargo run -p graph-examples --example payments [-- --crash after-charge|inside-charge]
//! ```

use std::path::PathBuf;
use std::process::Command;

use graph_examples::payments::{self, CRASH_ENV, Crash};

/// The order whose charge the first process crashes in.
const CRASHED_ORDER: &str = "order-2";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut crash = Crash::AfterCharge(CRASHED_ORDER.to_owned());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // A child: one process's work, then exit (or abort, when CRASH_ENV says so).
            "--child" => {
                let dir = PathBuf::from(args.next().ok_or("--child needs a directory")?);
                return payments::process(&dir, &mut std::io::stdout()).await;
            }
            "--crash" => {
                crash = match args.next().as_deref() {
                    Some("after-charge") => Crash::AfterCharge(CRASHED_ORDER.to_owned()),
                    Some("inside-charge") => Crash::InsideCharge(CRASHED_ORDER.to_owned()),
                    _ => return Err("--crash takes `after-charge` or `inside-charge`".into()),
                };
            }
            other => return Err(format!("unknown argument `{other}`; see the top of payments.rs").into()),
        }
    }
    let dir = std::env::temp_dir().join("graph-runtime-payments");
    let exe = std::env::current_exe()?;
    let mut spawn = |crash: Option<String>| {
        let mut child = Command::new(&exe);
        child.arg("--child").arg(&dir);
        match crash {
            Some(value) => child.env(CRASH_ENV, value),
            None => child.env_remove(CRASH_ENV),
        };
        child.status()
    };
    let report = payments::demo(&dir, &crash, &mut spawn, &mut std::io::stdout()).await?;
    println!("processes after the crash: {}; confirmations asked: {}", report.resumes, report.confirmations);
    Ok(())
}
