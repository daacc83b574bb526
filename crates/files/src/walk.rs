//! One walker over the records of a capture file, for every reader of them:
//! [`crate::PcapReader`] (and so [`crate::FileInfo::scan`]),
//! [`crate::repair`] and the index rebuild ([`crate::index::rebuild`]).
//!
//! Built like libpcap (savefile.c over sf-pcap.c and sf-pcapng.c): one front,
//! [`Walker`], reads the file header and picks the per-format step (pcap: ns
//! or µs, either byte order; pcapng: sections with their own byte order,
//! interfaces with their own `if_tsresol`, SHB/IDB/EPB/SPB, other blocks
//! skipped, every block's leading and trailing length checked), which yields
//! one record at a time ([`Meta`]: where it is, how long, its stamp and
//! lengths; the data on request). When the walk ends, [`Walker::stop`] says
//! how ([`Stop`]): a clean end, a torn tail (the stream ends inside a
//! record), zero padding (what an interrupted aligned write leaves: zero
//! bytes to the end of the stream), or corruption and why, at the offset
//! where the last whole record ends.
//!
//! An all-zero pcap record header is read as libpcap reads it (`sf-pcap.c`
//! takes any header whose caplen is within the link type's maximum): an
//! empty record stamped 1970, when anything but zeros follows it. Only
//! zeros to the end of the stream are padding. Telling the two apart reads
//! ahead to the first non-zero byte; what was read ahead is handed out
//! again (the private `Ahead`), so the walker needs no `Seek`.
//!
//! The walker states facts; each front applies its policy: the reader is
//! strict ([`Stop::error`]: anything but a clean end is an error), repair
//! trims torn tails and zero padding and refuses to cut anything else.

use crate::pcap::{FileHeader, Format, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN};
use crate::pcapng::{self, Interface};
use crate::StorageError;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;
use wiretape_filter::linktype;

/// One record as the walker found it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Stream offset where the record starts (its pcap record header, or
    /// its pcapng block).
    pub offset: u64,
    /// Bytes the record takes in the file (pcapng: its whole block).
    pub file_len: u64,
    /// Captured bytes (the data).
    pub caplen: u32,
    /// Length of the frame on the wire, as the record states it (normally
    /// at least `caplen`).
    pub orig_len: u32,
    /// UTC ns since the epoch (other resolutions are scaled; 0 for a pcapng
    /// simple packet block, which has no stamp).
    pub ts_ns: u64,
    /// pcapng: the interface (of its section); pcap: 0.
    pub interface: u32,
    /// An odd record that libpcap reads as a frame (and so do we): orig_len
    /// 0 or below its caplen, a fraction of a second out of range, or (pcap)
    /// a caplen above the file's snap length (the frame is cut to it, as
    /// libpcap cuts it; `caplen` is then what is kept). Counted as
    /// `records_odd`.
    pub odd: bool,
}

/// How a walk ended, at [`Stop::offset`].
#[derive(Debug)]
pub enum End {
    /// The stream ends after a whole record (or header).
    Clean,
    /// The stream ends inside a record or block: `what` was cut short;
    /// `record`: what the record's header said, when it was whole (pcap).
    Torn {
        /// What was cut short, e.g. "record data", "block": words for
        /// [`StorageError::Truncated`].
        what: &'static str,
        /// pcap: the record's header when it was whole and only the data
        /// was cut; None otherwise.
        record: Option<Meta>,
    },
    /// Only zero bytes from here to the end (an interrupted aligned write):
    /// a header of zeros, which as a header would be `Why`.
    Zeros(Why),
    /// Bytes that are not a record, and why.
    Corrupt(Why),
    /// Reading failed.
    Io(std::io::Error),
}

/// Why bytes are not a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Why {
    /// The pcap file magic, or a pcapng section's byte-order magic.
    BadMagic(u32),
    /// A pcap record header libpcap refuses: a caplen above the largest it
    /// takes for the link type (`max_snaplen_for_dlt`, 256 KiB for most).
    /// Also what an all-zero header followed only by zeros would be as a
    /// header ([`End::Zeros`]); followed by anything else, it is an empty
    /// record.
    RecordHeader {
        /// Captured length it states.
        caplen: u32,
        /// Wire length it states.
        orig_len: u32,
        /// Fraction of a second it states.
        frac: u32,
    },
    /// A pcap file header libpcap refuses: its version.
    Version {
        /// Major version (libpcap reads 2, and 543.0).
        major: u16,
        /// Minor version (libpcap reads up to 4).
        minor: u16,
    },
    /// A pcapng block header with values no block has.
    BlockHeader {
        /// Block type it states (bad when 0).
        kind: u32,
        /// Total length it states (bad below 12, not a multiple of 4, or
        /// above 16 MiB).
        total: u32,
    },
    /// A pcapng section header block of an impossible length.
    ShbLength {
        /// Total length it states (bad below 28, not a multiple of 4, or
        /// above 16 MiB).
        total: u32,
    },
    /// A pcapng block whose trailing length is not its leading one; `last`:
    /// nothing follows the block (its end was never written).
    Trailer {
        /// The leading length.
        total: u32,
        /// The trailing length, which differs from it.
        trailer: u32,
        /// Nothing follows the block in the stream.
        last: bool,
    },
    /// A well framed pcapng block of `total` bytes whose content is wrong.
    Content {
        /// The block's total length in bytes.
        total: u32,
        /// What is wrong with the content, in words for the user.
        what: String,
    },
}

/// Where and how a walk ended. `offset` is where the last whole record (or
/// block) ends: where the stopping bytes start.
#[derive(Debug)]
pub struct Stop {
    /// Stream offset where the last whole record (or block) ends.
    pub offset: u64,
    /// How the walk ended there.
    pub end: End,
    /// Whether the file's header was whole before the stop (see
    /// [`Walker::header_complete`]).
    pub header_complete: bool,
}

impl Stop {
    fn at(offset: u64, end: End) -> Self {
        Stop {
            offset,
            end,
            header_complete: false,
        }
    }

    fn torn(offset: u64, what: &'static str) -> Self {
        Stop::at(offset, End::Torn { what, record: None })
    }

    fn corrupt(offset: u64, why: Why) -> Self {
        Stop::at(offset, End::Corrupt(why))
    }

    /// The strict reading of the end (what [`crate::PcapReader`] reports):
    /// None for a clean end, else the error for the file at `path` of `len`
    /// bytes.
    pub fn error(&self, path: &Path, len: u64) -> Option<StorageError> {
        let offset = self.offset;
        let corrupt = |offset, why: String| StorageError::Corrupt {
            path: path.to_owned(),
            offset,
            why,
        };
        Some(match &self.end {
            End::Clean => return None,
            End::Torn { what, .. } => StorageError::Truncated {
                path: path.to_owned(),
                what,
                offset,
                len,
                // Nothing is whole before the header is.
                good_end: if self.header_complete { offset } else { 0 },
            },
            End::Io(e) => StorageError::Read {
                path: path.to_owned(),
                source: copy_io_error(e),
            },
            End::Zeros(why) | End::Corrupt(why) => match why {
                Why::BadMagic(magic) => StorageError::BadMagic {
                    path: path.to_owned(),
                    magic: *magic,
                },
                Why::RecordHeader {
                    caplen,
                    orig_len,
                    frac,
                } => corrupt(
                    offset,
                    format!(
                        "caplen {caplen}, orig_len {orig_len}, fraction {frac}: not a record header"
                    ),
                ),
                Why::BlockHeader { kind, total } => corrupt(
                    offset,
                    format!("block type {kind:#x}, length {total}: not a block header"),
                ),
                Why::Version { major, minor } => corrupt(
                    offset,
                    format!("pcap version {major}.{minor}: libpcap reads 2.0 to 2.4 only"),
                ),
                Why::ShbLength { .. } => corrupt(offset, "section header block length".into()),
                Why::Trailer { total, trailer, .. } => corrupt(
                    offset,
                    format!("block length {total} but trailing length {trailer}"),
                ),
                // The reader has always named the end of such a block.
                Why::Content { total, what } => corrupt(offset + *total as u64, what.clone()),
            },
        })
    }
}

