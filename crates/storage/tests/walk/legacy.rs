//! The four record parsers the walker replaced, verbatim from before it
//! (reader.rs's `next_into`/`next_ng`, repair.rs's `scan_from`/`scan_ng`,
//! index.rs's `rebuild` over the old reader): the oracle of the tests that
//! the walker gives what they gave. Test-only.
#![allow(dead_code, clippy::all)]

use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use wiretape_files::index::Entry;
use wiretape_files::pcap::{FileHeader, Format, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN};
use wiretape_files::pcapng;
use wiretape_files::StorageError;

/// A streaming reader of pcap (ns or µs, either byte order) and pcapng files.
pub(super) struct OldReader<R: Read> {
    inner: R,
    path: PathBuf,
    header: FileHeader,
    offset: u64,
    len: u64,
    /// pcapng: the section's byte order and interfaces; None for pcap.
    ng: Option<NgState>,
    /// Bytes of the last record (its pcap record or pcapng block).
    last_len: u64,
}

struct NgState {
    big_endian: bool,
    ifaces: Vec<pcapng::Interface>,
    body: Vec<u8>,
    /// Ok(false) of the header reading: the file ended after the header.
    pending: Option<(u32, Vec<u8>)>,
}

impl OldReader<BufReader<File>> {
    pub(super) fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        let path = path.as_ref();
        let rd = |source| StorageError::Read {
            path: path.to_owned(),
            source,
        };
        let f = File::open(path).map_err(rd)?;
        let len = f.metadata().map_err(rd)?.len();
        Self::new(BufReader::with_capacity(1 << 20, f), path, len)
    }
}

