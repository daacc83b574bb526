//! The sidecar index (`<capture>.idx`): one entry per block of records the
//! writer handed to the disk, so that a reader finds a time range without
//! scanning the file (`wiretape info` reads it; the extraction planner picks blocks
//! by it), and, per block, the flow keys it holds (hosts, ports, protocols,
//! VLANs, EtherTypes: [`FlowSet`]) so that a filter skips the blocks that
//! cannot match.
//!
//! Layout, little-endian: a 16-byte header (`WTIDX\x02\0\0`, fixed entry
//! size u32 = 32, reserved u32), then per block: offset of the first record
//! that starts in the block (u64), first and last timestamp (UTC ns, u64
//! each), frame count (u64), then the length of its flow set (u32; 0: none)
//! and the set ([`FlowSet::encode`]). Version 1 files (`WTIDX\x01`, entries of
//! the 32 fixed bytes alone) are still read: their blocks have no flow set,
//! and `wiretape index` rewrites them. A compressed capture's index is
//! version 3 (`WTIDX\x03`, fixed entry size 56): the fixed part goes on with
//! where the compressed unit holding the block's first record is (its file
//! offset and length, and the uncompressed offset it starts at: three u64s,
//! [`Entry::z`]); plain files keep version 2. Entries are appended as blocks go
//! out; the index is not made durable before the data, so after a crash it
//! may describe more or fewer records than the file holds: the rebuild (run
//! by `repair`, `wiretape index` and after a write error) makes it exact
//! again from the file.
//!
//! Here: the format ([`Entry`], [`header`]) and the reading ([`read`],
//! [`read_from`], [`parse`]). Writing one (as blocks go out, or rebuilt
//! from the file) is `wiretape-storage`'s `index`.

use crate::error::StorageError;
use std::fs::File;
use std::io::Read;
use std::path::Path;
pub use wiretape_filter::flow::{FlowCollector, FlowSet};

/// The first 8 bytes of an index file: `WTIDX`, format version 2, two zeros.
pub const MAGIC: &[u8; 8] = b"WTIDX\x02\0\0";
/// The first 8 bytes of a compressed capture's index (version 3).
pub const MAGIC_V3: &[u8; 8] = b"WTIDX\x03\0\0";
/// Bytes of the fixed part of a version 3 entry.
pub const ENTRY_LEN_V3: usize = 56;
/// The first 8 bytes of a version 1 index (no flow sets), still read.
pub const MAGIC_V1: &[u8; 8] = b"WTIDX\x01\0\0";
/// Bytes of the file header (magic, entry size, reserved) before the entries.
pub const HEADER_LEN: usize = 16;
/// Bytes of the fixed part of one entry: four little-endian u64s, as
/// [`Entry`] lists them (version 1 entries are these alone).
pub const ENTRY_LEN: usize = 32;

/// One block of records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// File offset of the first record that starts in the block.
    pub offset: u64,
    /// Stamp of the block's first record, UTC ns (whole µs in a µs file).
    pub first_ns: u64,
    /// Stamp of the block's last record, UTC ns, cut as `first_ns`.
    pub last_ns: u64,
    /// Records that start in the block.
    pub count: u64,
    /// The flow keys of the block's frames (`None`: not known, e.g. a
    /// version 1 index: the block may hold anything).
    pub flows: Option<FlowSet>,
    /// In a compressed capture: the compressed unit holding the first
    /// record (None in a plain file's index).
    pub z: Option<crate::compress::Placed>,
}

impl Entry {
    fn encode_fixed(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.first_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.last_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }

    /// Appends the version 2 encoding of the entry to `out` (version 3
    /// when it has a compressed location).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encode_fixed());
        if let Some(z) = &self.z {
            for v in [z.c_off, z.c_len, z.u_start] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        if let Some(f) = &self.flows {
            f.encode(out);
        }
        let n = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&n.to_le_bytes());
    }

    /// The fixed part as the `.idx` holds it: 32 bytes, or 56 with the
    /// compressed unit ([`Entry::z`]).
    pub fn fixed_bytes(&self) -> FixedBytes {
        let mut b = [0u8; ENTRY_LEN_V3];
        b[..ENTRY_LEN].copy_from_slice(&self.encode_fixed());
        let mut n = ENTRY_LEN;
        if let Some(z) = &self.z {
            for v in [z.c_off, z.c_len, z.u_start] {
                b[n..n + 8].copy_from_slice(&v.to_le_bytes());
                n += 8;
            }
        }
        FixedBytes(b, n as u8)
    }

    /// An entry from its fixed part ([`Entry::fixed_bytes`]: 32 or 56
    /// bytes; no flow set). Shorter input reads as zeros.
    pub fn from_fixed(b: &[u8]) -> Self {
        let mut x = [0u8; ENTRY_LEN_V3];
        let n = b.len().min(ENTRY_LEN_V3);
        x[..n].copy_from_slice(&b[..n]);
        let mut e = Entry::decode_fixed(&x);
        if b.len() >= ENTRY_LEN_V3 {
            let r = |o: usize| u64::from_le_bytes(x[o..o + 8].try_into().unwrap());
            e.z = Some(crate::compress::Placed {
                c_off: r(32),
                c_len: r(40),
                u_start: r(48),
                u_len: 0,
            });
        }
        e
    }

    fn decode_fixed(b: &[u8]) -> Self {
        let r = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        Entry {
            offset: r(0),
            first_ns: r(8),
            last_ns: r(16),
            count: r(24),
            flows: None,
            z: None,
        }
    }

    /// Whether a block with this entry may hold a frame that `needs` asks
    /// for (always, without a flow set).
    pub fn may_match(&self, needs: &wiretape_filter::flow::Needs) -> bool {
        self.flows.as_ref().is_none_or(|f| needs.may_match(f))
    }
}

/// An entry's fixed part ([`Entry::fixed_bytes`]), without allocating: it
/// derefs to its 32 or 56 bytes.
#[derive(Clone, Copy, Debug)]
pub struct FixedBytes([u8; ENTRY_LEN_V3], u8);

impl std::ops::Deref for FixedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0[..self.1 as usize]
    }
}

pub use crate::naming::index_path as path_for;

/// The header of an index: of version 3 (a compressed capture's) or 2.
pub fn header(compressed: bool) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    if compressed {
        h[..8].copy_from_slice(MAGIC_V3);
        h[8..12].copy_from_slice(&(ENTRY_LEN_V3 as u32).to_le_bytes());
    } else {
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&(ENTRY_LEN as u32).to_le_bytes());
    }
    h
}

/// Reads the entries of `index` (a torn last entry is ignored).
pub fn read(index: &Path) -> Result<Vec<Entry>, StorageError> {
    let rd = |source| StorageError::Read {
        path: index.to_owned(),
        source,
    };
    let mut b = Vec::new();
    File::open(index)
        .map_err(rd)?
        .read_to_end(&mut b)
        .map_err(rd)?;
    parse(index, &b).map(|(es, _)| es)
}

/// The format version of the index at `index` (1, 2 or 3), read from its magic.
pub fn version(index: &Path) -> Result<u8, StorageError> {
    let mut h = [0u8; 8];
    File::open(index)
        .and_then(|mut f| f.read_exact(&mut h))
        .map_err(|source| StorageError::Read {
            path: index.to_owned(),
            source,
        })?;
    match &h {
        m if m == MAGIC => Ok(2),
        m if m == MAGIC_V3 => Ok(3),
        m if m == MAGIC_V1 => Ok(1),
        _ => Err(bad_magic(index)),
    }
}

fn bad_magic(index: &Path) -> StorageError {
    StorageError::Corrupt {
        path: index.to_owned(),
        offset: 0,
        why: "not a wiretape index (bad magic); `wiretape index` rebuilds it".into(),
    }
}

