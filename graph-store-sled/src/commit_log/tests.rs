//! Unit tests of the commit log: round trips, torn tails, damage, recycling, injected failures, the
//! manifest, a property test, and an ignored measurement.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;

use super::format::{self, GROUP_HEADER, SEGMENT_HEADER, SegmentHeader};
use super::io::Site;
use super::*;

fn options(segment_size: u64) -> LogOptions {
    LogOptions {
        segment_size,
        max_spares: 2,
        background_spares: false,
        applied_through: None,
        read_from: 0,
        faults: None,
    }
}

fn with_faults(segment_size: u64, faults: &Arc<Faults>) -> LogOptions {
    LogOptions { faults: Some(faults.clone()), ..options(segment_size) }
}

/// Deterministic payload bytes of a record, so a returned record is checked byte for byte.
fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq.wrapping_mul(31).wrapping_add(i as u64 * 7) as u8) ^ 0x5a).collect()
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Appends one record per length (seqs continuing the log, or from `start` in a new one) and commits.
/// On success the records join `model`.
fn commit_group(
    log: &mut CommitLog,
    model: &mut Vec<Record>,
    start: u64,
    lens: &[usize],
) -> Result<(), LogError> {
    let first = log.next_seq().unwrap_or(start);
    let group: Vec<Record> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| Record { seq: first + i as u64, payload: payload(first + i as u64, n) })
        .collect();
    for r in &group {
        log.append(r.seq, &r.payload)?;
    }
    log.commit()?;
    model.extend(group);
    Ok(())
}

fn open(dir: &Path, opts: LogOptions) -> (CommitLog, Vec<Record>) {
    CommitLog::open(dir, opts).unwrap_or_else(|e| panic!("open failed: {e}"))
}

fn open_err(dir: &Path, opts: LogOptions) -> LogError {
    match CommitLog::open(dir, opts) {
        Ok((_, records)) => panic!("open succeeded with {} records", records.len()),
        Err(e) => e,
    }
}

fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| keep(p.file_name().unwrap().to_str().unwrap()))
        .collect();
    v.sort();
    v
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    files(dir, |n| parse_segment_name(n).is_some())
}

fn spare_files(dir: &Path) -> Vec<PathBuf> {
    files(dir, |n| parse_spare_name(n).is_some())
}

/// A group found in a segment file: where it starts, where its bytes end (before padding), its seqs.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    first_seq: u64,
}

fn group_spans(path: &Path) -> Vec<Span> {
    let bytes = std::fs::read(path).unwrap();
    let header = format::decode_segment_header(&bytes).unwrap();
    let seed = format::salt_seed(header.salt);
    let mut at = SEGMENT_HEADER;
    let mut spans = Vec::new();
    while let Ok(g) = format::parse_group(&bytes, at, seed) {
        let end = g.payloads.last().map_or(at + GROUP_HEADER, |r| r.end);
        spans.push(Span { start: at, end, first_seq: g.first_seq });
        at = g.next;
    }
    spans
}

/// Copies the log's files (not its lock) into a new folder.
fn copy_log(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for p in files(from, |n| n != LOCK_FILE) {
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

fn corrupted_at(e: &LogError) -> (PathBuf, u64) {
    match e {
        LogError::Corrupted { file, offset, .. } => (file.clone(), *offset),
        other => panic!("expected Corrupted, got {other:?}: {other}"),
    }
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).unwrap();
    b[at] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

fn zero(path: &Path, range: std::ops::Range<usize>) {
    let mut b = std::fs::read(path).unwrap();
    b[range].fill(0);
    std::fs::write(path, b).unwrap();
}

/// Writes `groups` random groups (1..=4 records of 0..max_len bytes) starting at seq `start`.
fn fill(
    log: &mut CommitLog,
    model: &mut Vec<Record>,
    rng: &mut Rng,
    groups: usize,
    max_len: u64,
    start: u64,
) {
    for _ in 0..groups {
        let lens: Vec<usize> = (0..1 + rng.below(4)).map(|_| rng.below(max_len) as usize).collect();
        commit_group(log, model, start, &lens).unwrap();
    }
}

#[test]
fn round_trip_across_rotations_and_reopens() {
    for background in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let opts = LogOptions { background_spares: background, ..options(1024) };
        let (mut log, records) = open(dir.path(), opts.clone());
        assert!(records.is_empty());
        assert_eq!(log.next_seq(), None);
        let mut model = Vec::new();
        let mut rng = Rng(0x1234_5678);
        for _ in 0..150 {
            let lens: Vec<usize> = (0..1 + rng.below(4)).map(|_| rng.below(200) as usize).collect();
            commit_group(&mut log, &mut model, 1000, &lens).unwrap();
            // A commit never changes a segment's size: fdatasync has no metadata to write.
            for seg in segment_files(dir.path()) {
                assert_eq!(std::fs::metadata(&seg).unwrap().len(), 1024, "{}", seg.display());
            }
        }
        let stats = log.stats();
        assert!(stats.rotations >= 10, "{stats:?}");
        assert_eq!(stats.commits, 150);
        assert_eq!(model.first().unwrap().seq, 1000);
        assert_eq!(log.segment_seqs().len(), segment_files(dir.path()).len());
        drop(log);

        let (mut log, records) = open(dir.path(), opts.clone());
        assert_eq!(records, model);
        assert_eq!(log.next_seq(), Some(model.last().unwrap().seq + 1));
        fill(&mut log, &mut model, &mut rng, 40, 200, 0);
        drop(log);
        let (_log, records) = open(dir.path(), opts);
        assert_eq!(records, model, "background = {background}");
    }
}

#[test]
fn empty_records_and_an_empty_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    log.commit().unwrap(); // nothing staged: nothing written
    assert_eq!(log.stats().commits, 0);
    assert!(segment_files(dir.path()).is_empty());
    let mut model = Vec::new();
    commit_group(&mut log, &mut model, 0, &[0, 0, 0]).unwrap();
    commit_group(&mut log, &mut model, 0, &[0]).unwrap();
    drop(log);
    let (log, records) = open(dir.path(), options(512));
    assert_eq!(records, model);
    assert_eq!(log.next_seq(), Some(4));
}

