//! The write-ahead log checked before SQLite reads it: damage inside the log is an error, not its end.
//!
//! SQLite reads a log (`<file>-wal`) from its start and stops at the first frame whose salt or checksum
//! does not match. Each frame's checksum continues the one before it, so one damaged byte ends the
//! log there, and every commit after it is dropped without an error: a store whose log had a flipped
//! byte in its third of ten commits opened with two of them (docs/stores.md, "A damaged log"). At the
//! end of the log that is right: a group cut by a crash before its sync returned was never
//! acknowledged, and must read as the torn end of the log. Inside the log it is not: the groups after
//! the damage were synced and acknowledged.
//!
//! [`check`] reads the log once, a frame at a time, and reports as `Corrupted`, naming the log (or the
//! database file) and the byte:
//!
//! - **damage inside the log.** Each frame also stores the checksum up to itself, so a frame can be
//!   checked on its own against the one stored in the frame before it. A whole commit group past the
//!   point where SQLite stops (the frames after a commit frame up to the next commit frame, each
//!   checked so, with the log's salt) is a group SQLite would drop;
//! - **a log cut short or damaged at its end**, when the log's index (`<file>-shm`, whose header SQLite
//!   writes after each commit's sync) records more committed frames than SQLite can read;
//! - **a database file too short for its header** beside a log holding commits, which SQLite deletes.
//!
//! Not damage: a last group a crash tore before its sync returned (only the last group can be torn,
//! since a group is written after the previous one's sync returned, and the index never counted it),
//! and frames a rolled-back transaction left past the end (they carry no commit mark).

use std::path::Path;

use crate::errors::beside;
use graph_store::StoreError;

/// The log's header: magic, format version, page size, checkpoint sequence, two salts, checksum.
const HEADER: usize = 32;
/// A frame's header: page number, database size after a commit (0 for other frames), two salts,
/// checksum.
const FRAME_HEADER: usize = 24;
/// The magic numbers: little-endian checksums, big-endian ones.
const MAGIC: [u32; 2] = [0x377f_0682, 0x377f_0683];
/// Bytes of the log read at a time: the check holds this much of it, whatever the log's size.
const READ_BUFFER: usize = 256 * 1024;

/// What to do about a damaged log.
const REMEDY: &str = "opened as it is, the store would lose the commits the log held after that point: restore \
     the database file and its -wal and -shm files from a backup; or copy them aside and open the store once \
     with `Durability::Async`, which reads the log as far as SQLite can and drops the rest. A store last \
     written with `Durability::Async` can show this after a power loss without any damage (its commits were \
     not synced, and the device may have kept a later one and not an earlier one): open it with `Async`";

