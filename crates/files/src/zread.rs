//! Reading compressed captures ([`crate::compress`]): [`ZReader`] reads a
//! `.pcap.lz4` / `.pcap.zst` (and pcapng) file as the plain stream it holds,
//! `Read + Seek` in the offsets of that stream, so the record walker, the
//! extraction merge, the index rebuild, `info`, `repair` and `replay` read
//! it as they read a plain file. A seek goes to the compressed unit the
//! index ([`crate::index::Entry::z`]) names for that offset (or the nearest
//! one before it), and only the units read are decompressed
//! ([`ZReader::blocks_decompressed`]). [`ZReader::open`] tells the kinds apart by the
//! first 4 bytes.

use crate::compress::{Placed, LZ4_HEADER_LEN, LZ4_MAGIC, LZ4_MAX_BLOCK, LZ4_STORED, ZSTD_MAGIC};
use crate::crypt::AgeReader;
use crate::ReadOptions;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The compressed formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One LZ4 frame.
    Lz4,
    /// zstd frames.
    Zstd,
}

/// How the compressed stream ended (once read to its end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZEnd {
    /// lz4: the end mark and content checksum; zstd: the file ends after a
    /// whole frame.
    Whole,
    /// The file ends inside a unit, or (lz4) without the end mark: the
    /// last whole unit ends at this file offset (where repair cuts).
    Torn(u64),
}

/// The kind of compressed capture `path` is (None: plain or unknown),
/// read from its first 4 bytes.
pub fn kind(path: &Path) -> std::io::Result<Option<Kind>> {
    let mut m = [0u8; 4];
    let f = File::open(path)?;
    let n = f.read_at(&mut m, 0)?;
    Ok(kind_of(&m[..n]))
}

fn kind_of(m: &[u8]) -> Option<Kind> {
    let m = u32::from_le_bytes(m.get(..4)?.try_into().ok()?);
    match m {
        LZ4_MAGIC => Some(Kind::Lz4),
        ZSTD_MAGIC => Some(Kind::Zstd),
        _ => None,
    }
}

/// What a compressed stream is read from: the file, or the plain stream
/// of an age file ([`crate::crypt`]: `.pcap.lz4.age`).
pub enum Raw {
    /// The file itself.
    File(File),
    /// An age file's plain stream.
    Age(Box<AgeReader>),
}

impl From<File> for Raw {
    fn from(f: File) -> Self {
        Raw::File(f)
    }
}

impl Raw {
    fn read_at(&mut self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        match self {
            Raw::File(f) => f.read_at(buf, at),
            Raw::Age(a) => a.read_at(buf, at),
        }
    }

    /// The stream's length (an age file's: what its size implies).
    fn len(&self) -> std::io::Result<u64> {
        match self {
            Raw::File(f) => Ok(f.metadata()?.len()),
            Raw::Age(a) => a.plain_len(),
        }
    }

    fn file(&self) -> &File {
        match self {
            Raw::File(f) => f,
            Raw::Age(a) => a.file(),
        }
    }
}

/// A capture file opened by its first bytes: which layers it has.
pub enum Layers {
    /// A plain capture.
    Plain(File),
    /// An age file holding a plain capture (`.pcap.age`).
    Age(Box<AgeReader>),
    /// A compressed capture, maybe inside an age file.
    Z(Box<ZReader>),
}

/// Opens `path` through its layers: age (with the identities of `opts`),
/// then compression (with its index, where `opts` says it is).
pub fn open_layers(path: &Path, opts: &ReadOptions) -> std::io::Result<Layers> {
    Ok(open_layers_head(path, opts)?.0)
}

/// A capture file's head, where the reader's options keep heads
/// ([`crate::kept::Kept::head`]).
struct Head {
    /// Its first [`crate::kept::HEAD_BYTES`] (or all of a shorter file).
    bytes: std::sync::Arc<[u8]>,
    /// The file it is the head of.
    id: crate::kept::FileId,
    /// Kept from an earlier open (else read now).
    kept: bool,
}