impl<R: Read> OldReader<R> {
    /// `len` is the total length of the input, for messages.
    pub(super) fn new(mut inner: R, path: &Path, len: u64) -> Result<Self, StorageError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        let trunc = |what| StorageError::Truncated {
            path: path.to_owned(),
            what,
            offset: 0,
            len,
            good_end: 0,
        };
        let got = read_full(&mut inner, &mut h[..4]).map_err(|source| StorageError::Read {
            path: path.to_owned(),
            source,
        })?;
        if got == 4 && u32::from_le_bytes(h[..4].try_into().unwrap()) == pcapng::SHB {
            let mut r = OldReader {
                inner,
                path: path.to_owned(),
                header: FileHeader::new(0, true),
                offset: 0,
                len,
                last_len: 0,
                ng: Some(NgState {
                    big_endian: false,
                    ifaces: Vec::new(),
                    body: Vec::new(),
                    pending: None,
                }),
            };
            r.read_shb_rest(None)?;
            // Up to the first interface: it gives the header's fields.
            while let Some((kind, body)) = r.next_block()? {
                let be = r.ng.as_ref().expect("pcapng").big_endian;
                if kind == pcapng::IDB {
                    let itf = pcapng::parse_idb(&body, be)
                        .ok_or_else(|| r.corrupt("interface block too short"))?;
                    let ng = r.ng.as_mut().expect("pcapng");
                    ng.ifaces.push(itf);
                    r.header = FileHeader {
                        nanos: itf.units == 1_000_000_000,
                        snaplen: itf.snaplen,
                        linktype: itf.linktype as u32,
                        big_endian: ng.big_endian,
                    };
                    break;
                }
                if kind == pcapng::EPB || kind == pcapng::SPB {
                    r.ng.as_mut().expect("pcapng").pending = Some((kind, body));
                    break;
                }
            }
            return Ok(r);
        }
        if got < 4 {
            return Err(trunc("file header"));
        }
        match read_full(&mut inner, &mut h[4..]) {
            Ok(n) if n == FILE_HEADER_LEN - 4 => {}
            Ok(_) => return Err(trunc("file header")),
            Err(source) => {
                return Err(StorageError::Read {
                    path: path.to_owned(),
                    source,
                })
            }
        }
        let header = FileHeader::decode(&h).map_err(|magic| StorageError::BadMagic {
            path: path.to_owned(),
            magic,
        })?;
        Ok(OldReader {
            inner,
            path: path.to_owned(),
            header,
            offset: FILE_HEADER_LEN as u64,
            len,
            last_len: 0,
            ng: None,
        })
    }

    pub(super) fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The file's format (a pcapng file reports [`Format::PcapNg`]).
    pub(super) fn format(&self) -> Format {
        match (&self.ng, self.header.nanos) {
            (Some(_), _) => Format::PcapNg,
            (None, true) => Format::PcapNs,
            (None, false) => Format::PcapUs,
        }
    }

    /// Bytes of the last record read (it starts at `offset() - last_len()`).
    pub(super) fn last_len(&self) -> u64 {
        self.last_len
    }

    /// Offset just past the last record read: the end of the valid part.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }

    fn corrupt(&self, why: &str) -> StorageError {
        StorageError::Corrupt {
            path: self.path.clone(),
            offset: self.offset,
            why: why.to_string(),
        }
    }

    /// The SHB after its type: length (when not read yet), byte-order
    /// magic, the rest.
    fn read_shb_rest(&mut self, len: Option<[u8; 4]>) -> Result<(), StorageError> {
        let mut b = [0u8; 8];
        let from = match len {
            Some(l) => {
                b[..4].copy_from_slice(&l);
                4
            }
            None => 0,
        };
        let n = read_full(&mut self.inner, &mut b[from..]).map_err(|e| self.read_err(e))?;
        if n < 8 - from {
            return Err(self.truncated("section header block"));
        }
        let bom = u32::from_le_bytes(b[4..8].try_into().unwrap());
        let big_endian = match bom {
            pcapng::BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == pcapng::BYTE_ORDER_MAGIC => true,
            m => {
                return Err(StorageError::BadMagic {
                    path: self.path.clone(),
                    magic: m,
                })
            }
        };
        let mut total = u32::from_le_bytes(b[0..4].try_into().unwrap());
        if big_endian {
            total = total.swap_bytes();
        }
        if total < 28 || total % 4 != 0 || total > 1 << 24 {
            return Err(self.corrupt("section header block length"));
        }
        let mut rest = vec![0u8; total as usize - 12];
        let n = read_full(&mut self.inner, &mut rest).map_err(|e| self.read_err(e))?;
        if n < rest.len() {
            return Err(self.truncated("section header block"));
        }
        let ng = self.ng.as_mut().expect("pcapng");
        ng.big_endian = big_endian;
        ng.ifaces.clear();
        self.offset += total as u64;
        Ok(())
    }

    /// The next pcapng block: (type, body without the trailing length).
    /// A new section (SHB) is handled here. None at a clean end.
    fn next_block(&mut self) -> Result<Option<(u32, Vec<u8>)>, StorageError> {
        loop {
            let mut h = [0u8; 8];
            let n = read_full(&mut self.inner, &mut h).map_err(|e| self.read_err(e))?;
            if n == 0 {
                return Ok(None);
            }
            if n < 4 {
                return Err(self.truncated("block header"));
            }
            let kind_le = u32::from_le_bytes(h[0..4].try_into().unwrap());
            if kind_le == pcapng::SHB {
                // A new section: its byte order may differ.
                if n < 8 {
                    return Err(self.truncated("section header block"));
                }
                self.read_shb_rest(Some(h[4..8].try_into().unwrap()))?;
                continue;
            }
            if n < 8 {
                return Err(self.truncated("block header"));
            }
            let be = self.ng.as_ref().expect("pcapng").big_endian;
            let rd = |o: usize| {
                let v = u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
                if be {
                    v.swap_bytes()
                } else {
                    v
                }
            };
            let (kind, total) = (rd(0), rd(4));
            if total < 12 || total % 4 != 0 || total > 1 << 24 || kind == 0 {
                return Err(self.corrupt(&format!(
                    "block type {kind:#x}, length {total}: not a block header"
                )));
            }
            let mut body = std::mem::take(&mut self.ng.as_mut().expect("pcapng").body);
            body.resize(total as usize - 8, 0);
            let got = read_full(&mut self.inner, &mut body).map_err(|e| self.read_err(e))?;
            if got < body.len() {
                return Err(self.truncated("block"));
            }
            let t = body.len() - 4;
            let trailer = u32::from_le_bytes(body[t..].try_into().unwrap());
            let trailer = if be { trailer.swap_bytes() } else { trailer };
            if trailer != total {
                return Err(self.corrupt(&format!(
                    "block length {total} but trailing length {trailer}"
                )));
            }
            body.truncate(t);
            self.offset += total as u64;
            self.last_len = total as u64;
            return Ok(Some((kind, body)));
        }
    }

    /// Reads the next record into `rec`; Ok(false) at a clean end of file.
    pub(super) fn next_into(
        &mut self,
        rec: &mut wiretape_files::reader::Record,
    ) -> Result<bool, StorageError> {
        if self.ng.is_some() {
            return self.next_ng(rec);
        }
        let mut h = [0u8; RECORD_HEADER_LEN];
        let n = read_full(&mut self.inner, &mut h).map_err(|e| self.read_err(e))?;
        if n == 0 {
            return Ok(false);
        }
        if n < RECORD_HEADER_LEN {
            return Err(self.truncated("record header"));
        }
        let f = |o: usize| {
            let v = u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
            if self.header.big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (sec, frac, caplen, orig) = (f(0), f(4), f(8), f(12));
        // Since issue 23, libpcap's rules (sf-pcap.c): only a caplen above
        // its maximum is refused (and an all-zero header, padding); odd
        // records are frames; above the snaplen, cut to it.
        let frac_max = if self.header.nanos {
            1_000_000_000
        } else {
            1_000_000
        };
        if caplen > MAX_SNAPLEN || h.iter().all(|&b| b == 0) {
            return Err(StorageError::Corrupt {
                path: self.path.clone(),
                offset: self.offset,
                why: format!(
                    "caplen {caplen}, orig_len {orig}, fraction {frac}: not a record header"
                ),
            });
        }
        let snap = match self.header.snaplen {
            0 => MAX_SNAPLEN,
            s => s.min(MAX_SNAPLEN),
        };
        let keep = caplen.min(snap);
        rec.data.resize(keep as usize, 0);
        let got = read_full(&mut self.inner, &mut rec.data).map_err(|e| self.read_err(e))?;
        let mut rest = vec![0u8; (caplen - keep) as usize];
        let skipped = if got == keep as usize {
            read_full(&mut self.inner, &mut rest).map_err(|e| self.read_err(e))?
        } else {
            0
        };
        if got < keep as usize || skipped < rest.len() {
            return Err(self.truncated("record data"));
        }
        rec.ts_ns = sec as u64 * 1_000_000_000
            + if self.header.nanos {
                frac as u64
            } else {
                frac.wrapping_mul(1000) as u64
            };
        rec.odd = orig < caplen || orig == 0 || frac >= frac_max || keep < caplen;
        rec.orig_len = orig;
        self.last_len = (RECORD_HEADER_LEN + caplen as usize) as u64;
        self.offset += self.last_len;
        Ok(true)
    }

    fn next_ng(&mut self, rec: &mut wiretape_files::reader::Record) -> Result<bool, StorageError> {
        loop {
            let pending = self.ng.as_mut().expect("pcapng").pending.take();
            let (kind, body) = match pending {
                Some(p) => p,
                None => match self.next_block()? {
                    Some(b) => b,
                    None => return Ok(false),
                },
            };
            let ng = self.ng.as_mut().expect("pcapng");
            let be = ng.big_endian;
            let rd = |o: usize| {
                let v = u32::from_le_bytes(body[o..o + 4].try_into().unwrap());
                if be {
                    v.swap_bytes()
                } else {
                    v
                }
            };
            let done = match kind {
                pcapng::IDB => {
                    let Some(itf) = pcapng::parse_idb(&body, be) else {
                        return Err(self.corrupt("interface block too short"));
                    };
                    ng.ifaces.push(itf);
                    false
                }
                pcapng::EPB => {
                    if body.len() < 20 {
                        return Err(self.corrupt("packet block too short"));
                    }
                    let (ifc, hi, lo, caplen, orig) = (rd(0), rd(4), rd(8), rd(12), rd(16));
                    let Some(itf) = ng.ifaces.get(ifc as usize).copied() else {
                        return Err(self.corrupt(&format!("packet of undescribed interface {ifc}")));
                    };
                    if 20 + caplen as usize > body.len() {
                        return Err(
                            self.corrupt(&format!("captured length {caplen} beyond its block"))
                        );
                    }
                    rec.data.clear();
                    rec.data.extend_from_slice(&body[20..20 + caplen as usize]);
                    rec.ts_ns = pcapng::to_ns(((hi as u64) << 32) | lo as u64, itf.units);
                    rec.orig_len = orig;
                    rec.odd = orig < caplen || orig == 0;
                    true
                }
                pcapng::SPB => {
                    if body.len() < 4 {
                        return Err(self.corrupt("simple packet block too short"));
                    }
                    let orig = rd(0);
                    let snap = ng.ifaces.first().map(|i| i.snaplen).unwrap_or(0);
                    let mut cap = (orig as usize).min(body.len() - 4);
                    if snap > 0 {
                        cap = cap.min(snap as usize);
                    }
                    rec.data.clear();
                    rec.data.extend_from_slice(&body[4..4 + cap]);
                    rec.ts_ns = 0;
                    rec.orig_len = orig;
                    rec.odd = false;
                    true
                }
                _ => false,
            };
            ng.body = body;
            if done {
                return Ok(true);
            }
        }
    }

    fn truncated(&self, what: &'static str) -> StorageError {
        StorageError::Truncated {
            path: self.path.clone(),
            what,
            offset: self.offset,
            len: self.len,
            good_end: self.offset,
        }
    }

    fn read_err(&self, source: std::io::Error) -> StorageError {
        StorageError::Read {
            path: self.path.clone(),
            source,
        }
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Scans records from `start` (an offset where a record begins) to the end.
/// Returns (end of the last complete record, records, captured bytes).
pub(super) fn scan_from(path: &Path, start: u64) -> Result<(u64, u64, u64), StorageError> {
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
    let _ = hdr;
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
        let (caplen, orig) = (w(8), w(12));
        if caplen > MAX_SNAPLEN || rh.iter().all(|&b| b == 0) {
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

/// `index::rebuild` as it was, returning the entries instead of writing them.
pub(super) fn rebuild_entries(capture: &Path, block: u64) -> Result<Vec<Entry>, StorageError> {
    let mut out = Vec::new();
    let f = File::open(capture).map_err(|source| StorageError::Read {
        path: capture.to_owned(),
        source,
    })?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut r = OldReader::new(BufReader::with_capacity(1 << 20, f), capture, len)?;
    let mut rec = wiretape_files::reader::Record::default();
    let mut cur = Entry::default();
    let block = block.max(1);
    while r.next_into(&mut rec)? {
        // The record starts at the end of what was read minus its length
        // (pcapng: other blocks may come before it).
        let start = r.offset() - r.last_len();
        if cur.count > 0 && start / block != cur.offset / block {
            out.push(cur);
            cur = Entry::default();
        }
        if cur.count == 0 {
            cur.offset = start;
            cur.first_ns = rec.ts_ns;
        }
        cur.last_ns = rec.ts_ns;
        cur.count += 1;
    }
    if cur.count > 0 {
        out.push(cur);
    }
    Ok(out)
}
