//! Torn tails: finding the last complete record of a pcap file and cutting
//! the file there. A crash (or a full disk) can leave a half-written record,
//! or zero padding from an interrupted aligned write, after the last complete
//! record; both are trimmed. A damaged record followed by real data is not:
//! that is corruption, reported and left alone.

use crate::pcap::{FileHeader, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN};
use crate::pcapng;
use crate::StorageError;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// What [`repair`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repaired {
    pub records: u64,
    pub len_before: u64,
    pub len_after: u64,
}

impl Repaired {
    pub fn trimmed(&self) -> u64 {
        self.len_before - self.len_after
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
pub fn scan_from(path: &Path, start: u64) -> Result<(u64, u64, u64), StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let mut f = File::open(path).map_err(rd)?;
    let len = f.metadata().map_err(rd)?.len();
    let mut h = [0u8; FILE_HEADER_LEN];
    if len < FILE_HEADER_LEN as u64 {
        return Ok((0, 0, 0));
    }
    f.read_exact(&mut h).map_err(rd)?;
    if u32::from_le_bytes(h[0..4].try_into().unwrap()) == pcapng::SHB {
        return scan_ng(path, f, len, start);
    }
    let hdr = FileHeader::decode(&h).map_err(|magic| StorageError::BadMagic {
        path: path.to_owned(),
        magic,
    })?;
    let start = start.max(FILE_HEADER_LEN as u64);
    f.seek(SeekFrom::Start(start)).map_err(rd)?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let (mut off, mut n, mut bytes) = (start, 0u64, 0u64);
    let frac_max = if hdr.nanos { 1_000_000_000 } else { 1_000_000 };
    let mut data = vec![0u8; MAX_SNAPLEN as usize];
    loop {
        if off + RECORD_HEADER_LEN as u64 > len {
            break; // torn record header (or clean end)
        }
        let mut rh = [0u8; RECORD_HEADER_LEN];
        r.read_exact(&mut rh).map_err(rd)?;
        let w = |o: usize| {
            let v = u32::from_le_bytes(rh[o..o + 4].try_into().unwrap());
            if hdr.big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (frac, caplen, orig) = (w(4), w(8), w(12));
        if caplen > MAX_SNAPLEN || orig == 0 || caplen > orig || frac >= frac_max {
            // Zero padding from an interrupted aligned write ends the data;
            // anything else after a bad header is corruption.
            if rh.iter().all(|&b| b == 0) && rest_is_zero(&mut r)? {
                break;
            }
            return Err(StorageError::Corrupt {
                path: path.to_owned(),
                offset: off,
                why: format!("caplen {caplen}, orig_len {orig} and more data after it: not a torn tail, refusing to cut"),
            });
        }
        let end = off + (RECORD_HEADER_LEN as u64) + caplen as u64;
        if end > len {
            break; // torn record data
        }
        r.read_exact(&mut data[..caplen as usize]).map_err(rd)?;
        off = end;
        n += 1;
        bytes += caplen as u64;
    }
    Ok((off, n, bytes))
}

/// [`scan_from`] for pcapng: walks blocks from `start` (0 or a block
/// boundary), checking each block's leading and trailing lengths.
fn scan_ng(path: &Path, f: File, len: u64, start: u64) -> Result<(u64, u64, u64), StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let mut r = BufReader::with_capacity(1 << 20, f);
    r.seek(SeekFrom::Start(start)).map_err(rd)?;
    let (mut off, mut n, mut bytes) = (start, 0u64, 0u64);
    let mut big_endian = false;
    if start > 0 {
        // The byte order is the section's: read it from the SHB.
        let mut f = File::open(path).map_err(rd)?;
        let mut b = [0u8; 12];
        f.read_exact(&mut b).map_err(rd)?;
        big_endian = u32::from_le_bytes(b[8..12].try_into().unwrap()) != pcapng::BYTE_ORDER_MAGIC;
    }
    let mut body = Vec::new();
    loop {
        if off + 12 > len {
            break; // torn block header (or clean end)
        }
        let mut h = [0u8; 12];
        r.read_exact(&mut h).map_err(rd)?;
        let kind_le = u32::from_le_bytes(h[0..4].try_into().unwrap());
        if kind_le == pcapng::SHB {
            let bom = u32::from_le_bytes(h[8..12].try_into().unwrap());
            big_endian = bom != pcapng::BYTE_ORDER_MAGIC;
        }
        let w = |o: usize| {
            let v = u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
            if big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (kind, total) = (w(0), w(4) as u64);
        if kind == 0 || total < 12 || total % 4 != 0 || total > 1 << 24 {
            if h.iter().all(|&b| b == 0) && rest_is_zero(&mut r)? {
                break;
            }
            return Err(StorageError::Corrupt {
                path: path.to_owned(),
                offset: off,
                why: format!("block type {kind:#x}, length {total} and more data after it: not a torn tail, refusing to cut"),
            });
        }
        if off + total > len {
            break; // torn block
        }
        body.resize(total as usize - 12, 0);
        r.read_exact(&mut body).map_err(rd)?;
        let t = body.len() - 4;
        let trailer = u32::from_le_bytes(body[t..].try_into().unwrap());
        let trailer = if big_endian {
            trailer.swap_bytes()
        } else {
            trailer
        };
        if trailer as u64 != total {
            if off + total == len {
                break; // the last block, torn inside
            }
            return Err(StorageError::Corrupt {
                path: path.to_owned(),
                offset: off,
                why: format!("block length {total} but trailing length {trailer}, data after it: refusing to cut"),
            });
        }
        if kind == pcapng::EPB {
            let cap = u32::from_le_bytes(body[8..12].try_into().unwrap());
            bytes += if big_endian { cap.swap_bytes() } else { cap } as u64;
            n += 1;
        } else if kind == pcapng::SPB {
            bytes += total - 16;
            n += 1;
        }
        off += total;
    }
    Ok((off, n, bytes))
}

fn rest_is_zero(r: &mut impl Read) -> Result<bool, StorageError> {
    let mut buf = [0u8; 65536];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(k) => {
                if buf[..k].iter().any(|&b| b != 0) {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(false),
        }
    }
}

fn index_disagrees(idx: &Path, records: u64) -> bool {
    crate::index::read(idx).map_or(true, |e| e.iter().map(|e| e.count).sum::<u64>() != records)
}

/// Trims a torn tail off `path`. A file too short for a header is left alone
/// (and reported as truncated); a corrupt middle is an error.
pub fn repair(path: &Path) -> Result<Repaired, StorageError> {
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
    let (end, records, _) = scan_from(path, 0)?;
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
