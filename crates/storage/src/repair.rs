//! Torn tails: finding the last complete record of a pcap file and cutting
//! the file there. A crash (or a full disk) can leave a half-written record,
//! or zero padding from an interrupted aligned write, after the last complete
//! record; both are trimmed. A damaged record followed by real data is not:
//! that is corruption, reported and left alone.

use crate::pcap::FILE_HEADER_LEN;
use crate::pcapng;
use crate::walk::{End, Walker, Why};
use crate::StorageError;
use std::fs::{File, OpenOptions};
use std::io::BufReader;
use std::path::Path;

/// What [`repair`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repaired {
    /// Complete records in the file (after the cut).
    pub records: u64,
    /// Length of the file in bytes before the repair.
    pub len_before: u64,
    /// Length after it: the end of the last complete record (`len_before`
    /// when nothing was cut).
    pub len_after: u64,
}

impl Repaired {
    /// Bytes cut off the end (0 when the file was whole).
    pub fn trimmed(&self) -> u64 {
        self.len_before.saturating_sub(self.len_after)
    }

    /// Whether the file changed (cut; a compressed one also closed).
    pub fn changed(&self) -> bool {
        self.len_before != self.len_after
    }
}

/// Cuts `path` to `len` bytes.
pub fn truncate(path: &Path, len: u64) -> Result<(), StorageError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|source| StorageError::Read {
            path: path.to_owned(),
            source,
        })?;
    f.set_len(len)
        .map_err(|e| StorageError::from_write(path, e))
}

/// Scans records from `start` (an offset where a record begins) to the end.
/// Returns (end of the last complete record, records, captured bytes).
/// The lenient front of [`crate::walk::Walker`]: a torn tail, zero padding
/// and a last block torn inside end the records; other damage is an error.
pub fn scan_from(path: &Path, start: u64) -> Result<(u64, u64, u64), StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let f = File::open(path).map_err(rd)?;
    let len = f.metadata().map_err(rd)?.len();
    if len < FILE_HEADER_LEN as u64 {
        return Ok((0, 0, 0));
    }
    let mut w = Walker::new(BufReader::with_capacity(1 << 20, f));
    w.seek_to(start);
    let (mut n, mut bytes) = (0u64, 0u64);
    // Every record the walker takes is one libpcap reads: never cut.
    while let Some(m) = w.next() {
        n += 1;
        bytes += m.caplen as u64;
    }
    let s = w.stop().expect("a walk that ended says how");
    match &s.end {
        End::Clean | End::Torn { .. } | End::Zeros(_) => {}
        // The last block, torn inside.
        End::Corrupt(Why::Trailer { last: true, .. }) => {}
        // A block header cut by the end of the file.
        End::Corrupt(Why::BlockHeader { .. }) if s.offset + 12 > len => {}
        End::Corrupt(Why::BadMagic(magic)) => {
            return Err(StorageError::BadMagic {
                path: path.to_owned(),
                magic: *magic,
            })
        }
        End::Corrupt(why) => return Err(refuse(path, s.offset, why)),
        End::Io(_) => return Err(s.error(path, len).expect("an I/O error")),
    }
    Ok((s.offset, n, bytes))
}

/// Damage that is not a torn tail: repair's words for it.
fn refuse(path: &Path, offset: u64, why: &Why) -> StorageError {
    let why = match why {
        Why::RecordHeader {
            caplen, orig_len, ..
        } => format!(
            "caplen {caplen}, orig_len {orig_len} and more data after it: not a torn tail, refusing to cut"
        ),
        Why::BlockHeader { kind, total } => format!(
            "block type {kind:#x}, length {total} and more data after it: not a torn tail, refusing to cut"
        ),
        Why::ShbLength { total } => format!(
            "block type {:#x}, length {total} and more data after it: not a torn tail, refusing to cut",
            pcapng::SHB
        ),
        Why::Trailer { total, trailer, .. } => format!(
            "block length {total} but trailing length {trailer}, data after it: refusing to cut"
        ),
        Why::Content { what, .. } => format!("{what}: not a torn tail, refusing to cut"),
        Why::Version { major, minor } => {
            format!("pcap version {major}.{minor}: not a file libpcap reads, refusing to cut")
        }
        Why::BadMagic(m) => format!("magic {m:#010x}: not a torn tail, refusing to cut"),
    };
    StorageError::Corrupt {
        path: path.to_owned(),
        offset,
        why,
    }
}

