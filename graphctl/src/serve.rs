//! `graphctl serve`: an HTTP JSON API over the store graphctl opens, and [`router`] to mount the same
//! API in an application's own axum server.
//!
//! Every read endpoint answers with the JSON the matching command prints with `--json` (one
//! implementation, `commands.rs`), so the API and the command line cannot disagree. Safe by default:
//! the server listens on 127.0.0.1 unless told otherwise, and is read-only unless it was given a token;
//! an action needs the token in the `Authorization: Bearer` header (no cookie can carry it, so no
//! cross-site request can act). Request bodies are limited to 64 KiB. An error is a JSON body
//! `{"error": {"kind", "message"}}` with a 4xx or 5xx status, never a stack trace or the store's path.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::{Value, json};

use super::args::{Command, StatusArg};
use super::commands::{Page, Session};
use super::exit::{Exit, Failure};
use super::registry::Registry;
use graph_runtime::store::Store;

/// The largest request body an endpoint reads.
pub const BODY_LIMIT: usize = 64 * 1024;

/// What the API serves: a store, the graphs registered for it, and the token actions need (`None`:
/// read-only).
pub(crate) struct App {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) graphs: Registry,
    pub(crate) token: Option<String>,
    /// Text no answer may carry (the store's path or URL as given): replaced by "the served store".
    pub(crate) hide: Vec<String>,
}

impl App {
    /// A session of the commands over the store. The store is named, not shown: an answer never
    /// carries its path or URL.
    fn session(&self) -> Session<'_> {
        Session { store: self.store.clone(), graphs: &self.graphs, json: true, spec: "the served store" }
    }

    /// `result` with every hidden text taken out of a failure's message.
    fn scrubbed(
        &self,
        result: Result<super::commands::Output, Failure>,
    ) -> Result<super::commands::Output, Failure> {
        result.map_err(|mut f| {
            for h in self.hide.iter().filter(|h| !h.is_empty()) {
                f.message = f.message.replace(h.as_str(), "the served store");
            }
            f
        })
    }
}

/// One endpoint: how it is reached, what it does, for the router and the OpenAPI description alike.
struct Endpoint {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    /// Query parameters: (name, type, required, description); a type is `integer` (0 to
    /// `i64::MAX`), `boolean` or `status` (a run status's name).
    query: &'static [(&'static str, &'static str, bool, &'static str)],
    /// The request body's fields, for an action: (name, type, required, description).
    body: &'static [(&'static str, &'static str, bool, &'static str)],
    /// It changes the store: it needs the token.
    action: bool,
    /// Its handler, under `method` (the router is built from this table).
    route: fn() -> MethodRouter<Arc<App>>,
}

/// The run statuses `?status=` takes.
const STATUSES: [&str; 7] =
    ["running", "completed", "paused", "interrupted", "waiting", "failed", "cancelled"];