/// Checks the write-ahead log of the database file `path`, if it has one: `Corrupted` when SQLite
/// would drop commits it holds or held (module docs). The log is read once from start to end, a frame
/// at a time (its size does not matter: a log that checkpoints starved can be gigabytes).
///
/// Another process may be writing the store while its log is read: a read that a commit overtook can
/// see a stale region before fresh groups, and a restarted log mixes two headers' frames. So damage is
/// reported only when a second read of the log finds it at the same byte (damage stays where it is), a
/// read whose header changed meanwhile counts for nothing, and after four reads without an answer the
/// log is left to SQLite.
pub(super) fn check(path: &Path) -> Result<(), StoreError> {
    let (wal, shm) = (beside(path, "-wal"), beside(path, "-shm"));
    let mut seen = None;
    for _ in 0..4 {
        // The index before the log: a commit another process makes in between then only adds frames
        // to the log that the index read does not count.
        let index = index_header(&shm);
        let file = match std::fs::File::open(&wal) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(read_error(&wal, e)),
        };
        let Some(log) = scan(std::io::BufReader::with_capacity(READ_BUFFER, file), false)
            .map_err(|e| read_error(&wal, e))?
        else {
            return Ok(());
        };
        if Some(log.header) != header(&wal) {
            seen = None;
            continue;
        }
        // SQLite deletes the log of a database file without pages (a file too short for its header)
        // as a leftover, whatever commits it holds.
        let file_len = std::fs::metadata(path).map_or(0, |m| m.len());
        if file_len < 100 && log.readable > 0 {
            return Err(StoreError::corrupted_file(
                path,
                format!(
                    "the database file has {file_len} bytes, too few for its header, while its write-ahead log \
                     holds commits, which SQLite would delete with the log: the file was cut short"
                ),
                REMEDY,
            ));
        }
        // What the index records as committed, when it was written for this log.
        let committed = index.filter(|(salt, _)| log.header[16..24] == salt[..]).map(|(_, m)| m);
        let Some(d) = log.damage(committed) else { return Ok(()) };
        if seen != Some(d.offset) {
            seen = Some(d.offset);
            continue;
        }
        let detail = match d.groups {
            0 => format!(
                "SQLite reads the first {} frames of the write-ahead log (up to byte {}), but the log's index \
                 records {} frames as committed: the log was cut short or damaged",
                d.frame,
                d.offset,
                committed.unwrap_or_default()
            ),
            n => format!(
                "the write-ahead log is damaged at byte {} (frame {}), and {n} whole commit group{} after it \
                 would be dropped: SQLite reads a log only up to its first damaged frame",
                d.offset,
                d.frame + 1,
                if n == 1 { "" } else { "s" }
            ),
        };
        return Err(StoreError::corrupted_file(&wal, detail, REMEDY));
    }
    Ok(())
}

fn read_error(wal: &Path, e: std::io::Error) -> StoreError {
    StoreError::backend(format!("reading the write-ahead log {}", wal.display()), e)
}

/// The header of the log's index `shm` (SQLite's `WalIndexHdr`, in the machine's byte order, written
/// twice): the log's salt it was written for and the frames it records as committed (`mxFrame`), when
/// both copies are equal, initialised and their checksum right. SQLite updates it after a commit's
/// log sync, so under `synchronous = FULL` every frame it counts was on the device.
fn index_header(shm: &Path) -> Option<([u8; 8], u32)> {
    use std::io::Read;
    let mut h = [0; 96];
    std::fs::File::open(shm).ok()?.read_exact(&mut h).ok()?;
    let (hdr, copy) = h.split_at(48);
    let big_endian = cfg!(target_endian = "big");
    let word = |at: usize| {
        let b = [hdr[at], hdr[at + 1], hdr[at + 2], hdr[at + 3]];
        if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
    };
    if hdr != copy || hdr[12] == 0 || checksum(big_endian, (0, 0), &hdr[..40]) != (word(40), word(44)) {
        return None;
    }
    let mut salt = [0; 8];
    salt.copy_from_slice(&hdr[32..40]);
    Some((salt, word(16)))
}

/// The first bytes of the file `wal` (its header), if it has that many.
fn header(wal: &Path) -> Option<[u8; HEADER]> {
    use std::io::Read;
    let mut h = [0; HEADER];
    std::fs::File::open(wal).ok()?.read_exact(&mut h).ok()?;
    Some(h)
}

/// Where a log's damage starts, and how many whole commit groups follow it.
#[derive(Debug, PartialEq, Eq)]
struct Damage {
    /// Byte offset of the first frame SQLite would not read.
    offset: usize,
    /// Its index (from 0).
    frame: usize,
    /// Whole commit groups after it.
    groups: usize,
}

/// SQLite's log checksum (`walChecksumBytes`): two running sums over 32-bit words, in the byte order
/// the magic number names, continuing from `sums`.
fn checksum(big_endian: bool, sums: (u32, u32), data: &[u8]) -> (u32, u32) {
    let word = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
    };
    let (mut s1, mut s2) = sums;
    for pair in data.chunks_exact(8) {
        s1 = s1.wrapping_add(word(&pair[..4])).wrapping_add(s2);
        s2 = s2.wrapping_add(word(&pair[4..])).wrapping_add(s1);
    }
    (s1, s2)
}

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn offset(frame_size: usize, j: usize) -> usize {
    HEADER + j * frame_size
}