fn index_disagrees(idx: &Path, records: u64) -> bool {
    crate::index::read(idx).map_or(true, |e| e.iter().map(|e| e.count).sum::<u64>() != records)
}

/// Trims a torn tail off `path`. A file too short for a header is left alone
/// (and reported as truncated); a corrupt middle is an error.
pub fn repair(path: &Path) -> Result<Repaired, StorageError> {
    repair_counting(path).map(|(r, _)| r)
}

/// [`repair`], also giving the captured bytes of the records kept for a
/// compressed file (0 for a plain one).
pub fn repair_counting(path: &Path) -> Result<(Repaired, u64), StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    if crate::zread::kind(path).map_err(rd)?.is_some() {
        return repair_compressed(path);
    }
    repair_plain(path).map(|r| (r, 0))
}

/// A compressed capture: cut after its last whole unit (lz4: and write the
/// end mark and content checksum there); then every record is read to
/// count them (damage inside a whole unit is an error, not cut).
fn repair_compressed(path: &Path) -> Result<(Repaired, u64), StorageError> {
    use crate::zread::{Kind, ZEnd, ZReader};
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let len_before = std::fs::metadata(path).map_err(rd)?.len();
    let hole = File::open(path)
        .ok()
        .and_then(|f| crate::first_hole(&f, len_before));
    if let Some(h) = hole {
        truncate(path, h)?;
    }
    let bad = |e: std::io::Error| StorageError::Corrupt {
        path: path.to_owned(),
        offset: 0,
        why: format!("{e}: not a torn tail, refusing to cut"),
    };
    let mut z = ZReader::open(path)
        .map_err(bad)?
        .ok_or(StorageError::Internal(
            "a compressed file no longer starts as one",
        ))?;
    let kind = z.kind();
    let end = z.read_to_end_state().map_err(bad)?;
    let mut len_after = hole.unwrap_or(len_before);
    if let ZEnd::Torn(c) = end {
        // Its first unit cut short: nothing whole to keep, and a cut there
        // would leave no capture at all (zstd: no bytes; found by fuzzing:
        // the reopen below panicked). Refused, as a plain file torn in its
        // header is.
        if c == 0 || (kind == Kind::Lz4 && c <= crate::compress::LZ4_HEADER_LEN) {
            return Err(StorageError::Truncated {
                path: path.to_owned(),
                what: "compressed stream (its first unit cut short: nothing whole to keep)",
                offset: c,
                len: len_before,
                good_end: 0,
            });
        }
        truncate(path, c)?;
        len_after = c;
        if kind == Kind::Lz4 {
            // The checksum of what stays: decode it all again from the start.
            let mut z = ZReader::open(path).map_err(bad)?.expect("still lz4");
            let mut sink = std::io::sink();
            std::io::copy(&mut z, &mut sink).map_err(bad)?;
            let sum = z.content_checksum();
            let mut tail = [0u8; 8];
            tail[4..].copy_from_slice(&sum.to_le_bytes());
            use std::io::Write;
            let mut f = OpenOptions::new().append(true).open(path).map_err(rd)?;
            f.write_all(&tail)
                .and_then(|()| f.sync_data())
                .map_err(|e| StorageError::from_write(path, e))?;
            len_after += 8;
        }
    }
    // Count the records (and prove they parse).
    let z = ZReader::open(path).map_err(bad)?.expect("still compressed");
    let mut w = Walker::new(z);
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(m) = w.next() {
        records += 1;
        bytes += m.caplen as u64;
    }
    let s = w.stop().expect("a walk that ended says how");
    if !matches!(s.end, End::Clean) {
        let e = s.error(path, len_after).unwrap_or(StorageError::Internal(
            "a walk that ended badly without an error",
        ));
        return Err(e);
    }
    let idx = crate::index::path_for(path);
    if idx.exists() && (len_after != len_before || index_disagrees(&idx, records)) {
        crate::index::rebuild(path, crate::block::DEFAULT_BLOCK_SIZE as u64)?;
    }
    Ok((
        Repaired {
            records,
            len_before,
            len_after,
        },
        bytes,
    ))
}

