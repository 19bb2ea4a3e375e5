//! Canonical JSON: the bytes that are hashed, keyed and compared.
//!
//! A state hash, an idempotency key and a stored delta must be the same bytes in every process that
//! computes them. `serde_json` writes a `HashMap` in its iteration order, which is random per process
//! (`RandomState`), so the same value gives different bytes after a restart: a resumed run would find its
//! state hash "corrupted" and its idempotency keys different. This module writes the JSON of a value with
//! one canonical byte form:
//!
//! - **Maps are sorted.** The entries of every map, at any depth (`HashMap`, `BTreeMap`, any type whose
//!   `Serialize` calls `serialize_map`, in enums, `Option`s, `Vec`s, map values, ...), are written in
//!   ascending order of their key's string: the UTF-8 bytes of the key as JSON gives it (serde_json turns
//!   integer, bool, char, float and unit-variant keys into strings: `10` is `"10"`), compared byte by byte
//!   before JSON escaping. That is Go's `encoding/json` order (it sorts by the key's string form, so `"10"`
//!   comes before `"9"`) and Rust's `str` order, so a `BTreeMap<String, _>` keeps its own order.
//! - **Struct fields keep their declaration order** ([`to_vec`], [`to_writer`]): a struct's JSON is a
//!   function of its value already, and not buffering it keeps the hot path fast. [`to_vec_sorted`] and
//!   [`to_writer_sorted`] sort struct fields too (every object's keys sorted, no whitespace: the form
//!   of an audit log's hash chain).
//! - **Everything else is `serde_json::to_vec`'s output, byte for byte**: no whitespace, the same number
//!   formatting (integers up to `u128`, floats by `ryu`, non-finite floats as `null`), the same string
//!   escapes (control characters, `"` and `\`; other characters, non-ASCII included, as raw UTF-8). A value
//!   without maps is written exactly as serde_json writes it.
//!
//! ```
//! use std::collections::HashMap;
//!
//! let counts: HashMap<u32, &str> = [(9, "nine"), (10, "ten"), (100, "hundred")].into();
//! assert_eq!(
//!     graph_store::canonical::to_vec(&counts).unwrap(),
//!     br#"{"10":"ten","100":"hundred","9":"nine"}"#,
//! );
//! ```
//!
//! # What a serializer cannot sort
//!
//! - **Sets.** A `HashSet` serializes through `serialize_seq`, exactly like a `Vec`: a serializer cannot
//!   tell them apart, so it cannot sort one without reordering every list. `#[reducer]` therefore rejects
//!   `HashSet` anywhere in a state field's type (use `BTreeSet`), and the engine detects the cases no macro
//!   can see (docs/guarantees.md, "Canonical bytes").
//! - **`#[serde(flatten)]`.** serde writes a struct with a flattened field through `serialize_map`, so
//!   that struct's keys (its own fields and the flattened ones) come out sorted, not in declaration
//!   order. Still canonical, but not serde_json's bytes.
//! - **Duplicate keys.** A hand-written `Serialize` can emit one key twice (so can `flatten` with clashing
//!   names). Like serde_json, every entry is written; entries with equal keys are ordered by their value's
//!   bytes, so the output does not depend on the order they were emitted in.
//! - **A `Serialize` that is not a function of the value** (one that reads a clock, a global, or iterates
//!   a hash-ordered collection into a sequence) gives whatever bytes it emits.
//!
//! # How
//!
//! A [`serde::Serializer`] that writes structs, sequences and enums straight through to the writer and
//! hands every scalar (numbers, strings, chars, bytes, `null`) to serde_json's own serializer, so those
//! bytes cannot drift from serde_json's. Maps are written straight into the output too: each key (written
//! by serde_json's map-key serializer, so a key that is not string-like fails with serde_json's own
//! error) and each value, while the map records where each entry starts and whether it came after the one
//! before in sorted order. Entries that come sorted (a `BTreeMap`, serde_json's `Value`, the fields of a
//! struct declared in name order) are never moved; a map with an entry out of order (a `HashMap`) has its
//! entries sorted and rewritten once by `end`. serde_json's private structs (`arbitrary_precision`
//! numbers, `RawValue`) are handed to serde_json whole, so they stay raw. [`to_writer`] writes the
//! finished bytes to its writer in one call.
//!
//! # Cost
//!
//! `cargo bench -p graph-bench-criterion --bench canonical_ab`: each round times `serde_json::to_vec` and
//! `canonical::to_vec` back to back, alternating which goes first; the ratio is the median of 400
//! per-round ratios, the figure that survives load drifting between runs. Two runs, release build, on a
//! 2-core machine shared with other builds (load average 4.8 to 6):
//!
//! | value | `canonical::to_vec` ÷ `serde_json::to_vec` |
//! |---|---|
//! | ~1 KB struct, no maps | 1.04, 1.05 |
//! | struct with a 100-entry `BTreeMap<String, u64>` (entries come sorted: written in place) | 1.86, 2.43 |
//! | the same entries in a `HashMap` (sorted and rewritten once) | 2.65, 3.49 |
//!
//! A value without maps pays the indirection of the wrapper only. A map pays for recording its entries
//! and comparing each key with the one before; a map whose entries come out of order also pays the sort
//! and one rewrite of its bytes. Writing maps in place replaced a buffer per map (three allocations, and
//! one copy of the map's bytes per nesting level), which made the small sorted maps of the event log
//! cheaper (bench/analysis.md); a large `HashMap` costs about 15 % more than with the buffer (the
//! buffered version in the same session: 2.24 and 2.28 for it, 1.87 for the `BTreeMap`).

use std::fmt::Display;
use std::io;

use serde::Serialize;
use serde::ser::{self, Error as _, SerializeStruct as _, Serializer as _};
use serde_json::Error;

/// The canonical JSON of `value`: serde_json's bytes with every map's entries sorted by key (struct fields
/// stay in declaration order). See the [module documentation](self) for the exact rules.
///
/// # Errors
///
/// Whatever `serde_json::to_vec` fails on, with serde_json's error: a map key that is not string-like
/// (`key must be a string`), a non-finite float key, an error from the value's `Serialize` impl. Also
/// fails, where serde_json would write invalid JSON, when a hand-written `Serialize` calls the map methods
/// out of order (a value without a key, a key without a value).
///
/// # Examples
///
/// ```
/// use std::collections::HashMap;
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct State { stage: &'static str, scores: HashMap<String, u32> }
///
/// let mut scores = HashMap::new();
/// for (name, score) in [("carol", 3), ("alice", 1), ("bob", 2)] {
///     scores.insert(name.to_owned(), score);
/// }
/// let state = State { stage: "review", scores };
/// assert_eq!(
///     graph_store::canonical::to_vec(&state).unwrap(),
///     br#"{"stage":"review","scores":{"alice":1,"bob":2,"carol":3}}"#,
/// );
/// ```
pub fn to_vec<T: ?Sized + Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    into_vec(value, Fields::Declared)
}

