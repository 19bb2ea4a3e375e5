//! The process the timer crash tests start and kill: a run on a sled store that sleeps (real time), and
//! a timer service that wakes it.
//!
//! `timer_child <store dir> <ledger> <sleep ms> start` starts run `nap`, prints `parked <wake_at_ms>`
//! once it sleeps, then serves the store's timers until killed; `... serve` serves them until `nap`
//! completes and prints `done <woke_at_ms>`. The node appends `woke <woke_at_ms>` to the ledger each
//! time it runs past its sleep.

use std::io::Write as _;
use std::time::Duration;

use graph_runtime::prelude::*;

/// The run's state: how long it sleeps, where it writes, when it woke.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nap {
    sleep_ms: u64,
    ledger: String,
    woke_at_ms: Option<u64>,
}

#[graph(state = Nap, name = "timer_child")]
mod napping {
    use super::*;

    #[node(entry, to = END)]
    async fn nap(s: &Nap, ctx: &mut Ctx) -> NodeResult<Nap> {
        let woke = ctx.sleep(Duration::from_millis(s.sleep_ms))?;
        let at = woke.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let mut ledger = std::fs::OpenOptions::new().create(true).append(true).open(&s.ledger).unwrap();
        writeln!(ledger, "woke {at}").unwrap();
        ledger.sync_all().unwrap();
        Ok(NapDelta::default().woke_at_ms(Some(at)))
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, ledger, sleep_ms, command] = &args[..] else {
        eprintln!("usage: timer_child <store dir> <ledger> <sleep ms> start|serve");
        std::process::exit(2);
    };
    let engine =
        Engine::builder(napping::graph()).store(SledStore::open(dir).expect("the store opens")).build();
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    match command.as_str() {
        "start" => {
            let input = Nap { sleep_ms: sleep_ms.parse().unwrap(), ledger: ledger.clone(), woke_at_ms: None };
            let out = engine.run("nap", input).await.expect("the run parks");
            println!("parked {}", out.status.wake_at_ms().expect("asleep"));
            std::io::stdout().flush().unwrap();
            // Serve until killed.
            std::future::pending::<()>().await;
        }
        "serve" => loop {
            let out = engine.outcome("nap").await.unwrap().expect("the run exists");
            if out.is_completed() {
                println!("done {}", out.state.woke_at_ms.unwrap());
                shutdown.cancel();
                service.await.unwrap().unwrap();
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        },
        _ => {
            eprintln!("unknown command");
            std::process::exit(2);
        }
    }
}