/// [`open_layers`], and where `opts` keep capture files' heads (a server),
/// the file's head: the one kept for this very file (nothing read), else
/// its first page read now (one page: the read that finds its format).
fn open_layers_head(path: &Path, opts: &ReadOptions) -> std::io::Result<(Layers, Option<Head>)> {
    let file = File::open(path)?;
    // Its first bytes only, so far: no read ahead around them (on a cold
    // cache, a selective query over many files would read tens of KiB of
    // each for a few bytes). A plain file is handed out so (its header is
    // all a caller reads of it, or the caller reads it in order and says
    // so: [`open_buffered`]); a compressed one is read in order.
    crate::sys::advise_random(&file);
    let mut m = [0u8; 22];
    let kept = opts.kept();
    let mut head = None;
    if kept.keeps_heads() {
        let meta = file.metadata()?;
        let id = crate::kept::file_id(&meta);
        head = match kept.head(path, id) {
            Some(bytes) => Some(Head {
                bytes,
                id,
                kept: true,
            }),
            None => {
                // Its first page, or all of a shorter file (as long as the
                // `fstat` just now says; cut since: no head kept).
                let mut b = vec![0u8; (meta.len() as usize).min(crate::kept::HEAD_BYTES)];
                match file.read_exact_at(&mut b, 0) {
                    Ok(()) => Some(Head {
                        bytes: b.into(),
                        id,
                        kept: false,
                    }),
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => None,
                    Err(e) => return Err(e),
                }
            }
        };
    }
    let n = match &head {
        Some(h) => {
            let n = h.bytes.len().min(m.len());
            m[..n].copy_from_slice(&h.bytes[..n]);
            n
        }
        None => file.read_at(&mut m, 0)?,
    };
    let mut raw = if crate::crypt::is_age_bytes(&m[..n]) {
        Raw::Age(Box::new(AgeReader::open(path, opts.identities())?))
    } else {
        Raw::File(file)
    };
    // A plain file's first bytes are those read above; an age file's
    // plain stream starts with its own.
    let n = match &mut raw {
        Raw::File(_) => n,
        Raw::Age(_) => raw.read_at(&mut m[..4], 0)?,
    };
    let Some(kind) = kind_of(&m[..n]) else {
        return Ok(match raw {
            Raw::File(f) => (Layers::Plain(f), head),
            Raw::Age(mut a) => {
                a.seek(SeekFrom::Start(0))?;
                (Layers::Age(a), None)
            }
        });
    };
    if let Raw::File(f) = &raw {
        crate::sys::advise_normal(f);
    }
    let entries = crate::index::read(&opts.index_path(path)).unwrap_or_default();
    if kind == Kind::Lz4 {
        let mut h = [0u8; LZ4_HEADER_LEN as usize];
        let n = raw.read_at(&mut h, 0)?;
        let head = crate::compress::lz4_frame_header();
        if n < h.len() && head.starts_with(&h[..n]) {
            // The frame header cut short (a crash right after the file
            // was created): a stream torn before its first unit.
            let mut z = ZReader::new(raw, kind, &[]);
            z.end = Some(ZEnd::Torn(0));
            return Ok((Layers::Z(Box::new(z)), None));
        }
        if h[..] != head[..] {
            return Err(std::io::Error::new(
                ErrorKind::InvalidData,
                "an LZ4 frame wiretape did not write (it reads independent 4 MB blocks with a content checksum only)",
            ));
        }
    }
    Ok((Layers::Z(Box::new(ZReader::new(raw, kind, &entries))), None))
}

/// A compressed capture read as its plain stream.
pub struct ZReader {
    file: Raw,
    kind: Kind,
    /// Units known: uncompressed start -> file offset.
    known: BTreeMap<u64, u64>,
    next_c: u64,
    next_u: u64,
    buf: Vec<u8>,
    buf_u: u64,
    pos: usize,
    want: Option<u64>,
    end: Option<ZEnd>,
    decompressed: u64,
    read: u64,
    scratch: Vec<u8>,
    zd: Option<zstd::bulk::Decompressor<'static>>,
    /// Every unit decoded, in order of decoding.
    placed: Vec<Placed>,
    /// LZ4's content checksum over the stream decoded from its start, and
    /// how far it got (a seek ahead stops it).
    xxh: twox_hash::XxHash32,
    hashed: u64,
}

