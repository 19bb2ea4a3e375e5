//! The closure given to `ctx.effect(..).run(..)` is the node's I/O zone: its response is journaled (a
//! retry, resume or replay reads it back), so it may read the wall clock and touch a process-wide
//! `static` (a client, a counter); the purity lints still check the node around it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use graph_runtime::prelude::*;

static SENT: AtomicU64 = AtomicU64::new(0);

#[reducer]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Mail {
    pub to: String,
    pub sent_at_ms: u64,
    pub receipt: u64,
}

#[graph(state = Mail)]
mod mailer {
    use super::*;

    #[node(entry, to = END)]
    async fn send(s: &Mail, ctx: &mut Ctx) -> NodeResult<Mail> {
        let (at, receipt): (u64, u64) = ctx
            .effect("send_mail", &s.to)
            .run(|_key| async move {
                let at = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as u64;
                let receipt = SENT.fetch_add(1, Ordering::SeqCst) + 1;
                Ok::<_, NodeError>((at, receipt))
            })
            .await?;
        Ok(MailDelta::default().sent_at_ms(at).receipt(receipt))
    }
}

/// Runs the case (a `#[tokio::test]` of `tests/pass.rs`).
pub(crate) async fn main() {
    let engine = Engine::builder(mailer::graph()).build();
    let out = engine.run("m", Mail { to: "ops@example.com".into(), ..Default::default() }).await.unwrap();
    assert!(out.is_completed());
    assert!(out.state.sent_at_ms > 0);
    assert_eq!(out.state.receipt, SENT.load(Ordering::SeqCst));
}