#[test]
fn sequence_and_limit_errors_refuse_without_failing_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    assert!(matches!(log.append(u64::MAX, b"x"), Err(LogError::Refused { .. })));
    log.append(7, b"a").unwrap();
    let e = log.append(9, b"b").unwrap_err();
    assert!(matches!(e, LogError::Sequence { expected: 8, found: 9 }), "{e:?}");
    assert_eq!(e.to_string(), "the commit log expects seq 8 next, not 9");
    log.append(8, b"b").unwrap();
    log.commit().unwrap();
    assert!(matches!(log.append(8, b"c"), Err(LogError::Sequence { expected: 9, found: 8 })));
    log.append(9, b"c").unwrap();
    log.commit().unwrap();
    drop(log);
    let (_, records) = open(dir.path(), options(512));
    assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [7, 8, 9]);
    assert_eq!(records[2].payload, b"c");
}

#[test]
fn a_second_open_of_the_folder_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), options(512));
    assert_eq!(log.dir(), dir.path());
    let e = open_err(dir.path(), options(512));
    assert!(matches!(e, LogError::Locked { .. }), "{e:?}");
    assert!(e.to_string().contains("wal.lock is locked"), "{e}");
    drop(log);
    open(dir.path(), options(512));
}

#[test]
fn bad_segment_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for size in [0, 63, 100, 1001] {
        assert!(
            matches!(CommitLog::open(dir.path(), options(size)), Err(LogError::Refused { .. })),
            "{size}"
        );
    }
}

#[test]
fn a_group_larger_than_a_segment_gets_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(256));
    let mut model = Vec::new();
    commit_group(&mut log, &mut model, 1, &[10]).unwrap();
    commit_group(&mut log, &mut model, 1, &[500, 300, 1]).unwrap();
    commit_group(&mut log, &mut model, 1, &[20]).unwrap();
    commit_group(&mut log, &mut model, 1, &[2000]).unwrap();
    commit_group(&mut log, &mut model, 1, &[30]).unwrap();
    let sizes: Vec<u64> =
        segment_files(dir.path()).iter().map(|p| std::fs::metadata(p).unwrap().len()).collect();
    assert_eq!(sizes.len(), 5, "{sizes:?}");
    assert!(sizes[1] > 256 && sizes[3] > 2000, "{sizes:?}");
    drop(log);
    let (mut log, records) = open(dir.path(), options(256));
    assert_eq!(records, model);
    // Oversized segments are deleted, never recycled as spares of the wrong size.
    log.retire_through(model.last().unwrap().seq, 0).unwrap();
    let stats = log.stats();
    assert_eq!((stats.recycled, stats.deleted), (2, 2), "{stats:?}");
    assert!(spare_files(dir.path()).iter().all(|p| std::fs::metadata(p).unwrap().len() == 256));
}

#[test]
fn an_empty_last_segment_is_replaced_by_an_oversized_group() {
    // A crash right after a rotation leaves a last segment with no group; a group too large for it then
    // needs a segment of the same name.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(256));
    let mut model = Vec::new();
    while segment_files(dir.path()).len() < 2 {
        commit_group(&mut log, &mut model, 1, &[60]).unwrap();
    }
    drop(log);
    let last = segment_files(dir.path()).pop().unwrap();
    let spans = group_spans(&last);
    assert_eq!(spans.len(), 1);
    zero(&last, spans[0].start..spans[0].end);
    model.pop();
    let (mut log, records) = open(dir.path(), options(256));
    assert_eq!(records, model);
    assert_eq!(log.segment_seqs().last(), Some(&spans[0].first_seq));
    commit_group(&mut log, &mut model, 1, &[1000]).unwrap();
    commit_group(&mut log, &mut model, 1, &[5]).unwrap();
    drop(log);
    let (_, records) = open(dir.path(), options(256));
    assert_eq!(records, model);
}

#[test]
fn retire_deletes_or_recycles_whole_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    let mut model = Vec::new();
    let mut rng = Rng(99);
    while segment_files(dir.path()).len() < 7 {
        fill(&mut log, &mut model, &mut rng, 1, 120, 1);
    }
    let seqs = log.segment_seqs();
    // Nothing is retired while a segment still holds a record above the seq.
    assert_eq!(log.retire_through(seqs[1] - 2, 0).unwrap(), 0);
    assert_eq!(log.retire_through(seqs[1] - 1, 0).unwrap(), 1);
    assert_eq!(log.retire_through(seqs[4], 0).unwrap(), 3); // segment 4 still holds seqs above seqs[4]
    assert_eq!(log.segment_seqs(), seqs[4..]);
    let stats = log.stats();
    assert_eq!((stats.recycled, stats.deleted), (2, 2), "{stats:?}");
    assert_eq!(spare_files(dir.path()).len(), 2);
    // The current segment stays, however high the seq.
    assert_eq!(log.retire_through(u64::MAX, 0).unwrap(), 2);
    assert_eq!(log.segment_seqs(), [seqs[6]]);
    assert_eq!(segment_files(dir.path()).len(), 1);
    fill(&mut log, &mut model, &mut rng, 3, 120, 1);
    drop(log);
    let (_, records) = open(dir.path(), options(512));
    let kept: Vec<Record> = model.into_iter().filter(|r| r.seq >= seqs[6]).collect();
    assert_eq!(records, kept);
}