impl ZReader {
    /// Reads `file` (of `kind`); `index` entries (with their compressed
    /// locations) let seeks start at the right unit.
    pub fn new(file: impl Into<Raw>, kind: Kind, index: &[crate::index::Entry]) -> Self {
        let first = match kind {
            Kind::Lz4 => LZ4_HEADER_LEN,
            Kind::Zstd => 0,
        };
        let mut known = BTreeMap::new();
        known.insert(0, first);
        for z in index.iter().filter_map(|e| e.z) {
            known.insert(z.u_start, z.c_off);
        }
        ZReader {
            file: file.into(),
            kind,
            known,
            next_c: first,
            next_u: 0,
            buf: Vec::new(),
            buf_u: 0,
            pos: 0,
            want: None,
            end: None,
            decompressed: 0,
            read: 0,
            scratch: Vec::new(),
            zd: None,
            placed: Vec::new(),
            xxh: twox_hash::XxHash32::with_seed(0),
            hashed: 0,
        }
    }

    /// Opens `path` if it is compressed (None: a plain file, or an age
    /// file holding one), using its index when it has one with compressed
    /// locations; an age file is opened through [`open_layers`].
    pub fn open(path: &Path, opts: &ReadOptions) -> std::io::Result<Option<Self>> {
        Ok(match open_layers(path, opts)? {
            Layers::Z(z) => Some(*z),
            _ => None,
        })
    }

    /// The file (for its lock).
    pub fn file(&self) -> &File {
        self.file.file()
    }

    /// The age file's reader under the compressed stream, if encrypted.
    pub fn age(&self) -> Option<&AgeReader> {
        match &self.file {
            Raw::Age(a) => Some(a),
            Raw::File(_) => None,
        }
    }

    /// Which compression.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Compressed units decompressed so far.
    pub fn blocks_decompressed(&self) -> u64 {
        self.decompressed
    }

    /// Compressed bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// How the stream ended, once read to its end.
    pub fn end(&self) -> Option<ZEnd> {
        self.end
    }

    /// The units decoded so far, in the order they were decoded.
    pub fn placed(&self) -> &[Placed] {
        &self.placed
    }

    /// The unit holding uncompressed offset `u`, among those decoded.
    pub fn unit_of(&self, u: u64) -> Option<Placed> {
        let i = self.placed.partition_point(|p| p.u_start <= u);
        let p = *self.placed.get(i.checked_sub(1)?)?;
        (u < p.u_start + p.u_len.max(1)).then_some(p)
    }