fn repair_plain(path: &Path) -> Result<Repaired, StorageError> {
    let len_before = std::fs::metadata(path)
        .map_err(|source| StorageError::Read {
            path: path.to_owned(),
            source,
        })?
        .len();
    if len_before < FILE_HEADER_LEN as u64 {
        return Err(StorageError::Truncated {
            path: path.to_owned(),
            what: "file header",
            offset: 0,
            len: len_before,
            good_end: 0,
        });
    }
    // Writes still in flight at a crash leave holes (see first_hole): the
    // records end at the first one at the latest.
    let hole = File::open(path)
        .ok()
        .and_then(|f| crate::first_hole(&f, len_before));
    if let Some(h) = hole {
        truncate(path, h)?;
    }
    let (end, records, _) = scan_from(path, 0)?;
    // No whole header (a pcapng section header cut short): nothing to keep,
    // and a cut would leave no capture at all; refused as a pcap file
    // shorter than its header is (found by fuzzing: it was cut to 0 bytes).
    if end == 0 {
        return Err(StorageError::Truncated {
            path: path.to_owned(),
            what: "file header",
            offset: 0,
            len: len_before,
            good_end: 0,
        });
    }
    if end < len_before {
        truncate(path, end)?;
    }
    // A sidecar index is rebuilt to describe exactly what the file holds.
    let idx = crate::index::path_for(path);
    if idx.exists() && (end < len_before || index_disagrees(&idx, records)) {
        crate::index::rebuild(path, crate::block::DEFAULT_BLOCK_SIZE as u64)?;
    }
    Ok(Repaired {
        records,
        len_before,
        len_after: end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileSink, PcapWriter};

    fn file_with(n: u64, name: &str) -> (std::path::PathBuf, Vec<u8>) {
        let d = std::env::temp_dir().join(format!("wt-repair-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("a.pcap");
        let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
        for i in 0..n {
            w.write(1_000 + i, &vec![i as u8 | 1; 60 + i as usize])
                .unwrap();
        }
        w.close().unwrap();
        let data = std::fs::read(&p).unwrap();
        (p, data)
    }

    #[test]
    fn trims_torn_record_and_zero_padding() {
        let (p, full) = file_with(20, "torn");
        // torn data
        std::fs::write(&p, &full[..full.len() - 5]).unwrap();
        let r = repair(&p).unwrap();
        assert_eq!(r.records, 19);
        assert_eq!(std::fs::read(&p).unwrap(), full[..full.len() - (16 + 79)]);
        // zero padding after the last record (an interrupted aligned write)
        let mut padded = full.clone();
        padded.resize(full.len().div_ceil(4096) * 4096 + 4096, 0);
        std::fs::write(&p, &padded).unwrap();
        let r = repair(&p).unwrap();
        assert_eq!((r.records, r.len_after), (20, full.len() as u64));
        assert_eq!(std::fs::read(&p).unwrap(), full);
        // an intact file is untouched
        let r = repair(&p).unwrap();
        assert_eq!(r.trimmed(), 0);
    }

    /// A crash while writes run in parallel (Growth::Extend) can leave a
    /// write that never completed (a hole) before ones that did: the file
    /// is cut at the hole, then to the last complete record before it.
    #[test]
    fn cuts_at_a_hole_left_by_a_write_in_flight() {
        use std::io::{Seek, SeekFrom, Write};
        let (p, full) = file_with(400, "hole");
        assert!(full.len() > 5 * 4096, "{}", full.len());
        let (a, b) = (2 * 4096, 3 * 4096);
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(&full[..a]).unwrap();
        f.seek(SeekFrom::Start(b as u64)).unwrap();
        f.write_all(&full[b..]).unwrap();
        drop(f);
        let r = repair(&p).unwrap();
        // The records wholly before the hole, and nothing after it.
        let (mut end, mut n) = (24usize, 0u64);
        while end + 16 <= a {
            let caplen = u32::from_le_bytes(full[end + 8..end + 12].try_into().unwrap()) as usize;
            if end + 16 + caplen > a {
                break;
            }
            end += 16 + caplen;
            n += 1;
        }
        assert_eq!((r.records, r.len_after), (n, end as u64));
        assert_eq!(std::fs::read(&p).unwrap(), full[..end]);
    }

    #[test]
    fn refuses_to_cut_corruption_followed_by_data() {
        let (p, full) = file_with(20, "corrupt");
        let mut bad = full.clone();
        bad[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        assert!(matches!(
            repair(&p),
            Err(StorageError::Corrupt { offset: 24, .. })
        ));
        assert_eq!(std::fs::read(&p).unwrap(), bad, "left alone");
    }

    #[test]
    fn pcapng_torn_tail_trimmed_and_index_rebuilt() {
        let d = std::env::temp_dir().join(format!("wt-repair-ng-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("a.pcapng");
        let sink = FileSink::with_block_size(&p, 4096).unwrap();
        let mut w =
            PcapWriter::with_format(sink, 65535, crate::Format::PcapNg, "veth0").with_index(&p);
        for i in 0..50u64 {
            w.write(1_000 + i, &vec![i as u8 | 1; 61 + i as usize])
                .unwrap();
        }
        w.close().unwrap();
        let full = std::fs::read(&p).unwrap();
        let info = crate::FileInfo::scan(&p).unwrap();
        assert_eq!(
            (info.packets, info.first_ns, info.nanos),
            (50, Some(1_000), true)
        );
        assert_eq!(info.format, Some(crate::Format::PcapNg));
        // torn in the last block
        std::fs::write(&p, &full[..full.len() - 7]).unwrap();
        assert!(crate::FileInfo::scan(&p).is_err());
        let r = repair(&p).unwrap();
        assert_eq!(r.records, 49);
        assert_eq!(crate::FileInfo::scan(&p).unwrap().packets, 49);
        let idx = crate::index::read(&crate::index::path_for(&p)).unwrap();
        assert_eq!(idx.iter().map(|e| e.count).sum::<u64>(), 49);
        // zero padding
        let mut padded = full.clone();
        padded.resize(full.len() + 4096, 0);
        std::fs::write(&p, &padded).unwrap();
        assert_eq!(repair(&p).unwrap().len_after, full.len() as u64);
        // a bad block followed by data
        let mut bad = full.clone();
        let shb = u32::from_le_bytes(full[4..8].try_into().unwrap()) as usize;
        let idb = u32::from_le_bytes(full[shb + 4..shb + 8].try_into().unwrap()) as usize;
        bad[shb + idb + 4..shb + idb + 8].copy_from_slice(&3u32.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        assert!(matches!(repair(&p), Err(StorageError::Corrupt { .. })));
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn scans_from_a_boundary() {
        let (p, full) = file_with(10, "scan");
        let second = 24 + 16 + 60;
        let (end, n, bytes) = scan_from(&p, second as u64).unwrap();
        assert_eq!((end, n), (full.len() as u64, 9));
        assert_eq!(bytes, (61..70).sum::<u64>());
    }
}