/// Every endpoint, in the order the OpenAPI description lists them.
const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        method: "get",
        path: "/api/runs",
        summary: "A page of the runs in run-id order (as `graphctl runs --json --after`): each with its status, graph and version, label, start and last commit; `next` is the cursor of the page after (null at the end).",
        query: &[
            ("status", "status", false, "only runs of this status"),
            ("limit", "integer", false, "at most this many (default 50, at most 1,000)"),
            ("prefix", "string", false, "only runs whose id starts with this"),
            (
                "after",
                "string",
                false,
                "only runs whose id sorts after this one: the `next` of the page before",
            ),
        ],
        body: &[],
        action: false,
        route: || get(runs),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}",
        summary: "Where a run stands: status, waits, steps, graph and version, events (`graphctl show`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(show),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/history",
        summary: "The run's stored checkpoints (`graphctl history`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(history),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/state",
        summary: "The state at a step, the latest by default (`graphctl state`).",
        query: &[("step", "integer", false, "the step")],
        body: &[],
        action: false,
        route: || get(state),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/diff",
        summary: "What changed in the state between two steps (`graphctl diff`).",
        query: &[("from", "integer", true, "the earlier step"), ("to", "integer", true, "the later step")],
        body: &[],
        action: false,
        route: || get(diff),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/graph",
        summary: "The run's graph as Mermaid (or DOT) text, from the shape its log recorded (`graphctl graph`).",
        query: &[("dot", "boolean", false, "Graphviz DOT instead of Mermaid")],
        body: &[],
        action: false,
        route: || get(graph),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/graph.svg",
        summary: "The run's graph drawn as SVG: visited nodes, the frontier and the nodes it waits on marked.",
        query: &[],
        body: &[],
        action: false,
        route: || get(graph_svg),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/events",
        summary: "A page of the run's event log (`graphctl events`).",
        query: &[
            ("from", "integer", false, "the first event's seq"),
            ("limit", "integer", false, "at most this many (default 100, at most 10,000)"),
        ],
        body: &[],
        action: false,
        route: || get(events),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/verify",
        summary: "The verification of the run's hash-chained log and checkpoints (`graphctl verify`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(verify),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/effects",
        summary: "The run's effect journal (`graphctl effects`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(effects),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/outbox",
        summary: "The outbox rows the run's stored checkpoints carry, each delivered or not (`graphctl outbox`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(outbox),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/live",
        summary: "Server-sent events: a `run` event (`run_id`, `status`, `latest_step`, `version`) at once and each time the run's row moves, read from the store every 250 ms; the stream ends once the run has ended, or after 30 s (a browser's EventSource connects again).",
        query: &[],
        body: &[],
        action: false,
        route: || get(live),
    },
    Endpoint {
        method: "get",
        path: "/api/runs/{run}/mailbox",
        summary: "The external events sent to the run (`graphctl mailbox`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(mailbox),
    },
    Endpoint {
        method: "get",
        path: "/api/schedules",
        summary: "The store's schedules (`graphctl schedules`).",
        query: &[],
        body: &[],
        action: false,
        route: || get(schedules),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/resume",
        summary: "Resume the run from its last committed step with its registered graph (`graphctl resume`).",
        query: &[],
        body: &[],
        action: true,
        route: || post(resume),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/answer",
        summary: "Answer the run's question and continue it (`graphctl answer`); the node reads the answer as the type it asks for.",
        query: &[],
        body: &[
            ("input", "any", true, "the answer, any JSON value"),
            ("interrupt", "string", false, "the question's id; needed when several wait"),
        ],
        action: true,
        route: || post(answer_run),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/cancel",
        summary: "Cancel the run (`graphctl cancel`).",
        query: &[],
        body: &[],
        action: true,
        route: || post(cancel),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/fork",
        summary: "Fork the run at a step as a new run, left running for `resume` (`graphctl fork`).",
        query: &[],
        body: &[
            ("step", "integer", true, "the step to fork at"),
            ("new_run", "string", true, "the new run's id"),
        ],
        action: true,
        route: || post(fork),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/resolve-effect",
        summary: "Say what happened to an effect a crash left unknown (`graphctl resolve-effect`): one of `completed` (its response), `retry`, `fail` (the node's error).",
        query: &[],
        body: &[
            ("key", "string", true, "the effect's key"),
            ("completed", "any", false, "it happened, with this response"),
            ("retry", "boolean", false, "it did not happen: call it again"),
            ("fail", "string", false, "it failed for good, with this error"),
        ],
        action: true,
        route: || post(resolve_effect),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/hand-back",
        summary: "Hand the run back to a worker pool: what continues it is written, a worker claims it (`graphctl hand-back`).",
        query: &[],
        body: &[],
        action: true,
        route: || post(hand_back),
    },
    Endpoint {
        method: "post",
        path: "/api/runs/{run}/send-event",
        summary: "Send an external event to the run (`graphctl send-event`).",
        query: &[],
        body: &[
            ("topic", "string", true, "the topic"),
            ("payload", "any", true, "the payload, any JSON value"),
            ("key", "string", false, "a dedupe key: a second send with it is the same message"),
        ],
        action: true,
        route: || post(send_event),
    },
];

/// The API's router over `app`: mount it in an axum server (`axum::serve`), or nest it in one's own.
pub(crate) fn router(app: Arc<App>) -> Router {
    let pages = Router::new()
        .route("/", get(|| page("text/html; charset=utf-8", include_str!("ui/index.html"))))
        .route("/app.js", get(|| page("text/javascript; charset=utf-8", include_str!("ui/app.js"))))
        .route("/app.css", get(|| page("text/css; charset=utf-8", include_str!("ui/app.css"))))
        .route("/api/openapi.json", get(openapi));
    ENDPOINTS
        .iter()
        .fold(pages, |router, e| router.route(e.path, (e.route)()))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(app)
}

