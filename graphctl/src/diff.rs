//! What changed between two JSON values, field by field: the paths (JSON Pointers, RFC 6901) that were
//! added, removed or changed, in key order. Objects are compared key by key and arrays index by index
//! (an appended element is an addition at its index); any other difference is a change of the whole
//! value at that path.

use std::collections::BTreeSet;

use serde_json::Value;

/// One difference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    /// Only the later value has this path.
    Added { path: String, new: Value },
    /// Only the earlier value has it.
    Removed { path: String, old: Value },
    /// Both have it, with different values (that are not both objects or both arrays).
    Changed { path: String, old: Value, new: Value },
}

impl Change {
    pub(crate) fn path(&self) -> &str {
        match self {
            Change::Added { path, .. } | Change::Removed { path, .. } | Change::Changed { path, .. } => path,
        }
    }

    /// `{"op", "path", "old"?, "new"?}`.
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Change::Added { path, new } => serde_json::json!({ "op": "added", "path": path, "new": new }),
            Change::Removed { path, old } => serde_json::json!({ "op": "removed", "path": path, "old": old }),
            Change::Changed { path, old, new } => {
                serde_json::json!({ "op": "changed", "path": path, "old": old, "new": new })
            }
        }
    }
}

/// The differences from `old` to `new`, in path order (object keys sorted, array indices ascending).
pub(crate) fn diff(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk(&mut String::new(), old, new, &mut out);
    out
}

fn walk(path: &mut String, old: &Value, new: &Value, out: &mut Vec<Change>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                at(path, &escape(k), a.get(k.as_str()), b.get(k.as_str()), out);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                at(path, &i.to_string(), a.get(i), b.get(i), out);
            }
        }
        _ if old != new => {
            out.push(Change::Changed { path: path.clone(), old: old.clone(), new: new.clone() })
        }
        _ => {}
    }
}

/// Compares the members named `segment` of the current path.
fn at(path: &mut String, segment: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<Change>) {
    let len = path.len();
    path.push('/');
    path.push_str(segment);
    match (old, new) {
        (Some(a), Some(b)) => walk(path, a, b, out),
        (Some(a), None) => out.push(Change::Removed { path: path.clone(), old: a.clone() }),
        (None, Some(b)) => out.push(Change::Added { path: path.clone(), new: b.clone() }),
        (None, None) => {}
    }
    path.truncate(len);
}

/// A key as a JSON Pointer segment: `~` is `~0`, `/` is `~1`.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_are_added_removed_and_changed_by_path() {
        let old = json!({ "n": 1, "log": ["a"], "gone": true, "same": { "x": 1 }, "a/b": { "c~": 1 } });
        let new = json!({ "n": 2, "log": ["a", "b"], "new": null, "same": { "x": 1 }, "a/b": { "c~": 2 } });
        let paths: Vec<String> = diff(&old, &new).iter().map(|c| format!("{c:?}")).collect();
        assert_eq!(
            paths,
            [
                r#"Changed { path: "/a~1b/c~0", old: Number(1), new: Number(2) }"#,
                r#"Removed { path: "/gone", old: Bool(true) }"#,
                r#"Added { path: "/log/1", new: String("b") }"#,
                r#"Changed { path: "/n", old: Number(1), new: Number(2) }"#,
                r#"Added { path: "/new", new: Null }"#,
            ]
        );
    }

    #[test]
    fn equal_values_have_no_changes_and_a_new_type_is_one_change() {
        let v = json!({ "a": [1, { "b": [] }] });
        assert!(diff(&v, &v).is_empty());
        let changes = diff(&json!({ "a": [1] }), &json!({ "a": "x" }));
        assert_eq!(changes, [Change::Changed { path: "/a".into(), old: json!([1]), new: json!("x") }]);
        assert_eq!(diff(&json!(1), &json!(2))[0].path(), "");
        let shrunk = diff(&json!([1, 2, 3]), &json!([1]));
        assert_eq!(shrunk.iter().map(Change::path).collect::<Vec<_>>(), ["/1", "/2"]);
    }
}