/// An owned copy of an I/O error (same kind, errno and text).
fn copy_io_error(e: &std::io::Error) -> std::io::Error {
    match e.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(e.kind(), e.to_string()),
    }
}

/// Walks the records of a pcap or pcapng stream read from `R` (which must
/// start at the file's first byte).
pub struct Walker<R> {
    inner: Ahead<R>,
    /// The file header is whole: pcap's 24 bytes; pcapng's section header
    /// and an interface (libpcap refuses a file without one).
    header_done: bool,
    /// Stream offset just past the last whole record or block.
    off: u64,
    /// Known once the file's first bytes are read.
    format: Option<Format>,
    /// pcap: the file header; pcapng: made from the first interface.
    header: FileHeader,
    /// pcapng: the current section's byte order and interfaces.
    big_endian: bool,
    ifaces: Vec<Interface>,
    /// pcapng: a packet block met while looking for the first interface
    /// (offset, type, length); its body is in `body`.
    pending: Option<(u64, u32, u32)>,
    /// pcapng: the last block's body (without its trailing length).
    body: Vec<u8>,
    /// Moved ahead with [`Walker::seek_to`]: interfaces may be unknown.
    resumed: bool,
    /// pcapng: an interface was read, and `header.linktype` is its link
    /// type (every interface must have it).
    linktype_known: bool,
    /// pcap: libpcap's snapshot length (records above it are cut to it)
    /// and largest caplen (records above it are refused) for the file.
    snapshot: u32,
    max_caplen: u32,
    /// pcap: caplen and orig_len are swapped in the record headers
    /// (versions before 2.3: always; 2.3: where caplen > orig_len).
    swapped_lengths: Lengths,
    stop: Option<Stop>,
}

/// Whether a pcap file's record headers have caplen and orig_len swapped
/// (libpcap's `lengths_swapped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    NotSwapped,
    MaybeSwapped,
    Swapped,
}

impl<R: Read> Walker<R> {
    /// Reads the file header (pcapng: the section header and the blocks up
    /// to the first interface or packet). If that fails, the walk has
    /// already stopped ([`Walker::stop`]).
    pub fn new(inner: R) -> Self {
        let mut w = Walker {
            inner: Ahead::new(inner),
            header_done: false,
            off: 0,
            format: None,
            header: FileHeader::new(0, true),
            big_endian: false,
            ifaces: Vec::new(),
            pending: None,
            body: Vec::new(),
            resumed: false,
            linktype_known: false,
            snapshot: MAX_SNAPLEN,
            max_caplen: MAX_SNAPLEN,
            swapped_lengths: Lengths::NotSwapped,
            stop: None,
        };
        if let Err(s) = w.read_head() {
            w.stop = Some(s);
        }
        // pcap: the header was read whole; pcapng: an interface was read.
        w.header_done = (w.stop.is_none() && w.format != Some(Format::PcapNg)) || w.linktype_known;
        if let Some(s) = &mut w.stop {
            s.header_complete = w.header_done;
        }
        w
    }

    /// Whether the file's header is whole: a pcap file header, or a
    /// pcapng section header and an interface block before any packet
    /// (libpcap refuses a pcapng file without one). A file whose walk
    /// stopped before that holds no frame a reader can read.
    pub fn header_complete(&self) -> bool {
        self.header_done
    }

    /// The file's format, once its first bytes were read.
    pub fn format(&self) -> Option<Format> {
        self.format
    }

    /// pcap: the file header. pcapng: made from the first interface (if
    /// it came before the first packet).
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// pcap: libpcap's snapshot length for the file (records above it are
    /// cut to it).
    pub fn snapshot(&self) -> u32 {
        self.snapshot
    }

    /// pcap: whether caplen and orig_len stand in the record headers as
    /// written (version 2.4; older versions may swap them).
    pub fn lengths_as_written(&self) -> bool {
        self.swapped_lengths == Lengths::NotSwapped
    }

    /// pcapng: the interfaces of the current section.
    pub fn interfaces(&self) -> &[Interface] {
        &self.ifaces
    }

    /// Stream offset just past the last whole record or block read.
    pub fn offset(&self) -> u64 {
        self.off
    }

    /// The stream read from.
    pub fn get_ref(&self) -> &R {
        &self.inner.inner
    }