/// The canonical JSON of `value` (as [`to_vec`]) appended to `buf`, returned: a caller that serializes
/// often reuses one buffer instead of allocating each time.
///
/// # Errors
///
/// As [`to_vec`] (the buffer is dropped).
///
/// ```
/// let buf = graph_store::canonical::to_vec_in(Vec::with_capacity(64), &[1, 2]).unwrap();
/// assert_eq!(buf, b"[1,2]");
/// ```
pub fn to_vec_in<T: ?Sized + Serialize>(buf: Vec<u8>, value: &T) -> Result<Vec<u8>, Error> {
    into(buf, value, Fields::Declared)
}

/// Writes the canonical JSON of `value` (as [`to_vec`]) to `writer`.
///
/// The bytes are built in memory (maps may be rewritten once they are complete) and written in one
/// `write_all`: a value that fails to serialize writes nothing.
///
/// # Errors
///
/// As [`to_vec`], plus the writer's I/O errors (`serde_json::Error::is_io`).
///
/// # Examples
///
/// ```
/// use std::collections::BTreeMap;
///
/// let mut out = Vec::new();
/// let value = (1, BTreeMap::from([("b", true), ("a", false)]));
/// graph_store::canonical::to_writer(&mut out, &value).unwrap();
/// assert_eq!(out, br#"[1,{"a":false,"b":true}]"#);
/// ```
pub fn to_writer<W: io::Write, T: ?Sized + Serialize>(mut writer: W, value: &T) -> Result<(), Error> {
    writer.write_all(&into_vec(value, Fields::Declared)?).map_err(Error::io)
}

/// The fully sorted JSON of `value`: every object's keys sorted, struct fields included, no whitespace.
///
/// The form of an audit log's hash chain, where the bytes must not depend on the order fields are declared
/// in (two programs, or two versions of one, hash the same event the same way). Keys compare as in
/// [`to_vec`].
///
/// # Errors
///
/// As [`to_vec`].
///
/// # Examples
///
/// ```
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct Event { step: u64, node: &'static str, attempt: u32 }
///
/// let event = Event { step: 3, node: "plan", attempt: 1 };
/// assert_eq!(
///     graph_store::canonical::to_vec_sorted(&event).unwrap(),
///     br#"{"attempt":1,"node":"plan","step":3}"#,
/// );
/// ```
pub fn to_vec_sorted<T: ?Sized + Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    into_vec(value, Fields::Sorted)
}

/// Writes the fully sorted JSON of `value` (as [`to_vec_sorted`]) to `writer`.
///
/// # Errors
///
/// As [`to_writer`].
///
/// # Examples
///
/// ```
/// let mut out = Vec::new();
/// graph_store::canonical::to_writer_sorted(&mut out, &serde_json::json!({"z": [1], "a": null})).unwrap();
/// assert_eq!(out, br#"{"a":null,"z":[1]}"#);
/// ```
pub fn to_writer_sorted<W: io::Write, T: ?Sized + Serialize>(mut writer: W, value: &T) -> Result<(), Error> {
    writer.write_all(&into_vec(value, Fields::Sorted)?).map_err(Error::io)
}

/// [`to_vec`] and [`to_vec_sorted`]: the serializer over a new buffer.
fn into_vec<T: ?Sized + Serialize>(value: &T, fields: Fields) -> Result<Vec<u8>, Error> {
    into(Vec::with_capacity(256), value, fields)
}

/// `value` serialized onto the end of `buf`.
///
/// The serializer owns the `Vec` (rather than a `&mut Vec`): serde_json's string writer, the hottest code,
/// then gets the `&mut Vec<u8>` it gets from `serde_json::to_vec`, not one more indirection. (Measured with
/// cachegrind on the 1 KB bench value: 5.4% more instructions than serde_json through a `&mut Vec`, 2.9%
/// owning it.)
fn into<T: ?Sized + Serialize>(buf: Vec<u8>, value: &T, fields: Fields) -> Result<Vec<u8>, Error> {
    let mut ser = Canonical { writer: buf, fields };
    value.serialize(&mut ser)?;
    Ok(ser.writer)
}

/// Whether struct fields are sorted like map keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fields {
    Declared,
    Sorted,
}

/// The serializer. Scalars go to serde_json's serializer over the same writer.
struct Canonical {
    writer: Vec<u8>,
    fields: Fields,
}

/// serde_json's private struct names (`arbitrary_precision` numbers, `RawValue`), which its serializer
/// writes raw instead of as an object when the matching feature is on.
const SERDE_JSON_TOKENS: [&str; 2] = ["$serde_json::private::Number", "$serde_json::private::RawValue"];

impl Canonical {
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.writer.extend_from_slice(bytes);
        Ok(())
    }

    /// serde_json's serializer over this writer (a wrapper: nothing is allocated).
    #[inline]
    fn json(&mut self) -> serde_json::Serializer<&mut Vec<u8>> {
        serde_json::Serializer::new(&mut self.writer)
    }

    #[inline]
    fn string(&mut self, s: &str) -> Result<(), Error> {
        self.json().serialize_str(s)
    }

    /// `{"variant":`, the opening of an externally tagged variant with data.
    fn open_variant(&mut self, variant: &str) -> Result<(), Error> {
        self.put(b"{")?;
        self.string(variant)?;
        self.put(b":")
    }
}

macro_rules! scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        #[inline]
        fn $method(self, v: $ty) -> Result<(), Error> {
            self.json().$method(v)
        }
    )*};
}

impl<'a> ser::Serializer for &'a mut Canonical {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Seq<'a>;
    type SerializeTupleStruct = Seq<'a>;
    type SerializeTupleVariant = Seq<'a>;
    type SerializeMap = Map<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Struct<'a>;

