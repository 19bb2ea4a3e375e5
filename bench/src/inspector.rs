//! The `inspector` workload: `graphctl serve`'s API over a sled store of 100,000 runs, asked for pages
//! of the runs list (the first, pages at random cursors, a status filter, an id prefix) and for run
//! pages, over HTTP on loopback as a browser asks; each request's latency, from the request written to
//! the response read whole.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use graph_runtime::store::{Durability, SledOptions, SledStore};
use graph_runtime::{Engine, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Count, loop_graph};

/// Makes the path of each request of a kind.
type Paths = Box<dyn FnMut() -> String>;

/// The id of run `i`.
fn run_id(i: u64) -> String {
    format!("run-{i:06}")
}

/// Fills a sled store at `dir` with `runs` runs of two steps (every tenth submitted and left running,
/// the rest completed), serves it as `graphctl serve` does, and measures `requests` requests of each
/// kind. One JSON record per kind.
pub async fn inspector_workload(dir: &Path, runs: u64, requests: usize) -> Vec<Value> {
    let store =
        SledStore::open_with(dir, SledOptions::default().durability(Durability::Async)).expect("sled opens");
    let store: Arc<dyn Store> = Arc::new(store);
    let engine = Engine::builder(loop_graph(2)).shared_store(store.clone()).build();
    let t = Instant::now();
    for i in 0..runs {
        if i % 10 == 0 {
            engine.submit(&run_id(i), Count::default()).await.expect("submits");
        } else {
            engine.run(&run_id(i), Count::default()).await.expect("runs");
        }
    }
    eprintln!("inspector: {runs} runs stored in {:.1} s", t.elapsed().as_secs_f64());
    let app = graphctl::Cli::new().graph(loop_graph(2)).router(store, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serves") });

    // A fixed sequence of cursors and prefixes (a linear congruential generator: the same in every run).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pick = move |below: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % below
    };
    let kinds: Vec<(&str, Paths)> = vec![
        ("first page", Box::new(|| "/api/runs?limit=50".to_owned())),
        ("page at a cursor", Box::new(move || format!("/api/runs?limit=50&after={}", run_id(pick(runs))))),
        (
            "running, at a cursor",
            Box::new(move || format!("/api/runs?limit=50&status=running&after={}", run_id(pick(runs)))),
        ),
        ("id prefix", Box::new(move || format!("/api/runs?limit=50&prefix=run-{:04}", pick(runs / 100)))),
        ("a run's page (show)", Box::new(move || format!("/api/runs/{}", run_id(pick(runs))))),
    ];
    let mut out = Vec::new();
    for (kind, mut path) in kinds {
        // Warm: the first requests of a kind read sled's pages from disk.
        for _ in 0..5 {
            get(addr, &path()).await;
        }
        let mut ms = Vec::with_capacity(requests);
        let mut rows = 0;
        for _ in 0..requests {
            let p = path();
            let t = Instant::now();
            let body = get(addr, &p).await;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            rows = body["runs"].as_array().map_or(1, Vec::len);
        }
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms[((ms.len() as f64 * q).ceil() as usize).clamp(1, ms.len()) - 1];
        out.push(json!({
            "workload": "inspector", "mode": kind, "runs": runs, "requests": requests, "rows": rows,
            "ms_p50": at(0.50), "ms_p99": at(0.99), "ms_max": ms[ms.len() - 1],
            "note": "graphctl serve's router on 127.0.0.1, HTTP/1.1, one request at a time"
        }));
    }
    out
}

/// One GET over a connection of its own; the response's JSON body (a non-200 answer panics).
async fn get(addr: std::net::SocketAddr, path: &str) -> Value {
    let mut c = tokio::net::TcpStream::connect(addr).await.expect("connects");
    let request = format!("GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n");
    c.write_all(request.as_bytes()).await.expect("writes");
    let mut response = Vec::new();
    c.read_to_end(&mut response).await.expect("reads");
    let text = String::from_utf8(response).expect("UTF-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("a response with a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: not JSON ({e})"))
}
