//! Torn tails: finding the last complete record of a pcap file and cutting
//! the file there. A crash (or a full disk) can leave a half-written record,
//! or zero padding from an interrupted aligned write, after the last complete
//! record; both are trimmed. A damaged record followed by real data is not:
//! that is corruption, reported and left alone.
//!
//! A crash right after a file was created leaves it without a complete
//! header: empty, zeros (space allocated ahead that no write reached), a
//! header cut short, or a compressed stream without one whole unit. Such a
//! file holds no frame, and no reader (libpcap's included) can open it, so
//! [`repair`] removes it, with its `.idx`, and says so
//! ([`Repaired::removed`]): the name would only promise a capture that is
//! not there, and a header made up from the name could not know the run's
//! snap length, link type or interface. Only files cut short or zeroed are
//! removed; a file whose first bytes are not a capture's is refused as
//! before. A file a running recorder holds ([`wiretape_files::is_being_written`])
//! is left alone ([`Repaired::busy`]): its end is a write in flight. The
//! lock of a recorder that was killed outlives it for a moment (until the
//! kernel has finished its writes in flight): repair waits for that.

use std::fs::{File, OpenOptions};
use std::io::BufReader;
use std::path::Path;
use wiretape_files::pcapng;
use wiretape_files::walk::{End, Walker, Why};
use wiretape_files::{ReadOptions, StorageError};

/// What [`repair`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Complete records in the file (after the cut).
    pub records: u64,
    /// Length of the file in bytes before the repair.
    pub len_before: u64,
    /// Length after it: the end of the last complete record (`len_before`
    /// when nothing was cut; 0 when removed).
    pub len_after: u64,
    /// The file had no complete header (see the module docs): it held no
    /// frame and was removed, with its `.idx`.
    pub removed: bool,
    /// A running recorder holds the file: it was left alone, unread.
    pub busy: bool,
}

impl Repaired {
    /// Bytes cut off the end (0 when the file was whole).
    pub fn trimmed(&self) -> u64 {
        self.len_before.saturating_sub(self.len_after)
    }

    /// Whether the file changed (cut; a compressed one also closed; removed).
    pub fn changed(&self) -> bool {
        self.removed || self.len_before != self.len_after
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
/// The lenient front of [`wiretape_files::walk::Walker`]: a torn tail, zero padding
/// and a last block torn inside end the records; other damage is an error.
pub fn scan_from(path: &Path, start: u64) -> Result<(u64, u64, u64), StorageError> {
    scan(path, start).map(|s| (s.end, s.records, s.bytes))
}

/// What [`scan`] found.
struct Scan {
    end: u64,
    records: u64,
    bytes: u64,
    /// The file's header is whole ([`Walker::header_complete`]).
    header: bool,
}

fn scan(path: &Path, start: u64) -> Result<Scan, StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let f = File::open(path).map_err(rd)?;
    let len = f.metadata().map_err(rd)?.len();
    let mut w = Walker::new(BufReader::with_capacity(1 << 20, f));
    w.seek_to(start);
    let (mut records, mut bytes) = (0u64, 0u64);
    // Every record the walker takes is one libpcap reads: never cut.
    while let Some(m) = w.next() {
        records += 1;
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
    Ok(Scan {
        end: s.offset,
        records,
        bytes,
        header: w.header_complete(),
    })
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
        Why::Content { what, .. } | Why::Steno(what) => {
            format!("{what}: not a torn tail, refusing to cut")
        }
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
    wiretape_files::index::read(idx)
        .map_or(true, |e| e.iter().map(|e| e.count).sum::<u64>() != records)
}

/// What the internal repairs found.
enum Outcome {
    Repaired(Repaired, u64),
    /// No complete header (nothing whole in the file): `len_before`.
    Headerless(u64),
}

/// Repairs `path` (see the module docs): trims a torn tail, closes a
/// compressed stream cut short, removes a file without a complete header
/// (and its `.idx`), leaves a file a running recorder holds alone. A
/// corrupt middle is an error, and the file is left as it was. An
/// encrypted file needs an identity ([`repair_with`]).
pub fn repair(path: &Path) -> Result<Repaired, StorageError> {
    repair_with(path, &ReadOptions::default())
}

/// [`repair`] with `opts` (an encrypted file is read and closed with its
/// identities).
pub fn repair_with(path: &Path, opts: &ReadOptions) -> Result<Repaired, StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let f = File::open(path).map_err(rd)?;
    let len = f.metadata().map_err(rd)?.len();
    // Stenographer's file: read, never cut (stenotype may still write it,
    // and its server's index points into it).
    if wiretape_files::steno::starts_like(path) {
        return Err(StorageError::NotOurs {
            path: path.to_owned(),
        });
    }
    if wiretape_files::is_being_written(&f) && !released_by_the_dead(&f) {
        return Ok(Repaired {
            len_before: len,
            len_after: len,
            busy: true,
            ..Repaired::default()
        });
    }
    drop(f);
    match repair_outcome(path, opts)? {
        Outcome::Repaired(r, _) => Ok(r),
        Outcome::Headerless(len_before) => {
            std::fs::remove_file(path).map_err(|e| StorageError::from_write(path, e))?;
            match std::fs::remove_file(wiretape_files::index::path_for(path)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StorageError::from_write(
                        &wiretape_files::index::path_for(path),
                        e,
                    ))
                }
                _ => {}
            }
            Ok(Repaired {
                len_before,
                removed: true,
                ..Repaired::default()
            })
        }
    }
}