/// One of the page's files (embedded in the binary: no CDN, no build step), with headers that keep a
/// stored string from ever running as script: no inline script or style, nothing from elsewhere, the
/// page not framed by another site.
async fn page(content_type: &'static str, body: &'static str) -> Response {
    let csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
               connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, csp),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}

/// An error answer: `{"error": {"kind", "message"}}`.
fn error(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Response {
    ApiError { status, kind, message: message.into() }.into_response()
}

/// A refused request, answered as `{"error": {"kind", "message"}}` with its status.
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl ApiError {
    fn bad(message: impl Into<String>) -> Self {
        ApiError { status: StatusCode::BAD_REQUEST, kind: "bad_request", message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "kind": self.kind, "message": self.message } });
        (self.status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
    }
}

/// The answer of a command's output or failure.
fn answer(result: Result<super::commands::Output, Failure>) -> Response {
    match result {
        Ok(out) => {
            let status = match out.exit {
                Exit::Ok => StatusCode::OK,
                _ => StatusCode::CONFLICT,
            };
            (status, [(header::CONTENT_TYPE, "application/json")], out.json.to_string()).into_response()
        }
        Err(f) => {
            let (status, kind) = match f.exit {
                Exit::NotFound => (StatusCode::NOT_FOUND, "not_found"),
                Exit::Usage => (StatusCode::BAD_REQUEST, "bad_request"),
                Exit::Unsupported => (StatusCode::UNPROCESSABLE_ENTITY, "unsupported"),
                Exit::Locked | Exit::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                Exit::Corrupted => (StatusCode::INTERNAL_SERVER_ERROR, "corrupted"),
                Exit::Diverged => (StatusCode::CONFLICT, "conflict"),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "failed"),
            };
            error(status, kind, f.message)
        }
    }
}

/// Runs `command` in a session over the app's store.
async fn run(app: &App, command: Command) -> Response {
    answer(app.scrubbed(app.session().output(command).await))
}

/// Runs an action whose body was read already: what the command refuses then (an answer the
/// question does not take, a run that asks nothing) is `409 refused`, not a malformed request.
async fn act(app: &App, command: Command) -> Response {
    match app.scrubbed(app.session().output(command).await) {
        Err(f) if f.exit == Exit::Usage => error(StatusCode::CONFLICT, "refused", f.message),
        other => answer(other),
    }
}

/// An action's check: the server has a token and the request carries it.
fn authorized(app: &App, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = &app.token else {
        return Err(ApiError {
            status: StatusCode::FORBIDDEN,
            kind: "read_only",
            message: "this server is read-only: start it with `--token-file` to allow actions".into(),
        });
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "unauthorized",
            message: "the token is not this server's".into(),
        }),
        None => Err(ApiError {
            status: StatusCode::UNAUTHORIZED,
            kind: "unauthorized",
            message: "an action needs the server's token: `Authorization: Bearer <token>`".into(),
        }),
    }
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A query string's parameters, each checked by the endpoint that reads it.
type Params = Query<std::collections::BTreeMap<String, String>>;

/// The parameter `name` as `T`, if given; a value that does not read is a typed 400.
fn param<T: std::str::FromStr>(q: &Params, name: &str, what: &str) -> Result<Option<T>, ApiError> {
    match q.get(name) {
        None => Ok(None),
        Some(v) => {
            v.parse().map(Some).map_err(|_| ApiError::bad(format!("`{name}` must be {what}, not {v:?}")))
        }
    }
}

/// The integer parameter `name`, from 0 to `i64::MAX` (what the description says).
fn count(q: &Params, name: &str, what: &str) -> Result<Option<u64>, ApiError> {
    match param::<u64>(q, name, what)? {
        Some(n) if n > i64::MAX as u64 => {
            Err(ApiError::bad(format!("`{name}` must be at most {}", i64::MAX)))
        }
        n => Ok(n),
    }
}

/// Unknown query parameters are refused (a typo is not silently ignored).
fn only(q: &Params, known: &[&str]) -> Result<(), ApiError> {
    match q.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => {
            let takes = if known.is_empty() { "none".into() } else { known.join(", ") };
            Err(ApiError::bad(format!("unknown parameter `{k}`; this endpoint takes: {takes}")))
        }
        None => Ok(()),
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(refused) => return IntoResponse::into_response(refused),
        }
    };
}