    /// The stream read from, to change how it reads (e.g. a read hint),
    /// never where: reading or seeking it would lose the walk's place.
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner.inner
    }

    /// How the walk ended (None while it goes on).
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// The next record, its captured bytes in `data`; None at the end
    /// (then [`Walker::stop`] says how it ended).
    pub fn next_into(&mut self, data: &mut Vec<u8>) -> Option<Meta> {
        self.step(Some(data))
    }

    /// The next record, without its data.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Meta> {
        self.step(None)
    }

    fn step(&mut self, data: Option<&mut Vec<u8>>) -> Option<Meta> {
        if self.stop.is_some() {
            return None;
        }
        let r = match self.format {
            Some(Format::PcapNg) => self.step_ng(data),
            Some(_) => self.step_pcap(data),
            None => unreachable!("no format means the header failed, and the walk stopped"),
        };
        match r {
            Ok(m) => Some(m),
            Err(mut s) => {
                s.header_complete = self.header_done;
                self.stop = Some(s);
                None
            }
        }
    }

    fn read(&mut self, at: u64, buf: &mut [u8]) -> Result<usize, Stop> {
        read_full(&mut self.inner, buf).map_err(|e| Stop::at(at, End::Io(e)))
    }

    fn rd32(&self, b: &[u8], o: usize) -> u32 {
        let v = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if self.big_endian {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// Whether everything left in the stream is zero bytes; what it reads
    /// to know is handed out again. Out of line and cold: only an all-zero
    /// header gets here.
    #[cold]
    #[inline(never)]
    fn rest_is_zero(&mut self) -> bool {
        self.inner.zeros_to_end()
    }

    /// Whether the stream has nothing left.
    fn at_end(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(read_full(&mut self.inner, &mut b), Ok(0))
    }

    fn read_head(&mut self) -> Result<(), Stop> {
        let torn = || Stop::torn(0, "file header");
        let mut h = [0u8; FILE_HEADER_LEN];
        let n = self.read(0, &mut h[..4])?;
        if n == 4 && u32::from_le_bytes(h[..4].try_into().unwrap()) == pcapng::SHB {
            self.format = Some(Format::PcapNg);
            self.read_shb(0, None)?;
            // Up to the first interface: it gives the header's fields.
            loop {
                let (at, kind, total) = self.read_block()?;
                if kind == pcapng::IDB {
                    self.interface(at, total)?;
                    let itf = self.ifaces[0];
                    self.header = FileHeader {
                        nanos: itf.units == 1_000_000_000,
                        snaplen: itf.snaplen,
                        linktype: itf.linktype as u32,
                        big_endian: self.big_endian,
                    };
                    return Ok(());
                }
                if kind == pcapng::EPB || kind == pcapng::SPB {
                    self.pending = Some((at, kind, total));
                    return Ok(());
                }
            }
        }
        if n < 4 {
            // Cut short in its magic, or not a capture at all.
            if could_start_a_capture(&h[..n]) {
                return Err(torn());
            }
            let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            return Err(Stop::corrupt(0, Why::BadMagic(magic)));
        }
        // Not a capture at all: say so (with its first bytes), short or not.
        let magic = u32::from_le_bytes(h[..4].try_into().unwrap());
        let pcap = [crate::pcap::MAGIC_US, crate::pcap::MAGIC_NS];
        if !pcap.contains(&magic) && !pcap.contains(&magic.swap_bytes()) {
            // Zeros from the start to the end: space allocated ahead that
            // no write reached (a crash before the first block landed).
            if magic == 0 && self.rest_is_zero() {
                return Err(Stop::at(0, End::Zeros(Why::BadMagic(0))));
            }
            return Err(Stop::corrupt(0, Why::BadMagic(magic)));
        }
        if self.read(0, &mut h[4..])? < FILE_HEADER_LEN - 4 {
            return Err(torn());
        }
        self.header = FileHeader::decode(&h).map_err(|m| Stop::corrupt(0, Why::BadMagic(m)))?;
        // libpcap's pcap_check_header: the version, lengths swapped in
        // old versions, the snapshot length for the link type.
        let v16 = |o: usize| {
            let v = u16::from_le_bytes([h[o], h[o + 1]]);
            if self.header.big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (major, minor) = (v16(4), v16(6));
        self.swapped_lengths = match (major, minor) {
            (2, 0..=2) | (543, 0) => Lengths::Swapped,
            (2, 3) => Lengths::MaybeSwapped,
            (2, 4) => Lengths::NotSwapped,
            _ => return Err(Stop::corrupt(0, Why::Version { major, minor })),
        };
        self.max_caplen = linktype::max_caplen(self.header.linktype);
        self.snapshot = linktype::snapshot(self.header.linktype, self.header.snaplen);
        self.format = Some(if self.header.nanos {
            Format::PcapNs
        } else {
            Format::PcapUs
        });
        self.off = FILE_HEADER_LEN as u64;
        Ok(())
    }

    // ---- pcap ----

    fn step_pcap(&mut self, data: Option<&mut Vec<u8>>) -> Result<Meta, Stop> {
        let at = self.off;
        let mut h = [0u8; RECORD_HEADER_LEN];
        let n = self.read(at, &mut h)?;
        if n == 0 {
            return Err(Stop::at(at, End::Clean));
        }
        if n < RECORD_HEADER_LEN {
            return Err(Stop::torn(at, "record header"));
        }
        let be = self.header.big_endian;
        let f = |o: usize| {
            let v = u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
            if be {
                v.swap_bytes()
            } else {
                v
            }
        };
        let (sec, frac, mut caplen, mut orig_len) = (f(0), f(4), f(8), f(12));
        // libpcap's pcap_next_packet, rule by rule.
        match self.swapped_lengths {
            Lengths::NotSwapped => {}
            Lengths::MaybeSwapped if caplen <= orig_len => {}
            Lengths::MaybeSwapped | Lengths::Swapped => std::mem::swap(&mut caplen, &mut orig_len),
        }
        let nanos = self.header.nanos;
        let frac_max = if nanos { 1_000_000_000 } else { 1_000_000 };
        let why = || Why::RecordHeader {
            caplen,
            orig_len,
            frac,
        };
        if caplen > self.max_caplen {
            return Err(Stop::corrupt(at, why()));
        }
        // All zeros to the end is the padding an interrupted aligned write
        // leaves (repair trims it), not a run of empty frames; an all-zero
        // header with anything else after it is an empty record, as libpcap
        // reads it.
        if caplen == 0 && h == [0; RECORD_HEADER_LEN] && self.rest_is_zero() {
            return Err(Stop::at(at, End::Zeros(why())));
        }
        // Above the file's snap length (and within the maximum): libpcap
        // keeps the first snapshot bytes and skips the rest.
        let keep = caplen.min(self.snapshot);
        let rest = (caplen - keep) as u64;
        let got = match data {
            Some(d) => read_claimed(&mut self.inner, d, keep as usize)
                .map_err(|e| Stop::at(at, End::Io(e)))?,
            None => std::io::copy(
                &mut (&mut self.inner).take(keep as u64),
                &mut std::io::sink(),
            )
            .map_err(|e| Stop::at(at, End::Io(e)))? as usize,
        };
        let skipped = if rest > 0 && got == keep as usize {
            std::io::copy(&mut (&mut self.inner).take(rest), &mut std::io::sink())
                .map_err(|e| Stop::at(at, End::Io(e)))?
        } else {
            0
        };
        let file_len = self
            .format
            .unwrap_or(Format::PcapNs)
            .record_len(caplen as usize) as u64;
        // The fraction as libpcap reading with ns precision carries it
        // (and tcpdump --nano -w writes it): µs scaled by 1000 in 32 bits,
        // out-of-range values kept (they spill into the seconds here).
        let frac_ns = if nanos { frac } else { frac.wrapping_mul(1000) };
        let meta = Meta {
            offset: at,
            file_len,
            caplen: keep,
            orig_len,
            ts_ns: sec as u64 * 1_000_000_000 + frac_ns as u64,
            interface: 0,
            odd: orig_len < caplen || orig_len == 0 || frac >= frac_max || keep < caplen,
        };
        if got < keep as usize || skipped < rest {
            return Err(Stop::at(
                at,
                End::Torn {
                    what: "record data",
                    record: Some(meta),
                },
            ));
        }
        self.off = at + file_len;
        Ok(meta)
    }

    // ---- pcapng ----

    /// A section header block at `at`, after its type; `len`: its length
    /// field when already read. Sets the section's byte order.
    fn read_shb(&mut self, at: u64, len: Option<[u8; 4]>) -> Result<(), Stop> {
        let torn = || Stop::torn(at, "section header block");
        let mut b = [0u8; 8];
        let from = match len {
            Some(l) => {
                b[..4].copy_from_slice(&l);
                4
            }
            None => 0,
        };
        if self.read(at, &mut b[from..])? < 8 - from {
            return Err(torn());
        }
        let bom = u32::from_le_bytes(b[4..8].try_into().unwrap());
        self.big_endian = match bom {
            pcapng::BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == pcapng::BYTE_ORDER_MAGIC => true,
            m => return Err(Stop::corrupt(at, Why::BadMagic(m))),
        };
        let total = self.rd32(&b, 0);
        if total < 28 || total & 3 != 0 || total > 1 << 24 {
            return Err(Stop::corrupt(at, Why::ShbLength { total }));
        }
        // Version, section length, options, trailing length.
        let mut rest = std::mem::take(&mut self.body);
        let want = total as usize - 12;
        let got = read_claimed(&mut self.inner, &mut rest, want);
        self.body = rest;
        if got.map_err(|e| Stop::at(at, End::Io(e)))? < want {
            return Err(torn());
        }
        self.check_trailer(at, total)?;
        self.ifaces.clear();
        self.off = at + total as u64;
        Ok(())
    }

    /// The next block other than a section header (those are taken in
    /// passing): (offset, type, length), its body in `self.body`.
    fn read_block(&mut self) -> Result<(u64, u32, u32), Stop> {
        loop {
            let at = self.off;
            let mut h = [0u8; 8];
            let n = self.read(at, &mut h)?;
            if n == 0 {
                return Err(Stop::at(at, End::Clean));
            }
            if n < 4 {
                return Err(Stop::torn(at, "block header"));
            }
            if u32::from_le_bytes(h[0..4].try_into().unwrap()) == pcapng::SHB {
                // A new section: its byte order may differ.
                if n < 8 {
                    return Err(Stop::torn(at, "section header block"));
                }
                self.read_shb(at, Some(h[4..8].try_into().unwrap()))?;
                continue;
            }
            if n < 8 {
                return Err(Stop::torn(at, "block header"));
            }
            let (kind, total) = (self.rd32(&h, 0), self.rd32(&h, 4));
            if total < 12 || total & 3 != 0 || total > 1 << 24 || kind == 0 {
                let why = Why::BlockHeader { kind, total };
                if h.iter().all(|&b| b == 0) && self.rest_is_zero() {
                    return Err(Stop::at(at, End::Zeros(why)));
                }
                return Err(Stop::corrupt(at, why));
            }
            let mut body = std::mem::take(&mut self.body);
            let want = total as usize - 8;
            let got = read_claimed(&mut self.inner, &mut body, want);
            self.body = body;
            if got.map_err(|e| Stop::at(at, End::Io(e)))? < want {
                return Err(Stop::torn(at, "block"));
            }
            self.check_trailer(at, total)?;
            self.body.truncate(self.body.len() - 4);
            self.off = at + total as u64;
            return Ok((at, kind, total));
        }
    }

    /// The block at `at`, read into `self.body` (its trailing length last),
    /// must end with the length it started with.
    fn check_trailer(&mut self, at: u64, total: u32) -> Result<(), Stop> {
        let trailer = self.rd32(&self.body, self.body.len() - 4);
        if trailer == total {
            return Ok(());
        }
        let last = self.at_end();
        Err(Stop::corrupt(
            at,
            Why::Trailer {
                total,
                trailer,
                last,
            },
        ))
    }

    fn content(at: u64, total: u32, what: String) -> Stop {
        Stop::corrupt(at, Why::Content { total, what })
    }

    /// The interface block at `at` (body in `self.body`) joins the section.
    fn interface(&mut self, at: u64, total: u32) -> Result<(), Stop> {
        let itf = pcapng::parse_idb(&self.body, self.big_endian)
            .ok_or_else(|| Self::content(at, total, "interface block too short".into()))?;
        // libpcap reads one link type per file: an interface of another
        // is where it stops (and so do we, rather than relabel frames).
        let first = self.header.linktype;
        if self.linktype_known && itf.linktype as u32 != first {
            let what = format!(
                "an interface of link type {} in a file of link type {first}: libpcap reads one link type per file",
                itf.linktype
            );
            return Err(Self::content(at, total, what));
        }
        self.linktype_known = true;
        self.header.linktype = itf.linktype as u32;
        self.ifaces.push(itf);
        Ok(())
    }

    fn step_ng(&mut self, mut data: Option<&mut Vec<u8>>) -> Result<Meta, Stop> {
        loop {
            let (at, kind, total) = match self.pending.take() {
                Some(p) => p,
                None => self.read_block()?,
            };
            let body = &self.body;
            let rd = |o: usize| self.rd32(body, o);
            let mut meta = Meta {
                offset: at,
                file_len: total as u64,
                ..Meta::default()
            };
            let range = match kind {
                pcapng::IDB => {
                    self.interface(at, total)?;
                    continue;
                }
                pcapng::EPB => {
                    if body.len() < 20 {
                        return Err(Self::content(at, total, "packet block too short".into()));
                    }
                    let (ifc, hi, lo, caplen, orig) = (rd(0), rd(4), rd(8), rd(12), rd(16));
                    let itf = match self.ifaces.get(ifc as usize) {
                        Some(i) => *i,
                        // Its description may lie in what seek_to skipped:
                        // the default resolution (µs) then.
                        None if self.resumed => Interface {
                            linktype: 0,
                            snaplen: 0,
                            units: 1_000_000,
                        },
                        None => {
                            return Err(Self::content(
                                at,
                                total,
                                format!("packet of undescribed interface {ifc}"),
                            ))
                        }
                    };
                    if 20 + caplen as usize > body.len() {
                        return Err(Self::content(
                            at,
                            total,
                            format!("captured length {caplen} beyond its block"),
                        ));
                    }
                    meta.interface = ifc;
                    meta.caplen = caplen;
                    meta.orig_len = orig;
                    meta.odd = orig < caplen || orig == 0;
                    meta.ts_ns = pcapng::to_ns(((hi as u64) << 32) | lo as u64, itf.units);
                    20..20 + caplen as usize
                }
                pcapng::SPB => {
                    if body.len() < 4 {
                        return Err(Self::content(
                            at,
                            total,
                            "simple packet block too short".into(),
                        ));
                    }
                    let orig = rd(0);
                    let snap = self.ifaces.first().map(|i| i.snaplen).unwrap_or(0);
                    let mut cap = (orig as usize).min(body.len() - 4);
                    if snap > 0 {
                        cap = cap.min(snap as usize);
                    }
                    meta.caplen = cap as u32;
                    meta.orig_len = orig;
                    4..4 + cap
                }
                _ => continue,
            };
            if let Some(d) = data.as_deref_mut() {
                d.clear();
                d.extend_from_slice(&body[range]);
            }
            return Ok(meta);
        }
    }
}

impl<R: Read + Seek> Walker<R> {
    /// Goes on from stream offset `to` (the caller knows a record or block
    /// starts there), skipping what lies before it, including a stop in it
    /// (damage in the skipped part is not looked at); nothing happens if the
    /// walk is already at `to` or beyond, or stopped before knowing the
    /// format. pcapng: the byte order and interfaces are those read with
    /// the header; a packet of an interface not known (its description may
    /// be in the skipped part) is stamped at the default resolution (µs)
    /// instead of being an error.
    pub fn seek_to(&mut self, to: u64) {
        // pcapng: a packet block met before any interface was read with
        // the header, so the stream is already past it; it is skipped too
        // when `to` is past its start (found by fuzzing: it was handed out
        // after the seek).
        if self.stop.is_none() && to == self.off && self.pending.is_some_and(|p| p.0 < to) {
            self.pending = None;
            return;
        }
        let stopped_before = self.stop.as_ref().is_some_and(|s| s.offset < to);
        if self.format.is_none() || (self.stop.is_some() && !stopped_before) || to <= self.off {
            return;
        }
        self.stop = None;
        match self.inner.inner.seek(SeekFrom::Start(to)) {
            Ok(_) => {
                self.inner.forget();
                self.off = to;
                self.pending = None;
                self.resumed = true;
            }
            Err(e) => self.stop = Some(Stop::at(self.off, End::Io(e))),
        }
    }
}

/// Whether `b`, shorter than a magic number, could be the start of a
/// capture cut short (pcap either way round, pcapng, or compressed: lz4,
/// zstd), or zeros (space allocated ahead).
pub(crate) fn could_start_a_capture(b: &[u8]) -> bool {
    use crate::pcap::{MAGIC_NS, MAGIC_US};
    let magics = [
        MAGIC_US,
        MAGIC_NS,
        MAGIC_US.swap_bytes(),
        MAGIC_NS.swap_bytes(),
        pcapng::SHB,
        crate::compress::LZ4_MAGIC,
        crate::compress::ZSTD_MAGIC,
    ];
    b.iter().all(|&x| x == 0) || magics.iter().any(|m| m.to_le_bytes().starts_with(b))
}

/// The walker's stream: `R`, and in front of it what [`Ahead::zeros_to_end`]
/// read ahead (a run of zero bytes, then the bytes from the first non-zero
/// one), handed out first. With nothing read ahead, a read is `R`'s: one
/// branch more per read.
struct Ahead<R> {
    inner: R,
    /// Zero bytes read ahead, handed out before `buf`.
    zeros: u64,
    /// Bytes read ahead after the zeros; `buf[pos..]` is still to come.
    buf: Vec<u8>,
    pos: usize,
}

impl<R> Ahead<R> {
    fn new(inner: R) -> Self {
        Ahead {
            inner,
            zeros: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// Drops what was read ahead (`inner` was moved).
    fn forget(&mut self) {
        self.zeros = 0;
        self.buf.clear();
        self.pos = 0;
    }
}

impl<R: Read> Ahead<R> {
    /// Whether only zero bytes are left. Reads ahead to the first non-zero
    /// byte, at most one chunk past the zeros (which are only counted): a
    /// run of zero records costs its bytes once, however many headers ask.
    fn zeros_to_end(&mut self) -> bool {
        // What came after the zeros already read ahead: its leading zeros
        // join them; a non-zero byte answers.
        let rest = &self.buf[self.pos..];
        let lead = rest.iter().position(|&b| b != 0).unwrap_or(rest.len());
        self.zeros += lead as u64;
        self.pos += lead;
        if self.pos < self.buf.len() {
            return false;
        }
        self.buf.clear();
        self.pos = 0;
        self.buf.resize(64 << 10, 0);
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => {
                    self.buf.clear();
                    return true;
                }
                Ok(k) => match self.buf[..k].iter().position(|&b| b != 0) {
                    None => self.zeros += k as u64,
                    Some(i) => {
                        self.zeros += i as u64;
                        self.buf.truncate(k);
                        self.pos = i;
                        return false;
                    }
                },
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Not known to be zeros: the next read meets the error.
                Err(_) => {
                    self.buf.clear();
                    return false;
                }
            }
        }
    }

    #[cold]
    fn read_ahead(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.zeros > 0 {
            let k = (self.zeros.min(out.len() as u64)) as usize;
            out[..k].fill(0);
            self.zeros -= k as u64;
            return Ok(k);
        }
        let k = out.len().min(self.buf.len() - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        Ok(k)
    }
}

impl<R: Read> Read for Ahead<R> {
    #[inline]
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.zeros == 0 && self.pos == self.buf.len() {
            return self.inner.read(out);
        }
        self.read_ahead(out)
    }
}

/// Reads `len` bytes into `buf` (from its start; it ends up `len` long,
/// or as long as what the stream held) and returns how many came. A
/// record header or block length is only a claim: up to
/// [`GROW_FROM`] bytes are made room for at once, beyond that room grows
/// with the bytes that arrive, so that a few bytes claiming a 128 MiB
/// record (a link type with that limit) or a 16 MiB block never allocate
/// that much.
fn read_claimed(r: &mut impl Read, buf: &mut Vec<u8>, len: usize) -> std::io::Result<usize> {
    if len <= GROW_FROM {
        buf.resize(len, 0);
        let n = read_full(r, buf)?;
        buf.truncate(n);
        return Ok(n);
    }
    buf.clear();
    while buf.len() < len {
        let old = buf.len();
        let want = (len - old).min(GROW_FROM.max(old));
        buf.resize(old + want, 0);
        let n = read_full(r, &mut buf[old..])?;
        buf.truncate(old + n);
        if n < want {
            break;
        }
    }
    Ok(buf.len())
}

/// Bytes `read_claimed` makes room for before any arrive: the largest
/// caplen libpcap takes for most link types (256 KiB).
pub const GROW_FROM: usize = 256 << 10;

/// Reads until `buf` is full or the stream ends; the bytes read.
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

#[cfg(test)]
mod legacy;

#[cfg(test)]
mod tests {
    //! The walker against the parsers it replaced (`legacy`, verbatim): the
    //! reader, repair's scan and the index rebuild give what they gave.
    use super::*;
    use crate::reader::{PcapReader, Record};
    use std::io::Cursor;
    use std::path::PathBuf;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wt-walk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn put(out: &mut Vec<u8>, v: u32, be: bool) {
        out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
    }

    fn frame(i: usize) -> Vec<u8> {
        (0..20 + (i * 37) % 90)
            .map(|j| (i * 7 + j) as u8 | 1)
            .collect()
    }

    /// A pcap file by hand (any precision and byte order); the record
    /// offsets.
    fn pcap(nanos: bool, be: bool, n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut f = Vec::new();
        let magic = if nanos {
            crate::pcap::MAGIC_NS
        } else {
            crate::pcap::MAGIC_US
        };
        put(&mut f, magic, be);
        f.extend_from_slice(&if be { [0, 2, 0, 4] } else { [2, 0, 4, 0] });
        f.extend_from_slice(&[0; 8]);
        put(&mut f, 65535, be);
        put(&mut f, 1, be);
        let mut offs = Vec::new();
        for i in 0..n {
            offs.push(f.len());
            let d = frame(i);
            put(&mut f, 1_700_000_000 + i as u32, be);
            put(
                &mut f,
                if nanos { 123_456_789 } else { 123_456 } + i as u32,
                be,
            );
            put(&mut f, d.len() as u32, be);
            put(&mut f, d.len() as u32 + (i as u32 % 3) * 100, be);
            f.extend_from_slice(&d);
        }
        (f, offs)
    }

    fn block(f: &mut Vec<u8>, kind: u32, body: &[u8], be: bool) -> usize {
        let at = f.len();
        let total = 12 + body.len() as u32;
        put(f, kind, be);
        put(f, total, be);
        f.extend_from_slice(body);
        put(f, total, be);
        at
    }

    fn shb(f: &mut Vec<u8>, be: bool) {
        let mut b = Vec::new();
        put(&mut b, pcapng::BYTE_ORDER_MAGIC, be);
        b.extend_from_slice(&if be { [0, 1, 0, 0] } else { [1, 0, 0, 0] });
        b.extend_from_slice(&[0xff; 8]);
        block(f, pcapng::SHB, &b, be);
    }

    fn idb(f: &mut Vec<u8>, be: bool, snaplen: u32, tsresol: u8) {
        let mut b = Vec::new();
        put(&mut b, if be { 1 << 16 } else { 1 }, be); // linktype 1, reserved
        put(&mut b, snaplen, be);
        b.extend_from_slice(&if be { [0, 9, 0, 1] } else { [9, 0, 1, 0] });
        b.extend_from_slice(&[tsresol, 0, 0, 0]);
        put(&mut b, 0, be); // opt_endofopt
        block(f, pcapng::IDB, &b, be);
    }

    fn epb(f: &mut Vec<u8>, be: bool, ifc: u32, ts: u64, data: &[u8]) -> usize {
        let mut b = Vec::new();
        put(&mut b, ifc, be);
        put(&mut b, (ts >> 32) as u32, be);
        put(&mut b, ts as u32, be);
        put(&mut b, data.len() as u32, be);
        put(&mut b, data.len() as u32 + 4, be);
        b.extend_from_slice(data);
        b.resize(pcapng::pad4(b.len()), 0);
        block(f, pcapng::EPB, &b, be)
    }

    /// Two sections (little-, then big-endian), two interfaces each with
    /// their own resolutions, an unknown block; the packet block offsets.
    fn pcapng_two_sections() -> (Vec<u8>, Vec<usize>) {
        let mut f = Vec::new();
        let mut offs = Vec::new();
        shb(&mut f, false);
        idb(&mut f, false, 65535, 9); // ns
        idb(&mut f, false, 65535, 6); // µs
        offs.push(epb(&mut f, false, 0, 1_700_000_000_123_456_789, &frame(0)));
        offs.push(epb(&mut f, false, 1, 1_700_000_000_123_456, &frame(1)));
        block(&mut f, 0x0BAD, &[1, 2, 3, 4], false); // skipped
        offs.push(epb(&mut f, false, 0, 1_700_000_001_000_000_000, &frame(2)));
        shb(&mut f, true);
        idb(&mut f, true, 1500, 0x80 | 10); // 1/1024 s
        idb(&mut f, true, 1500, 3); // ms
        offs.push(epb(&mut f, true, 1, 1_700_000_002_500, &frame(3)));
        offs.push(epb(&mut f, true, 0, 1_700_000_003 * 1024 + 512, &frame(4)));
        offs.push(epb(&mut f, true, 1, 1_700_000_004_001, &frame(5)));
        (f, offs)
    }

    /// What a reader gives: the header (or error) and every record (or
    /// error), as text so that errors compare by their messages.
    fn read_all<R>(
        r: Result<R, StorageError>,
        mut next: impl FnMut(&mut R, &mut Record) -> Result<bool, StorageError>,
        pos: impl Fn(&R) -> (u64, u64),
    ) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(mut r) = r.map_err(|e| out.push(format!("open: {e:?} / {e}"))) else {
            return out;
        };
        let mut rec = Record::default();
        loop {
            match next(&mut r, &mut rec) {
                Ok(true) => out.push(format!("{rec:?} at {:?}", pos(&r))),
                Ok(false) => return out,
                Err(e) => {
                    out.push(format!("{e:?} / {e}"));
                    return out;
                }
            }
        }
    }

    /// The reader, scan_from (from 0 and from `from`) and the index rebuild
    /// give what the old code gave on `bytes`; the walker's records are the
    /// old reader's. Returns the old reader's records (text) for checks.
    fn same_as_before(d: &Path, bytes: &[u8], from: u64) -> Vec<String> {
        let p = d.join("x.cap");
        std::fs::write(&p, bytes).unwrap();
        let len = bytes.len() as u64;
        let old = read_all(
            legacy::OldReader::new(Cursor::new(bytes), &p, len),
            |r, rec| r.next_into(rec),
            |r| (r.offset(), r.last_len()),
        );
        let new = read_all(
            PcapReader::new(Cursor::new(bytes), &p, len),
            |r, rec| r.next_into(rec),
            |r| (r.offset(), r.last_len()),
        );
        assert_eq!(old, new, "reader");
        // The walker itself: the old reader's records, where they lie.
        let mut oldr = legacy::OldReader::new(Cursor::new(bytes), &p, len).ok();
        let mut w = Walker::new(Cursor::new(bytes));
        let (mut rec, mut data) = (Record::default(), Vec::new());
        while let Some(or) = oldr.as_mut() {
            if !or.next_into(&mut rec).unwrap_or(false) {
                break;
            }
            let m = w.next_into(&mut data).expect("the walker has it too");
            assert_eq!(
                (m.offset, m.file_len, m.ts_ns, m.orig_len, m.caplen as usize),
                (
                    or.offset() - or.last_len(),
                    or.last_len(),
                    rec.ts_ns,
                    rec.orig_len,
                    rec.data.len()
                )
            );
            assert_eq!(data, rec.data);
        }
        for start in [0, from] {
            let a = legacy::scan_from(&p, start).map_err(|e| e.to_string());
            let b = crate::repair::scan_from(&p, start).map_err(|e| e.to_string());
            assert_eq!(a, b, "scan_from {start}");
        }
        let a = legacy::rebuild_entries(&p, 256).map_err(|e| e.to_string());
        // The old index had no flow sets: compare the blocks' places and times.
        let b = crate::index::rebuild(&p, 256)
            .map(|_| crate::index::read(&crate::index::path_for(&p)).unwrap())
            .map(|es| {
                es.into_iter()
                    .map(|e| crate::index::Entry { flows: None, ..e })
                    .collect::<Vec<_>>()
            })
            .map_err(|e| e.to_string());
        assert_eq!(a, b, "index rebuild");
        old
    }

    /// Whole, cut at every byte of the last record, zero padded, and with
    /// bad lengths in the middle: the same as before, every time.
    fn every_damage(name: &str, full: &[u8], offs: &[usize], len_at: usize, ng: bool) {
        let d = tmpdir(name);
        let from = offs[1] as u64;
        let whole = same_as_before(&d, full, from);
        assert_eq!(whole.len(), offs.len(), "{whole:#?}");
        assert!(whole.iter().all(|r| r.starts_with("Record")), "{whole:#?}");
        let last = *offs.last().unwrap();
        for cut in last..full.len() {
            let r = same_as_before(&d, &full[..cut], from);
            let end = r.last().unwrap();
            if cut == last {
                assert_eq!(r.len(), offs.len() - 1, "cut at {cut}: n-1 records");
                assert!(end.starts_with("Record"), "{end}");
            } else {
                assert_eq!(
                    r.len(),
                    offs.len(),
                    "cut at {cut}: n-1 records and the error"
                );
                assert!(
                    end.starts_with("Truncated") || end.starts_with("Corrupt"),
                    "{end}"
                );
            }
            let (end, n, _) = crate::repair::scan_from(&d.join("x.cap"), 0).unwrap();
            assert_eq!((end, n), (last as u64, offs.len() as u64 - 1));
        }
        for zeros in [1, 3, 4, 7, 8, 11, 12, 15, 16, 17, 100, 4096] {
            let mut z = full.to_vec();
            z.resize(full.len() + zeros, 0);
            same_as_before(&d, &z, from);
            let (end, n, _) = crate::repair::scan_from(&d.join("x.cap"), 0).unwrap();
            assert_eq!((end, n), (full.len() as u64, offs.len() as u64));
            // Zeros, then data. pcap: each 16 zero bytes before the data
            // are an empty record, as libpcap reads them (the old readers
            // stopped there); pcapng: a block of length 0 is corrupt.
            z.push(1);
            if ng || zeros < RECORD_HEADER_LEN {
                same_as_before(&d, &z, from);
            } else {
                let k = zeros / RECORD_HEADER_LEN;
                let mut w = Walker::new(Cursor::new(&z));
                let metas: Vec<Meta> = std::iter::from_fn(|| w.next()).collect();
                assert_eq!(metas.len(), offs.len() + k, "{zeros} zeros");
                for (j, m) in metas[offs.len()..].iter().enumerate() {
                    let at = (full.len() + j * RECORD_HEADER_LEN) as u64;
                    assert_eq!(
                        (m.offset, m.file_len, m.caplen, m.orig_len, m.ts_ns, m.odd),
                        (at, 16, 0, 0, 0, true)
                    );
                }
                let stop = w.stop().unwrap();
                let end = (full.len() + k * RECORD_HEADER_LEN) as u64;
                assert_eq!(stop.offset, end);
                assert!(matches!(
                    stop.end,
                    End::Torn {
                        what: "record header",
                        ..
                    }
                ));
                std::fs::write(d.join("x.cap"), &z).unwrap();
                let (e, n, _) = crate::repair::scan_from(&d.join("x.cap"), 0).unwrap();
                assert_eq!((e, n), (end, (offs.len() + k) as u64));
            }
        }
        // A corrupt length in the middle (and on the last record).
        let mid = offs[offs.len() / 2];
        for at in [mid, last] {
            let values: &[u32] = if ng {
                &[0, 7, 9, 13, 1 << 25, 4, 48, 4096, u32::MAX]
            } else {
                &[0, 1, 262_145, u32::MAX, 4096, 3000]
            };
            for &v in values {
                for be in [false, true] {
                    let mut bad = full.to_vec();
                    let v = if be { v.to_be_bytes() } else { v.to_le_bytes() };
                    bad[at + len_at..at + len_at + 4].copy_from_slice(&v);
                    same_as_before(&d, &bad, from);
                }
            }
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn pcap_ns_us_and_big_endian_as_before() {
        for (nanos, be) in [(true, false), (false, false), (true, true), (false, true)] {
            let (f, offs) = pcap(nanos, be, 7);
            // The caplen field; then orig_len and the fraction.
            every_damage(&format!("pcap-{nanos}-{be}"), &f, &offs, 8, false);
            every_damage(&format!("pcap-orig-{nanos}-{be}"), &f, &offs, 12, false);
            every_damage(&format!("pcap-frac-{nanos}-{be}"), &f, &offs, 4, false);
        }
        // Stamps are read in their precision and byte order.
        let (f, _) = pcap(false, true, 2);
        let mut w = Walker::new(Cursor::new(&f));
        assert_eq!(w.format(), Some(Format::PcapUs));
        let m = w.next().unwrap();
        assert_eq!(m.ts_ns, 1_700_000_000_123_456_000);
        assert_eq!((m.offset, m.file_len, m.caplen), (24, 36, 20));
        assert!(w.next().is_some() && w.next().is_none());
        assert!(matches!(w.stop().unwrap().end, End::Clean));
    }

    #[test]
    fn pcapng_two_sections_and_interfaces_as_before() {
        let (f, offs) = pcapng_two_sections();
        // The leading length; then the trailing one of the block.
        every_damage("ng-len", &f, &offs, 4, true);
        let d = tmpdir("ng-trailer");
        for &at in &offs {
            let total = u32::from_le_bytes(f[at + 4..at + 8].try_into().unwrap());
            let total = if at > offs[2] {
                total.swap_bytes()
            } else {
                total
            } as usize;
            let mut bad = f.clone();
            bad[at + total - 4] ^= 4;
            same_as_before(&d, &bad, offs[1] as u64);
        }
        std::fs::remove_dir_all(d).unwrap();
        // Each interface's resolution, each section's byte order.
        let mut w = Walker::new(Cursor::new(&f));
        let ts: Vec<(u64, u32)> = std::iter::from_fn(|| w.next())
            .map(|m| (m.ts_ns, m.interface))
            .collect();
        assert_eq!(
            ts,
            [
                (1_700_000_000_123_456_789, 0),
                (1_700_000_000_123_456_000, 1),
                (1_700_000_001_000_000_000, 0),
                (1_700_000_002_500_000_000, 1),
                (1_700_000_003_500_000_000, 0),
                (1_700_000_004_001_000_000, 1),
            ]
        );
        assert_eq!(w.offset(), f.len() as u64);
    }

    #[test]
    fn wiretape_files_as_before() {
        use crate::{FileSink, PcapWriter};
        let d = tmpdir("wt");
        for fmt in [Format::PcapNs, Format::PcapUs, Format::PcapNg] {
            let p = d.join(format!("{fmt:?}.{}", fmt.extension()));
            let mut w = PcapWriter::with_format(
                FileSink::with_block_size(&p, 4096).unwrap(),
                100,
                fmt,
                "e",
            );
            for i in 0..9 {
                w.write(1_000_000_007 + i * 999, &frame(i as usize))
                    .unwrap();
            }
            w.close().unwrap();
            let f = std::fs::read(&p).unwrap();
            let mut offs = Vec::new();
            let mut walk = Walker::new(Cursor::new(&f));
            while let Some(m) = walk.next() {
                offs.push(m.offset as usize);
            }
            let len_at = if fmt == Format::PcapNg { 4 } else { 8 };
            every_damage(
                &format!("wt-{fmt:?}"),
                &f,
                &offs,
                len_at,
                fmt == Format::PcapNg,
            );
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn simple_packet_blocks_read_as_before() {
        let d = tmpdir("spb");
        let mut f = Vec::new();
        shb(&mut f, false);
        idb(&mut f, false, 50, 9);
        let mut offs = Vec::new();
        for i in 0..4 {
            let data = frame(i);
            let mut b = Vec::new();
            put(&mut b, data.len() as u32, false);
            b.extend_from_slice(&data);
            b.resize(pcapng::pad4(b.len()), 0);
            offs.push(block(&mut f, pcapng::SPB, &b, false));
        }
        let p = d.join("x.cap");
        std::fs::write(&p, &f).unwrap();
        let len = f.len() as u64;
        let old = read_all(
            legacy::OldReader::new(Cursor::new(&f), &p, len),
            |r, rec| r.next_into(rec),
            |r| (r.offset(), r.last_len()),
        );
        let new = read_all(
            PcapReader::new(Cursor::new(&f), &p, len),
            |r, rec| r.next_into(rec),
            |r| (r.offset(), r.last_len()),
        );
        assert_eq!(old, new);
        // scan_from counts captured bytes as the reader does (cut to the
        // snap length); the old scan counted whole block bodies.
        let caps: u64 = (0..4).map(|i| frame(i).len().min(50) as u64).sum();
        assert_eq!(crate::repair::scan_from(&p, 0).unwrap(), (len, 4, caps));
        let (end, n, _) = legacy::scan_from(&p, 0).unwrap();
        assert_eq!((end, n), (len, 4));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Hands out one byte per read: every read ahead and hand-back path.
    struct OneByte<R>(R);

    impl<R: Read> Read for OneByte<R> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(1);
            self.0.read(&mut out[..n])
        }
    }

    /// A record as [`records`] gives it: offset, caplen, orig_len, stamp, data.
    type Rec = (u64, u32, u32, u64, Vec<u8>);

    /// Every record the walker gives, read at once and a byte at a time
    /// (the same), and its stop.
    fn records(b: &[u8]) -> (Vec<Rec>, Stop) {
        let walk = |w: &mut Walker<Box<dyn Read + '_>>| {
            let mut d = Vec::new();
            let mut v = Vec::new();
            while let Some(m) = w.next_into(&mut d) {
                v.push((m.offset, m.caplen, m.orig_len, m.ts_ns, d.clone()));
            }
            v
        };
        let mut w: Walker<Box<dyn Read>> = Walker::new(Box::new(Cursor::new(b)));
        let a = walk(&mut w);
        let mut w1: Walker<Box<dyn Read>> = Walker::new(Box::new(OneByte(Cursor::new(b))));
        assert_eq!(walk(&mut w1), a, "a byte at a time");
        let (s, s1) = (w.stop.take().unwrap(), w1.stop.take().unwrap());
        assert_eq!(
            (s.offset, format!("{:?}", s.end)),
            (s1.offset, format!("{:?}", s1.end))
        );
        (a, s)
    }

    /// `f` with `n` zero bytes put in at `at`.
    fn with_zeros(f: &[u8], at: usize, n: usize) -> Vec<u8> {
        let mut b = f[..at].to_vec();
        b.resize(at + n, 0);
        b.extend_from_slice(&f[at..]);
        b
    }

    /// tcpdump's test capture bgp_vpn_rt-oobr.pcap holds an all-zero
    /// record header between records, and libpcap reads it as an empty
    /// record (stamped 1970): so does the walker, when anything but zeros
    /// follows it; only zeros to the end are padding. ns and µs, either
    /// byte order, read at once and a byte at a time; repair cuts nothing
    /// libpcap reads after such a record.
    #[test]
    fn an_all_zero_header_before_records_is_an_empty_record() {
        let d = tmpdir("zero-record");
        let p = d.join("z.pcap");
        for (nanos, be) in [(true, false), (false, false), (true, true), (false, true)] {
            let (f, offs) = pcap(nanos, be, 9);
            let whole = records(&f).0;
            // 2 records, an all-zero header, 7 records: 10, as tcpdump reads.
            let b = with_zeros(&f, offs[2], 16);
            let (got, stop) = records(&b);
            assert_eq!(got.len(), 10, "nanos {nanos}, be {be}");
            assert_eq!(got[2], (offs[2] as u64, 0, 0, 0, Vec::new()));
            for (k, r) in got.iter().enumerate().filter(|(k, _)| *k != 2) {
                let (o, c, l, t, data) = &whole[k - usize::from(k > 2)];
                let shift = if k > 2 { 16 } else { 0 };
                assert_eq!(r, &(o + shift, *c, *l, *t, data.clone()), "record {k}");
            }
            assert!(matches!(stop.end, End::Clean));
            assert_eq!(stop.offset, b.len() as u64);
            let mut w = Walker::new(Cursor::new(&b));
            let odd = std::iter::from_fn(|| w.next()).filter(|m| m.odd).count();
            let odd_before = {
                let mut w = Walker::new(Cursor::new(&f));
                std::iter::from_fn(|| w.next()).filter(|m| m.odd).count()
            };
            assert_eq!(odd, odd_before + 1, "an empty record is odd (orig_len 0)");
            // The strict reader reads it to its end; repair leaves it whole.
            let mut r = PcapReader::new(Cursor::new(&b), &p, b.len() as u64).unwrap();
            let mut rec = Record::default();
            let mut n = 0;
            while r.next_into(&mut rec).unwrap() {
                n += 1;
            }
            assert_eq!(n, 10);
            std::fs::write(&p, &b).unwrap();
            let rep = crate::repair::repair(&p).unwrap();
            assert_eq!(
                (rep.records, rep.len_after, rep.changed()),
                (10, b.len() as u64, false)
            );
            assert_eq!(std::fs::read(&p).unwrap(), b);
            // Then zeros to the end: padding, which repair cuts, and only it.
            let mut padded = b.clone();
            padded.resize(b.len() + 4096 + 5, 0);
            let (got, stop) = records(&padded);
            assert_eq!(got.len(), 10);
            assert!(matches!(stop.end, End::Zeros(_)), "{stop:?}");
            assert_eq!(stop.offset, b.len() as u64);
            std::fs::write(&p, &padded).unwrap();
            let rep = crate::repair::repair(&p).unwrap();
            assert_eq!((rep.records, rep.len_after), (10, b.len() as u64));
            assert_eq!(std::fs::read(&p).unwrap(), b);
            // Empty records first and in a row, a torn record last: repair
            // cuts the torn record only.
            let b = with_zeros(&with_zeros(&f, offs[5], 48), offs[0], 16);
            let torn = &b[..b.len() - 3];
            let (got, stop) = records(torn);
            assert_eq!(got.len(), 9 + 4 - 1);
            assert_eq!(got[0].1, 0);
            assert!(got[6..9].iter().all(|r| r.1 == 0 && r.4.is_empty()));
            assert!(matches!(stop.end, End::Torn { .. }));
            std::fs::write(&p, torn).unwrap();
            let rep = crate::repair::repair(&p).unwrap();
            let last = *offs.last().unwrap() + 64;
            assert_eq!((rep.records, rep.len_after), (12, last as u64));
            assert_eq!(std::fs::read(&p).unwrap(), b[..last]);
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A long run of zeros before records: one empty record per 16 bytes,
    /// the run read ahead once (not once per header). Zeros that are not a
    /// whole number of headers before records: the bytes after them are
    /// read as libpcap reads them (here a header libpcap refuses), and
    /// repair refuses to cut.
    #[test]
    fn runs_of_zeros_before_records() {
        let (f, offs) = pcap(true, false, 4);
        let n = 100_000;
        let b = with_zeros(&f, offs[1], n * 16);
        let mut w = Walker::new(Cursor::new(&b));
        let metas: Vec<Meta> = std::iter::from_fn(|| w.next()).collect();
        assert_eq!(metas.len(), 4 + n);
        assert!(metas[1..=n].iter().all(|m| m.caplen == 0));
        assert_eq!(metas[n + 1].offset, (offs[1] + n * 16) as u64);
        assert!(matches!(w.stop().unwrap().end, End::Clean));
        // 20 zero bytes: one empty record, then a header made of 4 zeros
        // and the next record's first 12 bytes (its fraction as caplen).
        let b = with_zeros(&f, offs[1], 20);
        let (got, stop) = records(&b);
        assert_eq!(got.len(), 2);
        assert_eq!(stop.offset, (offs[1] + 16) as u64);
        assert!(matches!(
            stop.end,
            End::Corrupt(Why::RecordHeader {
                caplen: 123_456_790,
                ..
            })
        ));
        let d = tmpdir("zero-run");
        let p = d.join("z.pcap");
        std::fs::write(&p, &b).unwrap();
        assert!(matches!(
            crate::repair::repair(&p),
            Err(StorageError::Corrupt { .. })
        ));
        assert_eq!(std::fs::read(&p).unwrap(), b, "left alone");
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A stream of zeros from its first byte is padding from the start
    /// (space allocated ahead that no write reached): no header.
    #[test]
    fn all_zeros_is_padding_without_a_header() {
        for n in [4, 24, 4096] {
            let z = vec![0u8; n];
            let w = Walker::new(Cursor::new(&z));
            let s = w.stop().unwrap();
            assert!(matches!(s.end, End::Zeros(Why::BadMagic(0))), "{s:?}");
            assert!(!w.header_complete() && !s.header_complete);
        }
        let (f, _) = pcap(true, false, 1);
        for cut in [0, 3, 10, 23] {
            let w = Walker::new(Cursor::new(&f[..cut]));
            assert!(!w.header_complete());
            let e = w.stop().unwrap().error(Path::new("f"), cut as u64).unwrap();
            assert!(
                e.to_string().contains("`wiretape repair` removes it"),
                "{e}"
            );
        }
        assert!(Walker::new(Cursor::new(&f[..24])).header_complete());
        // pcapng: a section header without an interface is no header
        // (libpcap refuses such a file).
        let mut ng = Vec::new();
        shb(&mut ng, false);
        let shb_len = ng.len();
        idb(&mut ng, false, 65535, 9);
        for cut in [shb_len, shb_len + 8, ng.len() - 1] {
            assert!(!Walker::new(Cursor::new(&ng[..cut])).header_complete());
        }
        assert!(Walker::new(Cursor::new(&ng)).header_complete());
    }

    #[test]
    fn a_stop_says_where_and_how() {
        let (f, offs) = pcap(true, false, 3);
        let cut = &f[..offs[2] + 5];
        let mut w = Walker::new(Cursor::new(cut));
        assert_eq!(std::iter::from_fn(|| w.next()).count(), 2);
        let s = w.stop().unwrap();
        assert_eq!(s.offset, offs[2] as u64);
        assert!(matches!(
            s.end,
            End::Torn {
                what: "record header",
                ..
            }
        ));
        let mut z = f.clone();
        z.resize(f.len() + 100, 0);
        let mut w = Walker::new(Cursor::new(&z));
        assert_eq!(std::iter::from_fn(|| w.next()).count(), 3);
        assert!(matches!(w.stop().unwrap().end, End::Zeros(_)));
        let mut bad = f.clone();
        bad[offs[1] + 8] = 0xff;
        bad[offs[1] + 11] = 0xff;
        let mut w = Walker::new(Cursor::new(&bad));
        assert_eq!(std::iter::from_fn(|| w.next()).count(), 1);
        let s = w.stop().unwrap();
        assert_eq!(s.offset, offs[1] as u64);
        assert!(matches!(s.end, End::Corrupt(Why::RecordHeader { .. })));
        let e = s
            .error(Path::new("f"), bad.len() as u64)
            .unwrap()
            .to_string();
        let at = format!("corrupt record at byte {}: caplen", offs[1]);
        assert!(e.contains(&at), "{e}");
    }
}
