//! The bytes of a segment: its header and its record groups (see the module doc of `commit_log` for the
//! layout and why it is so). Pure functions over byte slices, so the rules are tested without files.

use std::ops::Range;

/// Magic of a segment header.
pub(super) const SEGMENT_MAGIC: &[u8; 4] = b"GRWL";
/// The segment format this build writes (and reads, with [`FORMAT_V1`]).
pub(super) const FORMAT_VERSION: u32 = 2;
/// The first segment format, still read: its header has no capacity (bytes 24..28 are zero).
pub(super) const FORMAT_V1: u32 = 1;
/// The largest segment a header can describe (its capacity is stored as `u32` units of [`ALIGN`]).
pub(super) const MAX_CAPACITY: u64 = u32::MAX as u64 * ALIGN as u64;
/// Bytes of a segment header; a multiple of [`ALIGN`], so the first group is aligned.
pub(super) const SEGMENT_HEADER: usize = 32;
/// Bytes of a group header.
pub(super) const GROUP_HEADER: usize = 24;
/// Groups start at multiples of this offset, so a search for a valid group after a damaged one looks at
/// one position in eight.
pub(super) const ALIGN: usize = 8;
/// Bytes before each record's payload inside a group (its length).
pub(super) const RECORD_HEADER: usize = 4;

/// A decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegmentHeader {
    /// The seq of the segment's first record (also in the file name).
    pub(super) first_seq: u64,
    /// Chosen at random each time the file is (re)initialised as a segment; seeds every checksum in it.
    pub(super) salt: u64,
    /// The file's size in bytes when it became a segment (a multiple of [`ALIGN`]); a commit never
    /// changes it. `None` in a version-1 header.
    pub(super) capacity: Option<u64>,
}

/// Why a segment header was refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HeaderError {
    /// Damaged bytes.
    Damaged(&'static str),
    /// A valid header of a format this build does not know.
    Version(u32),
}

/// `crc32c(salt_le || data)`, as the initial value a segment's checksums continue from.
pub(super) fn salt_seed(salt: u64) -> u32 {
    crc32c::crc32c(&salt.to_le_bytes())
}