async fn openapi() -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], openapi_document().to_string())
        .into_response()
}

async fn runs(State(app): State<Arc<App>>, q: Params) -> Response {
    tri!(only(&q, &["status", "limit", "prefix", "after"]));
    let status = match q.get("status") {
        None => None,
        Some(s) => match <StatusArg as clap::ValueEnum>::from_str(s, true) {
            Ok(s) => Some(s),
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    format!(
                        "`status` must be one of running, completed, paused, interrupted, waiting, failed, cancelled, not {s:?}"
                    ),
                );
            }
        },
    };
    let limit = tri!(count(&q, "limit", "a whole number"))
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .unwrap_or(50)
        .min(1_000);
    let page = Page { prefix: q.get("prefix").cloned(), after: q.get("after").cloned(), by_id: true };
    answer(app.scrubbed(app.session().runs(status, Some(limit), page).await))
}

async fn show(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::Show { run: run_id }).await
}

async fn history(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::History { run: run_id }).await
}

async fn state(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &["step"]));
    let step = tri!(count(&q, "step", "a step number"));
    run(&app, Command::State { run: run_id, step, compact: true }).await
}

async fn diff(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &["from", "to"]));
    let (Some(from), Some(to)) =
        (tri!(count(&q, "from", "a step number")), tri!(count(&q, "to", "a step number")))
    else {
        return error(StatusCode::BAD_REQUEST, "bad_request", "`from` and `to` are both needed");
    };
    run(&app, Command::Diff { run: run_id, from, to }).await
}

async fn graph(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &["dot"]));
    let dot = tri!(param::<bool>(&q, "dot", "true or false")).unwrap_or(false);
    run(&app, Command::Graph { run: Some(run_id), registered: None, dot }).await
}

async fn graph_svg(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    use super::svg::{Mark, render};
    tri!(only(&q, &[]));
    let session = app.session();
    let shape = match session.run_shape(&run_id).await {
        Ok(shape) => shape,
        Err(f) => return answer(app.scrubbed(Err(f))),
    };
    let history = match session.output(Command::History { run: run_id.clone() }).await {
        Ok(out) => out.json,
        Err(f) => return answer(app.scrubbed(Err(f))),
    };
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let steps = history["history"].as_array().cloned().unwrap_or_default();
    let visited: Vec<String> = steps.iter().flat_map(|h| names(&h["ran"])).collect();
    let frontier: Vec<String> = steps.last().map(|h| names(&h["next"])).unwrap_or_default();
    let waiting: Vec<String> = match app.store.run_info(&run_id).await {
        Ok(Some(info)) => info.status.waits().iter().map(|i| i.node.clone()).collect(),
        _ => Vec::new(),
    };
    let svg = render(&shape, |n| {
        let has = |list: &[String]| list.iter().any(|x| x == n);
        if has(&waiting) {
            Mark::Waiting
        } else if has(&frontier) {
            Mark::Frontier
        } else if has(&visited) {
            Mark::Visited
        } else {
            Mark::Plain
        }
    });
    let headers = [
        (header::CONTENT_TYPE, "image/svg+xml"),
        (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    (StatusCode::OK, headers, svg).into_response()
}

async fn events(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &["from", "limit"]));
    let from = tri!(count(&q, "from", "an event seq")).unwrap_or(0);
    let limit = tri!(count(&q, "limit", "a whole number"))
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .unwrap_or(100)
        .min(10_000);
    run(&app, Command::Events { run: run_id, from, limit }).await
}

async fn verify(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    let command = Command::Verify { run: Some(run_id), all: false, key_file: None, no_store_check: false };
    run(&app, command).await
}

async fn effects(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::Effects { run: run_id }).await
}

async fn outbox(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::Outbox { run: run_id }).await
}

/// How often `/live` reads the run's row, and how long one stream lasts.
const LIVE_POLL: std::time::Duration = std::time::Duration::from_millis(250);
const LIVE_FOR: std::time::Duration = std::time::Duration::from_secs(30);