/// What one pass over a log found.
#[derive(Debug)]
struct Scan {
    header: [u8; HEADER],
    frame_size: usize,
    /// Frames SQLite reads: up to and with its last commit frame before the first frame it would not
    /// read.
    readable: usize,
    /// The first frame SQLite would not read (the first one not sound, or the first one when the
    /// header is damaged); `None` when every frame is sound.
    first_bad: Option<usize>,
    /// Whole commit groups after `first_bad`: a commit frame, then sound frames up to and with the next
    /// commit frame.
    groups_after: usize,
    /// The byte ranges of the groups SQLite reads, when asked for.
    ranges: Vec<(usize, usize)>,
}

impl Scan {
    /// The damage: whole commit groups after the first frame SQLite would not read, or (`groups` 0)
    /// fewer frames SQLite can read than the log's index records as `committed`.
    fn damage(&self, committed: Option<u32>) -> Option<Damage> {
        if let Some(first_bad) = self.first_bad.filter(|_| self.groups_after > 0) {
            let offset = offset(self.frame_size, first_bad);
            return Some(Damage { offset, frame: first_bad, groups: self.groups_after });
        }
        let short = committed.is_some_and(|c| c as usize > self.readable);
        short.then(|| Damage {
            offset: offset(self.frame_size, self.readable),
            frame: self.readable,
            groups: 0,
        })
    }
}

/// Reads a log from `r` to its end, a frame at a time, each frame checked on its own: its salt, a page
/// number, and its checksum continued from the one stored in the frame before it (the header's for the
/// first), so that frames after a damaged one are checked too. `None` for what SQLite would not read
/// as a log at all (too short, another magic number, a page size it does not have). With `ranges`, the
/// byte range of each group SQLite reads is kept (for the damage tests).
fn scan(mut r: impl std::io::Read, ranges: bool) -> std::io::Result<Option<Scan>> {
    let mut header = [0; HEADER];
    if !read_whole(&mut r, &mut header)? {
        return Ok(None);
    }
    let magic = be(&header, 0);
    let page = match be(&header, 8) {
        1 => 65_536,
        p => p as usize,
    };
    if !MAGIC.contains(&magic) || !page.is_power_of_two() || !(512..=65_536).contains(&page) {
        return Ok(None);
    }
    let big_endian = magic == MAGIC[1];
    let header_sums = (be(&header, 24), be(&header, 28));
    let header_ok = checksum(big_endian, (0, 0), &header[..24]) == header_sums;
    let frame_size = FRAME_HEADER + page;
    let mut out =
        Scan { header, frame_size, readable: 0, first_bad: None, groups_after: 0, ranges: Vec::new() };
    // The salt the frames must carry: the header's, or, when the header itself is damaged, the first
    // frame's (so that damage there is found too).
    let mut salt = [0; 8];
    salt.copy_from_slice(&header[16..24]);
    let mut before = header_sums; // the checksum stored in the frame before
    let mut open = false; // after `first_bad`: a commit frame seen, and every frame since sound
    let mut f = vec![0; frame_size];
    let mut j = 0;
    while read_whole(&mut r, &mut f)? {
        if j == 0 && !header_ok {
            salt.copy_from_slice(&f[8..16]);
        }
        let stored = (be(&f, 16), be(&f, 20));
        let salted = f[8..16] == salt;
        let sound = salted
            && be(&f, 0) != 0
            && checksum(big_endian, checksum(big_endian, before, &f[..8]), &f[FRAME_HEADER..]) == stored;
        let commit = salted && be(&f, 4) != 0;
        before = stored;
        match out.first_bad {
            None if header_ok && sound => {
                if commit {
                    if ranges {
                        out.ranges.push((offset(frame_size, out.readable), offset(frame_size, j + 1)));
                    }
                    out.readable = j + 1;
                }
            }
            None => {
                out.first_bad = Some(j);
                open = commit;
            }
            Some(_) if commit => {
                if open && sound {
                    out.groups_after += 1;
                }
                open = true;
            }
            Some(_) => open &= sound,
        }
        j += 1;
    }
    Ok(Some(out))
}

