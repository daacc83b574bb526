//! Compression at rest (`record --compress lz4|zstd[:LEVEL]`), the writing:
//! every block of records the writer hands on becomes one independently
//! decodable unit (the format, the choice and the encoders of one block
//! are `wiretape_files::compress`'s). A [`CompressSink`] sits in front of a
//! file's [`BlockSink`]: blocks are compressed on the [`Pool`]'s threads,
//! off the writer's path; when those fall behind, a block goes out
//! uncompressed (counted) rather than waiting, so no frame is ever dropped
//! for compression. Where each block landed ([`Placed`]) goes to the index
//! ([`crate::index`]).
//!
//! A volume that fails: the sink keeps a copy of each unit's compressed
//! bytes until the unit is written (the inner sink's
//! [`BlockSink::written`]), so it gives back ([`BlockSink::take_unwritten`])
//! the records of every unit its file does not keep whole, decoded again
//! (the file keeps the units that end at or before the inner sink's `kept`
//! offset; readers and `repair` stop at the torn one after them), then
//! those of the blocks still at the pool and of those handed in after the
//! failure. The copy costs one memcpy of the compressed bytes per block
//! and as much RAM as the compressed bytes the inner sink has not written
//! (its blocks waiting for the disk, and the one being filled).

use crate::sink::{Block, BlockSink, SinkStats, Unwritten};
use std::collections::{BTreeMap, VecDeque};
use std::hash::Hasher;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use wiretape_files::compress::{lz4_blocks, lz4_frame_header, zstd_stored_frame, Compress, Placed};
use wiretape_files::StorageError;

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