    scalars! {
        serialize_bool(bool), serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64),
        serialize_i128(i128), serialize_u8(u8), serialize_u16(u16), serialize_u32(u32), serialize_u64(u64),
        serialize_u128(u128), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_str(&str), serialize_bytes(&[u8]),
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.json().serialize_none()
    }

    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.json().serialize_unit()
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<(), Error> {
        self.json().serialize_unit_struct(name)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.string(variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.open_variant(variant)?;
        value.serialize(&mut *self)?;
        self.put(b"}")
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Seq<'a>, Error> {
        self.put(b"[")?;
        Ok(Seq { ser: self, first: true, variant: false })
    }

    fn serialize_tuple(self, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Seq<'a>, Error> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Seq<'a>, Error> {
        self.open_variant(variant)?;
        self.put(b"[")?;
        Ok(Seq { ser: self, first: true, variant: true })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Map<'a>, Error> {
        Ok(Map::new(self, len.unwrap_or(0), false))
    }

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Struct<'a>, Error> {
        if SERDE_JSON_TOKENS.contains(&name) {
            return Ok(Struct::SerdeJson { ser: self, name, fields: 0 });
        }
        match self.fields {
            Fields::Declared => {
                self.put(b"{")?;
                Ok(Struct::Declared { ser: self, first: true, variant: false })
            }
            Fields::Sorted => Ok(Struct::Sorted(Map::new(self, len, false))),
        }
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Struct<'a>, Error> {
        self.open_variant(variant)?;
        match self.fields {
            Fields::Declared => {
                self.put(b"{")?;
                Ok(Struct::Declared { ser: self, first: true, variant: true })
            }
            Fields::Sorted => Ok(Struct::Sorted(Map::new(self, len, true))),
        }
    }

    fn collect_str<T: ?Sized + Display>(self, value: &T) -> Result<(), Error> {
        self.json().collect_str(value)
    }
}

/// A sequence, tuple or tuple variant, written as it goes.
struct Seq<'a> {
    ser: &'a mut Canonical,
    first: bool,
    /// A tuple variant, closed by `]}` rather than `]`.
    variant: bool,
}

impl Seq<'_> {
    #[inline]
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        if !self.first {
            self.ser.put(b",")?;
        }
        self.first = false;
        value.serialize(&mut *self.ser)
    }

    #[inline]
    fn close(self) -> Result<(), Error> {
        // Constant-length writes: a one-byte push, not a `memcpy` call.
        self.ser.put(b"]")?;
        if self.variant { self.ser.put(b"}") } else { Ok(()) }
    }
}

macro_rules! seq_impls {
    ($($trait:ident::$method:ident),*) => {$(
        impl ser::$trait for Seq<'_> {
            type Ok = ();
            type Error = Error;

            #[inline]
            fn $method<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }

            fn end(self) -> Result<(), Error> {
                self.close()
            }
        }
    )*};
}

seq_impls!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// A map (or, in the sorted form, a struct), written straight into the output as its entries come.
/// Entries that come in ascending key order (a `BTreeMap`, serde_json's `Value`, sorted struct fields)
/// are never moved; at the first one out of order the map is marked, and `end` rewrites its entries in
/// sorted order once.
struct Map<'a> {
    ser: &'a mut Canonical,
    /// Where the map's first entry starts in the output (just after its `{`).
    open: usize,
    /// Every entry so far, in the order they came (see [`Entry`]).
    entries: Vec<Entry>,
    /// Each entry came after the one before in sorted order: nothing to rewrite.
    in_order: bool,
    /// The key written by `serialize_key` (its `start` and `key_end`), waiting for its value.
    pending: Option<(usize, usize)>,
    /// A struct variant, closed by `}}` rather than `}`.
    variant: bool,
}

/// One entry, in the output: `out[start..key_end]` the key's JSON (quoted, escaped), `out[key_end]` is
/// `:`, `out[key_end + 1..end]` the value's JSON. Entries are separated by commas, which are not theirs.
struct Entry {
    start: usize,
    key_end: usize,
    end: usize,
    /// [`prefix`] of the key's string: most comparisons end there, without a `memcmp` call.
    prefix: u64,
    /// The key's string when its JSON has escapes (`None`: the bytes between the quotes are the string).
    unescaped: Option<Box<str>>,
}

impl Entry {
    /// What entries sort by: the key's string, before escaping.
    #[inline]
    fn sort_key<'b>(&'b self, out: &'b [u8]) -> &'b [u8] {
        match &self.unescaped {
            Some(s) => s.as_bytes(),
            None => &out[self.start + 1..self.key_end - 1],
        }
    }

    /// The order of entries: by key string, then (equal keys) by value bytes.
    #[inline]
    fn cmp(&self, other: &Entry, out: &[u8]) -> std::cmp::Ordering {
        self.prefix.cmp(&other.prefix).then_with(|| {
            self.sort_key(out)
                .cmp(other.sort_key(out))
                .then_with(|| out[self.key_end + 1..self.end].cmp(&out[other.key_end + 1..other.end]))
        })
    }
}

/// The first 8 bytes of a key's string, big-endian, zero-padded. Comparing two prefixes orders the keys
/// unless they are equal: at the first byte where two prefixes differ, either both bytes are the
/// strings' own, or the shorter string has ended there and is a prefix of the longer one.
#[inline]
fn prefix(key: &[u8]) -> u64 {
    match key.first_chunk::<8>() {
        Some(first) => u64::from_be_bytes(*first),
        None => key.iter().enumerate().fold(0, |p, (i, &b)| p | u64::from(b) << (56 - 8 * i)),
    }
}

impl<'a> Map<'a> {
    fn new(ser: &'a mut Canonical, len: usize, variant: bool) -> Self {
        ser.writer.push(b'{');
        let open = ser.writer.len();
        // `len` is a hint from the `Serialize` impl: trusted for a head start, not for a huge allocation.
        Map { ser, open, entries: Vec::with_capacity(len.min(64)), in_order: true, pending: None, variant }
    }

    fn check_no_pending(&self) -> Result<(), Error> {
        match self.pending {
            Some(_) => Err(Error::custom("a map key was serialized without its value")),
            None => Ok(()),
        }
    }

    /// Writes `"key":` for a struct field (sorted form).
    fn field_key(&mut self, key: &'static str) -> Result<(), Error> {
        self.check_no_pending()?;
        if !self.entries.is_empty() {
            self.ser.writer.push(b',');
        }
        let start = self.ser.writer.len();
        self.ser.string(key)?;
        self.pending = Some((start, self.ser.writer.len()));
        self.ser.writer.push(b':');
        Ok(())
    }

