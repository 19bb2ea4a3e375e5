//! The built-in field merge strategies.
//!
//! Each strategy is a function `(current: &mut T, written: T, field) -> Result<(), MergeError>` bounded by a
//! trait naming what the strategy needs, so `#[reduce(sum)]` on a `String` is a compile error on the
//! field that says which strategies fit.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use super::MergeError;

/// Replaces the current value.
pub fn overwrite<T>(current: &mut T, written: T, _field: &'static str) -> Result<(), MergeError> {
    *current = written;
    Ok(())
}

/// Appends the written sequence after the current one.
pub fn append<T: MergeAppend>(current: &mut T, written: T, _field: &'static str) -> Result<(), MergeError> {
    current.merge_append(written);
    Ok(())
}

/// Adds the written value; integer overflow is a [`MergeError::Overflow`], never a wrap or a panic.
pub fn sum<T: MergeSum>(current: &mut T, written: T, field: &'static str) -> Result<(), MergeError> {
    current.merge_sum(written).ok_or(MergeError::Overflow { field })
}

/// Keeps the larger value (a value that is not comparable, like `NaN`, never replaces).
pub fn max<T: MergeOrd>(current: &mut T, written: T, _field: &'static str) -> Result<(), MergeError> {
    if written.partial_cmp(current) == Some(std::cmp::Ordering::Greater) {
        *current = written;
    }
    Ok(())
}

/// Keeps the smaller value (a value that is not comparable, like `NaN`, never replaces).
pub fn min<T: MergeOrd>(current: &mut T, written: T, _field: &'static str) -> Result<(), MergeError> {
    if written.partial_cmp(current) == Some(std::cmp::Ordering::Less) {
        *current = written;
    }
    Ok(())
}

/// Set union; for maps, the written entries are inserted (a written key replaces the current one).
pub fn union<T: MergeUnion>(current: &mut T, written: T, _field: &'static str) -> Result<(), MergeError> {
    current.merge_union(written);
    Ok(())
}

/// Sequences that `#[reduce(append)]` can merge.
#[diagnostic::on_unimplemented(
    message = "`#[reduce(append)]` needs a sequence, found `{Self}`",
    label = "`append` does not fit this field's type",
    note = "`append` fits `Vec<T>`, `VecDeque<T>` and `String`; use `union` for sets and maps, `sum` for numbers"
)]
pub trait MergeAppend {
    /// Appends `other` after `self`.
    fn merge_append(&mut self, other: Self);
}

impl<T> MergeAppend for Vec<T> {
    fn merge_append(&mut self, mut other: Self) {
        self.append(&mut other);
    }
}

impl<T> MergeAppend for VecDeque<T> {
    fn merge_append(&mut self, mut other: Self) {
        self.append(&mut other);
    }
}

impl MergeAppend for String {
    fn merge_append(&mut self, other: Self) {
        self.push_str(&other);
    }
}

/// Numbers that `#[reduce(sum)]` can merge.
#[diagnostic::on_unimplemented(
    message = "`#[reduce(sum)]` needs a number, found `{Self}`",
    label = "`sum` does not fit this field's type",
    note = "`sum` fits the integer and float primitives and `Duration`; use `append` for strings and sequences"
)]
pub trait MergeSum {
    /// Adds `other`; `None` on overflow.
    fn merge_sum(&mut self, other: Self) -> Option<()>;
}

macro_rules! checked_sum {
    ($($t:ty),*) => {$(
        impl MergeSum for $t {
            fn merge_sum(&mut self, other: Self) -> Option<()> {
                *self = self.checked_add(other)?;
                Some(())
            }
        }
    )*};
}
checked_sum!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, Duration);

impl MergeSum for f32 {
    fn merge_sum(&mut self, other: Self) -> Option<()> {
        *self += other;
        Some(())
    }
}

impl MergeSum for f64 {
    fn merge_sum(&mut self, other: Self) -> Option<()> {
        *self += other;
        Some(())
    }
}

/// Values that `#[reduce(max)]` and `#[reduce(min)]` can merge.
#[diagnostic::on_unimplemented(
    message = "`#[reduce(max)]` and `#[reduce(min)]` need a comparable value, found `{Self}`",
    label = "this field's type is not `PartialOrd`",
    note = "derive or implement `PartialOrd` for the field's type"
)]
pub trait MergeOrd: PartialOrd {}

impl<T: PartialOrd> MergeOrd for T {}

/// Sets and maps that `#[reduce(union)]` can merge.
#[diagnostic::on_unimplemented(
    message = "`#[reduce(union)]` needs a set or a map, found `{Self}`",
    label = "`union` does not fit this field's type",
    note = "`union` fits `BTreeSet`, `BTreeMap` and `HashMap` (a state cannot hold a `HashSet`: its order cannot be made canonical)"
)]
pub trait MergeUnion {
    /// Inserts every element of `other`.
    fn merge_union(&mut self, other: Self);
}

impl<T: Ord> MergeUnion for BTreeSet<T> {
    fn merge_union(&mut self, other: Self) {
        self.extend(other);
    }
}

impl<K: Ord, V> MergeUnion for BTreeMap<K, V> {
    fn merge_union(&mut self, other: Self) {
        self.extend(other);
    }
}

impl<T: Eq + Hash> MergeUnion for HashSet<T> {
    fn merge_union(&mut self, other: Self) {
        self.extend(other);
    }
}

impl<K: Eq + Hash, V> MergeUnion for HashMap<K, V> {
    fn merge_union(&mut self, other: Self) {
        self.extend(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_merge_as_named() {
        let mut v = vec![1];
        append(&mut v, vec![2, 3], "v").unwrap();
        assert_eq!(v, [1, 2, 3]);
        let mut n = 250u8;
        assert!(matches!(sum(&mut n, 10, "n"), Err(MergeError::Overflow { field: "n" })));
        assert_eq!(n, 250, "a failed sum leaves the value alone");
        sum(&mut n, 5, "n").unwrap();
        assert_eq!(n, 255);
        let mut m = 3;
        max(&mut m, 9, "m").unwrap();
        max(&mut m, 4, "m").unwrap();
        assert_eq!(m, 9);
        min(&mut m, 4, "m").unwrap();
        assert_eq!(m, 4);
        let mut f = 1.0f64;
        max(&mut f, f64::NAN, "f").unwrap();
        assert_eq!(f, 1.0);
        let mut s: BTreeSet<_> = [1, 2].into();
        union(&mut s, [2, 5].into(), "s").unwrap();
        assert_eq!(s, [1, 2, 5].into());
        let mut o = 1;
        overwrite(&mut o, 7, "o").unwrap();
        assert_eq!(o, 7);
    }
}