/// Fills `buf` from `r` (`read_exact`): `false` when the input ends first, a part of `buf` read or none.
fn read_whole(r: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match r.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// The byte ranges of the commit groups SQLite reads from the log `bytes`, in order: each from the
/// frame after the previous commit frame (or the first) to the end of its own commit frame. (The damage
/// tests compare a damaged log with its original group by group.)
pub fn groups(bytes: &[u8]) -> Vec<(usize, usize)> {
    scan(bytes, true).ok().flatten().map(|s| s.ranges).unwrap_or_default()
}

/// The damage in the log `bytes` (see [`Scan::damage`]).
#[cfg(test)]
fn damage(bytes: &[u8], committed: Option<u32>) -> Option<Damage> {
    scan(bytes, false).ok().flatten()?.damage(committed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of `commits` commit groups of `per_group` frames each (512-byte pages), as SQLite writes it.
    fn log(commits: usize, per_group: usize) -> Vec<u8> {
        frames(commits, per_group, true)
    }

    /// As [`log`]; without `mark`, no frame is a commit frame (a transaction that spilled its pages).
    fn frames(commits: usize, per_group: usize, mark: bool) -> Vec<u8> {
        let page = 512usize;
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC[0].to_be_bytes());
        out.extend_from_slice(&3_007_000u32.to_be_bytes());
        out.extend_from_slice(&(page as u32).to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes());
        out.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut sums = checksum(false, (0, 0), &out);
        out.extend_from_slice(&sums.0.to_be_bytes());
        out.extend_from_slice(&sums.1.to_be_bytes());
        let mut n = 0u32;
        for _ in 0..commits {
            for k in 0..per_group {
                n += 1;
                let mut f = Vec::new();
                f.extend_from_slice(&n.to_be_bytes());
                f.extend_from_slice(&(if mark && k + 1 == per_group { n } else { 0 }).to_be_bytes());
                f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
                let data: Vec<u8> = (0..page).map(|i| (i as u32 * 7 + n) as u8).collect();
                sums = checksum(false, checksum(false, sums, &f[..8]), &data);
                f.extend_from_slice(&sums.0.to_be_bytes());
                f.extend_from_slice(&sums.1.to_be_bytes());
                f.extend_from_slice(&data);
                out.extend_from_slice(&f);
            }
        }
        out
    }

    const FRAME: usize = FRAME_HEADER + 512;

    #[test]
    fn a_sound_log_has_no_damage() {
        assert_eq!(damage(&log(10, 3), None), None);
    }

    /// The groups SQLite reads: up to the first damaged frame.
    #[test]
    fn groups_are_read_up_to_the_damage() {
        let sound = log(4, 2);
        let ranges: Vec<_> = (0..4).map(|g| (HEADER + 2 * g * FRAME, HEADER + 2 * (g + 1) * FRAME)).collect();
        assert_eq!(groups(&sound), ranges);
        let mut bytes = sound.clone();
        bytes[HEADER + 5 * FRAME + 30] ^= 1; // group 3's second frame
        assert_eq!(groups(&bytes), ranges[..2]);
    }

    /// A byte flipped in the third of ten groups: the seven after it are whole.
    #[test]
    fn damage_inside_the_log_is_found() {
        let mut bytes = log(10, 3);
        let at = HEADER + 7 * FRAME + FRAME_HEADER + 100; // frame 8: the third group's second frame
        bytes[at] ^= 0x10;
        assert_eq!(damage(&bytes, None), Some(Damage { offset: HEADER + 7 * FRAME, frame: 7, groups: 7 }));
        // In the header: every group follows it.
        let mut bytes = log(10, 3);
        bytes[17] ^= 1;
        assert_eq!(damage(&bytes, None).map(|d| (d.frame, d.groups)), Some((0, 9)));
    }

    /// Damage in the last group, a last group cut short, and frames a rolled-back transaction left past
    /// the last commit: the end of the log, not damage.
    #[test]
    fn a_torn_or_unfinished_end_is_not_damage() {
        let sound = log(10, 3);
        let mut bytes = sound.clone();
        bytes[HEADER + 28 * FRAME + 40] ^= 1; // the last group's second frame
        assert_eq!(damage(&bytes, None), None);
        assert_eq!(damage(&sound[..HEADER + 28 * FRAME + 100], None), None);
        // Frames of a transaction that spilled and rolled back, then two commits over its first frames.
        let mut bytes = frames(1, 12, false);
        let two = log(2, 3);
        bytes[..two.len()].copy_from_slice(&two);
        assert_eq!(damage(&bytes, None), None);
    }

    /// With the index's count of committed frames: a log cut short, or damaged in its last group,
    /// holds fewer frames SQLite can read than were committed; a torn group the index never counted,
    /// or an index behind the log, is not damage.
    #[test]
    fn the_index_tells_a_cut_or_damaged_end_from_a_torn_one() {
        let sound = log(10, 3);
        assert_eq!(damage(&sound, Some(30)), None);
        assert_eq!(damage(&sound, Some(27)), None, "an index behind the log");
        let cut = &sound[..HEADER + 20 * FRAME + 7];
        assert_eq!(damage(cut, Some(30)), Some(Damage { offset: HEADER + 18 * FRAME, frame: 18, groups: 0 }));
        assert_eq!(damage(cut, None), None, "without the index: the end of the log");
        let mut last = sound.clone();
        last[HEADER + 28 * FRAME + 40] ^= 1;
        assert_eq!(damage(&last, Some(30)).map(|d| (d.frame, d.groups)), Some((27, 0)));
        assert_eq!(damage(&last, Some(27)), None, "a torn last group the index never counted");
    }

    /// A reader that hands out the log a few bytes at a time (as a pipe or a network file system may):
    /// the same answers as from the whole log at once.
    #[test]
    fn a_log_read_in_pieces_gives_the_same_answers() {
        struct Trickle<'a>(&'a [u8], usize);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.1 = self.1 % 7 + 1;
                let n = self.1.min(buf.len()).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut bytes = log(10, 3);
        bytes[HEADER + 7 * FRAME + FRAME_HEADER + 100] ^= 0x10;
        for b in [&log(10, 3)[..], &bytes[..], &bytes[..HEADER + 20 * FRAME + 7]] {
            let whole = scan(b, true).unwrap().unwrap();
            let pieces = scan(Trickle(b, 0), true).unwrap().unwrap();
            assert_eq!(pieces.ranges, whole.ranges);
            assert_eq!(pieces.damage(Some(30)), whole.damage(Some(30)));
            assert_eq!((pieces.readable, pieces.first_bad), (whole.readable, whole.first_bad));
        }
        assert_eq!(scan(Trickle(&bytes, 0), false).unwrap().unwrap().damage(None).map(|d| d.groups), Some(7));
    }

    /// Big-endian checksums (magic 0x377f0683), as a big-endian machine writes them.
    #[test]
    fn big_endian_logs_are_checked_too() {
        let mut bytes = log(4, 2);
        bytes[..4].copy_from_slice(&MAGIC[1].to_be_bytes());
        // Rewrite every checksum in big-endian words.
        let mut sums = checksum(true, (0, 0), &bytes[..24]);
        bytes[24..28].copy_from_slice(&sums.0.to_be_bytes());
        bytes[28..32].copy_from_slice(&sums.1.to_be_bytes());
        for j in 0..8 {
            let f = HEADER + j * FRAME;
            sums =
                checksum(true, checksum(true, sums, &bytes[f..f + 8]), &bytes[f + FRAME_HEADER..f + FRAME]);
            bytes[f + 16..f + 20].copy_from_slice(&sums.0.to_be_bytes());
            bytes[f + 20..f + 24].copy_from_slice(&sums.1.to_be_bytes());
        }
        assert_eq!(damage(&bytes, None), None);
        bytes[HEADER + 2 * FRAME + 60] ^= 4;
        assert_eq!(damage(&bytes, None).map(|d| (d.frame, d.groups)), Some((2, 2)));
    }
}