async fn live(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    tri!(only(&q, &[]));
    if let Err(f) = app.session().run_info(&run_id).await {
        return answer(app.scrubbed(Err(f)));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(4);
    let store = app.store.clone();
    tokio::spawn(async move {
        let until = tokio::time::Instant::now() + LIVE_FOR;
        let mut seen = None;
        // Ends when the page goes (the receiver is dropped), the run ends or goes, or the time is up.
        while let Ok(Some(info)) = store.run_info(&run_id).await {
            if seen != Some(info.version) {
                seen = Some(info.version);
                let data = json!({
                    "run_id": info.run_id, "status": info.status.as_str(),
                    "latest_step": info.latest_step, "version": info.version,
                });
                if tx.send(Event::default().event("run").data(data.to_string())).await.is_err() {
                    return;
                }
            }
            if info.status.has_ended() || tokio::time::Instant::now() >= until {
                return;
            }
            tokio::time::sleep(LIVE_POLL).await;
        }
    });
    let headers = [(header::CACHE_CONTROL, "no-store")];
    (headers, Sse::new(Events(rx)).keep_alive(KeepAlive::default())).into_response()
}

/// The events a `/live` task sends, as the stream an SSE answer reads.
struct Events(tokio::sync::mpsc::Receiver<axum::response::sse::Event>);

impl futures_core::Stream for Events {
    type Item = Result<axum::response::sse::Event, std::convert::Infallible>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|e| e.map(Ok))
    }
}

async fn mailbox(State(app): State<Arc<App>>, Path(run_id): Path<String>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::Mailbox { run: run_id }).await
}

async fn schedules(State(app): State<Arc<App>>, q: Params) -> Response {
    tri!(only(&q, &[]));
    run(&app, Command::Schedules).await
}

async fn resume(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Response {
    tri!(authorized(&app, &headers));
    tri!(only(&q, &[]));
    run(&app, Command::Resume { run: run_id, key_file: None }).await
}

/// The body of an action as a JSON object with only the fields `known`.
fn object(body: &Bytes, known: &[&str]) -> Result<serde_json::Map<String, Value>, ApiError> {
    let bad = ApiError::bad;
    let value: Value = serde_json::from_slice(body).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let Value::Object(map) = value else { return Err(bad("the body is a JSON object".into())) };
    if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(bad(format!("unknown field `{k}`; this action takes: {}", known.join(", "))));
    }
    Ok(map)
}

async fn send_event(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    tri!(authorized(&app, &headers));
    let map = tri!(object(&body, &["topic", "payload", "key"]));
    let bad = |m: &str| error(StatusCode::BAD_REQUEST, "bad_request", m);
    let Some(Value::String(topic)) = map.get("topic") else { return bad("`topic` is a string") };
    let Some(payload) = map.get("payload") else { return bad("`payload` is needed (any JSON value)") };
    let key = match map.get("key") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return bad("`key` is a string"),
    };
    let command = Command::SendEvent { run: run_id, topic: topic.clone(), payload: payload.to_string(), key };
    run(&app, command).await
}

async fn answer_run(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    tri!(authorized(&app, &headers));
    let map = tri!(object(&body, &["input", "interrupt"]));
    let Some(input) = map.get("input") else {
        return ApiError::bad("`input` is needed (the answer, any JSON value)").into_response();
    };
    let interrupt = match map.get("interrupt") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return ApiError::bad("`interrupt` is a string").into_response(),
    };
    act(&app, Command::Answer { run: run_id, input: input.to_string(), interrupt, key_file: None }).await
}

async fn cancel(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Response {
    tri!(authorized(&app, &headers));
    tri!(only(&q, &[]));
    run(&app, Command::Cancel { run: run_id, key_file: None }).await
}

async fn fork(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    tri!(authorized(&app, &headers));
    let map = tri!(object(&body, &["step", "new_run"]));
    let Some(step) = map.get("step").and_then(whole).filter(|n| *n <= i64::MAX as u64) else {
        return ApiError::bad("`step` is a step number").into_response();
    };
    let Some(Value::String(new_run)) = map.get("new_run") else {
        return ApiError::bad("`new_run` is the new run's id, a string").into_response();
    };
    act(&app, Command::Fork { run: run_id, step, new_run: new_run.clone() }).await
}

/// A JSON number that is a whole number from 0 (`3` or `3.0`: JSON does not tell them apart).
fn whole(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < u64::MAX as f64).map(|f| f as u64)
    })
}

