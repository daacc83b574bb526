//! Reading pcap files back: for `wiretape info`, verification and tests.
//! Strict: a truncated or corrupt file is an error that says where it breaks.

use crate::error::StorageError;
use crate::pcap::{FileHeader, Format};
use crate::walk::{End, Walker};
use crate::ReadOptions;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};

/// One record as read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// UTC ns since the epoch (µs files are scaled).
    pub ts_ns: u64,
    /// Length of the frame on the wire; `data` may be shorter (cut to the
    /// snap length).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// An odd record libpcap reads as a frame (see
    /// [`crate::walk::Meta::odd`]).
    pub odd: bool,
}

/// A streaming reader of pcap (ns or µs, either byte order) and pcapng
/// files: the strict front of [`crate::walk::Walker`].
pub struct PcapReader<R: Read> {
    walk: Walker<R>,
    path: PathBuf,
    header: FileHeader,
    format: Format,
    len: u64,
    /// Bytes of the last record (its pcap record or pcapng block).
    last_len: u64,
}

/// What [`PcapReader::open`] reads: a buffered plain file, or a compressed
/// one decompressed ([`crate::zread`]).
pub type FileSource = crate::zread::Source<BufReader<File>>;

impl PcapReader<FileSource> {
    /// Opens `path` and reads its header; fails if the file cannot be read
    /// or does not start as a pcap or pcapng file (a compressed capture is
    /// read decompressed).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::open_with(path, &ReadOptions::default())
    }

    /// [`PcapReader::open`] with `opts` (an encrypted file's identities,
    /// where its index is).
    pub fn open_with(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Self, StorageError> {
        let path = path.as_ref();
        let rd = |source| StorageError::Read {
            path: path.to_owned(),
            source,
        };
        let len = std::fs::metadata(path).map_err(rd)?.len();
        let src = crate::zread::open_buffered(path, opts).map_err(rd)?;
        Self::new(src, path, len)
    }
}

impl<R: Read> PcapReader<R> {
    /// `len` is the total length of the input, for messages.
    pub fn new(inner: R, path: &Path, len: u64) -> Result<Self, StorageError> {
        let walk = Walker::new(inner);
        // A pcapng file may end cleanly before its first interface.
        if let Some(e) = walk.stop().and_then(|s| s.error(path, len)) {
            return Err(e);
        }
        Ok(PcapReader {
            header: *walk.header(),
            format: walk.format().unwrap_or(Format::PcapNg),
            walk,
            path: path.to_owned(),
            len,
            last_len: 0,
        })
    }

    /// The pcap file header (pcapng: made from the first interface, if it
    /// came before the first packet).
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The file's format (a pcapng file reports [`Format::PcapNg`]).
    pub fn format(&self) -> Format {
        self.format
    }

    /// pcap: libpcap's snapshot length for the file (records above it are
    /// cut to it).
    pub fn snapshot(&self) -> u32 {
        self.walk.snapshot()
    }

    /// pcap: whether caplen and orig_len stand in the record headers as
    /// written (version 2.4; older versions may swap them).
    pub fn lengths_as_written(&self) -> bool {
        self.walk.lengths_as_written()
    }

    /// Bytes of the last record read (it starts at `offset() - last_len()`).
    pub fn last_len(&self) -> u64 {
        self.last_len
    }

    /// Offset just past the last record read: the end of the valid part.
    pub fn offset(&self) -> u64 {
        self.walk.offset()
    }

    /// The stream read from.
    pub fn get_ref(&self) -> &R {
        self.walk.get_ref()
    }

    /// Reads the next record into `rec`; Ok(false) at a clean end of file.
    pub fn next_into(&mut self, rec: &mut Record) -> Result<bool, StorageError> {
        if let Some(m) = self.walk.next_into(&mut rec.data) {
            rec.ts_ns = m.ts_ns;
            rec.orig_len = m.orig_len;
            rec.odd = m.odd;
            self.last_len = m.file_len;
            return Ok(true);
        }
        match self.walk.stop() {
            Some(s) if !matches!(s.end, End::Clean) => {
                Err(s.error(&self.path, self.len).expect("not a clean end"))
            }
            _ => Ok(false),
        }
    }
}

impl<R: Read + Seek> PcapReader<R> {
    /// Goes on from file offset `offset`, where the caller knows a record
    /// (pcapng: a block) starts, skipping what lies before it (see
    /// [`Walker::seek_to`]); nothing happens at or before the offset
    /// already reached.
    pub fn seek_to(&mut self, offset: u64) {
        self.walk.seek_to(offset);
    }
}

