//! Compression at rest (`record --compress lz4|zstd[:LEVEL]`): every block
//! of records the writer hands on becomes one independently decodable unit
//! of a standard format, so that `lz4`, `zstd`, Wireshark and tcpdump read
//! the file and a query decompresses only the blocks it selects
//! ([`crate::zread`]).
//!
//! - lz4: the whole file is ONE LZ4 frame (magic, FLG = version 01, block
//!   independence, content checksum; BD = 4 MB blocks), each record block
//!   one LZ4 block (stored uncompressed, high bit of its size set, when it
//!   does not shrink), closed by the end mark and the XXH32 of the content.
//! - zstd: one zstd frame per record block, with its content size (and a
//!   checksum), so any block decodes alone.
//!
//! [`CompressSink`] sits in front of a file's [`BlockSink`]: blocks are
//! compressed on the [`Pool`]'s threads, off the writer's path; when those
//! fall behind, a block goes out uncompressed (counted) rather than waiting,
//! so no frame is ever dropped for compression. Where each block landed
//! ([`Placed`]) goes to the index ([`crate::index`]).

use crate::sink::{Block, BlockSink, SinkStats};
use crate::StorageError;
use std::collections::{BTreeMap, VecDeque};
use std::hash::Hasher;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

/// How files are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compress {
    /// Plain pcap / pcapng.
    #[default]
    None,
    /// One LZ4 frame per file, one LZ4 block per record block.
    Lz4,
    /// One zstd frame per record block, at this level.
    Zstd(i32),
}

/// zstd's level when `--compress zstd` names none.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// The LZ4 frame's magic number.
pub const LZ4_MAGIC: u32 = 0x184D_2204;
/// A zstd frame's magic number.
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// The largest LZ4 block the frame header announces (BD = 7: 4 MB).
pub const LZ4_MAX_BLOCK: usize = 4 << 20;
/// Bytes of our LZ4 frame header (magic, FLG, BD, header checksum).
pub const LZ4_HEADER_LEN: u64 = 7;
/// The high bit of an LZ4 block size: the block is stored uncompressed.
pub const LZ4_STORED: u32 = 0x8000_0000;

impl std::str::FromStr for Compress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (alg, level) = match s.split_once(':') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        match (alg, level) {
            ("none", None) => Ok(Compress::None),
            ("lz4", None) => Ok(Compress::Lz4),
            ("lz4", Some(_)) => Err(format!(
                "--compress {s}: lz4 takes no level; use --compress lz4 or zstd:LEVEL"
            )),
            ("zstd", None) => Ok(Compress::Zstd(ZSTD_DEFAULT_LEVEL)),
            ("zstd", Some(l)) => {
                let range = zstd::compression_level_range();
                match l.parse::<i32>() {
                    Ok(n) if range.contains(&n) => Ok(Compress::Zstd(n)),
                    _ => Err(format!(
                        "--compress {s}: zstd level must be an integer from {} to {}",
                        range.start(),
                        range.end()
                    )),
                }
            }
            _ => Err(format!(
                "--compress {s}: unknown compression; use lz4, zstd or zstd:LEVEL"
            )),
        }
    }
}

impl Compress {
    /// The file name suffix after `.pcap` / `.pcapng` (`""` when plain).
    pub fn suffix(self) -> &'static str {
        match self {
            Compress::None => "",
            Compress::Lz4 => ".lz4",
            Compress::Zstd(_) => ".zst",
        }
    }

    /// The algorithm's name as the summary says it (`none`, `lz4`, `zstd`).
    pub fn algorithm(self) -> &'static str {
        match self {
            Compress::None => "none",
            Compress::Lz4 => "lz4",
            Compress::Zstd(_) => "zstd",
        }
    }

    /// The level (zstd's; 0 for lz4 and none).
    pub fn level(self) -> i32 {
        match self {
            Compress::Zstd(l) => l,
            _ => 0,
        }
    }

    /// Whether files are compressed at all.
    pub fn is_on(self) -> bool {
        self != Compress::None
    }
}