#[test]
fn restart_drops_every_segment_and_continues_at_any_seq() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    let mut model = Vec::new();
    let mut rng = Rng(5);
    while segment_files(dir.path()).len() < 3 {
        fill(&mut log, &mut model, &mut rng, 1, 120, 1);
    }
    let next = log.next_seq().unwrap();
    log.append(next, b"staged").unwrap();
    assert!(matches!(log.restart(), Err(LogError::Refused { .. })), "staged records refuse a restart");
    log.commit().unwrap();
    log.restart().unwrap();
    assert!(segment_files(dir.path()).is_empty());
    assert_eq!(log.next_seq(), None);
    // The log continues from a later seq, as if new; a reopen returns only what came after.
    let mut after = Vec::new();
    commit_group(&mut log, &mut after, next + 100, &[10, 20]).unwrap();
    assert_eq!(after[0].seq, next + 100);
    drop(log);
    let (_, records) = open(dir.path(), options(512));
    assert_eq!(records, after);
}

#[test]
fn recycled_segments_never_return_their_stale_records() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    let mut model = Vec::new();
    let mut rng = Rng(7);
    while segment_files(dir.path()).len() < 4 {
        fill(&mut log, &mut model, &mut rng, 1, 100, 1);
    }
    let created = log.stats().spares_created;
    log.retire_through(u64::MAX, 0).unwrap();
    assert_eq!(log.stats().recycled, 2);
    // The next two rotations take the recycled files: no zeros written.
    let rotations = log.stats().rotations;
    while log.stats().rotations < rotations + 2 {
        fill(&mut log, &mut model, &mut rng, 1, 100, 1);
    }
    assert_eq!(log.stats().spares_created, created);
    let current = segment_files(dir.path()).pop().unwrap();
    let end = group_spans(&current).last().unwrap().end;
    // The recycled file still holds its old groups after the new ones: the test is about them.
    let bytes = std::fs::read(&current).unwrap();
    assert!(bytes[format::align_up(end)..].iter().any(|&b| b != 0), "no stale bytes to ignore");
    let first_kept = log.segment_seqs()[0];
    drop(log);
    let (_, records) = open(dir.path(), options(512));
    let kept: Vec<Record> = model.into_iter().filter(|r| r.seq >= first_kept).collect();
    assert_eq!(records, kept);
}

#[test]
fn stale_groups_of_an_earlier_salt_are_not_records_even_with_the_expected_seq() {
    // The case the seq check alone cannot catch: a file whose earlier life holds groups of exactly the
    // seqs that come next (a spare that a crash left written but not renamed, then reused).
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(4096));
    let mut model = Vec::new();
    for _ in 0..5 {
        commit_group(&mut log, &mut model, 40, &[30, 7]).unwrap();
    }
    drop(log);
    let seg = segment_files(dir.path()).pop().unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    let header = format::decode_segment_header(&bytes).unwrap();
    bytes[..SEGMENT_HEADER]
        .copy_from_slice(&format::encode_segment_header(SegmentHeader { salt: header.salt ^ 1, ..header }));
    std::fs::write(&seg, bytes).unwrap();
    let (mut log, records) = open(dir.path(), options(4096));
    assert!(records.is_empty());
    assert_eq!(log.next_seq(), Some(40));
    model.clear();
    commit_group(&mut log, &mut model, 40, &[3]).unwrap();
    drop(log);
    assert_eq!(open(dir.path(), options(4096)).1, model);
}

/// A log of five groups in one segment, the last one with two records.
fn five_groups(dir: &Path) -> (Vec<Record>, PathBuf) {
    let (mut log, _) = open(dir, options(4096));
    let mut model = Vec::new();
    for lens in [[5, 9], [0, 17], [33, 1], [8, 8], [21, 13]] {
        commit_group(&mut log, &mut model, 500, &lens).unwrap();
    }
    drop(log);
    let seg = segment_files(dir).pop().unwrap();
    (model, seg)
}