/// Parses index bytes: the entries and the format version. A torn last
/// entry is ignored; a flow set that does not decode is an error (naming
/// its offset), as is a bad header.
pub fn parse(index: &Path, b: &[u8]) -> Result<(Vec<Entry>, u8), StorageError> {
    let version = check_header(index, b)?;
    let out = parse_entries(index, b, HEADER_LEN, version)?;
    Ok((out, version))
}

/// The version of index bytes `b` (1, 2 or 3) from their header, checked.
fn check_header(index: &Path, b: &[u8]) -> Result<u8, StorageError> {
    if b.len() < HEADER_LEN {
        return Err(bad_magic(index));
    }
    let version = match &b[..8] {
        m if m == MAGIC => 2,
        m if m == MAGIC_V3 => 3,
        m if m == MAGIC_V1 => 1,
        _ => return Err(bad_magic(index)),
    };
    let want = if version == 3 {
        ENTRY_LEN_V3
    } else {
        ENTRY_LEN
    };
    let fixed = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
    if fixed != want {
        return Err(StorageError::Corrupt {
            path: index.to_owned(),
            offset: 8,
            why: format!("entry size {fixed}, expected {want}; `wiretape index` rebuilds it"),
        });
    }
    Ok(version)
}

/// The entries of index bytes `b` from byte `at` on (an entry's start).
fn parse_entries(
    index: &Path,
    b: &[u8],
    mut at: usize,
    version: u8,
) -> Result<Vec<Entry>, StorageError> {
    let v2 = version >= 2;
    let want = if version == 3 {
        ENTRY_LEN_V3
    } else {
        ENTRY_LEN
    };
    let mut out = Vec::new();
    while at + want <= b.len() {
        let mut e = Entry::decode_fixed(&b[at..at + ENTRY_LEN]);
        if version == 3 {
            let r = |o: usize| u64::from_le_bytes(b[at + o..at + o + 8].try_into().unwrap());
            e.z = Some(crate::compress::Placed {
                c_off: r(32),
                c_len: r(40),
                u_start: r(48),
                u_len: 0,
            });
        }
        let mut next = at + want;
        if v2 {
            let Some(n) = b.get(next..next + 4) else {
                break;
            };
            let n = u32::from_le_bytes(n.try_into().unwrap()) as usize;
            next += 4;
            let Some(raw) = b.get(next..next.saturating_add(n)) else {
                break;
            };
            if n > 0 {
                e.flows = Some(FlowSet::decode(raw).ok_or_else(|| StorageError::Corrupt {
                    path: index.to_owned(),
                    offset: next as u64,
                    why: "a flow set that does not decode; `wiretape index` rebuilds it".into(),
                })?);
            }
            next += n;
        }
        out.push(e);
        at = next;
    }
    Ok(out)
}

/// The entries of the index at `index` from byte `from` on (an entry's
/// start, e.g. a key index segment's [`crate::keys::SegmentHeader::idx_next`]),
/// and the bytes read: the entries after those a key index covers, without
/// reading the ones before.
pub fn read_from(index: &Path, from: u64) -> Result<(Vec<Entry>, u64), StorageError> {
    use std::io::{Seek, SeekFrom};
    let rd = |source| StorageError::Read {
        path: index.to_owned(),
        source,
    };
    let mut f = File::open(index).map_err(rd)?;
    let mut h = [0u8; HEADER_LEN];
    f.read_exact(&mut h).map_err(rd)?;
    let version = check_header(index, &h)?;
    let from = from.max(HEADER_LEN as u64);
    f.seek(SeekFrom::Start(from)).map_err(rd)?;
    let mut b = Vec::new();
    f.read_to_end(&mut b).map_err(rd)?;
    let n = (HEADER_LEN + b.len()) as u64;
    Ok((parse_entries(index, &b, 0, version)?, n))
}