/// The LZ4 frame header we write: magic, FLG (version 01, independent
/// blocks, content checksum), BD (4 MB blocks), header checksum.
pub fn lz4_frame_header() -> [u8; LZ4_HEADER_LEN as usize] {
    let mut h = [0u8; 7];
    h[..4].copy_from_slice(&LZ4_MAGIC.to_le_bytes());
    h[4] = 0b0110_0100;
    h[5] = 0x70;
    let mut x = twox_hash::XxHash32::with_seed(0);
    x.write(&h[4..6]);
    h[6] = (x.finish_32() >> 8) as u8;
    h
}

/// Appends `data` as LZ4 blocks of at most [`LZ4_MAX_BLOCK`] bytes each
/// (compressed, or stored when `store` or when compressing does not shrink).
pub fn lz4_blocks(data: &[u8], store: bool, out: &mut Vec<u8>) {
    for part in data.chunks(LZ4_MAX_BLOCK) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut n = 0;
        if !store {
            let bound = lz4_flex::block::get_maximum_output_size(part.len());
            out.resize(at + 4 + bound, 0);
            n = lz4_flex::block::compress_into(part, &mut out[at + 4..]).unwrap_or(usize::MAX);
        }
        if store || n >= part.len() {
            out.truncate(at + 4);
            out.extend_from_slice(part);
            let w = part.len() as u32 | LZ4_STORED;
            out[at..at + 4].copy_from_slice(&w.to_le_bytes());
        } else {
            out.truncate(at + 4 + n);
            out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
        }
    }
}

/// Appends `data` as one zstd frame of raw (stored) blocks, with its
/// content size: what a block becomes when the compressors fall behind.
pub fn zstd_stored_frame(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&ZSTD_MAGIC.to_le_bytes());
    // FCS field 8 bytes, single segment, no checksum, no dictionary.
    out.push(0b1110_0000);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    const MAX: usize = 128 << 10;
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0]); // last, raw, size 0
        return;
    }
    let mut parts = data.chunks(MAX).peekable();
    while let Some(p) = parts.next() {
        let last = u32::from(parts.peek().is_none());
        let h = last | ((p.len() as u32) << 3);
        out.extend_from_slice(&h.to_le_bytes()[..3]);
        out.extend_from_slice(p);
    }
}

/// Counts of the compression of a recording (all queues), shared by the
/// writers and read by the summary, `ctl status` and `/metrics`.
#[derive(Debug, Default)]
pub struct CompressStats {
    /// Bytes of blocks before compression.
    pub bytes_in: AtomicU64,
    /// Bytes written for them (block headers included).
    pub bytes_out: AtomicU64,
    /// Blocks written.
    pub blocks: AtomicU64,
    /// Blocks written uncompressed: the compressors had fallen behind, or
    /// the block did not shrink.
    pub blocks_uncompressed: AtomicU64,
}

/// A snapshot of [`CompressStats`] with its settings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CompressReport {
    /// What was asked.
    pub compress: Compress,
    /// Bytes in.
    pub bytes_in: u64,
    /// Bytes out.
    pub bytes_out: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Blocks stored uncompressed.
    pub blocks_uncompressed: u64,
}

impl CompressReport {
    /// bytes_out / bytes_in (1 with nothing written).
    pub fn ratio(&self) -> f64 {
        if self.bytes_in == 0 {
            1.0
        } else {
            self.bytes_out as f64 / self.bytes_in as f64
        }
    }
}

impl CompressStats {
    /// The counts now.
    pub fn report(&self, compress: Compress) -> CompressReport {
        CompressReport {
            compress,
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            blocks: self.blocks.load(Ordering::Relaxed),
            blocks_uncompressed: self.blocks_uncompressed.load(Ordering::Relaxed),
        }
    }
}

struct Job {
    seq: u64,
    block: Block,
    out: Vec<u8>,
    compress: Compress,
    done: Sender<Done>,
}

struct Done {
    seq: u64,
    block: Block,
    out: Vec<u8>,
    stored: bool,
}