    /// Writes `value` after the pending key and records the entry.
    fn value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        let Some((start, key_end)) = self.pending.take() else {
            return Err(Error::custom("a map value was serialized without a key"));
        };
        value.serialize(&mut *self.ser)?;
        let out = &self.ser.writer;
        let json = &out[start + 1..key_end - 1];
        let unescaped = match json.contains(&b'\\') {
            true => Some(serde_json::from_slice::<String>(&out[start..key_end])?.into_boxed_str()),
            false => None,
        };
        let mut entry = Entry { start, key_end, end: out.len(), prefix: 0, unescaped };
        entry.prefix = prefix(entry.sort_key(out));
        if let Some(last) = self.entries.last() {
            self.in_order &= last.cmp(&entry, out).is_lt();
        }
        self.entries.push(entry);
        Ok(())
    }

    fn finish(self) -> Result<(), Error> {
        self.check_no_pending()?;
        let Map { ser, open, entries, in_order, variant, .. } = self;
        if !in_order {
            // Equal keys (only a hand-written `Serialize` makes them) fall back on the value's bytes, so
            // the output never depends on the order the entries came in.
            let out = &ser.writer;
            // (prefix, index) pairs are sorted, not entries: 16 bytes move instead of 48, and most
            // comparisons end at the prefixes, in the pair.
            let mut order: Vec<(u64, usize)> = entries.iter().map(|e| e.prefix).zip(0..).collect();
            order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| entries[a.1].cmp(&entries[b.1], out)));
            let mut sorted = Vec::with_capacity(out.len() - open);
            for (i, e) in order.into_iter().map(|(_, e)| &entries[e]).enumerate() {
                if i > 0 {
                    sorted.push(b',');
                }
                sorted.extend_from_slice(&out[e.start..e.end]);
            }
            ser.writer.truncate(open);
            ser.writer.extend_from_slice(&sorted);
        }
        ser.put(b"}")?;
        if variant { ser.put(b"}") } else { Ok(()) }
    }
}

impl ser::SerializeMap for Map<'_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        self.check_no_pending()?;
        // serde_json's map-key serializer (private) is reached through its map: it writes `{` then the
        // key, stringified and validated exactly as serde_json does. The `{` becomes the entry's comma,
        // or, for the first entry, is removed.
        let brace = self.ser.writer.len();
        let mut json = serde_json::Serializer::new(&mut self.ser.writer);
        let mut map = (&mut json).serialize_map(None)?;
        map.serialize_key(key)?;
        let start = match self.entries.is_empty() {
            true => {
                self.ser.writer.remove(brace);
                brace
            }
            false => {
                self.ser.writer[brace] = b',';
                brace + 1
            }
        };
        self.pending = Some((start, self.ser.writer.len()));
        self.ser.writer.push(b':');
        Ok(())
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.value(value)
    }

    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

/// A struct or struct variant: written as it goes (fields in declaration order), sorted like a map
/// (`to_vec_sorted`), or one of serde_json's private structs, handed to serde_json.
enum Struct<'a> {
    /// Fields in declaration order.
    Declared {
        /// The serializer.
        ser: &'a mut Canonical,
        /// No field written yet.
        first: bool,
        /// A struct variant, closed by `}}` rather than `}`.
        variant: bool,
    },
    /// Fields sorted by name.
    Sorted(Map<'a>),
    /// `$serde_json::private::Number` or `RawValue`: one field, serialized by serde_json.
    SerdeJson {
        /// The serializer.
        ser: &'a mut Canonical,
        /// The struct's name.
        name: &'static str,
        /// Fields seen.
        fields: usize,
    },
}