/// Summary of one capture file (`wiretape info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileInfo {
    /// Records in the file.
    pub packets: u64,
    /// Sum of captured lengths.
    pub captured_bytes: u64,
    /// Sum of original lengths.
    pub original_bytes: u64,
    /// Stamp of the first record, UTC ns; None for a file without records.
    pub first_ns: Option<u64>,
    /// Stamp of the last record, UTC ns (not always the latest: see
    /// `out_of_order`); None for a file without records.
    pub last_ns: Option<u64>,
    /// Whether the header says nanosecond stamps (pcapng: the first
    /// interface's `if_tsresol` is 9).
    pub nanos: bool,
    /// The file's format; always Some from [`FileInfo::scan`].
    pub format: Option<Format>,
    /// Snap length the header states, in bytes (pcapng: the first interface's).
    pub snaplen: u32,
    /// Link-layer type the header states (1: Ethernet).
    pub linktype: u32,
    /// Length of the file in bytes.
    pub file_bytes: u64,
    /// Records whose time is earlier than the one before.
    pub out_of_order: u64,
    /// Odd records libpcap reads as frames (orig_len 0 or below caplen, a
    /// fraction of a second out of range, a caplen above the snap length):
    /// counted in `packets` too.
    pub records_odd: u64,
    /// `lz4` or `zstd` for a compressed capture.
    pub compression: Option<&'static str>,
    /// An age file ([`crate::crypt`]: `record --encrypt-to`).
    pub encrypted: bool,
}

impl FileInfo {
    /// Reads a whole file; fails on any corruption or truncation.
    pub fn scan(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::scan_with(path, &ReadOptions::default())
    }

    /// [`FileInfo::scan`] with `opts` (an encrypted file's identities).
    pub fn scan_with(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Self, StorageError> {
        match Self::scan_to_damage_with(path, opts) {
            (info, None) => Ok(info),
            (_, Some(e)) => Err(e),
        }
    }

    /// Reads a whole file up to any damage: what was read (everything
    /// before the damage; nothing when the header is bad), and the damage.
    pub fn scan_to_damage(path: impl AsRef<Path>) -> (Self, Option<StorageError>) {
        Self::scan_to_damage_with(path, &ReadOptions::default())
    }

    /// [`FileInfo::scan_to_damage`] with `opts` (an encrypted file's
    /// identities).
    pub fn scan_to_damage_with(
        path: impl AsRef<Path>,
        opts: &ReadOptions,
    ) -> (Self, Option<StorageError>) {
        let path = path.as_ref();
        let mut r = match PcapReader::open_with(path, opts) {
            Ok(r) => r,
            Err(e) => {
                let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
                let info = FileInfo {
                    file_bytes,
                    ..Default::default()
                };
                return (info, Some(e));
            }
        };
        let mut info = FileInfo {
            nanos: r.header().nanos,
            format: Some(r.format()),
            snaplen: r.header().snaplen,
            linktype: r.header().linktype,
            file_bytes: r.len,
            ..Default::default()
        };
        let mut rec = Record::default();
        let damage = loop {
            match r.next_into(&mut rec) {
                Ok(true) => {}
                Ok(false) => break None,
                Err(e) => break Some(e),
            }
            info.packets += 1;
            info.records_odd += u64::from(rec.odd);
            info.captured_bytes += rec.data.len() as u64;
            info.original_bytes += rec.orig_len as u64;
            if info.first_ns.is_none() {
                info.first_ns = Some(rec.ts_ns);
            }
            if info.last_ns.is_some_and(|l| rec.ts_ns < l) {
                info.out_of_order += 1;
            }
            info.last_ns = Some(rec.ts_ns);
        };
        if let Some(a) = r.walk.get_ref().age() {
            info.encrypted = true;
            // An age stream without its final chunk (a crash): `repair`
            // closes it (with the identity), keeping every whole record.
            if let Some(t) = a.torn() {
                let e = StorageError::Truncated {
                    path: r.path.clone(),
                    what: "age stream (no final chunk: cut by a crash)",
                    offset: t,
                    len: r.len,
                    good_end: t,
                };
                return (info, damage.or(Some(e)));
            }
        }
        if let Some(z) = r.walk.get_ref().z() {
            info.compression = Some(match z.kind() {
                crate::zread::Kind::Lz4 => "lz4",
                crate::zread::Kind::Zstd => "zstd",
            });
            // A compressed stream cut short (a crash): `repair` closes it.
            if let Some(crate::zread::ZEnd::Torn(c)) = z.end() {
                // Not one whole unit: repair removes the file.
                let first = match z.kind() {
                    crate::zread::Kind::Lz4 => crate::compress::LZ4_HEADER_LEN,
                    crate::zread::Kind::Zstd => 0,
                };
                let e = StorageError::Truncated {
                    path: r.path.clone(),
                    what: "compressed stream (no end mark, or a unit cut short)",
                    offset: c,
                    len: r.len,
                    good_end: if c <= first { 0 } else { c },
                };
                return (info, damage.or(Some(e)));
            }
        }
        (info, damage)
    }
}