/// Actions whose body takes exactly one of these fields (`retry` counts when `true`), as their
/// description says.
const EXACTLY_ONE: &[(&str, &[&str])] =
    &[("/api/runs/{run}/resolve-effect", &["completed", "retry", "fail"])];

async fn resolve_effect(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    tri!(authorized(&app, &headers));
    let map = tri!(object(&body, &["key", "completed", "retry", "fail"]));
    let Some(Value::String(key)) = map.get("key") else {
        return ApiError::bad("`key` is the effect's key, a string").into_response();
    };
    let completed = map.get("completed").map(Value::to_string);
    let retry = match map.get("retry") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return ApiError::bad("`retry` is true or false").into_response(),
    };
    let fail = match map.get("fail") {
        None => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => return ApiError::bad("`fail` is the error's message, a string").into_response(),
    };
    if usize::from(completed.is_some()) + usize::from(retry) + usize::from(fail.is_some()) != 1 {
        return ApiError::bad("say exactly one of `completed`, `retry: true`, `fail`").into_response();
    }
    act(&app, Command::ResolveEffect { run: run_id, key: key.clone(), completed, retry, fail }).await
}

async fn hand_back(
    State(app): State<Arc<App>>,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    q: Params,
) -> Response {
    tri!(authorized(&app, &headers));
    tri!(only(&q, &[]));
    act(&app, Command::HandBack { run: run_id }).await
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "no such endpoint: see /api/openapi.json")
}

