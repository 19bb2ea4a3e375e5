//! What the fuzz targets in `fuzz/` call (feature `fuzzing`; not part of the API): the commit log's
//! segment and manifest decoders and the redo records they carry, each checked for the properties a
//! reader relies on, panicking when one fails.

use std::path::PathBuf;

use super::format::{
    GroupBuilder, SEGMENT_HEADER, SegmentHeader, decode_segment_header, encode_segment_header,
    find_valid_group, salt_seed,
};
use super::manifest::Manifest;
use crate::redo::{self, Op, RedoWriter};

/// Reads `bytes` as a whole segment (header, then every valid group found) and parses each record's
/// operations. Arbitrary bytes: never a panic, every group found lies within the file and is made of
/// whole records.
pub fn segment(bytes: &[u8]) {
    let Ok(header) = decode_segment_header(bytes) else { return };
    let seed = salt_seed(header.salt);
    let mut at = SEGMENT_HEADER;
    while let Some((found, group)) = find_valid_group(bytes, at, seed) {
        assert!(found >= at && group.next > found && group.next <= bytes.len().next_multiple_of(8));
        assert_eq!(group.payloads.len(), group.count as usize);
        for p in &group.payloads {
            let _ = redo_round_trip(&bytes[p.clone()]);
        }
        at = group.next;
    }
    // What `open` and `CommitLog::history` run: never a panic; with damage skipped, never fewer records.
    let path = std::path::Path::new("fuzz.log");
    let (mut strict, mut lenient) = (0, 0);
    let strict_scan = super::scan_segment(path, header.first_seq, bytes, None, None, &mut |_, _| strict += 1);
    let lenient_scan =
        super::scan_segment(path, header.first_seq, bytes, Some(u64::MAX - 1), None, &mut |_, _| {
            lenient += 1
        });
    if strict_scan.is_ok() {
        assert!(lenient_scan.is_ok() && lenient == strict, "skipping damage changed an intact segment");
    }
}

/// Builds a segment of `groups` (each a list of records) with a valid header and checksums, then
/// changes the byte at `flip.0` (wrapped into the file) by xor `flip.1`. Unchanged, every group reads
/// back exactly as written; changed inside a group, that group is never read back with other records
/// than were written (the checksums catch any one changed byte).
pub fn segment_round_trip(salt: u64, first_seq: u64, groups: &[Vec<Vec<u8>>], flip: Option<(usize, u8)>) {
    let mut body = Vec::new();
    let mut builder = GroupBuilder::default();
    let mut seq = first_seq;
    let mut written = Vec::new();
    for records in groups.iter().filter(|g| !g.is_empty()) {
        builder.begin(seq);
        for r in records {
            builder.push(r);
        }
        written.push((SEGMENT_HEADER + body.len(), seq, records.clone()));
        body.extend_from_slice(builder.finish(salt));
        seq += records.len() as u64;
    }
    // The segment's size is its header's capacity, as for a segment the log wrote.
    let capacity = (SEGMENT_HEADER + body.len() + 64) as u64;
    let mut file =
        encode_segment_header(SegmentHeader { first_seq, salt, capacity: Some(capacity) }).to_vec();
    file.extend_from_slice(&body);
    file.resize(capacity as usize, 0);
    let flipped = flip.filter(|&(_, x)| x != 0).map(|(at, x)| {
        let at = at % file.len();
        file[at] ^= x;
        at
    });
    let header = match decode_segment_header(&file) {
        Ok(h) => h,
        Err(_) => {
            assert!(flipped.is_some_and(|at| at < SEGMENT_HEADER), "an intact header was refused");
            return;
        }
    };
    if flipped.is_some_and(|at| at < SEGMENT_HEADER) {
        // The only header bytes outside the checksum: none (it covers 0..28 and is 28..32).
        panic!("a changed header byte was accepted: {header:?}");
    }
    let seed = salt_seed(header.salt);
    let mut at = SEGMENT_HEADER;
    let mut read = Vec::new();
    while let Some((found, group)) = find_valid_group(&file, at, seed) {
        let records: Vec<Vec<u8>> = group.payloads.iter().map(|p| file[p.clone()].to_vec()).collect();
        read.push((found, group.first_seq, records));
        at = group.next;
    }
    let mut scanned = Vec::new();
    let scan =
        super::scan_segment(&PathBuf::from("fuzz.log"), first_seq, &file, None, None, &mut |seq, p| {
            scanned.push((seq, p.to_vec()))
        });
    let records: Vec<(u64, Vec<u8>)> = written
        .iter()
        .flat_map(|(_, seq, records)| records.iter().zip(*seq..).map(|(r, s)| (s, r.clone())))
        .collect();
    match flipped {
        None => {
            assert_eq!(read, written, "an intact segment read back differently");
            assert!(
                scan.is_ok() && scanned == records,
                "an intact segment scanned differently: {:?}",
                scan.err()
            );
        }
        Some(_) => {
            // Every group read back is one that was written, at the place it was written.
            for r in &read {
                assert!(written.contains(r), "a changed segment read back a group never written: {r:?}");
            }
        }
    }
}

/// Parses a redo record; when it parses, writing its operations again gives the same bytes.
fn redo_round_trip(bytes: &[u8]) -> Result<(), String> {
    let ops = redo::parse(bytes)?;
    let mut w = RedoWriter::default();
    for op in &ops {
        match *op {
            Op::Put { tree, key, value } => w.put(tree, key, value),
            Op::Remove { tree, key } => w.remove(tree, key),
        }
    }
    assert_eq!(w.bytes(), bytes, "a redo record does not write back as it read");
    Ok(())
}

/// A redo record from arbitrary bytes: parses or is refused, and round-trips when it parses.
pub fn redo(bytes: &[u8]) {
    let _ = redo_round_trip(bytes);
}

/// A manifest from arbitrary bytes; when it decodes, encoding it again gives the same bytes.
pub fn manifest(bytes: &[u8]) {
    if let Ok(m) = Manifest::decode(PathBuf::from("manifest"), bytes) {
        assert_eq!(m.encode(), bytes, "a manifest does not encode back as it decoded");
    }
}

/// A valid manifest with the byte at `flip.0` changed by xor `flip.1`: never read as another manifest.
pub fn manifest_flip(checkpoint_seq: u64, extra: &[u64], flip: (usize, u8)) {
    let m = Manifest { checkpoint_seq, extra: extra.iter().copied().take(63).collect() };
    let mut bytes = m.encode();
    assert_eq!(Manifest::decode(PathBuf::from("manifest"), &bytes).expect("intact"), m);
    if flip.1 == 0 {
        return;
    }
    let at = flip.0 % bytes.len();
    bytes[at] ^= flip.1;
    if let Ok(read) = Manifest::decode(PathBuf::from("manifest"), &bytes) {
        panic!("a changed manifest byte at {at} was accepted as {read:?}");
    }
}
