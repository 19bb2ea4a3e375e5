//! The one vocabulary of the macros: every option each attribute accepts, with the example a message
//! shows. Unknown, duplicate and misplaced options read the same for every attribute because they are all
//! parsed by `options::parse` against these tables.

/// How an option is written.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// `key`
    Flag,
    /// `key = <type>`
    Type,
    /// `key = <expression>` (a path, a literal, a list `[a, b]`, a call `fixed("1s")`)
    Value,
    /// `key(<options of the nested table>)`
    Nested(&'static Owner),
}

/// One option.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    /// How it is written, shown in messages.
    pub(crate) example: &'static str,
}

/// An attribute (or a nested option list) and the options it accepts.
#[derive(Debug)]
pub(crate) struct Owner {
    /// How the attribute is named in messages, e.g. "#[node]".
    pub(crate) name: &'static str,
    pub(crate) specs: &'static [Spec],
}

impl Owner {
    pub(crate) fn spec(&self, name: &str) -> Option<&'static Spec> {
        self.specs.iter().find(|s| s.name == name)
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &'static str> + Clone {
        self.specs.iter().map(|s| s.name)
    }
}

const fn spec(name: &'static str, kind: Kind, example: &'static str) -> Spec {
    Spec { name, kind, example }
}

pub(crate) const STATE: &str = "state";
pub(crate) const NAME: &str = "name";
pub(crate) const VERSION: &str = "version";
pub(crate) const MIGRATE_FROM: &str = "migrate_from";
pub(crate) const MIGRATE: &str = "migrate";
pub(crate) const ENTRY: &str = "entry";
pub(crate) const TO: &str = "to";
pub(crate) const TIMEOUT: &str = "timeout";
pub(crate) const RETRY: &str = "retry";
pub(crate) const MAX_CONCURRENCY: &str = "max_concurrency";
pub(crate) const IMPURE: &str = "impure";
pub(crate) const ROUTE: &str = "route";
pub(crate) const WAIT_FOR: &str = "wait_for";
pub(crate) const INTERRUPT_BEFORE: &str = "interrupt_before";
pub(crate) const INTERRUPT_AFTER: &str = "interrupt_after";
pub(crate) const SUBGRAPH: &str = "subgraph";
pub(crate) const OUTPUT: &str = "output";
pub(crate) const ON_ERROR: &str = "on_error";
pub(crate) const ATTEMPTS: &str = "attempts";
pub(crate) const BACKOFF: &str = "backoff";
pub(crate) const JITTER: &str = "jitter";
pub(crate) const DELTA: &str = "delta";
pub(crate) const WITH: &str = "with";

/// The name edges use for the end of a path.
pub(crate) const END: &str = "END";

/// Names a node cannot take because the graph module defines them.
pub(crate) const RESERVED_NODE_NAMES: &[&str] = &["graph", "mermaid", "dot", "FINGERPRINT", "END"];

/// `#[graph(...)]`
pub(crate) static GRAPH: Owner = Owner {
    name: "#[graph]",
    specs: &[
        spec(STATE, Kind::Type, "state = MyState"),
        spec(NAME, Kind::Value, "name = \"my-graph\""),
        spec(VERSION, Kind::Value, "version = 2"),
        spec(MIGRATE_FROM, Kind::Value, "migrate_from = v1"),
        spec(MIGRATE, Kind::Value, "migrate = from_v1"),
    ],
};

/// `#[node(...)]`
pub(crate) static NODE: Owner = Owner {
    name: "#[node]",
    specs: &[
        spec(ENTRY, Kind::Flag, "entry"),
        spec(TO, Kind::Value, "to = [next, END]"),
        spec(TIMEOUT, Kind::Value, "timeout = \"30s\""),
        spec(RETRY, Kind::Nested(&RETRY_OPTS), "retry(attempts = 3, backoff = fixed(\"100ms\"))"),
        spec(MAX_CONCURRENCY, Kind::Value, "max_concurrency = 4"),
        spec(IMPURE, Kind::Value, "impure = \"reason\""),
        spec(ROUTE, Kind::Value, "route = my_router"),
        spec(WAIT_FOR, Kind::Value, "wait_for = [a, b]"),
        spec(INTERRUPT_BEFORE, Kind::Flag, "interrupt_before"),
        spec(INTERRUPT_AFTER, Kind::Flag, "interrupt_after"),
        spec(SUBGRAPH, Kind::Value, "subgraph = research"),
        spec(OUTPUT, Kind::Value, "output = merge_research"),
        spec(ON_ERROR, Kind::Value, "on_error = handler"),
    ],
};

/// `retry(...)` inside `#[node]`
pub(crate) static RETRY_OPTS: Owner = Owner {
    name: "retry(...)",
    specs: &[
        spec(ATTEMPTS, Kind::Value, "attempts = 3"),
        spec(BACKOFF, Kind::Value, "backoff = fixed(\"100ms\") or backoff = exponential(\"10ms\", \"5s\")"),
        spec(JITTER, Kind::Value, "jitter = 0.25"),
    ],
};

/// `#[reducer(...)]` on a struct
pub(crate) static REDUCER_STRUCT: Owner =
    Owner { name: "#[reducer] on a struct", specs: &[spec(DELTA, Kind::Value, "delta = MyDelta")] };

/// `#[reducer]` on a fn
pub(crate) static REDUCER_FN: Owner = Owner { name: "#[reducer] on a fn", specs: &[] };

/// The strategies of `#[reduce(...)]`, in the order messages list them.
pub(crate) static REDUCE: Owner = Owner {
    name: "#[reduce]",
    specs: &[
        spec("overwrite", Kind::Flag, "overwrite"),
        spec("append", Kind::Flag, "append"),
        spec("sum", Kind::Flag, "sum"),
        spec("max", Kind::Flag, "max"),
        spec("min", Kind::Flag, "min"),
        spec("union", Kind::Flag, "union"),
        spec(WITH, Kind::Value, "with = my_merge"),
    ],
};

/// Every top-level table, to tell a misplaced option from an unknown one.
pub(crate) static ALL: &[&Owner] = &[&GRAPH, &NODE, &RETRY_OPTS, &REDUCER_STRUCT, &REDUCE];
