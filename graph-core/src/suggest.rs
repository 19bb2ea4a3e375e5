//! "Did you mean": the closest candidate by edit distance, when close enough to be a plausible typo.
//!
//! Case-insensitive optimal string alignment (a swap of two neighbours is one edit, so `lpan` is one edit
//! from `plan`), accepted within a third of the longer name (at least one edit). The builder and the
//! macros both call [`closest`], so a typo gets the same suggestion at `build()` and at compile time.

/// The closest of `candidates` to `name`, if within a third of the longer length (at least 1 edit).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (distance(&name.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= (c.chars().count().max(name.chars().count()) / 3).max(1))
        .min()
        .map(|(_, c)| c)
}

/// `; did you mean `x`?` or nothing.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match closest(name, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

/// `` `a`, `b`, `c` ``.
pub fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items.into_iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

/// Edit distance where swapping two neighbours counts as one edit (optimal string alignment), so
/// `entyr` is one edit from `entry`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
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
        // A swap is one edit: plain Levenshtein counts two and, on a 4-letter name, suggests nothing.
        assert_eq!(closest("lpan", ["plan", "summarize"]), Some("plan"));
        assert_eq!(closest("Summarize", ["summarize"]), Some("summarize"));
    }
}
