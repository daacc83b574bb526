//! One walker over the records of a capture file, for every reader of them:
//! [`crate::PcapReader`] (and so [`crate::FileInfo::scan`]),
//! the write path's repair and index rebuild (`wiretape-storage`).
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

use crate::error::StorageError;
use crate::pcap::{FileHeader, Format, FILE_HEADER_LEN, MAX_SNAPLEN, RECORD_HEADER_LEN};
use crate::pcapng::{self, Interface};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;
use wiretape_filter::linktype;

mod steno;

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
    /// stenotype's file: bytes that are not its block or frame (or a file
    /// cut short inside one), in words for the user.
    Steno(String),
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
                Why::Steno(what) => StorageError::Steno {
                    path: path.to_owned(),
                    offset,
                    len,
                    what: what.clone(),
                },
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
    /// stenotype's file: where the walk is in it.
    steno: steno::StenoPos,
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
            steno: Default::default(),
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

    /// Stream offset at or after which the next record starts: no record
    /// not yet handed out starts before it. A caller that wants nothing
    /// from some offset on learns here, without reading the next record
    /// (nor its bytes), that the walk got there.
    pub fn next_at(&self) -> u64 {
        match self.pending {
            Some(p) => p.0,
            None if self.format == Some(Format::Steno) => self.steno_next_at(),
            None => self.off,
        }
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
            Some(Format::Steno) => self.step_steno(data).map_err(steno_cut),
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
        if n == 4
            && h[..4] == [2, 0, 0, 0]
            && self.read_steno_head([2, 0, 0, 0]).map_err(steno_cut)?
        {
            return Ok(());
        }
        if n == 0 {
            // Not a byte: a file created whose header never landed (its
            // volume went read-only or full first, where it cannot be
            // removed either). It holds no frame and nothing is cut in it:
            // an empty capture, not damage (`repair` still removes it).
            return Err(Stop::at(0, End::Clean));
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
        if self.format == Some(Format::Steno) {
            if let Err(s) = self.seek_steno(to).map_err(steno_cut) {
                self.stop = Some(s);
            }
            self.resumed = true;
            return;
        }
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

/// stenotype's file cut short: one line that says so, not repair's (which
/// never touches Stenographer's files).
fn steno_cut(mut s: Stop) -> Stop {
    if let End::Torn { what, .. } = s.end {
        s.end = End::Corrupt(Why::Steno(format!(
            "the file ends inside a {what} (a file cut short, or one stenotype still writes)"
        )));
    }
    s
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
        crate::steno::TPACKET_V3,
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
