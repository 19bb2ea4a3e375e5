//! What a commit-log record holds: the sled writes of one commit group, replayed into sled at open.
//!
//! A record is a sequence of operations, each `u8 op | u32_le len(key) | key [| u32_le len(value) |
//! value]`, where `op` is the tree (low 7 bits) and whether it is a removal (high bit). Writes are blind
//! puts and removes of whole values, so replaying a record twice leaves sled as replaying it once.
//! The commit log checksums every record; a record that does not parse here was written by a bug, and
//! is reported as damage, never skipped.

/// A tree of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum TreeId {
    Runs = 0,
    Checkpoints = 1,
    Keys = 2,
    /// Effect journal entries by (run, step, path, call index).
    Effects = 3,
    /// Effect key → its key in `Effects`.
    EffectKeys = 4,
    /// Pending outbox rows by (run, step, emit order).
    Outbox = 5,
    /// Event logs by (run, seq).
    Events = 6,
    /// Pending steps by run.
    Pending = 7,
    /// Mailboxes by run.
    Mailboxes = 8,
    /// Schedules by name.
    Schedules = 9,
}

impl TreeId {
    /// Every tree, in order.
    pub(super) const ALL: [TreeId; 10] = [
        TreeId::Runs,
        TreeId::Checkpoints,
        TreeId::Keys,
        TreeId::Effects,
        TreeId::EffectKeys,
        TreeId::Outbox,
        TreeId::Events,
        TreeId::Pending,
        TreeId::Mailboxes,
        TreeId::Schedules,
    ];

    fn from_u8(n: u8) -> Option<TreeId> {
        Some(match n {
            0 => TreeId::Runs,
            1 => TreeId::Checkpoints,
            2 => TreeId::Keys,
            3 => TreeId::Effects,
            4 => TreeId::EffectKeys,
            5 => TreeId::Outbox,
            6 => TreeId::Events,
            7 => TreeId::Pending,
            8 => TreeId::Mailboxes,
            9 => TreeId::Schedules,
            _ => return None,
        })
    }
}

const REMOVE: u8 = 0x80;

/// Writes operations into a record's bytes.
#[derive(Debug, Default)]
pub(super) struct RedoWriter {
    bytes: Vec<u8>,
    ops: usize,
}

impl RedoWriter {
    /// Forgets what was written (a sled transaction that is retried writes its operations again).
    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.ops = 0;
    }

    /// A put of `value` under `key` in `tree`.
    pub(super) fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) {
        self.bytes.push(tree as u8);
        self.field(key);
        self.field(value);
        self.ops += 1;
    }

    /// A removal of `key` from `tree`.
    pub(super) fn remove(&mut self, tree: TreeId, key: &[u8]) {
        self.bytes.push(tree as u8 | REMOVE);
        self.field(key);
        self.ops += 1;
    }

    fn field(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(&(b.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(b);
    }

    /// True when nothing was written.
    pub(super) fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// The record's bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The record's bytes, taken (the writer is left empty).
    pub(super) fn take(&mut self) -> Vec<u8> {
        self.ops = 0;
        std::mem::take(&mut self.bytes)
    }
}

/// One operation of a record, borrowing the record's bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Op<'a> {
    Put { tree: TreeId, key: &'a [u8], value: &'a [u8] },
    Remove { tree: TreeId, key: &'a [u8] },
}

/// The operations of a record, in order.
///
/// # Errors
///
/// What is wrong, when the bytes are not a sequence of operations.
pub(super) fn parse(mut bytes: &[u8]) -> Result<Vec<Op<'_>>, String> {
    let mut ops = Vec::new();
    while let Some((&op, rest)) = bytes.split_first() {
        let tree = TreeId::from_u8(op & !REMOVE).ok_or_else(|| {
            format!("operation {} names tree {}, which does not exist", ops.len(), op & !REMOVE)
        })?;
        let (key, rest) = field(rest).ok_or_else(|| format!("operation {} is cut short", ops.len()))?;
        if op & REMOVE != 0 {
            ops.push(Op::Remove { tree, key });
            bytes = rest;
        } else {
            let (value, rest) = field(rest).ok_or_else(|| format!("operation {} is cut short", ops.len()))?;
            ops.push(Op::Put { tree, key, value });
            bytes = rest;
        }
    }
    Ok(ops)
}

fn field(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let rest = &b[4..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_and_short_or_unknown_bytes_are_errors() {
        let mut w = RedoWriter::default();
        assert!(w.is_empty());
        w.put(TreeId::Keys, b"k", b"value");
        w.remove(TreeId::Checkpoints, b"old");
        w.put(TreeId::Runs, b"", b"");
        let ops = parse(w.bytes()).unwrap();
        assert_eq!(
            ops,
            [
                Op::Put { tree: TreeId::Keys, key: b"k", value: b"value" },
                Op::Remove { tree: TreeId::Checkpoints, key: b"old" },
                Op::Put { tree: TreeId::Runs, key: b"", value: b"" },
            ]
        );
        for cut in 1..w.bytes().len() {
            let short = &w.bytes()[..cut];
            assert!(parse(short).is_err() || parse(short).unwrap().len() < 3, "cut at {cut}");
        }
        assert!(parse(&[9, 0, 0, 0, 0]).is_err());
        w.clear();
        assert!(w.is_empty() && w.bytes().is_empty());
    }
}