/// The compression threads of a recording, shared by its writers.
pub struct Pool {
    tx: Mutex<Option<Sender<Job>>>,
    threads: usize,
    handles: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The recording's counts.
    pub stats: Arc<CompressStats>,
}

impl Pool {
    /// Starts `threads` compression threads (at least one).
    pub fn new(threads: usize) -> std::io::Result<Arc<Pool>> {
        let threads = threads.max(1);
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let mut handles = Vec::new();
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("wt-compress{i}"))
                    .spawn(move || worker(&rx))?,
            );
        }
        Ok(Arc::new(Pool {
            tx: Mutex::new(Some(tx)),
            threads,
            handles: Mutex::new(handles),
            stats: Arc::default(),
        }))
    }

    /// Its thread count.
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn send(&self, job: Job) -> Result<(), Job> {
        let g = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        for h in self
            .handles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = h.join();
        }
    }
}

fn worker(rx: &Mutex<Receiver<Job>>) {
    let mut zc: Option<(i32, zstd::bulk::Compressor<'static>)> = None;
    loop {
        // One lock per block, not per frame.
        let job = {
            let g = rx.lock().unwrap_or_else(|e| e.into_inner());
            g.recv()
        };
        let Ok(mut job) = job else { return };
        job.out.clear();
        let data = job.block.data();
        let stored = match job.compress {
            Compress::Zstd(level) => {
                if zc.as_ref().is_none_or(|(l, _)| *l != level) {
                    zc = zstd_compressor(level).map(|c| (level, c));
                }
                zstd_frame(zc.as_mut().map(|z| &mut z.1), data, &mut job.out)
            }
            _ => {
                lz4_blocks(data, false, &mut job.out);
                job.out.len() >= data.len() + 4
            }
        };
        let _ = job.done.send(Done {
            seq: job.seq,
            block: job.block,
            out: job.out,
            stored,
        });
    }
}

fn zstd_compressor(level: i32) -> Option<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(level).ok()?;
    c.include_contentsize(true).ok()?;
    c.include_checksum(true).ok()?;
    Some(c)
}

/// Appends `data` as one zstd frame (compressed by `c`, or stored when it
/// is missing or the frame does not shrink); true when stored.
fn zstd_frame(
    c: Option<&mut zstd::bulk::Compressor<'static>>,
    data: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    let at = out.len();
    if let Some(c) = c {
        out.reserve(zstd::zstd_safe::compress_bound(data.len()));
        if c.compress_to_buffer(data, out).is_ok() && out.len() - at < data.len() {
            return false;
        }
    }
    out.truncate(at);
    zstd_stored_frame(data, out);
    true
}

/// Where one record block went in a compressed file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placed {
    /// Offset of its first byte in the uncompressed stream.
    pub u_start: u64,
    /// Its uncompressed length.
    pub u_len: u64,
    /// Offset of its compressed unit (LZ4 block header, zstd frame) in the file.
    pub c_off: u64,
    /// Compressed bytes, headers included.
    pub c_len: u64,
}

/// A [`BlockSink`] that compresses each block into the file's real sink.
pub struct CompressSink<S: BlockSink> {
    inner: S,
    /// The inner sink's block being filled with compressed bytes.
    out: Option<Block>,
    compress: Compress,
    pool: Arc<Pool>,
    done_tx: Sender<Done>,
    done_rx: Receiver<Done>,
    /// Blocks at the pool, by sequence number, oldest first.
    in_flight: VecDeque<u64>,
    arrived: BTreeMap<u64, Done>,
    next_seq: u64,
    /// Free plain blocks for the builder, and spare output buffers.
    free: Vec<Block>,
    spare: Vec<Vec<u8>>,
    block_size: usize,
    max_in_flight: usize,
    /// Uncompressed stream bytes so far, and compressed bytes handed on.
    u_pos: u64,
    c_pos: u64,
    /// LZ4's content checksum (over every uncompressed byte, in order).
    xxh: twox_hash::XxHash32,
    placed: Vec<Placed>,
    stored_scratch: Vec<u8>,
}