    fn read_at(&mut self, at: u64, n: usize) -> std::io::Result<usize> {
        // A length read from the file is a claim: room for what the file
        // holds, not for what a few bytes say (fuzzing, issue 23).
        let n = if n > 1 << 16 {
            n.min(self.file.len()?.saturating_sub(at) as usize)
        } else {
            n
        };
        self.scratch.resize(n, 0);
        let mut got = 0;
        while got < n {
            match self.file.read_at(&mut self.scratch[got..], at + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.scratch.truncate(got);
        Ok(got)
    }

    /// Decodes the unit at `next_c` into `buf`; false at the end.
    fn decode_next(&mut self) -> std::io::Result<bool> {
        if self.end.is_some() {
            return Ok(false);
        }
        let c = self.next_c;
        let clen = match self.kind {
            Kind::Lz4 => {
                if self.read_at(c, 4)? < 4 {
                    self.end = Some(ZEnd::Torn(c));
                    return Ok(false);
                }
                let w = u32::from_le_bytes(self.scratch[..4].try_into().unwrap());
                if w == 0 {
                    // The end mark and checksum, ending the file; zeros of
                    // an interrupted aligned write are not one.
                    let whole = self.read_at(c + 4, 4)? == 4 && {
                        let sum = u32::from_le_bytes(self.scratch[..4].try_into().unwrap());
                        let len = self.file.len()?;
                        len == c + 8
                            && (self.hashed != self.next_u
                                || std::hash::Hasher::finish(&self.xxh) as u32 == sum)
                    };
                    self.end = Some(if whole { ZEnd::Whole } else { ZEnd::Torn(c) });
                    return Ok(false);
                }
                let len = (w & !LZ4_STORED) as usize;
                if len > LZ4_MAX_BLOCK {
                    return Err(bad(c, "an LZ4 block larger than 4 MB"));
                }
                if self.read_at(c + 4, len)? < len {
                    self.end = Some(ZEnd::Torn(c));
                    return Ok(false);
                }
                if w & LZ4_STORED != 0 {
                    self.buf.clear();
                    self.buf.extend_from_slice(&self.scratch);
                } else {
                    // LZ4 decodes to at most 255 bytes per byte: room
                    // for that, not 4 MB, behind a small block.
                    self.buf.resize(LZ4_MAX_BLOCK.min(len * 256 + 64), 0);
                    let n = lz4_flex::block::decompress_into(&self.scratch, &mut self.buf)
                        .map_err(|_| bad(c, "an LZ4 block that does not decode"))?;
                    self.buf.truncate(n);
                }
                4 + len as u64
            }
            Kind::Zstd => {
                let Some((len, content)) = self.zstd_frame_len(c)? else {
                    return Ok(false);
                };
                if self.read_at(c, len as usize)? < len as usize {
                    self.end = Some(ZEnd::Torn(c));
                    return Ok(false);
                }
                if content > 1 << 30 {
                    return Err(bad(c, "a zstd frame larger than 1 GB"));
                }
                if self.zd.is_none() {
                    self.zd = Some(zstd::bulk::Decompressor::new()?);
                }
                self.buf.clear();
                self.buf.reserve(content as usize);
                let zd = self.zd.as_mut().expect("made above");
                zd.decompress_to_buffer(&self.scratch, &mut self.buf)
                    .map_err(|_| bad(c, "a zstd frame that does not decode"))?;
                len
            }
        };
        let p = Placed {
            u_start: self.next_u,
            u_len: self.buf.len() as u64,
            c_off: c,
            c_len: clen,
        };
        if self.kind == Kind::Lz4 && self.hashed == p.u_start {
            std::hash::Hasher::write(&mut self.xxh, &self.buf);
            self.hashed += p.u_len;
        }
        if self.placed.last().is_none_or(|l| l.u_start < p.u_start) {
            self.placed.push(p);
        }
        self.known.insert(p.u_start, c);
        self.buf_u = self.next_u;
        self.pos = 0;
        self.next_u += self.buf.len() as u64;
        self.next_c += clen;
        self.decompressed += 1;
        self.read += clen;
        Ok(true)
    }

    /// The length and content size of the zstd frame at `c` (None: the
    /// file ends there or inside it; `end` says which).
    fn zstd_frame_len(&mut self, c: u64) -> std::io::Result<Option<(u64, u64)>> {
        let got = self.read_at(c, 18)?;
        if got == 0 {
            self.end = Some(ZEnd::Whole);
            return Ok(None);
        }
        let torn = |s: &mut Self| {
            s.end = Some(ZEnd::Torn(c));
            Ok(None)
        };
        if got < 6 {
            return torn(self);
        }
        let h = self.scratch.clone();
        if u32::from_le_bytes(h[..4].try_into().unwrap()) != ZSTD_MAGIC {
            // Zeros to the end: an interrupted aligned write, a torn tail.
            let len = self.file.len()?;
            if len - c <= 4 << 20
                && self.read_at(c, (len - c) as usize)? as u64 == len - c
                && self.scratch.iter().all(|&b| b == 0)
            {
                return torn(self);
            }
            return Err(bad(c, "not a zstd frame"));
        }
        let fhd = h[4];
        let single = fhd & 0x20 != 0;
        let fcs_len = match fhd >> 6 {
            0 => usize::from(single),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        let did_len = [0usize, 1, 2, 4][(fhd & 3) as usize];
        let at = 5 + usize::from(!single) + did_len;
        if got < at + fcs_len {
            return torn(self);
        }
        let mut fcs = [0u8; 8];
        fcs[..fcs_len].copy_from_slice(&h[at..at + fcs_len]);
        let mut content = u64::from_le_bytes(fcs);
        if fcs_len == 2 {
            content += 256;
        }
        if fcs_len == 0 {
            return Err(bad(c, "a zstd frame without its content size"));
        }
        let mut off = (at + fcs_len) as u64;
        let mut blocks = 0u64;
        loop {
            blocks += 1;
            if self.read_at(c + off, 3)? < 3 {
                return torn(self);
            }
            let b = &self.scratch;
            let bh = u32::from(b[0]) | u32::from(b[1]) << 8 | u32::from(b[2]) << 16;
            let (last, ty, size) = (bh & 1, (bh >> 1) & 3, (bh >> 3) as u64);
            off += 3 + match ty {
                1 => 1,
                3 => return Err(bad(c, "a zstd block of the reserved type")),
                _ => size,
            };
            if last == 1 {
                break;
            }
        }
        if fhd & 4 != 0 {
            off += 4;
        }
        // A block holds at most 128 KiB: a content size beyond what the
        // blocks can hold is a lie (and would be reserved before decoding).
        if content > blocks * (128 << 10) {
            return Err(bad(
                c,
                "a zstd frame whose content size its blocks cannot hold",
            ));
        }
        Ok(Some((off, content)))
    }

    /// Makes `buf[pos]` the next byte to read; false at the end.
    fn position(&mut self) -> std::io::Result<bool> {
        if let Some(t) = self.want.take() {
            let in_buf = t >= self.buf_u && t < self.buf_u + self.buf.len() as u64;
            if in_buf {
                self.pos = (t - self.buf_u) as usize;
                return Ok(true);
            }
            let (&u, &c) = self
                .known
                .range(..=t)
                .next_back()
                .expect("offset 0 is always known");
            if t < self.next_u || u > self.next_u {
                self.next_u = u;
                self.next_c = c;
                self.end = None;
                self.buf.clear();
                self.buf_u = u;
                self.pos = 0;
            }
            while self.next_u <= t {
                if !self.decode_next()? {
                    self.pos = self.buf.len();
                    return Ok(false);
                }
            }
            self.pos = (t - self.buf_u) as usize;
            return Ok(true);
        }
        while self.pos >= self.buf.len() {
            if !self.decode_next()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// XXH32 of the stream decoded from its start so far (lz4's content
    /// checksum once read to the end).
    pub fn content_checksum(&self) -> u32 {
        std::hash::Hasher::finish(&self.xxh) as u32
    }

    /// Reads the whole stream to its end (for repair): how it ended.
    pub fn read_to_end_state(&mut self) -> std::io::Result<ZEnd> {
        while self.decode_next()? {}
        Ok(self.end.unwrap_or(ZEnd::Whole))
    }
}

fn bad(at: u64, what: &str) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, format!("{what} at byte {at}"))
}

impl Read for ZReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if out.is_empty() || !self.position()? {
            return Ok(0);
        }
        let k = out.len().min(self.buf.len() - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

impl Seek for ZReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let SeekFrom::Start(to) = to else {
            return Err(std::io::Error::other("only absolute seeks"));
        };
        self.want = Some(to);
        Ok(to)
    }
}

/// A capture read plain, decrypted or decompressed: what the readers open.
pub enum Source<P> {
    /// A plain file through `P`.
    Plain(P),
    /// An age file holding a plain capture, decrypted.
    Age(Box<AgeReader>),
    /// A compressed one (maybe inside an age file).
    Z(Box<ZReader>),
}

impl<P> Source<P> {
    /// Compressed units decompressed so far (0 for a plain file).
    pub fn blocks_decompressed(&self) -> u64 {
        match self {
            Source::Plain(_) | Source::Age(_) => 0,
            Source::Z(z) => z.blocks_decompressed(),
        }
    }

    /// The decompressing reader, if compressed.
    pub fn z(&self) -> Option<&ZReader> {
        match self {
            Source::Plain(_) | Source::Age(_) => None,
            Source::Z(z) => Some(z),
        }
    }

    /// The decrypting reader, if encrypted.
    pub fn age(&self) -> Option<&AgeReader> {
        match self {
            Source::Plain(_) => None,
            Source::Age(a) => Some(a),
            Source::Z(z) => z.age(),
        }
    }

    /// Age chunks decrypted so far (0 for a file not encrypted).
    pub fn chunks_decrypted(&self) -> u64 {
        self.age().map_or(0, AgeReader::chunks_read)
    }

    fn from_layers(
        l: Layers,
        plain: impl FnOnce(File) -> std::io::Result<P>,
    ) -> std::io::Result<Self> {
        Ok(match l {
            Layers::Plain(f) => Source::Plain(plain(f)?),
            Layers::Age(a) => Source::Age(a),
            Layers::Z(z) => Source::Z(z),
        })
    }
}

impl<P: Read> Read for Source<P> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Source::Plain(p) => p.read(out),
            Source::Age(a) => a.read(out),
            Source::Z(z) => z.read(out),
        }
    }
}

