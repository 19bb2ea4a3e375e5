//! `graphctl serve`'s API, driven in process through `Cli::router` on a sled store and a SQLite
//! store filled with runs of the example graphs: every endpoint, bad input answered 4xx with a typed
//! JSON body and nothing written, the token rules of actions, the body limit, and the OpenAPI
//! description naming every route.

use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use graph_examples::approval::{self, approval_flow};
use graph_examples::payments::{Order, checkout};
use graph_runtime::Store;
use graph_runtime::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

mod common;

const TOKEN: &str = "s3cret-token-for-tests";

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// `expense-1` (approval, waiting for its approver) and `order-1` (checkout, completed).
async fn fill(store: Arc<dyn Store>, ledger: &Path) {
    let orders = Engine::builder(checkout::graph()).shared_store(store.clone()).build();
    let order = Order {
        id: "order-1".into(),
        customer: "alice".into(),
        amount_cents: 3000,
        provider: ledger.display().to_string(),
        ..Order::default()
    };
    assert!(orders.run("order-1", order).await.unwrap().is_completed());
    let expenses = Engine::builder(approval_flow::graph()).shared_store(store).build();
    assert_eq!(expenses.run("expense-1", approval::sample_request()).await.unwrap().interrupts().len(), 1);
}

fn router(store: Arc<dyn Store>, token: Option<&str>) -> axum::Router {
    graphctl::Cli::new()
        .graph(checkout::graph())
        .graph(approval_flow::graph())
        .router(store, token.map(str::to_owned))
}

/// One request: (status, JSON body).
async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let response = app.clone().oneshot(req.body(Body::from(body.to_owned())).unwrap()).await.unwrap();
    let status = response.status();
    if path.contains(".svg") && status == StatusCode::OK {
        assert_eq!(response.headers()["content-type"], "image/svg+xml", "{method} {path}");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
        return (status, Value::String(String::from_utf8(bytes.to_vec()).unwrap()));
    }
    if path.ends_with("/live") && status == StatusCode::OK {
        // A stream: whole once it ends (an ended run's ends at once).
        assert_eq!(response.headers()["content-type"], "text/event-stream", "{method} {path}");
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
        return (status, Value::String(String::from_utf8(bytes.to_vec()).unwrap()));
    }
    assert_eq!(response.headers()["content-type"], "application/json", "{method} {path}");
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e})")))
}

/// The next chunk of a streamed answer (`None` at its end).
async fn next_chunk(body: &mut axum::body::BodyDataStream) -> Option<Result<axum::body::Bytes, axum::Error>> {
    std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut *body), cx)).await
}

/// The typed error body: its kind.
fn kind(body: &Value) -> &str {
    body["error"]["kind"].as_str().unwrap_or_else(|| panic!("not an error body: {body}"))
}

