//! The process the timer crash tests start and kill: a run on a sled store that sleeps (real time) and,
//! with `mail` 1, then waits for an external event; a timer service that wakes it; a sender.
//!
//! `timer_child <store dir> <ledger> <sleep ms> <mail 0|1> start` starts run `nap`, prints
//! `parked <wake_at_ms>` once it sleeps, then serves the store's timers until killed; `... serve` serves
//! them until `nap` completes and prints `done <woke_at_ms>`; `... send <payload>` sends the event `go`
//! to `nap` and exits at once, serving nothing. The node appends `woke <woke_at_ms>` (and ` got
//! <payload>`) to the ledger each time it runs past its waits.

use std::io::Write as _;
use std::time::Duration;

use graph_runtime::prelude::*;

/// The run's state: how long it sleeps, where it writes, when it woke.
#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Nap {
    sleep_ms: u64,
    mail: bool,
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
        let got = match s.mail {
            true => format!(" got {}", ctx.wait_event::<String>("go")?),
            false => String::new(),
        };
        let mut ledger = std::fs::OpenOptions::new().create(true).append(true).open(&s.ledger).unwrap();
        writeln!(ledger, "woke {at}{got}").unwrap();
        ledger.sync_all().unwrap();
        Ok(NapDelta::default().woke_at_ms(Some(at)))
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, ledger, sleep_ms, mail, command, rest @ ..] = &args[..] else {
        eprintln!("usage: timer_child <store dir> <ledger> <sleep ms> <mail 0|1> start|serve|send <payload>");
        std::process::exit(2);
    };
    let engine =
        Engine::builder(napping::graph()).store(SledStore::open(dir).expect("the store opens")).build();
    if command == "send" {
        let sent = engine.send_event("nap", "go", &rest[0]).await.expect("sent");
        println!("sent {}", sent.seq);
        return;
    }
    let shutdown = CancellationToken::new();
    let service = tokio::spawn({
        let (engine, shutdown) = (engine.clone(), shutdown.clone());
        async move { engine.run_timers(shutdown).await }
    });
    match command.as_str() {
        "start" => {
            let input = Nap {
                sleep_ms: sleep_ms.parse().unwrap(),
                mail: mail == "1",
                ledger: ledger.clone(),
                woke_at_ms: None,
            };
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