/// Decodes one unit this sink made (`unit`: its bytes) into `out`, which
/// is exactly as long as the plain block was; None if it does not decode.
fn decode_unit(compress: Compress, unit: &[u8], out: &mut [u8]) -> Option<()> {
    use wiretape_files::compress::LZ4_STORED;
    match compress {
        Compress::Zstd(_) => {
            let n = zstd::bulk::Decompressor::new()
                .ok()?
                .decompress_to_buffer(unit, out)
                .ok()?;
            (n == out.len()).then_some(())
        }
        _ => {
            // LZ4 blocks of at most 4 MB, each after its 4-byte length.
            let (mut rest, mut at) = (unit, 0);
            while !rest.is_empty() {
                let w = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?);
                let len = (w & !LZ4_STORED) as usize;
                let data = rest.get(4..4 + len)?;
                let n = if w & LZ4_STORED != 0 {
                    out.get_mut(at..at + len)?.copy_from_slice(data);
                    len
                } else {
                    lz4_flex::block::decompress_into(data, out.get_mut(at..)?).ok()?
                };
                at += n;
                rest = &rest[4 + len..];
            }
            (at == out.len()).then_some(())
        }
    }
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
    /// The units not yet all written, in order (what a failure gives
    /// back), and their compressed bytes from stream offset `ring_at` on.
    units: VecDeque<Placed>,
    ring: VecDeque<u8>,
    ring_at: u64,
    /// Blocks handed in that became no unit (a write had failed).
    orphans: Vec<Block>,
    /// A write failed: nothing more goes to the inner sink.
    failed: bool,
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
            units: VecDeque::new(),
            ring: VecDeque::new(),
            ring_at: 0,
            orphans: Vec::new(),
            failed: false,
            inner,
        };
        s.out = Some(s.inner.first_block());
        if compress == Compress::Lz4 {
            s.put(&lz4_frame_header())?;
        }
        s.ring_at = s.c_pos;
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
                b = self.inner.submit(b).inspect_err(|_| self.failed = true)?;
            }
            self.out = Some(b);
        }
        Ok(())
    }

    /// Writes one finished unit `out` of the plain block `block` (its
    /// bytes kept until written; the block is free again).
    fn emit(&mut self, mut block: Block, out: &[u8], stored: bool) -> Result<(), StorageError> {
        let plain = block.data();
        let st = &self.pool.stats;
        st.bytes_in.fetch_add(plain.len() as u64, Ordering::Relaxed);
        st.bytes_out.fetch_add(out.len() as u64, Ordering::Relaxed);
        st.blocks.fetch_add(1, Ordering::Relaxed);
        st.blocks_uncompressed
            .fetch_add(u64::from(stored), Ordering::Relaxed);
        if self.compress == Compress::Lz4 {
            self.xxh.write(plain);
        }
        let p = Placed {
            u_start: self.u_pos,
            u_len: plain.len() as u64,
            c_off: self.c_pos,
            c_len: out.len() as u64,
        };
        self.placed.push(p);
        self.units.push_back(p);
        self.ring.extend(out);
        self.u_pos += plain.len() as u64;
        block.clear();
        self.free.push(block);
        self.put(out)?;
        self.release();
        Ok(())
    }

    /// Forgets the units that are written.
    fn release(&mut self) {
        let done = self.inner.written();
        while self
            .units
            .front()
            .is_some_and(|u| u.c_off + u.c_len <= done)
        {
            self.units.pop_front();
        }
        let keep_from = self.units.front().map_or(self.c_pos, |u| u.c_off);
        let n = (keep_from - self.ring_at) as usize;
        self.ring.drain(..n);
        self.ring_at = keep_from;
    }

    /// After a failure, with the inner sink's cut at `c`: the file is cut
    /// there now (as the inner sink does when it finishes), and where it
    /// cannot be (a volume that takes no more writes) the units past `c`
    /// that are on disk whole all the same stay with the file. A write
    /// that failed may have landed (EIO from a filesystem that aborted
    /// mid-write, which turns read-only a moment later): readers read those
    /// units, so giving them back too would put their frames in two files.
    /// Each unit, in order, is compared with its copy; the first that
    /// differs (or is not there) ends what is kept. Once per failure.
    fn keep_landed(&mut self, c: u64) {
        use std::os::unix::fs::FileExt;
        if !self.inner.offsets_in_file() {
            // Encrypted below: the file's bytes are not the units'.
            return;
        }
        let Ok(len) = std::fs::metadata(self.inner.path()).map(|m| m.len()) else {
            return;
        };
        if len <= c || self.inner.cut_at(c).is_ok() {
            return;
        }
        let Ok(f) = std::fs::File::open(self.inner.path()) else {
            return;
        };
        let ring = self.ring.make_contiguous();
        let mut disk = Vec::new();
        while let Some(u) = self.units.front() {
            if u.c_off + u.c_len > len {
                break;
            }
            let at = (u.c_off - self.ring_at) as usize;
            let Some(copy) = ring.get(at..at + u.c_len as usize) else {
                break;
            };
            disk.resize(u.c_len as usize, 0);
            if f.read_exact_at(&mut disk, u.c_off).is_err() || disk != copy {
                break;
            }
            self.units.pop_front();
        }
    }

    /// The plain bytes of the units not written, decoded again from their
    /// copy, into one block (None: none; or one does not decode, which a
    /// unit this sink made always does).
    fn decode_units(&mut self) -> Option<Block> {
        let total: u64 = self.units.iter().map(|u| u.u_len).sum();
        if total == 0 {
            return None;
        }
        let ring = self.ring.make_contiguous();
        let mut block = Block::new(total as usize);
        let (buf, len) = block.space();
        for u in &self.units {
            let at = (u.c_off - self.ring_at) as usize;
            let unit = ring.get(at..at + u.c_len as usize)?;
            let into = &mut buf[*len..*len + u.u_len as usize];
            decode_unit(self.compress, unit, into)?;
            *len += u.u_len as usize;
        }
        Some(block)
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
            let r = self.emit(d.block, &d.out, d.stored);
            self.spare.push(d.out);
            r?;
        }
        Ok(())
    }

    /// Writes `block` uncompressed, now (the pool is behind), after those
    /// at the pool.
    fn store_now(&mut self, block: Block) -> Result<(), StorageError> {
        if let Err(e) = self.drain(true) {
            self.orphans.push(block);
            return Err(e);
        }
        let mut out = std::mem::take(&mut self.stored_scratch);
        out.clear();
        match self.compress {
            Compress::Zstd(_) => zstd_stored_frame(block.data(), &mut out),
            _ => lz4_blocks(block.data(), true, &mut out),
        }
        let r = self.emit(block, &out, true);
        self.stored_scratch = out;
        r
    }

    fn submit_inner(&mut self, block: Block) -> Result<Block, StorageError> {
        if self.failed {
            let e = crate::sink::failed_before(self.inner.path());
            self.orphans.push(block);
            return Err(e);
        }
        if let Err(e) = self.drain(false) {
            self.orphans.push(block);
            return Err(e);
        }
        if block.is_empty() {
            return Ok(block);
        }
        if self.in_flight.len() >= self.max_in_flight {
            // Behind: out uncompressed, in order after those at the pool.
            self.store_now(block)?;
            return Ok(self.take_free());
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
            Ok(()) => self.in_flight.push_back(seq),
            Err(job) => self.store_now(job.block)?,
        }
        Ok(self.take_free())
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
        self.submit_inner(block).inspect_err(|_| self.failed = true)
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        let b = self.submit(block)?;
        self.drain(true).inspect_err(|_| self.failed = true)?;
        let out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        self.out = Some(self.inner.flush(out).inspect_err(|_| self.failed = true)?);
        self.release();
        Ok(b)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        let r = self
            .submit(block)
            .and_then(|_| self.drain(true))
            .and_then(|()| {
                if self.compress != Compress::Lz4 {
                    return Ok(());
                }
                let sum = self.xxh.finish_32();
                let mut end = [0u8; 8];
                end[4..].copy_from_slice(&sum.to_le_bytes());
                self.put(&end)
            });
        let mut out = self.out.take().unwrap_or_else(|| self.inner.first_block());
        if r.is_err() {
            // Nothing more after the failed write: the inner sink only
            // waits for its writes and cuts its file at the failure.
            self.failed = true;
            out.clear();
        }
        let f = self.inner.finish(out);
        r.and(f)
    }

    fn bytes(&self) -> u64 {
        self.inner.bytes()
    }

    fn offsets_in_file(&self) -> bool {
        false
    }

    fn written(&self) -> u64 {
        // Plain bytes of the units written.
        let done = self.inner.written();
        match self.units.iter().find(|u| u.c_off + u.c_len > done) {
            Some(u) => u.u_start,
            None => self.u_pos,
        }
    }

    /// The plain records of the units the file does not keep whole, of the
    /// blocks at the pool and of those handed in after the failure, from
    /// the first unit that ends past the inner sink's `kept` offset (or
    /// what it has written when it gives nothing back).
    fn take_unwritten(&mut self) -> Option<Unwritten> {
        self.failed = true;
        // The pool's blocks come back uncompressed: their units are not
        // written, nor will be.
        let mut queued = Vec::new();
        while let Some(seq) = self.in_flight.pop_front() {
            let d = match self.arrived.remove(&seq) {
                Some(d) => d,
                None => loop {
                    match self.done_rx.recv() {
                        Ok(d) if d.seq == seq => break d,
                        Ok(d) => {
                            self.arrived.insert(d.seq, d);
                        }
                        Err(_) => return None,
                    }
                },
            };
            queued.push(d.block);
            self.spare.push(d.out);
        }
        let c = match self.inner.take_unwritten() {
            Some(u) => u.kept,
            None => self.inner.written(),
        };
        while self.units.front().is_some_and(|u| u.c_off + u.c_len <= c) {
            self.units.pop_front();
        }
        self.keep_landed(c);
        let off = self.units.front().map_or(self.u_pos, |u| u.u_start);
        let decoded = self.decode_units();
        self.units.clear();
        self.ring.clear();
        let blocks: Vec<Block> = decoded
            .into_iter()
            .chain(queued)
            .chain(std::mem::take(&mut self.orphans))
            .filter(|b| !b.is_empty())
            .collect();
        (!blocks.is_empty()).then_some(Unwritten {
            off,
            kept: off,
            blocks,
        })
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