pub(super) fn encode_segment_header(h: SegmentHeader) -> [u8; SEGMENT_HEADER] {
    let mut b = [0u8; SEGMENT_HEADER];
    b[0..4].copy_from_slice(SEGMENT_MAGIC);
    b[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&h.first_seq.to_le_bytes());
    b[16..24].copy_from_slice(&h.salt.to_le_bytes());
    let capacity = h.capacity.expect("this build writes the capacity");
    debug_assert!(capacity.is_multiple_of(ALIGN as u64) && capacity <= MAX_CAPACITY);
    let units = u32::try_from(capacity / ALIGN as u64).expect("the caller checked MAX_CAPACITY");
    b[24..28].copy_from_slice(&units.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

pub(super) fn decode_segment_header(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
    let b = bytes
        .get(..SEGMENT_HEADER)
        .ok_or(HeaderError::Damaged("the file is shorter than a segment header"))?;
    if &b[0..4] != SEGMENT_MAGIC {
        return Err(HeaderError::Damaged("the segment header's magic is not GRWL"));
    }
    if crc32c::crc32c(&b[0..28]) != u32_at(b, 28) {
        return Err(HeaderError::Damaged("the segment header's checksum does not match"));
    }
    // The version is trusted only once the checksum vouches for it: a flipped bit must read as damage,
    // not as a future format.
    let version = u32_at(b, 4);
    let units = u64::from(u32_at(b, 24));
    let capacity = match version {
        FORMAT_VERSION if units == 0 => {
            return Err(HeaderError::Damaged("the segment header's capacity is zero"));
        }
        FORMAT_VERSION => Some(units * ALIGN as u64),
        FORMAT_V1 if units != 0 => {
            return Err(HeaderError::Damaged("the segment header's reserved field is not zero"));
        }
        FORMAT_V1 => None,
        other => return Err(HeaderError::Version(other)),
    };
    Ok(SegmentHeader { first_seq: u64_at(b, 8), salt: u64_at(b, 16), capacity })
}

/// Builds group frames in one reused buffer: `begin`, then `push` each record, then `finish`.
#[derive(Debug, Default)]
pub(super) struct GroupBuilder {
    /// Header placeholder, then the body. After `finish`, the whole padded frame.
    buf: Vec<u8>,
    first_seq: u64,
    count: u32,
}

impl GroupBuilder {
    /// Starts a group whose first record is `first_seq` (drops anything staged).
    pub(super) fn begin(&mut self, first_seq: u64) {
        self.buf.clear();
        self.buf.resize(GROUP_HEADER, 0);
        self.first_seq = first_seq;
        self.count = 0;
    }

    /// Records staged.
    pub(super) fn count(&self) -> u32 {
        self.count
    }

    /// The first staged seq (meaningful when `count() > 0`).
    pub(super) fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Body bytes staged so far.
    pub(super) fn body_len(&self) -> usize {
        self.buf.len().saturating_sub(GROUP_HEADER)
    }

    /// Appends a record (the caller checked the limits).
    pub(super) fn push(&mut self, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("checked by the caller");
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(payload);
        self.count += 1;
    }

    /// Fills the header for a segment of `salt`, pads to [`ALIGN`] and returns the frame to write.
    pub(super) fn finish(&mut self, salt: u64) -> &[u8] {
        let body_len = u32::try_from(self.body_len()).expect("checked by the caller");
        let seed = salt_seed(salt);
        let body_crc = crc32c::crc32c_append(seed, &self.buf[GROUP_HEADER..]);
        let h = &mut self.buf[..GROUP_HEADER];
        h[0..4].copy_from_slice(&body_len.to_le_bytes());
        h[4..8].copy_from_slice(&self.count.to_le_bytes());
        h[8..16].copy_from_slice(&self.first_seq.to_le_bytes());
        h[16..20].copy_from_slice(&body_crc.to_le_bytes());
        let header_crc = crc32c::crc32c_append(seed, &h[0..20]);
        h[20..24].copy_from_slice(&header_crc.to_le_bytes());
        let padded = align_up(self.buf.len());
        self.buf.resize(padded, 0);
        &self.buf
    }

    /// The frame length `finish` will produce.
    pub(super) fn frame_len(&self) -> usize {
        align_up(GROUP_HEADER + self.body_len())
    }
}

/// A valid group found in a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) first_seq: u64,
    pub(super) count: u32,
    /// Where each record's payload lies in the segment's bytes.
    pub(super) payloads: Vec<Range<usize>>,
    /// Offset just past the group's padding: where the next group starts.
    pub(super) next: usize,
}

/// Reads the group at `at` of a segment's bytes, checking both checksums and that the record lengths
/// fill the body exactly. `Err` says, for a message, why the bytes there are not a group.
pub(super) fn parse_group(seg: &[u8], at: usize, seed: u32) -> Result<Group, &'static str> {
    let h = seg.get(at..at + GROUP_HEADER).ok_or("the file ends before a record header would")?;
    if h.iter().all(|&b| b == 0) {
        return Err("zeros (nothing was written here)");
    }
    let body_len = u32_at(h, 0) as usize;
    let count = u32_at(h, 4);
    if crc32c::crc32c_append(seed, &h[0..20]) != u32_at(h, 20) {
        return Err("the record header's checksum does not match");
    }
    let body_start = at + GROUP_HEADER;
    let body =
        seg.get(body_start..body_start + body_len).ok_or("the record group runs past the end of the file")?;
    if crc32c::crc32c_append(seed, body) != u32_at(h, 16) {
        return Err("the record group's checksum does not match");
    }
    // Both checksums hold, so the lengths were written by us: a mismatch here means a bug, not damage,
    // but it is still refused rather than trusted.
    let mut payloads = Vec::with_capacity(count as usize);
    let mut p = 0usize;
    for _ in 0..count {
        let len =
            body.get(p..p + RECORD_HEADER).map(|b| u32_at(b, 0) as usize).ok_or("record lengths overrun")?;
        let start = p + RECORD_HEADER;
        if start + len > body.len() {
            return Err("record lengths overrun the group");
        }
        payloads.push(body_start + start..body_start + start + len);
        p = start + len;
    }
    if p != body.len() || count == 0 {
        return Err("record lengths do not fill the group");
    }
    Ok(Group { first_seq: u64_at(h, 8), count, payloads, next: align_up(body_start + body_len) })
}

/// The first position at or after `from` (aligned) holding a valid group of this segment, if any.
///
/// Cheap on what a segment's unused tail holds (zeros, stale groups of an older salt, torn bytes): the
/// header checksum is checked before the body is touched.
pub(super) fn find_valid_group(seg: &[u8], from: usize, seed: u32) -> Option<(usize, Group)> {
    const PAGE: usize = 4096;
    static ZEROS: [u8; PAGE] = [0; PAGE];
    let mut at = align_up(from);
    while at + GROUP_HEADER <= seg.len() {
        // Most of a segment past its end is zeros. No group header starts in an all-zero page (its count
        // field, bytes 4..8, would lie in the page and be zero), so skip such pages whole: one `memcmp`
        // each, fast even in an unoptimized build, instead of 512 candidate positions.
        while at.is_multiple_of(PAGE) && at + PAGE <= seg.len() && seg[at..at + PAGE] == ZEROS {
            at += PAGE;
        }
        if at + GROUP_HEADER > seg.len() {
            break;
        }
        let h = &seg[at..at + GROUP_HEADER];
        let plausible = u32_at(h, 4) != 0 && crc32c::crc32c_append(seed, &h[0..20]) == u32_at(h, 20);
        if plausible && let Ok(g) = parse_group(seg, at, seed) {
            return Some((at, g));
        }
        at += ALIGN;
    }
    None
}

pub(super) fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