/// A torn write of the last group (any prefix of it reached the device, the rest reads as zeros) is the
/// end of the log. A cut through the file, at the same bytes, is not: no crash shortens a preallocated
/// segment, so it is damage, and the records after the cut are not silently dropped.
#[test]
fn a_torn_last_group_is_the_tail_at_every_byte_and_a_cut_is_damage() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let (model, seg) = five_groups(&pristine);
    let last = *group_spans(&seg).last().unwrap();
    let before: Vec<Record> = model[..model.len() - 2].to_vec();
    let name = seg.file_name().unwrap();
    let mut case = 0;
    for cut in last.start..last.end {
        for truncate in [true, false] {
            case += 1;
            let dir = base.path().join(format!("case{case}"));
            copy_log(&pristine, &dir);
            let path = dir.join(name);
            if truncate {
                std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut as u64).unwrap();
                let e = open_err(&dir, options(4096));
                assert_eq!(corrupted_at(&e), (path.clone(), cut as u64), "cut at {cut}");
                assert!(e.to_string().contains("cut short"), "{e}");
                std::fs::remove_dir_all(&dir).unwrap();
                continue;
            }
            zero(&path, cut..last.end);
            let (mut log, records) = open(&dir, options(4096));
            assert_eq!(records, before, "cut at {cut}, truncate = {truncate}");
            assert_eq!(log.next_seq(), Some(last.first_seq));
            let mut after = before.clone();
            commit_group(&mut log, &mut after, 0, &[11, 0, 4]).unwrap();
            drop(log);
            let (_, records) = open(&dir, options(4096));
            assert_eq!(records, after, "cut at {cut}, truncate = {truncate}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}

#[test]
fn damage_before_the_last_group_is_corrupted_at_that_group() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let (model, seg) = five_groups(&pristine);
    let spans = group_spans(&seg);
    let name = seg.file_name().unwrap();
    let dir = base.path().join("case");
    for (g, span) in spans.iter().enumerate() {
        for at in span.start..span.end {
            copy_log(&pristine, &dir);
            let path = dir.join(name);
            flip(&path, at);
            if g + 1 < spans.len() {
                let e = open_err(&dir, options(4096));
                assert_eq!(corrupted_at(&e), (path.clone(), span.start as u64), "byte {at}: {e}");
            } else {
                // Damage in the last group reads as a torn tail.
                let (_, records) = open(&dir, options(4096));
                assert_eq!(records, model[..model.len() - 2], "byte {at}");
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
    // A zeroed range that ends before the last group.
    copy_log(&pristine, &dir);
    let path = dir.join(name);
    zero(&path, spans[1].start + 3..spans[2].start + 10);
    let e = open_err(&dir, options(4096));
    assert_eq!(corrupted_at(&e), (path.clone(), spans[1].start as u64));
    let message = e.to_string();
    assert!(
        message.contains(&path.display().to_string()) && message.contains("follows at byte"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // A valid group where another seq was expected (a group copied over its neighbour).
    copy_log(&pristine, &dir);
    let mut bytes = std::fs::read(&path).unwrap();
    let g3 = bytes[spans[3].start..spans[4].start].to_vec();
    bytes.splice(spans[1].start..spans[1].start + g3.len(), g3);
    std::fs::write(&path, bytes).unwrap();
    let e = open_err(&dir, options(4096));
    assert_eq!(corrupted_at(&e).1, spans[1].start as u64, "{e}");
}

/// A log over several segments of 512 bytes.
fn several_segments(dir: &Path, segments: usize) -> Vec<Record> {
    let (mut log, _) = open(dir, options(512));
    let mut model = Vec::new();
    let mut rng = Rng(3);
    while segment_files(dir).len() < segments {
        fill(&mut log, &mut model, &mut rng, 1, 40, 1);
    }
    fill(&mut log, &mut model, &mut rng, 1, 40, 1);
    model
}

#[test]
fn damage_in_an_earlier_segment_is_corrupted() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    several_segments(&pristine, 3);
    let segs = segment_files(&pristine);
    let dir = base.path().join("case");
    let first = dir.join(segs[0].file_name().unwrap());
    let spans = group_spans(&segs[0]);
    assert!(spans.len() >= 2);
    // Its last group (the next segment proves it was written), and one in the middle.
    for span in [spans[spans.len() - 1], spans[0]] {
        copy_log(&pristine, &dir);
        flip(&first, span.start + GROUP_HEADER + 1);
        let e = open_err(&dir, options(512));
        assert_eq!(corrupted_at(&e), (first.clone(), span.start as u64), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // A damaged segment header, whatever byte.
    for at in 0..SEGMENT_HEADER {
        copy_log(&pristine, &dir);
        flip(&first, at);
        let e = open_err(&dir, options(512));
        assert_eq!(corrupted_at(&e), (first.clone(), 0), "byte {at}: {e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_missing_or_overlapping_segment_is_corrupted() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    several_segments(&pristine, 4);
    let segs = segment_files(&pristine);
    let dir = base.path().join("case");
    copy_log(&pristine, &dir);
    std::fs::remove_file(dir.join(segs[1].file_name().unwrap())).unwrap();
    let e = open_err(&dir, options(512));
    let end = group_spans(&segs[0]).last().unwrap().end;
    assert_eq!(corrupted_at(&e), (dir.join(segs[0].file_name().unwrap()), format::align_up(end) as u64));
    assert!(e.to_string().contains("are missing"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();

    // A segment whose name does not match its header.
    copy_log(&pristine, &dir);
    let second = segs[1].file_name().unwrap().to_str().unwrap();
    let seq = parse_segment_name(second).unwrap();
    std::fs::rename(dir.join(second), dir.join(segment_name(seq + 1))).unwrap();
    let e = open_err(&dir, options(512));
    assert_eq!(corrupted_at(&e), (dir.join(segment_name(seq + 1)), 0), "{e}");
}

#[test]
fn a_newer_segment_format_is_unsupported_and_spares_are_never_read() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("log");
    let model = several_segments(&dir, 2);
    // Junk in spare-named files (a header torn mid-recycling, an unfinished preparation) is not damage.
    std::fs::write(dir.join(spares::spare_name(900)), vec![0xAB; 512]).unwrap();
    std::fs::write(dir.join(spares::spare_name(901)), vec![0xCD; 100]).unwrap();
    std::fs::write(dir.join(spares::spare_tmp_name(902)), vec![0xEF; 512]).unwrap();
    let (log, records) = open(&dir, options(512));
    assert_eq!(records, model);
    drop(log);
    // The unfinished one and the one of the wrong size are gone; the good one is kept for use.
    let names: Vec<String> =
        spare_files(&dir).iter().map(|p| p.file_name().unwrap().to_str().unwrap().to_owned()).collect();
    assert!(names.contains(&spares::spare_name(900)), "{names:?}");
    assert!(!names.contains(&spares::spare_name(901)) && !names.contains(&spares::spare_tmp_name(902)));

    let seg = segment_files(&dir)[0].clone();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[4..8].copy_from_slice(&3u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[0..28]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg, bytes).unwrap();
    let e = open_err(&dir, options(512));
    assert!(
        matches!(&e, LogError::UnsupportedVersion { file, found: 3, supported: 2 } if *file == seg),
        "{e:?}"
    );
    assert!(e.to_string().contains("format version 3"), "{e}");
}

/// Rewrites a segment's header as version 1 wrote it: no capacity (bytes 24..28 zero).
fn as_version_1(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[4..8].copy_from_slice(&format::FORMAT_V1.to_le_bytes());
    bytes[24..28].fill(0);
    let crc = crc32c::crc32c(&bytes[0..28]);
    bytes[28..32].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn version_1_segments_are_read_and_continued() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("log");
    let mut model = several_segments(&dir, 3);
    for seg in segment_files(&dir) {
        as_version_1(&seg);
        assert_eq!(format::decode_segment_header(&std::fs::read(&seg).unwrap()).unwrap().capacity, None);
    }
    let (mut log, records) = open(&dir, options(512));
    assert_eq!(records, model);
    let mut rng = Rng(9);
    fill(&mut log, &mut model, &mut rng, 12, 40, 1);
    drop(log);
    assert_eq!(open(&dir, options(512)).1, model);
    // Version 1 has no capacity to check a size against: a cut through its last group reads as the end.
    let segs = segment_files(&dir);
    let last = segs.last().unwrap();
    as_version_1(last);
    let spans = group_spans(last);
    let cut = spans.last().unwrap().start + 3;
    std::fs::OpenOptions::new().write(true).open(last).unwrap().set_len(cut as u64).unwrap();
    let lost = spans.last().unwrap().first_seq;
    let (_, records) = open(&dir, options(512));
    assert_eq!(records, model.into_iter().filter(|r| r.seq < lost).collect::<Vec<_>>());
}

#[test]
fn a_segment_longer_than_its_capacity_is_damage() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("log");
    several_segments(&dir, 2);
    let first = segment_files(&dir)[0].clone();
    let mut bytes = std::fs::read(&first).unwrap();
    bytes.extend_from_slice(&[0; 8]);
    std::fs::write(&first, bytes).unwrap();
    let e = open_err(&dir, options(512));
    assert_eq!(corrupted_at(&e), (first, 512), "{e}");
}

/// Runs commits until one fails under an armed fault, then checks fail-stop and that a reopen returns
/// exactly the committed records.
fn fault_case(site: Site, op: Op, action: Action, background: bool, cause: &str) {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let opts = LogOptions { background_spares: background, ..with_faults(512, &faults) };
    let (mut log, _) = open(dir.path(), opts);
    let mut model = Vec::new();
    let mut rng = Rng(11);
    fill(&mut log, &mut model, &mut rng, 3, 100, 1);
    faults.arm(site, op, 0, action);
    let mut error = None;
    for _ in 0..50 {
        let lens: Vec<usize> = (0..1 + rng.below(3)).map(|_| rng.below(100) as usize).collect();
        if let Err(e) = commit_group(&mut log, &mut model, 1, &lens) {
            error = Some(e);
            break;
        }
    }
    let case = format!("{site:?} {op:?} {action:?} background={background}");
    let error = error.unwrap_or_else(|| panic!("{case}: no commit failed"));
    assert!(matches!(error, LogError::Io { .. }), "{case}: {error:?}");
    assert!(error.to_string().contains(cause), "{case}: {error}");
    // Fail-stop: every call refuses, saying why.
    let refusals =
        [log.append(0, b"x").unwrap_err(), log.commit().unwrap_err(), log.retire_through(0, 0).unwrap_err()];
    for e in refusals {
        assert!(matches!(e, LogError::Failed { .. }), "{case}: {e:?}");
        let message = e.to_string();
        assert!(
            message.contains("failed earlier and must be reopened") && message.contains(cause),
            "{case}: {message}"
        );
    }
    drop(log);
    let (mut log, records) = open(dir.path(), options(512));
    assert_eq!(records, model, "{case}");
    fill(&mut log, &mut model, &mut rng, 12, 100, 1);
    drop(log);
    assert_eq!(open(dir.path(), options(512)).1, model, "{case}");
}

const ENOSPC: &str = "No space left on device";
const EIO: &str = "Input/output error";

#[test]
fn a_failed_commit_write_stops_the_log_and_loses_only_itself() {
    fault_case(Site::Commit, Op::Write, Action::Fail(28), false, ENOSPC);
    fault_case(Site::Commit, Op::Write, Action::Partial(10), false, EIO);
    fault_case(Site::Commit, Op::Write, Action::Partial(GROUP_HEADER + 3), false, EIO);
}

#[test]
fn a_failed_sync_is_undone_so_a_reopen_does_not_trust_the_page_cache() {
    // The write reached the page cache: without the undo the reopen would return the failed group.
    fault_case(Site::Commit, Op::SyncData, Action::Fail(5), false, EIO);
}

#[test]
fn a_failed_rotation_stops_the_log_and_loses_only_its_group() {
    for op in [Op::Write, Op::SyncData, Op::Rename, Op::SyncDir] {
        fault_case(Site::Rotate, op, Action::Fail(28), false, ENOSPC);
    }
    fault_case(Site::Rotate, Op::Write, Action::Partial(SEGMENT_HEADER + 5), false, EIO);
}

#[test]
fn a_failed_spare_preparation_fails_the_rotation_that_needs_it() {
    fault_case(Site::Spare, Op::Write, Action::Fail(28), false, ENOSPC);
    fault_case(Site::Spare, Op::SyncAll, Action::Fail(5), false, EIO);
    // On the thread: its failure is kept until a rotation finds no spare ready, and fails that one.
    fault_case(Site::Spare, Op::Write, Action::Fail(28), true, ENOSPC);
}

#[test]
fn a_failed_retire_stops_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(Faults::default());
    let (mut log, _) = open(dir.path(), with_faults(512, &faults));
    let mut model = Vec::new();
    let mut rng = Rng(5);
    while segment_files(dir.path()).len() < 4 {
        fill(&mut log, &mut model, &mut rng, 1, 100, 1);
    }
    faults.arm(Site::Retire, Op::SyncDir, 1, Action::Fail(5));
    let e = log.retire_through(u64::MAX, 0).unwrap_err();
    assert!(e.to_string().contains(EIO), "{e}");
    assert!(matches!(log.commit(), Err(LogError::Failed { .. })));
    drop(log);
    let (_, records) = open(dir.path(), options(512));
    // The first segment was retired, the second's rename happened but its folder sync failed; what
    // is left is a contiguous suffix of the records.
    let first = records[0].seq;
    assert!(first > 1);
    assert_eq!(records, model.into_iter().filter(|r| r.seq >= first).collect::<Vec<_>>());
}

#[test]
fn the_fault_seam_counts_calls() {
    let faults = Faults::default();
    faults.arm(Site::Commit, Op::Write, 2, Action::Fail(5));
    let io = Io { faults: Some(Arc::new(faults)) };
    let dir = tempfile::tempdir().unwrap();
    let file = io.create(Site::Commit, &dir.path().join("f")).unwrap();
    io.write_at(Site::Rotate, &file, b"a", 0).unwrap(); // another site: not counted
    io.write_at(Site::Commit, &file, b"a", 0).unwrap();
    io.write_at(Site::Commit, &file, b"a", 0).unwrap();
    assert!(io.write_at(Site::Commit, &file, b"a", 0).is_err());
    io.write_at(Site::Commit, &file, b"a", 0).unwrap(); // one-shot
    assert_eq!(io.faults.as_ref().unwrap().pending(), 0);
}

#[test]
fn manifest_round_trip_missing_and_damage() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap(), None);
    let m = Manifest { checkpoint_seq: 41, extra: vec![1, u64::MAX] };
    m.store(dir.path()).unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap(), Some(m.clone()));
    let m2 = Manifest { checkpoint_seq: 42, extra: vec![] };
    m2.store(dir.path()).unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap(), Some(m2.clone()));
    assert!(matches!(
        Manifest { checkpoint_seq: 0, extra: vec![0; 64] }.store(dir.path()),
        Err(LogError::Refused { .. })
    ));

    let path = dir.path().join(manifest::MANIFEST_FILE);
    let good = std::fs::read(&path).unwrap();
    for at in 0..good.len() {
        let mut b = good.clone();
        b[at] ^= 0x01;
        std::fs::write(&path, b).unwrap();
        let e = Manifest::load(dir.path()).unwrap_err();
        assert_eq!(corrupted_at(&e).0, path, "byte {at}");
    }
    for len in 0..good.len() {
        std::fs::write(&path, &good[..len]).unwrap();
        assert_eq!(corrupted_at(&Manifest::load(dir.path()).unwrap_err()).0, path, "length {len}");
    }
    // A valid manifest of a newer format.
    let mut b = good.clone();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..12]), &b[16..]);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, b).unwrap();
    let e = Manifest::load(dir.path()).unwrap_err();
    assert!(matches!(e, LogError::UnsupportedVersion { found: 2, supported: 1, .. }), "{e:?}");
}

