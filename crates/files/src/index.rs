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
//! may describe more or fewer records than the file holds: [`rebuild`] (run
//! by `repair`, `wiretape index` and after a write error) makes it exact
//! again from the file.

use crate::walk::Walker;
use crate::StorageError;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
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
    fn encode(&self, out: &mut Vec<u8>) {
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

fn header(compressed: bool) -> [u8; HEADER_LEN] {
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

/// Collects the records of the current block and appends an entry per block.
pub struct IndexWriter {
    file: Option<File>,
    path: PathBuf,
    cur: Entry,
    unit: u64,
    flows: Option<FlowCollector>,
    buf: Vec<u8>,
    /// A compressed capture: entries wait here for where their block went.
    compressed: bool,
    pending: std::collections::VecDeque<Entry>,
    /// Entries written to the index so far (the block being collected is not
    /// one yet; none more after a write error).
    pub entries: u64,
    /// The first write error (the index is then abandoned, the capture not).
    pub error: Option<String>,
    /// The exact key index ([`crate::keys`]), fed entry by entry.
    keys: Option<crate::keys::KeyWriter>,
    /// Bytes of the `.idx` written so far.
    idx_len: u64,
    /// What the key index came to, once finished.
    pub keys_report: Option<crate::keys::KeyReport>,
    /// Why the key index is missing or incomplete, if it is.
    pub keys_error: Option<String>,
}

impl IndexWriter {
    /// Creates the index of `capture` (never overwrites). Stamps are cut to
    /// whole `unit` ns, as the file holds them (1000 for µs pcap).
    pub fn create(capture: &Path, unit: u64) -> Result<Self, StorageError> {
        Self::create_with(capture, unit, false)
    }

    /// [`IndexWriter::create`]; `compressed`: a version 3 index, each entry
    /// written once [`IndexWriter::placed`] says where its block went.
    pub fn create_with(capture: &Path, unit: u64, compressed: bool) -> Result<Self, StorageError> {
        let path = path_for(capture);
        let mut file = crate::create_new(&path, 0)?;
        file.write_all(&header(compressed))
            .map_err(|e| StorageError::from_write(&path, e))?;
        // An old key index of that name (no capture of it is left: captures
        // are never overwritten) must not describe the new file.
        let _ = std::fs::remove_file(crate::keys::path_for(capture));
        Ok(IndexWriter {
            file: Some(file),
            path,
            cur: Entry::default(),
            unit: unit.max(1),
            flows: Some(FlowCollector::new()),
            buf: Vec::with_capacity(4096),
            compressed,
            pending: Default::default(),
            entries: 0,
            error: None,
            keys: None,
            idx_len: HEADER_LEN as u64,
            keys_report: None,
            keys_error: None,
        })
    }

    /// Also writes the exact key index `<capture>.kdx` ([`crate::keys`]),
    /// its segments built by `builder` (None: on this thread, at each cut
    /// and at [`IndexWriter::finish`]); `wait`: when the builder's queue is
    /// full, wait (a file source) instead of leaving that segment out. Needs
    /// the flow sets (Ethernet).
    pub fn with_keys(
        self,
        capture: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
    ) -> Self {
        self.with_keys_budget(capture, builder, wait, crate::keys::ROWS_BUDGET)
    }

    /// [`IndexWriter::with_keys`], cutting a segment every `rows` rows
    /// (bounds the memory the rows take: 32 bytes each).
    pub fn with_keys_budget(
        mut self,
        capture: &Path,
        builder: Option<std::sync::Arc<crate::keys::Builder>>,
        wait: bool,
        rows: usize,
    ) -> Self {
        if let Some(f) = self.flows.take() {
            self.flows = Some(if f.has_rows() {
                f
            } else {
                FlowCollector::new().with_rows(rows.saturating_add(65536))
            });
            let entry_len = if self.compressed {
                ENTRY_LEN_V3
            } else {
                ENTRY_LEN
            } as u32;
            self.keys = Some(
                crate::keys::KeyWriter::new(
                    capture,
                    builder,
                    wait,
                    entry_len,
                    crate::pcap::LINKTYPE_ETHERNET,
                )
                .with_budget(rows),
            );
        }
        self
    }

    /// Without flow sets (blocks then may hold anything; `wiretape index`
    /// adds them later), hence without the key index.
    pub fn without_flows(mut self) -> Self {
        self.flows = None;
        self.keys = None;
        self
    }

    /// A record at stream offset `offset`, stamped `ts_ns`, holding `frame`
    /// (its stored bytes), joined the block.
    #[inline(always)]
    pub fn record(&mut self, offset: u64, ts_ns: u64, frame: &[u8]) {
        if self.cur.count == 0 {
            self.cur.offset = offset;
            self.cur.first_ns = ts_ns;
        }
        self.cur.last_ns = ts_ns;
        self.cur.count += 1;
        if let Some(f) = &mut self.flows {
            f.add_at(frame, (offset - self.cur.offset) as u32);
        }
    }

    /// Forgets the records of the block being collected (they never went
    /// to the file).
    pub(crate) fn discard_current(&mut self) {
        self.cur = Entry::default();
        if let Some(f) = &mut self.flows {
            f.discard();
        }
    }

    /// The block went to the disk: append its entry.
    pub fn block_done(&mut self) {
        if self.cur.count == 0 {
            return;
        }
        let mut e = std::mem::take(&mut self.cur);
        // Once per block, not per frame.
        e.first_ns -= e.first_ns % self.unit;
        e.last_ns -= e.last_ns % self.unit;
        e.flows = self.flows.as_mut().map(FlowCollector::finish);
        if self.compressed {
            self.pending.push_back(e);
        } else {
            self.write_entry(&e);
        }
    }

    /// Blocks of a compressed capture went to the file at these places
    /// (in order): the entries whose first record they hold are written.
    pub fn placed(&mut self, places: &[crate::compress::Placed]) {
        for p in places {
            while let Some(e) = self.pending.front() {
                if e.offset < p.u_start {
                    // Its block never got a place (cannot happen): drop it.
                    self.pending.pop_front();
                    continue;
                }
                if e.offset >= p.u_start + p.u_len {
                    break;
                }
                let mut e = self.pending.pop_front().expect("a front entry");
                e.z = Some(*p);
                self.write_entry(&e);
            }
        }
    }

    fn write_entry(&mut self, e: &Entry) {
        self.buf.clear();
        e.encode(&mut self.buf);
        if let Some(f) = &mut self.file {
            if let Err(err) = f.write_all(&self.buf) {
                self.error = Some(format!("index {}: {err}", self.path.display()));
                self.file = None;
                // The key index cannot go on without its entries.
                if self.keys.take().is_some() {
                    self.keys_error = Some("its .idx could not be written".into());
                }
            } else {
                self.entries += 1;
                self.idx_len += self.buf.len() as u64;
                if let (Some(k), Some(f)) = (&mut self.keys, &mut self.flows) {
                    k.entry_written(&e.fixed_bytes(), self.idx_len, f);
                }
            }
        }
    }

    /// Closes the index (durable along with its capture file), and writes
    /// the key index's last segment (waiting for it: call it off the
    /// capture threads).
    pub fn finish(mut self) -> Result<(), StorageError> {
        self.finish_keeping().map(|_| ())
    }

    /// [`IndexWriter::finish`], giving back what the key index came to and
    /// why it is incomplete, if it is.
    pub fn finish_keeping(
        &mut self,
    ) -> Result<(Option<crate::keys::KeyReport>, Option<String>), StorageError> {
        self.block_done();
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
            if let (Some(k), Some(flows)) = (self.keys.take(), &mut self.flows) {
                match k.finish(flows) {
                    Ok(r) => {
                        if r.dropped_blocks > 0 {
                            self.keys_error = Some(format!(
                                "{} blocks left out of the key index (its builder fell behind); \
                                 `wiretape index --force` rebuilds it",
                                r.dropped_blocks
                            ));
                        }
                        self.keys_report = Some(r);
                    }
                    Err(e) => self.keys_error = Some(e.to_string()),
                }
            }
        }
        Ok((self.keys_report, self.keys_error.clone()))
    }

    /// Gives the index up (its file is to be rebuilt): waits until the key
    /// index's builder is done with this file, so that nothing is appended
    /// to the key index after the rebuild.
    pub fn abandon(mut self) {
        if let Some(k) = self.keys.take() {
            k.wait_done();
        }
    }

    /// The index file being written: `<capture>.idx`.
    pub fn path(&self) -> &Path {
        &self.path
    }
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

/// Rewrites the index of `capture` from the file itself, one entry per
/// `block` bytes of records. Returns the number of entries.
pub fn rebuild(capture: &Path, block: u64) -> Result<u64, StorageError> {
    rebuild_with(capture, block, &mut |_| {})
}

/// [`rebuild`], calling `progress` with the file offset reached (per
/// record: keep it cheap).
pub fn rebuild_with(
    capture: &Path,
    block: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, StorageError> {
    let path = path_for(capture);
    let tmp = {
        let mut p = path.as_os_str().to_owned();
        p.push(".tmp");
        PathBuf::from(p)
    };
    let rd = |source| StorageError::Read {
        path: capture.to_owned(),
        source,
    };
    let f = File::open(capture).map_err(rd)?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    // A compressed capture: one entry per compressed unit, where it is.
    let kind = crate::zread::kind(capture).map_err(rd)?;
    let mut out = Vec::from(header(kind.is_some()));
    let src = match kind {
        Some(k) => crate::zread::Source::Z(Box::new(crate::zread::ZReader::new(f, k, &[]))),
        None => crate::zread::Source::Plain(BufReader::with_capacity(1 << 20, f)),
    };
    let mut walk = Walker::new(src);
    // Flow keys are Ethernet's: other link types get time-only entries.
    let ethernet = walk.header().linktype == crate::pcap::LINKTYPE_ETHERNET;
    let mut cur = Entry::default();
    let mut flows = FlowCollector::new();
    // The key index is rebuilt in the same walk (into a temporary, renamed
    // with the `.idx`); its segments are built on this thread.
    let mut keys = ethernet.then(|| {
        flows = FlowCollector::new().with_rows(crate::keys::ROWS_BUDGET + 65536);
        let el = if kind.is_some() {
            ENTRY_LEN_V3
        } else {
            ENTRY_LEN
        };
        crate::keys::rebuild_file(capture, el as u32, crate::pcap::LINKTYPE_ETHERNET)
    });
    let mut data = Vec::new();
    let mut entries = 0;
    let block = block.max(1);
    let mut put = |cur: &mut Entry, flows: &mut FlowCollector, out: &mut Vec<u8>| {
        cur.flows = Some(flows.finish()).filter(|_| ethernet);
        cur.encode(out);
        if let Some(k) = &mut keys {
            k.entry_written(&cur.fixed_bytes(), out.len() as u64, flows);
        }
    };
    while let Some(m) = walk.next_into(&mut data) {
        let unit = walk.get_ref().z().and_then(|z| z.unit_of(m.offset));
        let new_block = match (unit, cur.z) {
            (Some(u), Some(c)) => u.u_start != c.u_start,
            _ => m.offset / block != cur.offset / block,
        };
        if cur.count > 0 && new_block {
            put(&mut cur, &mut flows, &mut out);
            entries += 1;
            cur = Entry::default();
        }
        if cur.count == 0 {
            cur.offset = m.offset;
            cur.first_ns = m.ts_ns;
            cur.z = unit;
        }
        cur.last_ns = m.ts_ns;
        cur.count += 1;
        if ethernet {
            flows.add_at(&data, (m.offset - cur.offset) as u32);
        }
        progress(m.offset);
    }
    if let Some(e) = walk.stop().and_then(|s| s.error(capture, len)) {
        if let Some(k) = &keys {
            let _ = std::fs::remove_file(k.path());
        }
        return Err(e);
    }
    if cur.count > 0 {
        put(&mut cur, &mut flows, &mut out);
        entries += 1;
    }
    std::fs::write(&tmp, &out).map_err(|e| StorageError::from_write(&tmp, e))?;
    let kdx = crate::keys::path_for(capture);
    match keys {
        Some(k) => {
            let ktmp = k.path().to_owned();
            if let Err(e) = k.finish(&mut flows) {
                let _ = std::fs::remove_file(&ktmp);
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            std::fs::rename(&ktmp, &kdx).map_err(|e| StorageError::from_write(&kdx, e))?;
        }
        None => {
            let _ = std::fs::remove_file(&kdx);
        }
    }
    std::fs::rename(&tmp, &path).map_err(|e| StorageError::from_write(&path, e))?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileSink, Format, PcapWriter};

    #[test]
    fn writer_index_matches_the_file_and_rebuild_agrees() {
        let d = std::env::temp_dir().join(format!("wt-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for fmt in [Format::PcapNs, Format::PcapNg] {
            let p = d.join(format!("a.{}", fmt.extension()));
            let sink = FileSink::with_block_size(&p, 8192).unwrap();
            let mut w = PcapWriter::with_format(sink, 65535, fmt, "eth9").with_index(&p);
            for i in 0..1000u64 {
                w.write(1_000_000 + i * 10, &vec![i as u8; 60 + (i as usize % 300)])
                    .unwrap();
                if i == 500 {
                    w.flush().unwrap();
                }
            }
            w.close().unwrap();
            let idx = read(&path_for(&p)).unwrap();
            assert!(idx.len() > 20, "{} entries", idx.len());
            assert_eq!(idx.iter().map(|e| e.count).sum::<u64>(), 1000);
            assert_eq!(idx[0].first_ns, 1_000_000);
            assert_eq!(idx.last().unwrap().last_ns, 1_000_000 + 999 * 10);
            // Every entry's offset is where a record with its first stamp starts.
            let data = std::fs::read(&p).unwrap();
            let mut n = 0u64;
            for e in &idx {
                let o = e.offset as usize;
                let ts = match fmt {
                    Format::PcapNg => {
                        assert_eq!(&data[o..o + 4], &crate::pcapng::EPB.to_le_bytes());
                        let hi = u32::from_le_bytes(data[o + 12..o + 16].try_into().unwrap());
                        let lo = u32::from_le_bytes(data[o + 16..o + 20].try_into().unwrap());
                        ((hi as u64) << 32) | lo as u64
                    }
                    _ => {
                        let s = u32::from_le_bytes(data[o..o + 4].try_into().unwrap()) as u64;
                        let f = u32::from_le_bytes(data[o + 4..o + 8].try_into().unwrap()) as u64;
                        s * 1_000_000_000 + f
                    }
                };
                assert_eq!(ts, e.first_ns);
                assert_eq!(e.first_ns, 1_000_000 + n * 10);
                assert_eq!(e.last_ns, 1_000_000 + (n + e.count - 1) * 10);
                n += e.count;
            }
            let k = rebuild(&p, 8192).unwrap();
            let again = read(&path_for(&p)).unwrap();
            assert_eq!(k as usize, again.len());
            assert_eq!(again.iter().map(|e| e.count).sum::<u64>(), 1000);
            assert_eq!(again[0].offset, idx[0].offset);
        }
        std::fs::remove_dir_all(d).unwrap();
    }
}