/// A recorder killed a moment ago still holds its files' locks until the
/// kernel has torn down its io_uring (its writes in flight complete first;
/// tens of ms measured after a SIGKILL): when the lock's owner is gone,
/// waits for the lock (up to 10 s) so that no late write lands after the
/// repair. False while a live process holds it.
fn released_by_the_dead(f: &File) -> bool {
    if !wiretape_files::lock_owner_gone(f) {
        // No dead owner in /proc/locks: a live one holds the lock, or the
        // lock went between the caller's look and this one (the killed
        // recorder's ring torn down just then: 1 kill in 5 under load).
        return !wiretape_files::is_being_written(f);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if !wiretape_files::is_being_written(f) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    false
}

/// The repair of a file its own writer holds (recovery after a failed
/// write: no lock check, nothing removed), also giving the captured bytes
/// of the records kept for a compressed file (0 for a plain one). A file
/// without a complete header is an error here
/// ([`StorageError::Truncated`] of its header).
pub fn repair_counting(path: &Path) -> Result<(Repaired, u64), StorageError> {
    match repair_outcome(path, &ReadOptions::default())? {
        Outcome::Repaired(r, bytes) => Ok((r, bytes)),
        Outcome::Headerless(len) => Err(StorageError::Truncated {
            path: path.to_owned(),
            what: "file header",
            offset: 0,
            len,
            good_end: 0,
        }),
    }
}

fn repair_outcome(path: &Path, opts: &ReadOptions) -> Result<Outcome, StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    if wiretape_files::crypt::is_age(path).map_err(rd)? {
        return repair_age(path, opts);
    }
    if wiretape_files::zread::kind(path).map_err(rd)?.is_some() {
        return repair_compressed(path, opts);
    }
    repair_plain(path, opts)
}

/// The file's length, and the first hole in it (writes still in flight at
/// a crash), where it is cut now.
fn cut_at_hole(path: &Path) -> Result<(u64, Option<u64>), StorageError> {
    let len_before = std::fs::metadata(path)
        .map_err(|source| StorageError::Read {
            path: path.to_owned(),
            source,
        })?
        .len();
    let hole = File::open(path)
        .ok()
        .and_then(|f| crate::sys::first_hole(&f, len_before));
    if let Some(h) = hole {
        truncate(path, h)?;
    }
    Ok((len_before, hole))
}

/// A stream that does not read as a torn tail: refused.
fn not_torn(path: &Path, e: std::io::Error) -> StorageError {
    StorageError::Corrupt {
        path: path.to_owned(),
        offset: 0,
        why: format!("{e}: not a torn tail, refusing to cut"),
    }
}