#[test]
fn a_torn_or_failed_manifest_write_leaves_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let old = Manifest { checkpoint_seq: 7, extra: vec![3] };
    old.store(dir.path()).unwrap();
    // A crash while writing the temporary file leaves it torn beside the manifest: never read.
    std::fs::write(dir.path().join("manifest.tmp"), b"GRMF\x01\0\0").unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap(), Some(old.clone()));
    let new = Manifest { checkpoint_seq: 8, extra: vec![] };
    for (op, action) in
        [(Op::Write, Action::Partial(9)), (Op::SyncData, Action::Fail(5)), (Op::Rename, Action::Fail(28))]
    {
        let faults = Arc::new(Faults::default());
        faults.arm(Site::Manifest, op, 0, action);
        let e = new.store_with(dir.path(), &Io { faults: Some(faults) }).unwrap_err();
        assert!(e.to_string().starts_with("cannot write"), "{e}");
        assert_eq!(Manifest::load(dir.path()).unwrap(), Some(old.clone()), "{op:?}");
    }
    new.store(dir.path()).unwrap();
    assert_eq!(Manifest::load(dir.path()).unwrap(), Some(new));
}

/// What `open` must return after segment `seg` lost its bytes from `cut` on: zeroed (`truncate` false:
/// a crash while they were written; the device never got them) or cut off the file (`truncate`).
fn expected_after_cut(
    dir: &Path,
    model: &[Record],
    seg: usize,
    cut: usize,
    truncate: bool,
) -> Result<Vec<Record>, (PathBuf, u64)> {
    let segs = segment_files(dir);
    if cut < SEGMENT_HEADER {
        return Err((segs[seg].clone(), 0));
    }
    if truncate {
        // No crash shortens a preallocated segment: the header's capacity shows the cut, wherever it is.
        return Err((segs[seg].clone(), cut as u64));
    }
    let spans = group_spans(&segs[seg]);
    let kept = spans.iter().take_while(|s| s.end <= cut).count();
    if kept == spans.len() {
        return Ok(model.to_vec());
    }
    if seg + 1 < segs.len() {
        return Err((segs[seg].clone(), spans[kept].start as u64));
    }
    let lost = spans[kept].first_seq;
    Ok(model.iter().filter(|r| r.seq < lost).cloned().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_groups_and_a_random_cut(
        segment_size in prop::sample::select(vec![256u64, 512, 1024]),
        groups in prop::collection::vec(prop::collection::vec(0usize..300, 1..5), 1..25),
        which in 0.0f64..1.0,
        where_ in 0.0f64..1.0,
        truncate in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), options(segment_size));
        let mut model = Vec::new();
        for lens in &groups {
            commit_group(&mut log, &mut model, 3, lens).unwrap();
        }
        drop(log);
        let (_, records) = open(dir.path(), options(segment_size));
        prop_assert_eq!(&records, &model);

        let segs = segment_files(dir.path());
        let seg = ((which * segs.len() as f64) as usize).min(segs.len() - 1);
        let len = std::fs::metadata(&segs[seg]).unwrap().len() as usize;
        let cut = (where_ * len as f64) as usize;
        // Zeroing bytes that are zero already changes nothing: the damage starts at the first byte from
        // `cut` on that is not (a record's last bytes can be zeros; one case cut a group's last byte,
        // a zero, and the log rightly read it whole).
        let damaged = if truncate {
            cut
        } else {
            let bytes = std::fs::read(&segs[seg]).unwrap();
            bytes[cut..].iter().position(|&b| b != 0).map_or(len, |p| cut + p)
        };
        let expected = expected_after_cut(dir.path(), &model, seg, damaged, truncate);
        if truncate {
            std::fs::OpenOptions::new().write(true).open(&segs[seg]).unwrap().set_len(cut as u64).unwrap();
        } else {
            zero(&segs[seg], cut..len);
        }
        match (CommitLog::open(dir.path(), options(segment_size)), expected) {
            (Ok((mut log, records)), Ok(expected)) => {
                prop_assert_eq!(&records, &expected);
                let mut after = expected;
                commit_group(&mut log, &mut after, 3, &[17, 2]).unwrap();
                drop(log);
                let (_, records) = open(dir.path(), options(segment_size));
                prop_assert_eq!(records, after);
            }
            (Err(e), Err(at)) => prop_assert_eq!(corrupted_at(&e), at),
            (got, expected) => {
                let got = got.map(|(_, r)| r.len());
                prop_assert!(false, "cut {cut} (damage from {damaged}) of segment {seg}: got {got:?}, expected {expected:?}");
            }
        }
    }
}

