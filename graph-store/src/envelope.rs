//! The byte envelope every record is stored in: magic (4 bytes naming the record's kind),
//! `u32_be(schema_version)`, the SHA-256 of the version and the body, then the body. Any flipped byte is
//! `StoreError::Corrupted`, a record of another version `UnsupportedSchemaVersion`.

use crate::error::StoreError;
use crate::keys::sha256_parts;

/// The record format version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The envelope's header: magic, version, checksum.
const HEADER: usize = 4 + 4 + 32;

/// An envelope of the current version around `body` (for the other records of the store).
pub fn seal(magic: &[u8; 4], body: &[u8]) -> Vec<u8> {
    seal_version(magic, SCHEMA_VERSION, body)
}

/// The JSON record inside an envelope of `magic`; `what` names it in errors.
pub fn unseal<T: serde::de::DeserializeOwned>(
    magic: &[u8; 4],
    bytes: &[u8],
    what: &str,
) -> Result<T, StoreError> {
    let corrupted = |detail: String| StoreError::Corrupted {
        run: None,
        step: None,
        file: None,
        detail: format!("{what}: {detail}"),
        remedy: crate::error::REMEDY_RECORD,
    };
    let (version, body) = open(magic, bytes).map_err(|e| corrupted(e.to_owned()))?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchemaVersion { found: version, supported: SCHEMA_VERSION });
    }
    serde_json::from_slice(body).map_err(|e| corrupted(format!("does not decode: {e}")))
}

pub(crate) fn seal_version(magic: &[u8; 4], version: u32, body: &[u8]) -> Vec<u8> {
    let version = version.to_be_bytes();
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version);
    out.extend_from_slice(&sha256_parts(&[&version, body]));
    out.extend_from_slice(body);
    out
}

/// Checks an envelope; returns its version and body.
pub(crate) fn open<'b>(magic: &[u8; 4], bytes: &'b [u8]) -> Result<(u32, &'b [u8]), &'static str> {
    if bytes.len() < HEADER || &bytes[..4] != magic {
        return Err("the record header is damaged");
    }
    let (version, body) = (&bytes[4..8], &bytes[HEADER..]);
    if sha256_parts(&[version, body])[..] != bytes[8..40] {
        return Err("the record's checksum does not match");
    }
    Ok((u32::from_be_bytes(version.try_into().expect("4 bytes")), body))
}