/// An age file ([`crate::crypt`]): read with the identities of `opts` up
/// to its last whole chunk, then up to its last whole record (or, inside,
/// its compressed stream's last whole unit), and closed there: the last
/// chunk sealed again with the STREAM's last flag
/// ([`crate::crypt::close_cut`]), so `age -d` reads it whole. Without an
/// identity of one of its recipients it is refused (nothing can be cut
/// without the key: which chunks are whole cannot be told).
fn repair_age(path: &Path, opts: &ReadOptions) -> Result<Outcome, StorageError> {
    use wiretape_files::zread::{open_buffered, Kind, Source, ZEnd};
    let (len_before, hole) = cut_at_hole(path)?;
    let bad = |e: std::io::Error| not_torn(path, e);
    let src = match open_buffered(path, opts) {
        Ok(s) => s,
        Err(source) if source.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(StorageError::Read {
                path: path.to_owned(),
                source,
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // The age header cut short: nothing whole in it.
            return Ok(Outcome::Headerless(len_before));
        }
        Err(e) => return Err(bad(e)),
    };
    // Where the plain (or compressed) stream's whole part ends, and what
    // closes it.
    let (keep, extra, torn) = match src {
        Source::Z(mut z) => {
            let end = z.read_to_end_state().map_err(bad)?;
            let age_torn = z.age().and_then(|a| a.torn()).is_some();
            match (end, z.kind()) {
                (ZEnd::Whole, _) if !age_torn => (0, Vec::new(), false),
                (ZEnd::Torn(c), Kind::Lz4) if c <= wiretape_files::compress::LZ4_HEADER_LEN => {
                    (0, Vec::new(), true)
                }
                (ZEnd::Torn(0), Kind::Zstd) => (0, Vec::new(), true),
                (ZEnd::Torn(c), Kind::Lz4) => {
                    // The end mark and the checksum of what stays (every
                    // whole unit, decoded from the start just now).
                    let mut tail = vec![0u8; 8];
                    tail[4..].copy_from_slice(&z.content_checksum().to_le_bytes());
                    (c, tail, true)
                }
                (ZEnd::Torn(c), Kind::Zstd) => (c, Vec::new(), true),
                (ZEnd::Whole, _) => {
                    let a = z.age().expect("an age file");
                    (a.torn().unwrap_or(0), Vec::new(), true)
                }
            }
        }
        src => {
            let mut w = Walker::new(src);
            while w.next().is_some() {}
            let age_torn = w.get_ref().age().and_then(|a| a.torn()).is_some();
            let header = w.header_complete();
            let s = w.stop().expect("a walk that ended says how");
            match &s.end {
                End::Clean if !age_torn => (0, Vec::new(), false),
                End::Clean | End::Torn { .. } | End::Zeros(_) => {
                    (if header { s.offset } else { 0 }, Vec::new(), true)
                }
                End::Corrupt(Why::Trailer { last: true, .. })
                | End::Corrupt(Why::BlockHeader { .. }) => (s.offset, Vec::new(), true),
                End::Corrupt(why) => return Err(refuse(path, s.offset, why)),
                End::Io(_) => return Err(s.error(path, len_before).expect("an I/O error")),
            }
        }
    };
    if torn && keep == 0 && only_zeros_after_age_header(path) {
        // A crash before the first chunk went out: no frame in it.
        return Ok(Outcome::Headerless(len_before));
    }
    if torn && keep == 0 {
        return Err(StorageError::Corrupt {
            path: path.to_owned(),
            offset: 0,
            why: "not one whole age chunk opens (a header cut short or zeros are what a crash leaves): refusing to cut or remove".into(),
        });
    }
    let len_after = if torn {
        crate::crypt::close_cut(path, keep, &extra, opts.identities())?
    } else {
        hole.unwrap_or(len_before)
    };
    // Count the records (and prove they parse, now that the stream is whole).
    let src = open_buffered(path, opts).map_err(bad)?;
    let mut w = Walker::new(src);
    let (mut records, mut bytes) = (0u64, 0u64);
    while let Some(m) = w.next() {
        records += 1;
        bytes += m.caplen as u64;
    }
    let whole = w.get_ref().age().is_some_and(|a| a.torn().is_none());
    let s = w.stop().expect("a walk that ended says how");
    if !matches!(s.end, End::Clean) || !whole {
        return Err(s.error(path, len_after).unwrap_or(StorageError::Internal(
            "an age file closed by repair does not read whole",
        )));
    }
    closed(path, len_before, len_after, records, bytes, opts)
}

/// A closed age or compressed file whose `records` (`bytes` captured) all
/// read: its index rebuilt where it no longer matches, and the outcome.
fn closed(
    path: &Path,
    len_before: u64,
    len_after: u64,
    records: u64,
    bytes: u64,
    opts: &ReadOptions,
) -> Result<Outcome, StorageError> {
    reindex(path, len_after != len_before, records, opts)?;
    Ok(Outcome::Repaired(
        Repaired {
            records,
            len_before,
            len_after,
            ..Repaired::default()
        },
        bytes,
    ))
}

/// A compressed capture: cut after its last whole unit (lz4: and write the
/// end mark and content checksum there); then every record is read to
/// count them (damage inside a whole unit is an error, not cut).
fn repair_compressed(path: &Path, opts: &ReadOptions) -> Result<Outcome, StorageError> {
    use wiretape_files::zread::{Kind, ZEnd, ZReader};
    let (len_before, hole) = cut_at_hole(path)?;
    let bad = |e: std::io::Error| not_torn(path, e);
    let mut z = ZReader::open(path, opts)
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
        // the reopen below panicked): no complete header.
        if c == 0 || (kind == Kind::Lz4 && c <= wiretape_files::compress::LZ4_HEADER_LEN) {
            return Ok(Outcome::Headerless(len_before));
        }
        truncate(path, c)?;
        len_after = c;
        if kind == Kind::Lz4 {
            // The checksum of what stays: decode it all again from the start.
            let mut z = ZReader::open(path, opts).map_err(bad)?.expect("still lz4");
            let mut sink = std::io::sink();
            std::io::copy(&mut z, &mut sink).map_err(bad)?;
            let sum = z.content_checksum();
            let mut tail = [0u8; 8];
            tail[4..].copy_from_slice(&sum.to_le_bytes());
            use std::io::Write;
            let mut f = OpenOptions::new()
                .append(true)
                .open(path)
                .map_err(|source| StorageError::Read {
                    path: path.to_owned(),
                    source,
                })?;
            f.write_all(&tail)
                .and_then(|()| f.sync_data())
                .map_err(|e| StorageError::from_write(path, e))?;
            len_after += 8;
        }
    }
    // Count the records (and prove they parse).
    let z = ZReader::open(path, opts)
        .map_err(bad)?
        .expect("still compressed");
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
    closed(path, len_before, len_after, records, bytes, opts)
}