/// Commits per second of one ~1.6 KB record per commit, against the machine's plain
/// "append 512 bytes + fdatasync" rate on a growing file in the same folder (how the project's
/// benchmark measures it); then the latency of a commit that rotates to a new 64 MiB segment, with the
/// spare prepared on the thread or in the rotation. Run:
///
/// `WAL_BENCH_DIR=/tmp cargo test -p graph-runtime --release --lib commit_log::tests::measure -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, not a test: run it by hand"]
fn measure_commit_rate_against_fdatasync() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let base = std::env::var_os("WAL_BENCH_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let slice: f64 = std::env::var("WAL_BENCH_SLICE").ok().and_then(|s| s.parse().ok()).unwrap_or(0.5);
    let slice = Duration::from_secs_f64(slice);
    let record = vec![0x5au8; 1600];
    let wait_for_spare = |log: &CommitLog| {
        while log.spares.ready_count() == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    for round in 1..=3 {
        let dir = tempfile::tempdir_in(&base).unwrap();
        let mut plain =
            std::fs::OpenOptions::new().create(true).append(true).open(dir.path().join("plain")).unwrap();
        let (mut log, _) = CommitLog::open(dir.path().join("wal"), LogOptions::default()).unwrap();
        log.append(0, &record).unwrap();
        log.commit().unwrap();
        // Time the steady state: the thread's next spare (64 MiB of zeros) is written before the clock
        // starts, as it is long before a rotation in a running store.
        wait_for_spare(&log);
        // The two loops alternate in short slices, so a change in the machine's load (it is shared)
        // falls on both.
        let (mut plain_n, mut plain_t, mut log_n, mut log_t, mut worst) =
            (0u64, Duration::ZERO, 0u64, Duration::ZERO, Duration::ZERO);
        for _ in 0..6 {
            let start = Instant::now();
            while start.elapsed() < slice {
                plain.write_all(&[0x33; 512]).unwrap();
                plain.sync_data().unwrap();
                plain_n += 1;
            }
            plain_t += start.elapsed();
            let start = Instant::now();
            while start.elapsed() < slice {
                let t = Instant::now();
                log.append(log_n + 1, &record).unwrap();
                log.commit().unwrap();
                worst = worst.max(t.elapsed());
                log_n += 1;
            }
            log_t += start.elapsed();
        }
        let plain_rate = plain_n as f64 / plain_t.as_secs_f64();
        let log_rate = log_n as f64 / log_t.as_secs_f64();
        println!(
            "round {round} in {}: plain append+fdatasync {plain_rate:.0}/s, commit log {log_rate:.0}/s, \
             ratio {:.2}, slowest commit {worst:.1?}",
            base.display(),
            log_rate / plain_rate,
        );
    }
    for background in [true, false] {
        for round in 1..=3 {
            let dir = tempfile::tempdir_in(&base).unwrap();
            let opts = LogOptions { background_spares: background, ..LogOptions::default() };
            let (mut log, _) = CommitLog::open(dir.path(), opts).unwrap();
            // One record that leaves no room for another: the next commit rotates.
            let fill = DEFAULT_SEGMENT_SIZE as usize - SEGMENT_HEADER - GROUP_HEADER - RECORD_HEADER - 64;
            log.append(0, &vec![1u8; fill]).unwrap();
            log.commit().unwrap();
            if background {
                wait_for_spare(&log);
            }
            let t = Instant::now();
            log.append(1, &record).unwrap();
            log.commit().unwrap();
            let took = t.elapsed();
            assert_eq!(log.stats().rotations, 2);
            let t = Instant::now();
            log.append(2, &record).unwrap();
            log.commit().unwrap();
            println!(
                "rotation {round}, spare prepared {}: the rotating commit took {took:.1?} (the next one {:.1?})",
                if background { "on the thread beforehand" } else { "in the rotation" },
                t.elapsed()
            );
        }
    }
}

#[test]
fn open_reports_a_write_back_error_of_the_last_segment() {
    // An error the kernel holds for the last segment (a write-back that failed after an earlier instance
    // stopped) must stop `open` before the segment's bytes are trusted.
    let dir = tempfile::tempdir().unwrap();
    let mut model = Vec::new();
    let (mut log, _) = open(dir.path(), options(512));
    commit_group(&mut log, &mut model, 1, &[5]).unwrap();
    drop(log);
    let faults = Arc::new(Faults::default());
    faults.arm(Site::Open, Op::SyncData, 0, Action::Fail(5));
    let e = open_err(dir.path(), with_faults(512, &faults));
    assert!(matches!(e, LogError::Io { .. }) && e.to_string().contains(EIO), "{e}");
    assert_eq!(open(dir.path(), options(512)).1, model);
}

/// Segments all of whose records precede `read_from` are history: `open` neither returns nor checks
/// them (one damaged there does not stop it), and `history` reads every segment again, oldest first,
/// with the records `open` would return, stopping at the damage with its file. `closed_history` leaves
/// the current segment out.
#[test]
fn segments_before_read_from_are_history_read_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), options(512));
    let mut model = Vec::new();
    let mut rng = Rng(7);
    while segment_files(dir.path()).len() < 5 {
        fill(&mut log, &mut model, &mut rng, 1, 120, 1);
    }
    let seqs = log.segment_seqs();
    drop(log);
    let read_from = seqs[2] - 1;
    let opts = LogOptions { read_from, ..options(512) };
    let (log, records) = open(dir.path(), opts.clone());
    assert_eq!(records, model.iter().filter(|r| r.seq >= seqs[2]).cloned().collect::<Vec<_>>());
    assert_eq!(log.first_seq(), Some(seqs[0]));
    let history: Vec<Record> = log.history().flat_map(Result::unwrap).collect();
    assert_eq!(history, model);
    let closed: Vec<Record> = log.closed_history().flat_map(Result::unwrap).collect();
    assert_eq!(closed, model.iter().filter(|r| r.seq < *seqs.last().unwrap()).cloned().collect::<Vec<_>>());
    drop(log);

    // One byte of the second segment's first group changed: a history segment, so `open` goes on.
    let second = segment_files(dir.path())[1].clone();
    let mut bytes = std::fs::read(&second).unwrap();
    bytes[SEGMENT_HEADER + GROUP_HEADER + 2] ^= 0x10;
    std::fs::write(&second, &bytes).unwrap();
    let (log, again) = open(dir.path(), opts);
    assert_eq!(again, records);
    let read: Vec<_> = log.history().collect();
    assert_eq!(read.len(), 2, "the history stops at the damage");
    assert!(read[0].is_ok());
    match &read[1] {
        Err(LogError::Corrupted { file, .. }) => assert_eq!(file, &second),
        other => panic!("{other:?}"),
    }
    drop(log);
    // Read from the start, the same damage is refused.
    assert!(matches!(open_err(dir.path(), options(512)), LogError::Corrupted { .. }));
}