impl<P: Seek> Seek for Source<P> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        match self {
            Source::Plain(p) => p.seek(to),
            Source::Age(a) => a.seek(to),
            Source::Z(z) => z.seek(to),
        }
    }
}

/// Opens `path` for a sequential read: a buffered plain file, or the
/// decrypted and decompressed stream of an encrypted or compressed one.
pub fn open_buffered(path: &Path, opts: &ReadOptions) -> std::io::Result<Source<BufReader<File>>> {
    Source::from_layers(open_layers(path, opts)?, |f| {
        crate::sys::advise_normal(&f);
        Ok(BufReader::with_capacity(1 << 20, f))
    })
}

impl Source<crate::ramp::RampReader> {
    /// A plain file: its next reads are a run that ends at `end`
    /// ([`crate::ramp::RampReader::hint_to`]); a compressed or encrypted
    /// one reads whole units anyway.
    pub fn hint_to(&mut self, end: u64) {
        if let Source::Plain(r) = self {
            r.hint_to(end);
        }
    }

    /// A plain file: its next reads are the runs `runs`, read ahead through
    /// `pool` ([`crate::ramp::RampReader::prefetch`]); a compressed or
    /// encrypted one reads whole units as usual.
    pub fn prefetch(
        &mut self,
        pool: &crate::ramp::ReadPool,
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) {
        if let Source::Plain(r) = self {
            r.prefetch(pool, runs);
        }
    }