/// Whether an age file holds nothing but zeros after its header (and
/// payload nonce): what a crash before its first chunk leaves.
fn only_zeros_after_age_header(path: &Path) -> bool {
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Some(mac) = data.windows(4).position(|w| w == b"\n---") else {
        return false;
    };
    let Some(eol) = data[mac + 1..].iter().position(|&b| b == b'\n') else {
        return false;
    };
    data.get(mac + 1 + eol + 1 + 16..)
        .is_some_and(|rest| rest.iter().all(|&b| b == 0))
}

/// Rebuilds the sidecar index of a repaired file, if it has one, when the
/// file was cut (`cut`) or the index does not count its `records`.
fn reindex(path: &Path, cut: bool, records: u64, opts: &ReadOptions) -> Result<(), StorageError> {
    let idx = wiretape_files::index::path_for(path);
    if idx.exists() && (cut || index_disagrees(&idx, records)) {
        crate::index::rebuild_with(
            path,
            crate::block::DEFAULT_BLOCK_SIZE as u64,
            opts,
            &mut |_| {},
        )?;
    }
    Ok(())
}

fn repair_plain(path: &Path, opts: &ReadOptions) -> Result<Outcome, StorageError> {
    let rd = |source| StorageError::Read {
        path: path.to_owned(),
        source,
    };
    let len_before = std::fs::metadata(path).map_err(rd)?.len();
    // Writes still in flight at a crash leave holes (see first_hole): the
    // records end at the first one at the latest.
    let hole = File::open(path)
        .ok()
        .and_then(|f| crate::sys::first_hole(&f, len_before));
    let len = hole.unwrap_or(len_before);
    if let Some(h) = hole {
        truncate(path, h)?;
    }
    let s = scan(path, 0)?;
    // No whole header (cut short or zeros: what the scan takes for a torn
    // tail, from the start): nothing in it, and nothing a reader opens.
    if !s.header {
        return Ok(Outcome::Headerless(len_before));
    }
    if s.end < len {
        truncate(path, s.end)?;
    }
    // A sidecar index is rebuilt to describe exactly what the file holds.
    reindex(path, s.end < len_before, s.records, opts)?;
    Ok(Outcome::Repaired(
        Repaired {
            records: s.records,
            len_before,
            len_after: s.end,
            ..Repaired::default()
        },
        0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::FileSink;
    use crate::writer::PcapWriter;

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
        let mut w = PcapWriter::with_format(sink, 65535, wiretape_files::Format::PcapNg, "veth0")
            .with_index(&p);
        for i in 0..50u64 {
            w.write(1_000 + i, &vec![i as u8 | 1; 61 + i as usize])
                .unwrap();
        }
        w.close().unwrap();
        let full = std::fs::read(&p).unwrap();
        let info = wiretape_files::FileInfo::scan(&p).unwrap();
        assert_eq!(
            (info.packets, info.first_ns, info.nanos),
            (50, Some(1_000), true)
        );
        assert_eq!(info.format, Some(wiretape_files::Format::PcapNg));
        // torn in the last block
        std::fs::write(&p, &full[..full.len() - 7]).unwrap();
        assert!(wiretape_files::FileInfo::scan(&p).is_err());
        let r = repair(&p).unwrap();
        assert_eq!(r.records, 49);
        assert_eq!(wiretape_files::FileInfo::scan(&p).unwrap().packets, 49);
        let idx = wiretape_files::index::read(&wiretape_files::index::path_for(&p)).unwrap();
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

    /// What a crash right after a file was created leaves (empty, zeros,
    /// a header cut short, a pcapng section header without its interface)
    /// is removed with its index, and said; a short file that is not the
    /// start of a capture is refused and kept; a file a writer holds is
    /// left alone.
    #[test]
    fn a_file_without_a_complete_header_is_removed() {
        let (p, full) = file_with(3, "headerless");
        let idx = wiretape_files::index::path_for(&p);
        let mut ng = Vec::new();
        {
            let q = p.with_extension("pcapng");
            let mut w = PcapWriter::with_format(
                FileSink::create(&q).unwrap(),
                65535,
                wiretape_files::Format::PcapNg,
                "eth0",
            );
            w.write(1, &[1u8; 60]).unwrap();
            w.close().unwrap();
            ng.extend(std::fs::read(&q).unwrap());
            std::fs::remove_file(&q).unwrap();
        }
        let shb = u32::from_le_bytes(ng[4..8].try_into().unwrap()) as usize;
        let idb = u32::from_le_bytes(ng[shb + 4..shb + 8].try_into().unwrap()) as usize;
        let cases: Vec<Vec<u8>> = vec![
            Vec::new(),
            full[..2].to_vec(),
            full[..4].to_vec(),
            full[..23].to_vec(),
            vec![0; 3],
            vec![0; 64 << 10],
            ng[..shb].to_vec(),
            ng[..shb + idb - 1].to_vec(),
            ng[..2].to_vec(),
        ];
        for (k, c) in cases.iter().enumerate() {
            std::fs::write(&p, c).unwrap();
            std::fs::write(&idx, b"WTIDX").unwrap();
            let r = repair(&p).unwrap_or_else(|e| panic!("case {k}: {e}"));
            assert!(r.removed && r.changed(), "case {k}: {r:?}");
            assert_eq!((r.records, r.len_before), (0, c.len() as u64), "case {k}");
            assert!(!p.exists() && !idx.exists(), "case {k}");
        }
        // Not the start of a capture: refused, kept.
        for c in [&b"ab"[..], b"hello", b"not a capture, longer than a header"] {
            std::fs::write(&p, c).unwrap();
            assert!(
                matches!(repair(&p), Err(StorageError::BadMagic { .. })),
                "{c:?}"
            );
            assert_eq!(std::fs::read(&p).unwrap(), c);
        }
        // Its writer's recovery never removes: the header is torn.
        std::fs::write(&p, &full[..10]).unwrap();
        assert!(matches!(
            repair_counting(&p),
            Err(StorageError::Truncated { good_end: 0, .. })
        ));
        assert!(p.exists());
        // Held by a writer: left alone, whatever it holds.
        std::fs::remove_file(&p).unwrap();
        let held = crate::sys::create_new(&p, 0).unwrap();
        let r = repair(&p).unwrap();
        assert!(r.busy && !r.changed(), "{r:?}");
        assert!(p.exists());
        drop(held);
        assert!(repair(&p).unwrap().removed);
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
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