impl<S: BlockSink> CompressSink<S> {
    /// Compresses into `inner` with `pool`'s threads. An LZ4 file starts
    /// with its frame header now.
    pub fn new(inner: S, compress: Compress, pool: Arc<Pool>) -> Result<Self, StorageError> {
        let (done_tx, done_rx) = channel();
        let block_size = inner.block_size();
        let mut s = CompressSink {
            out: None,
            compress,
            max_in_flight: 2 * pool.threads() + 1,
            pool,
            done_tx,
            done_rx,
            in_flight: VecDeque::new(),
            arrived: BTreeMap::new(),
            next_seq: 0,
            free: Vec::new(),
            spare: Vec::new(),
            block_size,
            u_pos: 0,
            c_pos: 0,
            xxh: twox_hash::XxHash32::with_seed(0),
            placed: Vec::new(),
            stored_scratch: Vec::new(),
            inner,
        };
        s.out = Some(s.inner.first_block());
        if compress == Compress::Lz4 {
            s.put(&lz4_frame_header())?;
        }
        Ok(s)
    }

    /// Appends compressed bytes to the inner sink's stream.
    fn put(&mut self, mut bytes: &[u8]) -> Result<(), StorageError> {
        self.c_pos += bytes.len() as u64;
        while !bytes.is_empty() {
            let mut b = self.out.take().unwrap_or_else(|| self.inner.first_block());
            let (buf, len) = b.space();
            let k = bytes.len().min(buf.len() - *len);
            buf[*len..*len + k].copy_from_slice(&bytes[..k]);
            *len += k;
            bytes = &bytes[k..];
            if *len == buf.len() {
                b = self.inner.submit(b)?;
            }
            self.out = Some(b);
        }
        Ok(())
    }

    /// Writes one finished unit for a block of `u_len` bytes.
    fn emit(&mut self, plain: &[u8], out: &[u8], stored: bool) -> Result<(), StorageError> {
        let st = &self.pool.stats;
        st.bytes_in.fetch_add(plain.len() as u64, Ordering::Relaxed);
        st.bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
        st.blocks.fetch_add(1, Ordering::Relaxed);
        st.blocks_uncompressed
            .fetch_add(u64::from(stored), Ordering::Relaxed);
        if self.compress == Compress::Lz4 {
            self.xxh.write(plain);
        }
        self.placed.push(Placed {
            u_start: self.u_pos,
            u_len: plain.len() as u64,
            c_off: self.c_pos,
            c_len: out.len() as u64,
        });
        self.u_pos += plain.len() as u64;
        self.put(out)
    }

    /// Writes the blocks the pool has finished, in order; with `wait`, all.
    fn drain(&mut self, wait: bool) -> Result<(), StorageError> {
        while let Some(&seq) = self.in_flight.front() {
            while let Ok(d) = self.done_rx.try_recv() {
                self.arrived.insert(d.seq, d);
            }
            let d = match self.arrived.remove(&seq) {
                Some(d) => d,
                None if wait => loop {
                    let d = self
                        .done_rx
                        .recv()
                        .map_err(|_| StorageError::Internal("a compression thread stopped"))?;
                    if d.seq == seq {
                        break d;
                    }
                    self.arrived.insert(d.seq, d);
                },
                None => return Ok(()),
            };
            self.in_flight.pop_front();
            let r = self.emit(d.block.data(), &d.out, d.stored);
            let mut b = d.block;
            b.clear();
            self.free.push(b);
            self.spare.push(d.out);
            r?;
        }
        Ok(())
    }

    /// Writes `block` uncompressed, now (the pool is behind).
    fn store_now(&mut self, block: &Block) -> Result<(), StorageError> {
        let mut out = std::mem::take(&mut self.stored_scratch);
        out.clear();
        match self.compress {
            Compress::Zstd(_) => zstd_stored_frame(block.data(), &mut out),
            _ => lz4_blocks(block.data(), true, &mut out),
        }
        let r = self.emit(block.data(), &out, true);
        self.stored_scratch = out;
        r
    }

    fn take_free(&mut self) -> Block {
        self.free
            .pop()
            .unwrap_or_else(|| Block::new(self.block_size))
    }