impl Struct<'_> {
    #[inline]
    fn field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        match self {
            Struct::Declared { ser, first, .. } => {
                if !*first {
                    ser.put(b",")?;
                }
                *first = false;
                ser.string(key)?;
                ser.put(b":")?;
                value.serialize(&mut **ser)
            }
            Struct::Sorted(map) => {
                map.field_key(key)?;
                map.value(value)
            }
            Struct::SerdeJson { ser, name, fields } => {
                *fields += 1;
                if *fields > 1 {
                    return Err(Error::custom(format_args!(
                        "`{name}` is a serde_json private type name, for a struct of one field"
                    )));
                }
                let mut json = ser.json();
                let mut s = (&mut json).serialize_struct(name, 1)?;
                s.serialize_field(key, value)?;
                ser::SerializeStruct::end(s)
            }
        }
    }

    fn finish(self) -> Result<(), Error> {
        match self {
            Struct::Declared { ser, variant, .. } => {
                ser.put(b"}")?;
                if variant { ser.put(b"}") } else { Ok(()) }
            }
            Struct::Sorted(map) => map.finish(),
            Struct::SerdeJson { ser, name, fields: 0 } => {
                ser::SerializeStruct::end(ser.json().serialize_struct(name, 0)?)
            }
            Struct::SerdeJson { .. } => Ok(()),
        }
    }
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = Error;

    #[inline]
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Struct<'_> {
    type Ok = ();
    type Error = Error;

    #[inline]
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.field(key, value)
    }

    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
    use std::hash::RandomState;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::Duration;

    use proptest::prelude::*;
    use serde::Serializer;
    use serde::ser::SerializeMap;
    use serde_json::{Value, json};

    /// Found by the `canonical` fuzz target: a float whose shortest text serde_json's default parser
    /// read back one unit in the last place off (fixed by its `float_roundtrip` feature). A state
    /// holding it would have changed, and hashed differently, each time a run was resumed.
    #[test]
    fn floats_read_back_from_canonical_bytes_are_the_floats_written() {
        // The fuzzer's input: an 87-digit integer, which JSON reads as a float.
        let v: Value = serde_json::from_str(&format!("444{}14347467612885206807", "0".repeat(64))).unwrap();
        let bytes = to_vec(&v).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            v,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        for x in
            [4.4399999999999997e86_f64, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308]
        {
            let bytes = to_vec(&x).unwrap();
            assert_eq!(serde_json::from_slice::<f64>(&bytes).unwrap().to_bits(), x.to_bits(), "{x}");
        }
    }

    /// `to_vec` and `to_writer` give serde_json's bytes exactly.
    #[track_caller]
    fn assert_serde_json_bytes<T: ?Sized + Serialize>(value: &T) {
        let expected = serde_json::to_vec(value).unwrap();
        let got = to_vec(value).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected));
        assert_eq!(got, expected);
        let mut written = Vec::new();
        to_writer(&mut written, value).unwrap();
        assert_eq!(written, expected);
    }

    #[track_caller]
    fn text<T: ?Sized + Serialize>(value: &T) -> String {
        String::from_utf8(to_vec(value).unwrap()).unwrap()
    }

    #[track_caller]
    fn sorted_text<T: ?Sized + Serialize>(value: &T) -> String {
        String::from_utf8(to_vec_sorted(value).unwrap()).unwrap()
    }

    /// Every object's keys sorted: serde_json's `Value` keeps objects in a `BTreeMap<String, _>` (the
    /// workspace does not enable `preserve_order`), so its bytes are the fully sorted form.
    #[track_caller]
    fn via_value<T: ?Sized + Serialize>(value: &T) -> String {
        serde_json::to_string(&serde_json::to_value(value).unwrap()).unwrap()
    }

    #[derive(Serialize)]
    struct UnitStruct;

    #[derive(Serialize)]
    struct Newtype(String);

    #[derive(Serialize)]
    struct TupleStruct(u8, i64, ());

    #[derive(Serialize)]
    struct EmptyStruct {}

    #[derive(Serialize)]
    struct Inner {
        zeta: u32,
        alpha: Vec<bool>,
    }

    #[derive(Debug, Serialize)]
    enum Shape {
        Unit,
        Newtype(f64),
        Tuple(u8, String),
        Struct { b: u8, a: Option<i8> },
        EmptyStruct {},
        EmptyTuple(),
        Nested(Box<Shape>),
    }

    #[derive(Serialize)]
    #[serde(tag = "kind")]
    enum Internal {
        A { z: u8, y: String },
        B(Inner),
        C,
    }

    #[derive(Serialize)]
    #[serde(tag = "t", content = "c")]
    enum Adjacent {
        A(u8),
        B { z: u8, a: u8 },
        C,
    }

    #[derive(Serialize)]
    #[serde(untagged)]
    enum Untagged {
        N(u64),
        S { z: String, a: bool },
    }

    /// `serialize_bytes` (serde_json writes an array of numbers).
    struct Bytes(&'static [u8]);

    impl Serialize for Bytes {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    /// `collect_str`, which serde_json streams into one escaped string.
    struct Displayed(u32);

    impl Serialize for Displayed {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&format_args!("n=\"{}\"\n{}", self.0, "é🦀"))
        }
    }

    #[derive(Serialize)]
    struct Everything {
        z_first: u8,
        a_second: i8,
        floats: Vec<f64>,
        f32s: Vec<f32>,
        signed: (i8, i16, i32, i64, i128, i128),
        unsigned: (u8, u16, u32, u64, u128),
        strings: Vec<String>,
        chars: Vec<char>,
        none: Option<u8>,
        some_none: Option<Option<u8>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        #[serde(skip)]
        _hidden: u8,
        #[serde(rename = "re\"named\n✓")]
        renamed: bool,
        unit: (),
        unit_struct: UnitStruct,
        newtype: Newtype,
        tuple_struct: TupleStruct,
        empty_struct: EmptyStruct,
        shapes: Vec<Shape>,
        internal: Vec<Internal>,
        adjacent: Vec<Adjacent>,
        untagged: Vec<Untagged>,
        nested: Vec<Vec<Vec<u8>>>,
        empty_vec: Vec<u8>,
        deque: VecDeque<i32>,
        array: [u16; 3],
        empty_array: [u8; 0],
        boxed: Box<Shape>,
        rc: Rc<str>,
        arc: Arc<Vec<u8>>,
        bytes: Bytes,
        displayed: Displayed,
        value: Value,
        set: BTreeSet<String>,
        duration: Duration,
        ip: std::net::IpAddr,
        path: std::path::PathBuf,
    }

    fn everything() -> Everything {
        Everything {
            z_first: 1,
            a_second: -2,
            floats: vec![
                0.0,
                -0.0,
                0.1,
                1.0,
                100.0,
                1e21,
                1e22,
                1e300,
                -1.5e-300,
                5e-324,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                f64::EPSILON,
                std::f64::consts::PI,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ],
            f32s: vec![0.1, -0.0, f32::MAX, f32::MIN_POSITIVE, 16_777_217.0, f32::NAN, f32::INFINITY],
            signed: (i8::MIN, i16::MIN, i32::MIN, i64::MIN, i128::MIN, i128::MAX),
            unsigned: (u8::MAX, u16::MAX, u32::MAX, u64::MAX, u128::MAX),
            strings: [
                "",
                "plain",
                "\"quoted\" and \\ backslash / slash",
                "\n\r\t\u{8}\u{c}",
                "\u{0}\u{1}\u{1f}\u{7f}\u{80}\u{9f}",
                "\u{2028}\u{2029}\u{feff}\u{fffd}",
                "héllo wörld",
                "日本語のテキスト",
                "🦀 crab, 𝄞 clef",
            ]
            .map(String::from)
            .to_vec(),
            chars: vec!['"', '\\', '\n', '\u{0}', 'é', '🦀', '\u{7f}'],
            none: None,
            some_none: Some(None),
            skipped: None,
            _hidden: 7,
            renamed: true,
            unit: (),
            unit_struct: UnitStruct,
            newtype: Newtype("new\ttype".into()),
            tuple_struct: TupleStruct(3, -4, ()),
            empty_struct: EmptyStruct {},
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(2.5),
                Shape::Tuple(1, "t".into()),
                Shape::Struct { b: 2, a: None },
                Shape::Struct { b: 3, a: Some(-1) },
                Shape::EmptyStruct {},
                Shape::EmptyTuple(),
                Shape::Nested(Box::new(Shape::Nested(Box::new(Shape::Unit)))),
            ],
            internal: vec![
                Internal::A { z: 1, y: "y".into() },
                Internal::B(Inner { zeta: 9, alpha: vec![true, false] }),
                Internal::C,
            ],
            adjacent: vec![Adjacent::A(1), Adjacent::B { z: 2, a: 1 }, Adjacent::C],
            untagged: vec![Untagged::N(5), Untagged::S { z: "z".into(), a: false }],
            nested: vec![vec![], vec![vec![1], vec![], vec![2, 3]]],
            empty_vec: vec![],
            deque: VecDeque::from([3, -1, 2]),
            array: [1, 2, 65_535],
            empty_array: [],
            boxed: Box::new(Shape::Tuple(0, String::new())),
            rc: Rc::from("rc"),
            arc: Arc::new(vec![9, 8]),
            bytes: Bytes(b"\x00\xffbytes"),
            displayed: Displayed(42),
            value: json!({"b": [1, -2, 2.5, 1e100, "x\u{1}", null, {"d": true, "c": {}}], "a": {}, "": [[]]}),
            set: ["b", "a", "c"].map(String::from).into(),
            duration: Duration::new(5, 7),
            ip: "::1".parse().unwrap(),
            path: "/tmp/a b/ü".into(),
        }
    }

    #[test]
    fn without_maps_the_bytes_are_serde_json_bytes() {
        assert_serde_json_bytes(&everything());
        assert_serde_json_bytes(&vec![everything(), everything()]);
        assert_serde_json_bytes(&Some(Box::new(everything())));
    }

    #[test]
    fn scalars_and_small_shapes_are_serde_json_bytes() {
        assert_serde_json_bytes(&0u8);
        assert_serde_json_bytes(&u128::MAX);
        assert_serde_json_bytes(&i128::MIN);
        assert_serde_json_bytes(&-0.0f64);
        assert_serde_json_bytes(&1.0e-7f64);
        assert_serde_json_bytes(&f64::NAN);
        assert_serde_json_bytes(&0.3f32);
        assert_serde_json_bytes(&true);
        assert_serde_json_bytes(&'\u{1}');
        assert_serde_json_bytes("str \"with\" \\ escapes \u{0} and ünïcödé");
        assert_serde_json_bytes(&());
        assert_serde_json_bytes(&None::<u8>);
        assert_serde_json_bytes(&Some(()));
        assert_serde_json_bytes(&UnitStruct);
        assert_serde_json_bytes(&Shape::Unit);
        assert_serde_json_bytes(&Shape::Struct { b: 1, a: Some(2) });
        assert_serde_json_bytes(&(1, "two", [3.5], ((),)));
        assert_serde_json_bytes(&Vec::<u8>::new());
        assert_serde_json_bytes(&EmptyStruct {});
        assert_serde_json_bytes(&Value::Null);
        assert_serde_json_bytes(&json!([{"z": 1, "a": [{"y": null, "b": 2}]}]));
        assert_serde_json_bytes(&serde_json::Map::new());
    }

    #[test]
    fn a_hash_map_gives_the_same_bytes_in_every_hasher_state() {
        let entries: Vec<(String, u64)> = (0..1_000u64).map(|i| (format!("key-{i}"), i * 7)).collect();
        let a: HashMap<String, u64, RandomState> = entries.iter().cloned().collect();
        let mut b = HashMap::with_hasher(RandomState::new());
        b.extend(entries.iter().rev().cloned());
        assert_ne!(
            serde_json::to_vec(&a).unwrap(),
            serde_json::to_vec(&b).unwrap(),
            "two hasher states iterate 1,000 entries in different orders (else this test shows nothing)"
        );
        let bytes = to_vec(&a).unwrap();
        assert_eq!(bytes, to_vec(&b).unwrap());
        let sorted: BTreeMap<String, u64> = entries.into_iter().collect();
        assert_eq!(bytes, serde_json::to_vec(&sorted).unwrap());
        assert_eq!(to_vec_sorted(&a).unwrap(), bytes);
    }

    #[test]
    fn integer_and_other_keys_sort_by_their_string_like_go() {
        let ints: HashMap<i32, u8> = [(9, 0), (10, 1), (100, 2), (-1, 3), (0, 4), (-20, 5), (2, 6)].into();
        assert_eq!(text(&ints), r#"{"-1":3,"-20":5,"0":4,"10":1,"100":2,"2":6,"9":0}"#);
        let wide: HashMap<u128, bool> = [(u128::MAX, true), (5, false)].into();
        assert_eq!(text(&wide), r#"{"340282366920938463463374607431768211455":true,"5":false}"#);
        let bools: HashMap<bool, u8> = [(true, 1), (false, 0)].into();
        assert_eq!(text(&bools), r#"{"false":0,"true":1}"#);
        let chars: HashMap<char, u8> = [('b', 1), ('a', 0), ('é', 2)].into();
        assert_eq!(text(&chars), r#"{"a":0,"b":1,"é":2}"#);
        #[derive(Serialize, PartialEq, Eq, Hash)]
        enum Color {
            Red,
            Blue,
        }
        let variants: HashMap<Color, u8> = [(Color::Red, 0), (Color::Blue, 1)].into();
        assert_eq!(text(&variants), r#"{"Blue":1,"Red":0}"#);
        #[derive(Serialize, PartialEq, Eq, Hash)]
        struct Id(u16);
        let newtypes: HashMap<Id, u8> = [(Id(10), 0), (Id(9), 1)].into();
        assert_eq!(text(&newtypes), r#"{"10":0,"9":1}"#);
        let options: HashMap<Option<u16>, u8> = [(Some(10), 0), (Some(9), 1)].into();
        assert_eq!(text(&options), r#"{"10":0,"9":1}"#);
        let floats = Entries(vec![(json!(10.0), json!(0)), (json!(1.5), json!(1)), (json!(2.0), json!(2))]);
        assert_eq!(text(&floats), r#"{"1.5":1,"10.0":0,"2.0":2}"#);
    }

    #[test]
    fn keys_sort_by_their_string_before_escaping() {
        // Escaped, `a\"b` and `a\nb` would both start `a\`; their strings compare at `"` (0x22) and
        // newline (0x0a).
        let keys = ["ab", "a\"b", "a\nb", "a", "a\\b", "é", "z", "\u{7f}", "", "\u{1}", "𝄞", "\u{ffff}"];
        let map: HashMap<&str, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let sorted: BTreeMap<&str, usize> = map.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(text(&map), serde_json::to_string(&sorted).unwrap());
        // UTF-8 byte order: DEL (7f) < é (c3 a9) < U+FFFF (ef bf bf) < 𝄞 (f0 9d 84 9e). (RFC 8785 compares
        // UTF-16 units and would put 𝄞, a surrogate pair, before U+FFFF.)
        let order = ["", "\u{1}", "a", "a\nb", "a\"b", "a\\b", "ab", "z", "\u{7f}", "é", "\u{ffff}", "𝄞"];
        let expected: Vec<String> =
            order.iter().map(|k| format!("{}:{}", serde_json::to_string(k).unwrap(), map[k])).collect();
        assert_eq!(text(&map), format!("{{{}}}", expected.join(",")));
    }

    #[test]
    fn keys_that_share_eight_bytes_or_end_in_nul_sort_by_the_whole_string() {
        // The sort compares an 8-byte zero-padded prefix first; these keys tie or nearly tie there.
        let keys = [
            "abcdefgh",
            "abcdefghi",
            "abcdefgh\0",
            "abcdefgg~",
            "abcdefgh\0\0",
            "ab",
            "ab\0",
            "ab\0\u{1}",
            "ab\u{1}",
            "",
            "\0",
            "\0\0",
            "abcdefghij_long_tail_b",
            "abcdefghij_long_tail_a",
        ];
        let map: HashMap<&str, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let sorted: BTreeMap<&str, usize> = map.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(text(&map), serde_json::to_string(&sorted).unwrap());
        // Without escapes in the keys (the other comparison path).
        let keys =
            ["abcdefgh", "abcdefghi", "abcdefgg~", "ab", "", "abcdefghij_b", "abcdefghij_a", "abcdefgh~"];
        let map: HashMap<&str, usize> = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let sorted: BTreeMap<&str, usize> = map.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(text(&map), serde_json::to_string(&sorted).unwrap());
    }

    #[test]
    fn nested_maps_are_sorted_at_every_depth() {
        type Leaf = HashMap<&'static str, Option<bool>>;
        let mut outer: HashMap<String, HashMap<u8, Vec<Leaf>>> = HashMap::new();
        for i in 0..20u8 {
            let inner = (0..20u8)
                .map(|j| {
                    (j.wrapping_mul(37), vec![[("y", Some(true)), ("b", None), ("m", Some(false))].into()])
                })
                .collect();
            outer.insert(format!("k{i}"), inner);
        }
        assert_eq!(text(&outer), via_value(&outer));
        assert_eq!(sorted_text(&outer), via_value(&outer));
        let tiny: HashMap<&str, HashMap<&str, u8>> =
            [("b", [("y", 1), ("x", 2)].into()), ("a", HashMap::new())].into();
        assert_eq!(text(&tiny), r#"{"a":{},"b":{"x":2,"y":1}}"#);
    }

    #[test]
    fn maps_inside_enums_options_vecs_and_structs_are_sorted_and_fields_keep_their_order() {
        #[derive(Serialize)]
        enum WithMaps {
            Newtype(HashMap<&'static str, u8>),
            Tuple(u8, HashMap<&'static str, u8>),
            Struct { z: HashMap<&'static str, u8>, a: u8 },
        }
        #[derive(Serialize)]
        #[serde(tag = "kind")]
        enum Tagged {
            Map(HashMap<&'static str, u8>),
        }
        #[derive(Serialize)]
        struct State {
            zulu: Option<HashMap<&'static str, u8>>,
            mike: Vec<HashMap<&'static str, u8>>,
            alpha: WithMaps,
            variants: Vec<WithMaps>,
            tagged: Tagged,
        }
        let m = || HashMap::from([("c", 3), ("a", 1), ("b", 2)]);
        let state = State {
            zulu: Some(m()),
            mike: vec![m(), HashMap::new(), m()],
            alpha: WithMaps::Newtype(m()),
            variants: vec![WithMaps::Tuple(7, m()), WithMaps::Struct { z: m(), a: 0 }],
            tagged: Tagged::Map(m()),
        };
        let abc = r#"{"a":1,"b":2,"c":3}"#;
        assert_eq!(
            text(&state),
            format!(
                r#"{{"zulu":{abc},"mike":[{abc},{{}},{abc}],"alpha":{{"Newtype":{abc}}},"variants":[{{"Tuple":[7,{abc}]}},{{"Struct":{{"z":{abc},"a":0}}}}],"tagged":{{"a":1,"b":2,"c":3,"kind":"Map"}}}}"#
            )
        );
        // The fully sorted form sorts the fields too, and equals `Value`'s (sorted) bytes.
        assert_eq!(sorted_text(&state), via_value(&state));
        assert!(sorted_text(&state).starts_with(r#"{"alpha":{"Newtype":{"a":1"#));
    }

    #[test]
    fn a_flattened_struct_is_a_map_so_its_keys_are_sorted() {
        #[derive(Serialize)]
        struct Outer {
            zulu: u8,
            #[serde(flatten)]
            inner: Inner,
            bravo: u8,
        }
        let v = Outer { zulu: 1, inner: Inner { zeta: 2, alpha: vec![] }, bravo: 3 };
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"zulu":1,"zeta":2,"alpha":[],"bravo":3}"#);
        assert_eq!(text(&v), r#"{"alpha":[],"bravo":3,"zeta":2,"zulu":1}"#);
    }

    #[test]
    fn the_sorted_form_sorts_struct_fields_at_every_depth() {
        #[derive(Serialize)]
        enum Event {
            Step { z: u8, a: Inner },
        }
        assert_eq!(
            sorted_text(&Event::Step { z: 1, a: Inner { zeta: 2, alpha: vec![true] } }),
            r#"{"Step":{"a":{"alpha":[true],"zeta":2},"z":1}}"#
        );
        // No u128 beyond u64 nor f32 in `Value`, so compare a copy of `everything()` without them.
        let mut e = everything();
        e.unsigned.4 = 0;
        e.signed.4 = 0;
        e.signed.5 = 0;
        e.f32s.clear();
        assert_eq!(sorted_text(&e), via_value(&e));
        // The declared-order form of the same value is serde_json's.
        assert_serde_json_bytes(&e);
    }

    /// A map whose entries are emitted as listed (keys and values of any shape).
    struct Entries(Vec<(Value, Value)>);

    impl Serialize for Entries {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
        }
    }

    #[test]
    fn duplicate_keys_are_all_written_in_value_order() {
        let entries = vec![(json!("b"), json!(2)), (json!("a"), json!(1)), (json!("b"), json!([1]))];
        let forward = Entries(entries.clone());
        assert_eq!(serde_json::to_string(&forward).unwrap(), r#"{"b":2,"a":1,"b":[1]}"#);
        assert_eq!(text(&forward), r#"{"a":1,"b":2,"b":[1]}"#);
        assert_eq!(text(&Entries(entries.into_iter().rev().collect())), text(&forward));
    }

    /// Both fail, with the same message and category.
    #[track_caller]
    fn assert_same_error<T: ?Sized + Serialize>(value: &T) {
        let expected = serde_json::to_vec(value).expect_err("serde_json rejects this value");
        for got in [to_vec(value).unwrap_err(), to_vec_sorted(value).unwrap_err()] {
            assert_eq!(got.to_string(), expected.to_string());
            assert_eq!(got.classify(), expected.classify());
        }
    }

    #[test]
    fn keys_are_validated_like_serde_json() {
        #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
        struct Key {
            a: u8,
        }
        assert_same_error(&HashMap::from([(Key { a: 1 }, 1)]));
        assert_same_error(&BTreeMap::from([((1, 2), 1)]));
        assert_same_error(&BTreeMap::from([(vec![1], 1)]));
        assert_same_error(&BTreeMap::from([(None::<u8>, 1)]));
        assert_same_error(&BTreeMap::from([((), 1)]));
        assert_same_error(&vec![BTreeMap::from([("ok", BTreeMap::from([(Key { a: 1 }, 1)]))])]);
        assert_same_error(&Entries(vec![(json!(f64::NAN), json!(0))]));
        assert_same_error(&Entries(vec![(json!({"a": 1}), json!(0))]));
        assert_same_error(&Entries(vec![(json!(null), json!(0))]));
        let e = to_vec(&HashMap::from([(Key { a: 1 }, 1)])).unwrap_err();
        assert_eq!(e.to_string(), "key must be a string");
        assert!(e.is_syntax());
    }

    #[test]
    fn errors_of_serialize_impls_and_writers_come_through() {
        struct Fails;
        impl Serialize for Fails {
            fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(ser::Error::custom("this value cannot be serialized"))
            }
        }
        assert_same_error(&HashMap::from([("a", vec![Fails])]));
        assert_same_error(&(1, Some(Fails)));

        struct Broken;
        impl io::Write for Broken {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let e = to_writer(Broken, &HashMap::from([("a", 1)])).unwrap_err();
        assert!(e.is_io(), "{e}");
        assert!(to_writer_sorted(Broken, &everything()).unwrap_err().is_io());
    }

    #[test]
    fn map_calls_out_of_order_are_errors_not_invalid_json() {
        struct Misuse(&'static str);
        impl Serialize for Misuse {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(None)?;
                match self.0 {
                    "value first" => m.serialize_value(&1)?,
                    "two keys" => {
                        m.serialize_key("a")?;
                        m.serialize_key("b")?;
                    }
                    _ => m.serialize_key("a")?,
                }
                m.end()
            }
        }
        for (case, message) in [
            ("value first", "a map value was serialized without a key"),
            ("two keys", "a map key was serialized without its value"),
            ("key last", "a map key was serialized without its value"),
        ] {
            assert!(serde_json::from_slice::<Value>(&serde_json::to_vec(&Misuse(case)).unwrap()).is_err());
            assert_eq!(to_vec(&Misuse(case)).unwrap_err().to_string(), message, "{case}");
        }
    }

    #[test]
    fn serde_json_private_structs_are_written_by_serde_json() {
        // With `arbitrary_precision` on, serde_json writes this struct as the bare number; here (off) as
        // an object. Either way canonical JSON is what serde_json writes.
        const TOKEN: &str = "$serde_json::private::Number";
        struct Number(&'static str, usize);
        impl Serialize for Number {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut st = s.serialize_struct(TOKEN, self.1)?;
                for _ in 0..self.1 {
                    st.serialize_field(TOKEN, self.0)?;
                }
                st.end()
            }
        }
        for n in [Number("12.50", 1), Number("", 0)] {
            assert_serde_json_bytes(&n);
            assert_eq!(to_vec_sorted(&n).unwrap(), serde_json::to_vec(&n).unwrap());
            assert_serde_json_bytes(&[Some(n)]);
        }
        assert!(to_vec(&Number("1", 2)).unwrap_err().to_string().contains("serde_json private type name"));
    }

    fn any_key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c]{0,3}",
            "[0-9]{1,3}",
            any::<String>(),
            Just("\"".to_owned()),
            Just("\\".to_owned()),
            Just("\u{7f}é".to_owned()),
        ]
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(any_key(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A plain struct of fields drawn at random (no maps).
    #[derive(Debug, Serialize)]
    struct Plain {
        z: u64,
        y: f64,
        x: String,
        w: Vec<i32>,
        v: Option<(u128, char)>,
        u: f32,
        t: Vec<Shape>,
    }

    fn any_plain() -> impl Strategy<Value = Plain> {
        (
            any::<u64>(),
            any::<f64>(),
            any::<String>(),
            prop::collection::vec(any::<i32>(), 0..5),
            any::<Option<(u128, char)>>(),
            any::<f32>(),
            prop::collection::vec((any::<u8>(), any::<String>(), any::<f64>()), 0..4),
        )
            .prop_map(|(z, y, x, w, v, u, t)| Plain {
                z,
                y,
                x,
                w,
                v,
                u,
                t: t.into_iter()
                    .map(|(n, s, f)| match n % 4 {
                        0 => Shape::Unit,
                        1 => Shape::Newtype(f),
                        2 => Shape::Tuple(n, s),
                        _ => Shape::Struct { b: n, a: Some(n as i8) },
                    })
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn any_value_is_serde_json_bytes(v in any_value()) {
            // `Value`'s objects are `BTreeMap`s: already sorted, so every form is serde_json's.
            let expected = serde_json::to_vec(&v).unwrap();
            prop_assert_eq!(to_vec(&v).unwrap(), expected.clone());
            prop_assert_eq!(to_vec_sorted(&v).unwrap(), expected);
        }

        #[test]
        fn any_plain_struct_is_serde_json_bytes(p in any_plain()) {
            prop_assert_eq!(to_vec(&p).unwrap(), serde_json::to_vec(&p).unwrap());
        }

        #[test]
        fn a_hash_map_is_its_sorted_map(entries in prop::collection::vec((any_key(), any_value()), 0..40)) {
            let hashed: HashMap<String, Value> = entries.iter().cloned().collect();
            let mut reversed = HashMap::with_hasher(RandomState::new());
            reversed.extend(entries.iter().rev().cloned());
            let sorted: BTreeMap<String, Value> = hashed.clone().into_iter().collect();
            let expected = serde_json::to_vec(&sorted).unwrap();
            prop_assert_eq!(to_vec(&hashed).unwrap(), expected.clone());
            let reversed_sorted: BTreeMap<String, Value> = reversed.clone().into_iter().collect();
            prop_assert_eq!(to_vec(&reversed).unwrap(), serde_json::to_vec(&reversed_sorted).unwrap());
            prop_assert_eq!(to_vec_sorted(&hashed).unwrap(), expected);
        }
    }
}
