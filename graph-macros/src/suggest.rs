//! "Did you mean": the closest candidate by edit distance, when close enough to be a plausible typo.

/// The closest of `candidates` to `name`, if within a third of the longer length (at least 1 edit).
pub(crate) fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (levenshtein(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.chars().count().max(name.chars().count()) / 3).max(1))
        .min()
        .map(|(_, c)| c)
}

/// `; did you mean `x`?` or nothing.
pub(crate) fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(name, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// `` `a`, `b`, `c` ``.
pub(crate) fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items.into_iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(closest("sumarize", ["summarize", "plan"]), Some("summarize"));
        assert_eq!(closest("end", ["END", "plan"]), Some("END"));
        assert_eq!(closest("zzz", ["summarize", "plan"]), None);
        assert_eq!(did_you_mean("plna", ["plan"]), "; did you mean `plan`?");
        assert_eq!(list(["a", "b"]), "`a`, `b`");
    }
}