async fn every_endpoint(store: Arc<dyn Store>, dir: &Path) {
    let app = router(store.clone(), Some(TOKEN));
    let get = |path: String| {
        let app = app.clone();
        async move { call(&app, "GET", &path, None, "").await }
    };
    let (s, runs) = get("/api/runs".into()).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> =
        runs["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["expense-1", "order-1"], "in run-id order");
    assert_eq!(runs["next"], Value::Null, "one page holds them");
    let expense = &runs["runs"][0];
    assert_eq!((expense["graph"].as_str(), expense["version"].as_u64()), (Some("approval"), Some(1)));
    assert!(expense["started_ms"].as_u64().unwrap() <= expense["updated_ms"].as_u64().unwrap(), "{expense}");
    // Pages of one, each from the `next` of the one before; a prefix; a page past the end.
    let (_, first) = get("/api/runs?limit=1".into()).await;
    assert_eq!(
        (first["runs"][0]["run_id"].as_str(), first["next"].as_str()),
        (Some("expense-1"), Some("expense-1"))
    );
    let (_, second) = get("/api/runs?limit=1&after=expense-1".into()).await;
    assert_eq!(
        (second["runs"][0]["run_id"].as_str(), second["next"].as_str()),
        (Some("order-1"), Some("order-1"))
    );
    let (_, end) = get("/api/runs?limit=1&after=order-1".into()).await;
    assert_eq!((end["runs"].as_array().unwrap().len(), &end["next"]), (0, &Value::Null));
    let (_, orders) = get("/api/runs?prefix=ord".into()).await;
    assert_eq!(orders["runs"].as_array().unwrap().len(), 1, "{orders}");
    assert_eq!(orders["runs"][0]["run_id"], "order-1");
    let (_, waiting) = get("/api/runs?status=interrupted&limit=5".into()).await;
    assert_eq!(waiting["runs"][0]["interrupts"][0]["node"], "approve");
    let (s, show) = get("/api/runs/expense-1".into()).await;
    assert_eq!(
        (s, show["status"].as_str(), show["version"].as_u64()),
        (StatusCode::OK, Some("interrupted"), Some(1))
    );
    let (_, history) = get("/api/runs/order-1/history".into()).await;
    assert_eq!(history["history"].as_array().map(Vec::len), Some(4), "{history}");
    let (_, state) = get("/api/runs/order-1/state?step=3".into()).await;
    assert_eq!(state["state"]["amount_cents"], 3000);
    let (s, diff) = get("/api/runs/order-1/diff?from=0&to=3".into()).await;
    assert_eq!(s, StatusCode::OK, "{diff}");
    let (_, graph) = get("/api/runs/order-1/graph".into()).await;
    assert!(graph["mermaid"].as_str().is_some_and(|m| m.starts_with("flowchart")), "{graph}");
    let (_, dot) = get("/api/runs/order-1/graph?dot=true".into()).await;
    assert!(dot.to_string().contains("digraph"), "{dot}");
    let (s, svg) = get("/api/runs/expense-1/graph.svg".into()).await;
    let svg = svg.as_str().unwrap().to_owned();
    assert_eq!(s, StatusCode::OK);
    assert!(svg.contains("class=\"node waiting\" data-node=\"approve\""), "{svg}");
    assert!(svg.contains("class=\"node visited\""), "{svg}");
    let (_, events) = get("/api/runs/order-1/events?from=1&limit=2".into()).await;
    assert_eq!(events["events"].as_array().map(Vec::len), Some(2), "{events}");
    let (s, verify) = get("/api/runs/order-1/verify".into()).await;
    assert_eq!(s, StatusCode::OK, "{verify}");
    let (s, _) = get("/api/runs/order-1/effects".into()).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = get("/api/runs/expense-1/mailbox".into()).await;
    assert_eq!(s, StatusCode::OK);
    // The checkout's receipt and shipment, written with their commits; no relay delivered them here.
    let (s, outbox) = get("/api/runs/order-1/outbox".into()).await;
    let rows = outbox["outbox"].as_array().unwrap();
    let topics: Vec<&str> = rows.iter().map(|r| r["topic"].as_str().unwrap()).collect();
    assert_eq!((s, topics), (StatusCode::OK, vec!["receipts", "shipments"]), "{outbox}");
    assert!(rows.iter().all(|r| r["delivered"] == false), "{outbox}");
    // Live: a completed run's stream says where it stands once and ends; a waiting run's starts the same.
    let live = |path: &'static str| {
        let app = app.clone();
        async move {
            let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
            assert_eq!(response.headers()["content-type"], "text/event-stream", "{path}");
            let mut body = response.into_body().into_data_stream();
            let first = tokio::time::timeout(std::time::Duration::from_secs(10), next_chunk(&mut body)).await;
            let first = String::from_utf8(first.unwrap().unwrap().unwrap().to_vec()).unwrap();
            (first, body)
        }
    };
    let (first, mut rest) = live("/api/runs/order-1/live").await;
    let data: Value = serde_json::from_str(first.split("data: ").nth(1).unwrap().trim()).unwrap();
    assert!(first.starts_with("event: run\n"), "{first}");
    assert_eq!(
        (data["status"].as_str(), data["latest_step"].as_u64()),
        (Some("completed"), Some(3)),
        "{data}"
    );
    let end = tokio::time::timeout(std::time::Duration::from_secs(10), next_chunk(&mut rest)).await.unwrap();
    assert!(end.is_none(), "the stream of an ended run ends: {end:?}");
    let (first, _) = live("/api/runs/expense-1/live").await;
    assert!(first.contains("\"status\":\"interrupted\""), "{first}");
    let (s, body) = get("/api/runs/nope/live".into()).await;
    assert_eq!((s, kind(&body)), (StatusCode::NOT_FOUND, "not_found"), "{body}");
    let (s, _) = get("/api/schedules".into()).await;
    assert_eq!(s, StatusCode::OK);
    // Actions, with the token.
    let before = store.run_info("expense-1").await.unwrap().unwrap();
    let (s, sent) = call(
        &app,
        "POST",
        "/api/runs/expense-1/send-event",
        Some(TOKEN),
        r#"{"topic":"note","payload":{"n":1},"key":"k1"}"#,
    )
    .await;
    assert_eq!((s, sent["seq"].as_u64()), (StatusCode::OK, Some(0)), "{sent}");
    let (s, again) = call(
        &app,
        "POST",
        "/api/runs/expense-1/send-event",
        Some(TOKEN),
        r#"{"topic":"note","payload":{"n":1},"key":"k1"}"#,
    )
    .await;
    assert_eq!((s, again["duplicate"].as_bool()), (StatusCode::OK, Some(true)));
    let (s, resumed) = call(&app, "POST", "/api/runs/expense-1/resume", Some(TOKEN), "").await;
    assert_eq!((s, resumed["status"].as_str()), (StatusCode::OK, Some("interrupted")), "{resumed}");
    assert_eq!(store.run_info("expense-1").await.unwrap().unwrap().status, before.status);
    // An answer that does not read as the question's type changes nothing; the right one goes on.
    let (s, refused) =
        call(&app, "POST", "/api/runs/expense-1/answer", Some(TOKEN), r#"{"input":"maybe"}"#).await;
    assert_eq!((s, kind(&refused)), (StatusCode::CONFLICT, "refused"), "{refused}");
    assert_eq!(store.run_info("expense-1").await.unwrap().unwrap().status, before.status);
    let (s, answered) =
        call(&app, "POST", "/api/runs/expense-1/answer", Some(TOKEN), r#"{"input":true}"#).await;
    assert_eq!(s, StatusCode::OK, "{answered}");
    assert_ne!(answered["status"], "interrupted", "{answered}");
    let (s, body) = call(&app, "POST", "/api/runs/expense-1/answer", Some(TOKEN), r#"{"input":true}"#).await;
    assert_eq!((s, kind(&body)), (StatusCode::CONFLICT, "refused"), "asked nothing now: {body}");
    let (s, cancelled) = call(&app, "POST", "/api/runs/order-1/cancel", Some(TOKEN), "").await;
    assert_eq!(
        (s, cancelled["status"].as_str()),
        (StatusCode::OK, Some("completed")),
        "a completed run stays: {cancelled}"
    );
    // Fork, resolve an effect, hand back.
    let (s, forked) =
        call(&app, "POST", "/api/runs/order-1/fork", Some(TOKEN), r#"{"step":2,"new_run":"order-1-b"}"#)
            .await;
    assert_eq!(
        (s, forked["run_id"].as_str(), forked["status"].as_str()),
        (StatusCode::OK, Some("order-1-b"), Some("running")),
        "{forked}"
    );
    let (s, again) =
        call(&app, "POST", "/api/runs/order-1/fork", Some(TOKEN), r#"{"step":2,"new_run":"order-1-b"}"#)
            .await;
    assert_eq!((s, kind(&again)), (StatusCode::CONFLICT, "refused"), "the id is taken: {again}");
    let (s, body) =
        call(&app, "POST", "/api/runs/order-1/resolve-effect", Some(TOKEN), r#"{"key":"nope","retry":true}"#)
            .await;
    assert_eq!(
        (s, kind(&body)),
        (StatusCode::CONFLICT, "refused"),
        "no effect waits for confirmation: {body}"
    );
    let (s, body) = call(
        &app,
        "POST",
        "/api/runs/order-1/resolve-effect",
        Some(TOKEN),
        r#"{"key":"nope","retry":true,"fail":"x"}"#,
    )
    .await;
    assert_eq!((s, kind(&body)), (StatusCode::BAD_REQUEST, "bad_request"), "{body}");
    let (s, body) =
        call(&app, "POST", "/api/runs/order-1/fork", Some(TOKEN), r#"{"step":-1,"new_run":"x"}"#).await;
    assert_eq!((s, kind(&body)), (StatusCode::BAD_REQUEST, "bad_request"), "{body}");
    let (s, handed) = call(&app, "POST", "/api/runs/order-1/hand-back", Some(TOKEN), "").await;
    assert_eq!((s, handed["status"].as_str()), (StatusCode::OK, Some("completed")), "{handed}");
    let (s, handed) = call(&app, "POST", "/api/runs/order-1-b/hand-back", Some(TOKEN), "").await;
    assert_eq!(
        (s, handed["status"].as_str()),
        (StatusCode::OK, Some("running")),
        "left for a worker: {handed}"
    );
    assert_eq!(store.run_info("order-1-b").await.unwrap().unwrap().latest_step, 2, "not driven here");
    // No answer names the store's folder.
    for (_, body) in [get("/api/runs/nobody".into()).await, get("/api/runs/nobody/state".into()).await] {
        assert!(!body.to_string().contains(&dir.display().to_string()), "{body}");
    }
}

async fn bad_input(store: Arc<dyn Store>) {
    let app = router(store.clone(), Some(TOKEN));
    let before = store.run_info("expense-1").await.unwrap().unwrap();
    let mailbox = store.mailbox("expense-1").await.unwrap();
    for (method, path, token, body, status, what) in [
        ("GET", "/api/runs/nobody", None, "", StatusCode::NOT_FOUND, "not_found"),
        ("GET", "/api/runs/order-1/state?step=99", None, "", StatusCode::NOT_FOUND, "not_found"),
        ("GET", "/api/runs/order-1/state?step=-1", None, "", StatusCode::BAD_REQUEST, "bad_request"),
        ("GET", "/api/runs/order-1/state?stpe=1", None, "", StatusCode::BAD_REQUEST, "bad_request"),
        ("GET", "/api/runs/order-1/diff?from=0", None, "", StatusCode::BAD_REQUEST, "bad_request"),
        ("GET", "/api/runs?status=sleeping", None, "", StatusCode::BAD_REQUEST, "bad_request"),
        ("GET", "/api/runs?limit=many", None, "", StatusCode::BAD_REQUEST, "bad_request"),
        ("GET", "/api/nothing", None, "", StatusCode::NOT_FOUND, "not_found"),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            None,
            r#"{"topic":"t","payload":1}"#,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some("wrong-token-wrong-token"),
            r#"{"topic":"t","payload":1}"#,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some(TOKEN),
            "not json",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some(TOKEN),
            r#"[1]"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some(TOKEN),
            r#"{"payload":1}"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some(TOKEN),
            r#"{"topic":"t","payload":1,"extra":2}"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "POST",
            "/api/runs/expense-1/send-event",
            Some(TOKEN),
            r#"{"topic":"t","payload":1,"key":3}"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "POST",
            "/api/runs/nobody/send-event",
            Some(TOKEN),
            r#"{"topic":"t","payload":1}"#,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ] {
        let (s, body) = call(&app, method, path, token, body).await;
        assert_eq!((s, kind(&body)), (status, what), "{method} {path}: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    for (path, token, body, status, what) in [
        ("/api/runs/expense-1/answer", None, r#"{"input":true}"#, StatusCode::UNAUTHORIZED, "unauthorized"),
        (
            "/api/runs/expense-1/answer",
            Some(TOKEN),
            r#"{"interrupt":"x"}"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/runs/expense-1/answer",
            Some(TOKEN),
            r#"{"input":true,"interrupt":7}"#,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            "/api/runs/expense-1/answer",
            Some(TOKEN),
            r#"{"input":true,"interrupt":"no-such-question"}"#,
            StatusCode::CONFLICT,
            "refused",
        ),
        ("/api/runs/expense-1/answer", Some(TOKEN), r#"{"input":"maybe"}"#, StatusCode::CONFLICT, "refused"),
        ("/api/runs/nobody/answer", Some(TOKEN), r#"{"input":true}"#, StatusCode::NOT_FOUND, "not_found"),
        (
            "/api/runs/expense-1/cancel",
            Some("nope-nope-nope-nope"),
            "",
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
    ] {
        let (s, reply) = call(&app, "POST", path, token, body).await;
        assert_eq!((s, kind(&reply)), (status, what), "POST {path} {body}: {reply}");
    }
    // A body over the limit is refused before it is read.
    let big = format!(r#"{{"topic":"t","payload":"{}"}}"#, "x".repeat(graphctl::BODY_LIMIT));
    let req = Request::builder()
        .method("POST")
        .uri("/api/runs/expense-1/send-event")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::from(big))
        .unwrap();
    assert_eq!(app.clone().oneshot(req).await.unwrap().status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Read-only: no token configured.
    let read_only = router(store.clone(), None);
    let (s, body) = call(&read_only, "POST", "/api/runs/expense-1/resume", Some(TOKEN), "").await;
    assert_eq!((s, kind(&body)), (StatusCode::FORBIDDEN, "read_only"));
    // Nothing of it was written.
    assert_eq!(store.run_info("expense-1").await.unwrap().unwrap(), before);
    assert_eq!(store.mailbox("expense-1").await.unwrap(), mailbox);
}

async fn openapi_names_every_route(store: Arc<dyn Store>) {
    let app = router(store, None);
    let (s, doc) = call(&app, "GET", "/api/openapi.json", None, "").await;
    assert_eq!((s, doc["openapi"].as_str()), (StatusCode::OK, Some("3.1.0")));
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 13, "{}", paths.len());
    for (path, ops) in paths {
        for method in ops.as_object().unwrap().keys() {
            let uri = path.replace("{run}", "order-1");
            let (s, body) = call(&app, &method.to_uppercase(), &uri, None, "{}").await;
            // Routed: whatever the answer, not the fallback's "no such endpoint".
            assert!(
                s != StatusCode::NOT_FOUND || !body.to_string().contains("no such endpoint"),
                "{method} {path} is described but not routed"
            );
        }
    }
}

#[test]
fn the_api_on_a_sled_store() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path().join("store")).unwrap());
        fill(store.clone(), &dir.path().join("ledger.txt")).await;
        every_endpoint(store.clone(), dir.path()).await;
        bad_input(store.clone()).await;
        openapi_names_every_route(store).await;
    });
}

#[test]
fn the_api_on_a_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let store: Arc<dyn Store> =
            Arc::new(graph_runtime::store::SqliteStore::open(dir.path().join("runs.sqlite")).unwrap());
        fill(store.clone(), &dir.path().join("ledger.txt")).await;
        every_endpoint(store.clone(), dir.path()).await;
        bad_input(store.clone()).await;
        openapi_names_every_route(store).await;
    });
}

/// Needs the local PostgreSQL (or GRAPH_TEST_POSTGRES_URL); a database of its own, dropped at the end.
#[cfg(feature = "postgres")]
#[test]
fn the_api_on_a_postgres_store() {
    use graph_runtime::store::PostgresStore;
    let db = common::PostgresDatabase::create("graphctl_serve");
    let dir = tempfile::tempdir().unwrap();
    block_on(async {
        let store: Arc<dyn Store> = Arc::new(PostgresStore::connect(&db.url).await.unwrap());
        fill(store.clone(), &dir.path().join("ledger.txt")).await;
        every_endpoint(store.clone(), dir.path()).await;
        bad_input(store.clone()).await;
        openapi_names_every_route(store).await;
    });
}

#[test]
fn the_openapi_description_is_json_with_the_token_scheme() {
    let doc = block_on(async {
        let app = router(Arc::new(MemoryStore::new()), None);
        call(&app, "GET", "/api/openapi.json", None, "").await.1
    });
    assert_eq!(doc["components"]["securitySchemes"]["token"], json!({ "type": "http", "scheme": "bearer" }));
    assert_eq!(doc["paths"]["/api/runs/{run}/send-event"]["post"]["security"], json!([{ "token": [] }]));
}

/// Not a test: fills the store the browser test (`scripts/browser-test.sh`) serves, in
/// `$INSPECTOR_STORE_DIR`: `expense-1` and `expense-2` waiting for their approvers, `order-1`
/// completed, `xss-1`, an approval whose purpose (in its state and its question) is hostile markup, and
/// 60 more approvals (`zz-00`…), so the runs list has a second page.
#[test]
#[ignore = "run by scripts/browser-test.sh"]
fn browser_store() {
    let dir = std::env::var_os("INSPECTOR_STORE_DIR").expect("INSPECTOR_STORE_DIR names a folder");
    let dir = Path::new(&dir);
    block_on(async {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.join("store")).unwrap());
        fill(store.clone(), &dir.join("ledger.txt")).await;
        let expenses = Engine::builder(approval_flow::graph()).shared_store(store).build();
        let hostile = graph_examples::approval::Expense {
            purpose: "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>".to_owned(),
            ..approval::sample_request()
        };
        expenses.run("xss-1", hostile).await.unwrap();
        expenses.run("expense-2", approval::sample_request()).await.unwrap();
        for i in 0..60 {
            expenses.run(&format!("zz-{i:02}"), approval::sample_request()).await.unwrap();
        }
    });
}
