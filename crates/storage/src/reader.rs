//! Reading pcap files back: for `wiretape info`, verification and tests.
//! Strict: a truncated or corrupt file is an error that says where it breaks.

use crate::pcap::{FileHeader, Format, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN};
use crate::pcapng;
use crate::StorageError;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

/// One record as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// UTC ns since the epoch (µs files are scaled).
    pub ts_ns: u64,
    pub orig_len: u32,
    pub data: Vec<u8>,
}

/// A streaming reader of pcap (ns or µs, either byte order) and pcapng files.
pub struct PcapReader<R: Read> {
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

impl PcapReader<BufReader<File>> {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
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

impl<R: Read> PcapReader<R> {
    /// `len` is the total length of the input, for messages.
    pub fn new(mut inner: R, path: &Path, len: u64) -> Result<Self, StorageError> {
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
            let mut r = PcapReader {
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
        Ok(PcapReader {
            inner,
            path: path.to_owned(),
            header,
            offset: FILE_HEADER_LEN as u64,
            len,
            last_len: 0,
            ng: None,
        })
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The file's format (a pcapng file reports [`Format::PcapNg`]).
    pub fn format(&self) -> Format {
        match (&self.ng, self.header.nanos) {
            (Some(_), _) => Format::PcapNg,
            (None, true) => Format::PcapNs,
            (None, false) => Format::PcapUs,
        }
    }

    /// Bytes of the last record read (it starts at `offset() - last_len()`).
    pub fn last_len(&self) -> u64 {
        self.last_len
    }

    /// Offset just past the last record read: the end of the valid part.
    pub fn offset(&self) -> u64 {
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
    pub fn next_into(&mut self, rec: &mut Record) -> Result<bool, StorageError> {
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
        // Other writers put caplen above the header's snaplen now and then;
        // what no valid file has is a record above libpcap's own maximum.
        let frac_max = if self.header.nanos {
            1_000_000_000
        } else {
            1_000_000
        };
        // orig_len 0 is no frame: zero padding left by an interrupted aligned write.
        if caplen > MAX_SNAPLEN || orig == 0 || frac >= frac_max {
            return Err(StorageError::Corrupt {
                path: self.path.clone(),
                offset: self.offset,
                why: format!(
                    "caplen {caplen}, orig_len {orig}, fraction {frac}: not a record header"
                ),
            });
        }
        rec.data.resize(caplen as usize, 0);
        let got = read_full(&mut self.inner, &mut rec.data).map_err(|e| self.read_err(e))?;
        if got < caplen as usize {
            return Err(self.truncated("record data"));
        }
        rec.ts_ns = sec as u64 * 1_000_000_000
            + if self.header.nanos {
                frac as u64
            } else {
                frac as u64 * 1000
            };
        rec.orig_len = orig;
        self.last_len = (RECORD_HEADER_LEN + caplen as usize) as u64;
        self.offset += self.last_len;
        Ok(true)
    }

    fn next_ng(&mut self, rec: &mut Record) -> Result<bool, StorageError> {
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

/// Summary of one capture file (`wiretape info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub packets: u64,
    /// Sum of captured lengths.
    pub captured_bytes: u64,
    /// Sum of original lengths.
    pub original_bytes: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub nanos: bool,
    pub format: Option<Format>,
    pub snaplen: u32,
    pub linktype: u32,
    pub file_bytes: u64,
    /// Records whose time is earlier than the one before.
    pub out_of_order: u64,
}

impl FileInfo {
    /// Reads a whole file; fails on any corruption or truncation.
    pub fn scan(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        let mut r = PcapReader::open(path.as_ref())?;
        let mut info = FileInfo {
            nanos: r.header().nanos,
            format: Some(r.format()),
            snaplen: r.header().snaplen,
            linktype: r.header().linktype,
            file_bytes: r.len,
            ..Default::default()
        };
        let mut rec = Record::default();
        while r.next_into(&mut rec)? {
            info.packets += 1;
            info.captured_bytes += rec.data.len() as u64;
            info.original_bytes += rec.orig_len as u64;
            if info.first_ns.is_none() {
                info.first_ns = Some(rec.ts_ns);
            }
            if info.last_ns.is_some_and(|l| rec.ts_ns < l) {
                info.out_of_order += 1;
            }
            info.last_ns = Some(rec.ts_ns);
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::FileSink;
    use crate::writer::PcapWriter;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wt-storage-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn write_then_read_back_with_snaplen() {
        let d = tmpdir("rt");
        let p = d.join("a.pcap");
        // 4 KiB blocks so that many blocks are written.
        let mut w =
            PcapWriter::with_options(FileSink::with_block_size(&p, 4096).unwrap(), 200, true);
        for i in 0..1000u64 {
            let len = 60 + (i as usize * 37) % 1400;
            let frame: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
            w.write(1_700_000_000_000_000_000 + i * 1000, &frame)
                .unwrap();
        }
        let st = w.close().unwrap();
        assert_eq!(st.frames, 1000);
        let mut r = PcapReader::open(&p).unwrap();
        assert!(r.header().nanos);
        assert_eq!(r.header().snaplen, 200);
        let mut rec = Record::default();
        let mut i = 0u64;
        while r.next_into(&mut rec).unwrap() {
            let len = 60 + (i as usize * 37) % 1400;
            assert_eq!(rec.orig_len as usize, len);
            assert_eq!(rec.data.len(), len.min(200));
            assert!(rec
                .data
                .iter()
                .enumerate()
                .all(|(j, &b)| b == (i as usize + j) as u8));
            assert_eq!(rec.ts_ns, 1_700_000_000_000_000_000 + i * 1000);
            i += 1;
        }
        assert_eq!(i, 1000);
        let info = FileInfo::scan(&p).unwrap();
        assert_eq!(info.packets, 1000);
        assert_eq!(info.captured_bytes, st.bytes);
        assert_eq!(info.out_of_order, 0);
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn truncated_and_corrupt_files_are_errors() {
        let d = tmpdir("bad");
        let p = d.join("a.pcap");
        let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
        for i in 0..10u64 {
            w.write(i, &[7u8; 100]).unwrap();
        }
        w.close().unwrap();
        let full = std::fs::read(&p).unwrap();
        assert_eq!(full.len(), 24 + 10 * 116);
        // torn tail: half a record
        std::fs::write(&p, &full[..full.len() - 50]).unwrap();
        match FileInfo::scan(&p) {
            Err(StorageError::Truncated { good_end, .. }) => assert_eq!(good_end, 24 + 9 * 116),
            other => panic!("expected Truncated, got {other:?}"),
        }
        // garbage record header
        let mut bad = full.clone();
        bad[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        assert!(matches!(
            FileInfo::scan(&p),
            Err(StorageError::Corrupt { offset: 24, .. })
        ));
        // not a pcap
        std::fs::write(&p, b"hello, this is not a capture file").unwrap();
        assert!(matches!(
            FileInfo::scan(&p),
            Err(StorageError::BadMagic { .. })
        ));
        std::fs::write(&p, b"short").unwrap();
        assert!(matches!(
            FileInfo::scan(&p),
            Err(StorageError::Truncated { .. })
        ));
        std::fs::remove_dir_all(d).unwrap();
    }
}