    /// The sink the compressed bytes go to.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The same, mutably.
    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Where the blocks written so far went (taken: each is given once).
    pub fn take_placed(&mut self, out: &mut Vec<Placed>) {
        out.append(&mut self.placed);
    }
}

impl<S: BlockSink> BlockSink for CompressSink<S> {
    fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
        self.drain(false)?;
        if block.is_empty() {
            return Ok(block);
        }
        if self.in_flight.len() >= self.max_in_flight {
            // Behind: out uncompressed, in order after those at the pool.
            self.drain(true)?;
            self.store_now(&block)?;
            let mut b = block;
            b.clear();
            return Ok(b);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let job = Job {
            seq,
            block,
            out: self.spare.pop().unwrap_or_default(),
            compress: self.compress,
            done: self.done_tx.clone(),
        };
        match self.pool.send(job) {
            Ok(()) => {
                self.in_flight.push_back(seq);
                Ok(self.take_free())
            }
            Err(job) => {
                self.drain(true)?;
                self.store_now(&job.block)?;
                let mut b = job.block;
                b.clear();
                Ok(b)
            }
        }
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        let b = self.submit(block)?;
        self.drain(true)?;
        let out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        self.out = Some(self.inner.flush(out)?);
        Ok(b)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        let _ = self.submit(block)?;
        self.drain(true)?;
        if self.compress == Compress::Lz4 {
            let sum = self.xxh.finish_32();
            let mut end = [0u8; 8];
            end[4..].copy_from_slice(&sum.to_le_bytes());
            self.put(&end)?;
        }
        let out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        self.inner.finish(out)
    }

    fn bytes(&self) -> u64 {
        self.inner.bytes()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn first_block(&mut self) -> Block {
        self.take_free()
    }

    fn stats(&self) -> SinkStats {
        self.inner.stats()
    }

    fn latency(&self) -> Option<&wiretape_timestamp::hist::Histogram<u64>> {
        self.inner.latency()
    }

    fn take_placed(&mut self, out: &mut Vec<Placed>) {
        CompressSink::take_placed(self, out)
    }

    fn write_after(&mut self, gate: Arc<crate::sink::Gate>) {
        self.inner.write_after(gate)
    }

    fn open_when_done(&mut self, gate: Arc<crate::sink::Gate>) {
        self.inner.open_when_done(gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_parses_and_refuses_in_words() {
        assert_eq!("lz4".parse::<Compress>(), Ok(Compress::Lz4));
        assert_eq!("zstd".parse::<Compress>(), Ok(Compress::Zstd(3)));
        assert_eq!("zstd:19".parse::<Compress>(), Ok(Compress::Zstd(19)));
        assert_eq!("none".parse::<Compress>(), Ok(Compress::None));
        for bad in ["zstd:99", "zstd:x", "lz4:3", "gzip", ""] {
            let e = bad.parse::<Compress>().unwrap_err();
            assert!(e.starts_with(&format!("--compress {bad}:")), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
        assert_eq!(Compress::Zstd(1).suffix(), ".zst");
        assert_eq!(Compress::Lz4.suffix(), ".lz4");
    }

    #[test]
    fn blocks_that_do_not_shrink_are_stored_and_decode_back() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..70_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let mut out = Vec::new();
        lz4_blocks(&random, false, &mut out);
        let w = u32::from_le_bytes(out[..4].try_into().unwrap());
        assert_ne!(w & LZ4_STORED, 0, "stored");
        assert_eq!(&out[4..], &random[..]);
        let mut z = Vec::new();
        zstd_stored_frame(&random, &mut z);
        assert_eq!(zstd::bulk::decompress(&z, 1 << 20).unwrap(), random);
        let text = b"GET / HTTP/1.1\r\n".repeat(4000);
        let mut out = Vec::new();
        lz4_blocks(&text, false, &mut out);
        assert!(out.len() < text.len() / 4);
        let n = (u32::from_le_bytes(out[..4].try_into().unwrap())) as usize;
        let back = lz4_flex::block::decompress(&out[4..4 + n], text.len()).unwrap();
        assert_eq!(back, text);
    }
}
