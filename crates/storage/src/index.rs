//! The sidecar index (`<capture>.idx`): one entry per block of records the
//! writer handed to the disk, so that a reader finds a time range without
//! scanning the file (`wiretape info` reads it; [`crate::extract`] picks blocks
//! by it).
//!
//! Layout, little-endian: a 16-byte header (`WTIDX\x01\0\0`, entry size u32
//! = 32, reserved u32), then entries of 32 bytes: offset of the first record
//! that starts in the block (u64), first and last timestamp (UTC ns, u64
//! each), frame count (u64). Entries are appended as blocks go out; the
//! index is not made durable before the data, so after a crash it may
//! describe more or fewer records than the file holds: [`rebuild`] (run by
//! `repair` and after a write error) makes it exact again from the file.

use crate::walk::Walker;
use crate::StorageError;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// The first 8 bytes of an index file: `WTIDX`, format version 1, two zeros.
pub const MAGIC: &[u8; 8] = b"WTIDX\x01\0\0";
/// Bytes of the file header (magic, entry size, reserved) before the entries.
pub const HEADER_LEN: usize = 16;
/// Bytes of one entry: four little-endian u64s, as [`Entry`] lists them.
pub const ENTRY_LEN: usize = 32;

/// One block of records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// File offset of the first record that starts in the block.
    pub offset: u64,
    /// Stamp of the block's first record, UTC ns (whole µs in a µs file).
    pub first_ns: u64,
    /// Stamp of the block's last record, UTC ns, cut as `first_ns`.
    pub last_ns: u64,
    /// Records that start in the block.
    pub count: u64,
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..16].copy_from_slice(&self.first_ns.to_le_bytes());
        b[16..24].copy_from_slice(&self.last_ns.to_le_bytes());
        b[24..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }
    fn decode(b: &[u8]) -> Self {
        let r = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        Entry {
            offset: r(0),
            first_ns: r(8),
            last_ns: r(16),
            count: r(24),
        }
    }
}

pub use crate::naming::index_path as path_for;

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&(ENTRY_LEN as u32).to_le_bytes());
    h
}

/// Collects the records of the current block and appends an entry per block.
pub struct IndexWriter {
    file: Option<File>,
    path: PathBuf,
    cur: Entry,
    unit: u64,
    /// Entries written to the index so far (the block being collected is not
    /// one yet; none more after a write error).
    pub entries: u64,
    /// The first write error (the index is then abandoned, the capture not).
    pub error: Option<String>,
}

impl IndexWriter {
    /// Creates the index of `capture` (never overwrites). Stamps are cut to
    /// whole `unit` ns, as the file holds them (1000 for µs pcap).
    pub fn create(capture: &Path, unit: u64) -> Result<Self, StorageError> {
        let path = path_for(capture);
        let mut file = crate::create_new(&path, 0)?;
        file.write_all(&header())
            .map_err(|e| StorageError::from_write(&path, e))?;
        Ok(IndexWriter {
            file: Some(file),
            path,
            cur: Entry::default(),
            unit: unit.max(1),
            entries: 0,
            error: None,
        })
    }

    /// A record at stream offset `offset`, stamped `ts_ns`, joined the block.
    #[inline(always)]
    pub fn record(&mut self, offset: u64, ts_ns: u64) {
        if self.cur.count == 0 {
            self.cur.offset = offset;
            self.cur.first_ns = ts_ns;
        }
        self.cur.last_ns = ts_ns;
        self.cur.count += 1;
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
        if let Some(f) = &mut self.file {
            if let Err(err) = f.write_all(&e.encode()) {
                self.error = Some(format!("index {}: {err}", self.path.display()));
                self.file = None;
            } else {
                self.entries += 1;
            }
        }
    }

    /// Closes the index (durable along with its capture file).
    pub fn finish(mut self) -> Result<(), StorageError> {
        self.block_done();
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
        }
        Ok(())
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
    if b.len() < HEADER_LEN || &b[..8] != MAGIC {
        return Err(StorageError::Corrupt {
            path: index.to_owned(),
            offset: 0,
            why: "not a wiretape index (bad magic); `wiretape repair` rebuilds it".into(),
        });
    }
    Ok(b[HEADER_LEN..]
        .chunks_exact(ENTRY_LEN)
        .map(Entry::decode)
        .collect())
}

/// Rewrites the index of `capture` from the file itself, one entry per
/// `block` bytes of records. Returns the number of entries.
pub fn rebuild(capture: &Path, block: u64) -> Result<u64, StorageError> {
    let path = path_for(capture);
    let tmp = {
        let mut p = path.as_os_str().to_owned();
        p.push(".tmp");
        PathBuf::from(p)
    };
    let mut out = Vec::from(header());
    let f = File::open(capture).map_err(|source| StorageError::Read {
        path: capture.to_owned(),
        source,
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut walk = Walker::new(BufReader::with_capacity(1 << 20, f));
    let mut cur = Entry::default();
    let mut entries = 0;
    let block = block.max(1);
    while let Some(m) = walk.next() {
        if cur.count > 0 && m.offset / block != cur.offset / block {
            out.extend_from_slice(&cur.encode());
            entries += 1;
            cur = Entry::default();
        }
        if cur.count == 0 {
            cur.offset = m.offset;
            cur.first_ns = m.ts_ns;
        }
        cur.last_ns = m.ts_ns;
        cur.count += 1;
    }
    if let Some(e) = walk.stop().and_then(|s| s.error(capture, len)) {
        return Err(e);
    }
    if cur.count > 0 {
        out.extend_from_slice(&cur.encode());
        entries += 1;
    }
    std::fs::write(&tmp, &out).map_err(|e| StorageError::from_write(&tmp, e))?;
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