    /// A plain file: [`crate::ramp::RampReader::prefetch_early`] (a file a
    /// query reaches later, asked for at its start); a compressed or
    /// encrypted one reads whole units as usual.
    pub fn prefetch_early(
        &mut self,
        pool: &crate::ramp::ReadPool,
        runs: impl IntoIterator<Item = (u64, u64)>,
    ) {
        if let Source::Plain(r) = self {
            r.prefetch_early(pool, runs);
        }
    }

    /// Whether reads are asked for ahead
    /// ([`crate::ramp::RampReader::prefetching`]).
    pub fn prefetching(&self) -> bool {
        matches!(self, Source::Plain(r) if r.prefetching())
    }

    /// Ends reading ahead, waiting for reads under way
    /// ([`crate::ramp::RampReader::settle`]): call before
    /// [`Source::bytes_read`] for the final count.
    pub fn settle(&mut self) {
        if let Source::Plain(r) = self {
            r.settle();
        }
    }

    /// Opens `path` for a query: a plain file through a
    /// [`crate::ramp::RampReader`], a compressed or encrypted one
    /// decompressed and decrypted; and whether a writer holds it
    /// ([`crate::is_being_written`]).
    pub fn open_query(path: &Path, opts: &ReadOptions) -> std::io::Result<(Self, bool)> {
        let (layers, head) = open_layers_head(path, opts)?;
        match layers {
            Layers::Plain(f) => {
                // Its first page is in the page cache now: read from there.
                let (mut r, live) = crate::ramp::RampReader::open_read_head(f, path)?;
                // Or from the head kept, or read, just now: a finished
                // file's only (one being written may change its first page).
                if let Some(h) = head.filter(|_| !live) {
                    if !h.kept {
                        opts.kept().keep_head(path, h.id, &h.bytes);
                    }
                    r.set_head(h.bytes);
                }
                Ok((Source::Plain(r), live))
            }
            Layers::Age(a) => {
                let live = crate::sys::is_being_written(a.file());
                Ok((Source::Age(a), live))
            }
            Layers::Z(z) => {
                let live = crate::sys::is_being_written(z.file());
                Ok((Source::Z(z), live))
            }
        }
    }

    /// The file (for its lock).
    pub fn file(&self) -> &File {
        match self {
            Source::Plain(r) => r.file(),
            Source::Age(a) => a.file(),
            Source::Z(z) => z.file(),
        }
    }

    /// Bytes read from the file so far (compressed or encrypted bytes for
    /// such a file).
    pub fn bytes_read(&self) -> u64 {
        match self {
            Source::Plain(r) => r.bytes_read(),
            Source::Age(a) => a.bytes_read(),
            Source::Z(z) => match z.age() {
                Some(a) => a.bytes_read(),
                None => z.bytes_read(),
            },
        }
    }
}