/// The OpenAPI 3.1 description of [`ENDPOINTS`]: what the router serves, from the same table.
pub(crate) fn openapi_document() -> Value {
    let error_schema = json!({
        "type": "object", "required": ["error"],
        "properties": { "error": { "type": "object", "required": ["kind", "message"],
            "properties": { "kind": { "type": "string" }, "message": { "type": "string" } } } }
    });
    let err = |what: &str| json!({ "description": what, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
    let mut paths = serde_json::Map::new();
    for e in ENDPOINTS {
        let mut parameters = Vec::new();
        if e.path.contains("{run}") {
            parameters.push(json!({ "name": "run", "in": "path", "required": true, "schema": { "type": "string" }, "description": "the run id" }));
        }
        for (name, ty, required, description) in e.query {
            let schema = match *ty {
                "integer" => json!({ "type": "integer", "minimum": 0, "maximum": i64::MAX }),
                "status" => json!({ "type": "string", "enum": STATUSES }),
                other => json!({ "type": other }),
            };
            parameters.push(json!({
                "name": name, "in": "query", "required": required, "schema": schema, "description": description
            }));
        }
        let mut responses = serde_json::Map::new();
        let done = match (e.path.ends_with(".svg"), e.path.ends_with("/live")) {
            (true, _) => {
                json!({ "description": "the drawing", "content": { "image/svg+xml": { "schema": { "type": "string" } } } })
            }
            (_, true) => {
                // Each event as schemathesis and SSE readers parse it: its name and its data (JSON text).
                let event = json!({ "type": "object", "properties": {
                    "event": { "const": "run" }, "data": { "type": "string" } }, "required": ["data"] });
                json!({ "description": "the events", "content": { "text/event-stream": { "schema": event } } })
            }
            _ => {
                json!({ "description": "done", "content": { "application/json": { "schema": { "type": "object" } } } })
            }
        };
        responses.insert("200".into(), done);
        responses.insert("400".into(), err("a parameter or the body does not read"));
        responses.insert("404".into(), err("no such run, step or endpoint"));
        responses.insert("422".into(), err("this graphctl cannot do it: the run's graph is not registered"));
        responses.insert("500".into(), err("damaged data, or another failure"));
        responses.insert("503".into(), err("the store is unavailable for now"));
        let mut op = json!({ "summary": e.summary, "operationId": operation_id(e), "parameters": parameters, "responses": responses });
        if e.action {
            responses_insert(&mut op, "401", err("the token is missing or wrong"));
            responses_insert(&mut op, "403", err("the server is read-only"));
            responses_insert(&mut op, "409", err("the run moved, or the action was refused"));
            responses_insert(&mut op, "413", err("the body is over 64 KiB"));
            op["security"] = json!([{ "token": [] }]);
            if !e.body.is_empty() {
                let mut props = serde_json::Map::new();
                let mut required = Vec::new();
                for (name, ty, req, description) in e.body {
                    let schema = match *ty {
                        "any" => json!({ "description": description }),
                        "integer" => json!({
                            "type": "integer", "minimum": 0, "maximum": i64::MAX, "description": description
                        }),
                        other => json!({ "type": other, "description": description }),
                    };
                    props.insert((*name).into(), schema);
                    if *req {
                        required.push(*name);
                    }
                }
                let mut schema = json!({
                    "type": "object", "properties": props, "required": required, "additionalProperties": false });
                if let Some((_, fields)) = EXACTLY_ONE.iter().find(|(path, _)| *path == e.path) {
                    let given = |f: &str| match f {
                        "retry" => json!({ "required": [f], "properties": { f: { "const": true } } }),
                        _ => json!({ "required": [f] }),
                    };
                    schema["oneOf"] = fields.iter().map(|f| given(f)).collect();
                }
                op["requestBody"] =
                    json!({ "required": true, "content": { "application/json": { "schema": schema } } });
            }
        }
        let entry = paths.entry(e.path.to_owned()).or_insert_with(|| json!({}));
        entry[e.method] = op;
    }
    // A run id listed by `GET /api/runs` reaches every operation on a run (OpenAPI links), so a
    // client generated from the description, or a fuzzer, finds real runs.
    let links: serde_json::Map<String, Value> = ENDPOINTS
        .iter()
        .filter(|e| e.path.contains("{run}"))
        .map(|e| {
            let id = operation_id(e);
            (
                id.clone(),
                json!({ "operationId": id, "parameters": { "run": "$response.body#/runs/0/run_id" } }),
            )
        })
        .collect();
    paths["/api/runs"]["get"]["responses"]["200"]["links"] = Value::Object(links);
    json!({
        "openapi": "3.1.0",
        "info": { "title": "graphctl serve", "version": env!("CARGO_PKG_VERSION"),
                  "description": "The runs of a graph-runtime store: read them, and (with the server's token) act on them." },
        "paths": paths,
        "components": {
            "schemas": { "Error": error_schema },
            "securitySchemes": { "token": { "type": "http", "scheme": "bearer" } }
        }
    })
}

fn responses_insert(op: &mut Value, code: &str, response: Value) {
    op["responses"][code] = response;
}

/// `getRuns`, `getRunsRunHistory`, `postRunsRunSendEvent`, ...: from the method and the path.
fn operation_id(e: &Endpoint) -> String {
    let mut id = e.method.to_owned();
    for part in e.path.trim_start_matches("/api/").split(['/', '-']) {
        let part = part.trim_matches(['{', '}']);
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}

/// Serves the API on `listen` until the process is stopped.
pub(crate) async fn serve(app: Arc<App>, listen: std::net::SocketAddr) -> Result<Exit, Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::new(Exit::Failure, format!("cannot listen on {listen}: {e}")))?;
    let actions = if app.token.is_some() { "actions allowed with the token" } else { "read-only" };
    eprintln!(
        "graphctl serve: http://{listen}/api/runs ({actions}; the API is described at /api/openapi.json)"
    );
    axum::serve(listener, router(app))
        .await
        .map_err(|e| Failure::new(Exit::Failure, format!("the server stopped: {e}")))?;
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_names_the_served_store_not_its_path() {
        let app = App {
            store: Arc::new(graph_runtime::MemoryStore::new()),
            graphs: Registry::default(),
            token: None,
            hide: vec!["/srv/runs".into(), String::new()],
        };
        let failed = Failure::new(Exit::Corrupted, "the file /srv/runs/db is damaged at byte 12 (/srv/runs)");
        let Err(f) = app.scrubbed(Err(failed)) else { panic!("still a failure") };
        assert_eq!(f.message, "the file the served store/db is damaged at byte 12 (the served store)");
    }

    #[test]
    fn every_endpoint_is_described_with_a_unique_operation() {
        let doc = openapi_document();
        let mut ids: Vec<String> = Vec::new();
        for e in ENDPOINTS {
            let op = &doc["paths"][e.path][e.method];
            assert!(op.is_object(), "{} {}", e.method, e.path);
            ids.push(op["operationId"].as_str().unwrap().to_owned());
        }
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "operation ids are unique");
    }
}
