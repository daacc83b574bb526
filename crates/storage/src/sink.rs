//! Where blocks go. [`BlockSink`] is the seam between block building and the
//! engine that writes blocks: a filled [`Block`] goes in, an empty one to fill
//! next comes out. [`FileSink`] is the plain buffered `write(2)` engine;
//! [`crate::uring::UringSink`] the io_uring O_DIRECT one; [`AnySink`] picks.
//!
//! # Who owns a block
//!
//! A [`Block`] owns its buffer, and a block handed to a sink is the sink's.
//! Its fields are private: outside code makes a block only with
//! [`Block::new`] (a plain buffer, no sink's) and otherwise only moves the
//! blocks sinks give back (`first_block`, `submit`, `flush`). The io_uring
//! sink's own blocks (buffers registered with its ring, in flight while the
//! kernel writes them) carry a lease: (the sink's id, the buffer's slot),
//! which only that sink can mint (`Block::leased` wants a token only
//! `uring.rs` can make) and which no other block ever carries, since blocks
//! are not `Clone`. So a block with a sink's lease in the caller's hands is
//! not in flight, and the sink trusts a slot only with its own id: any other
//! block (from [`Block::new`], or from another sink) is copied into a free
//! block of its own before it is written. A block dropped outside is simply
//! lost to its sink (never reused, so never written twice).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wiretape_files::aligned::AlignedBuf;
use wiretape_files::StorageError;

/// An aligned buffer and how much of it holds data (see the module docs
/// for who owns it).
///
/// ```
/// use wiretape_storage::Block;
/// let mut b = Block::new(4096);
/// assert_eq!((b.len(), b.capacity(), b.data()), (0, 4096, &[][..]));
/// b.clear();
/// ```
///
/// Outside the crate a block cannot be built from parts, nor its buffer
/// reached mutably:
///
/// ```compile_fail
/// let b = wiretape_storage::Block::new(4096);
/// let forged = wiretape_storage::Block { len: 4096, ..b };
/// ```
pub struct Block {
    buf: AlignedBuf,
    len: usize,
    /// Set only by the io_uring sink, on its own blocks.
    lease: Option<Lease>,
}

/// Whose block this is: the io_uring sink `owner`'s buffer `slot`
/// (registered with its ring when below its count of registered buffers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) owner: u64,
    pub(crate) slot: u16,
}

impl Block {
    /// A block of `size` bytes (rounded up to a page) that belongs to no
    /// sink: what a sink that allocates its own blocks (or a test's) uses.
    pub fn new(size: usize) -> Self {
        Block {
            buf: AlignedBuf::new(size),
            len: 0,
            lease: None,
        }
    }

    /// A block holding a copy of `bytes` (what a failed sink gives back of
    /// memory that is not its own: runs laid out in place, its stream).
    pub(crate) fn copy_of(bytes: &[u8]) -> Self {
        let mut b = Block::new(bytes.len().max(1));
        b.buf_mut()[..bytes.len()].copy_from_slice(bytes);
        b.set_len(bytes.len());
        b
    }

    /// One of the io_uring sink's own blocks; the token proves the caller
    /// is that sink's module.
    pub(crate) fn leased(buf: AlignedBuf, lease: Lease, _: &crate::uring::Mint) -> Self {
        Block {
            buf,
            len: 0,
            lease: Some(lease),
        }
    }

    pub(crate) fn lease(&self) -> Option<Lease> {
        self.lease
    }

    /// The bytes it holds.
    pub fn data(&self) -> &[u8] {
        &self.buf.as_slice()[..self.len]
    }

    /// How many bytes it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its size.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Empties it (a sink that discards blocks).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The whole buffer and the length of the filled part, for the builder
    /// to append (it keeps `len <= buf.len()`).
    #[inline(always)]
    pub(crate) fn space(&mut self) -> (&mut [u8], &mut usize) {
        (self.buf.as_mut_slice(), &mut self.len)
    }

    /// The whole buffer, mutably.
    pub(crate) fn buf_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    /// Start of the buffer (for io_uring entries and registration).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.buf.as_slice().as_ptr()
    }

    pub(crate) fn set_len(&mut self, len: usize) {
        assert!(len <= self.buf.len(), "a block holds at most its size");
        self.len = len;
    }

    /// Moves bytes `from..to` to the front and holds just them (the tail a
    /// sink carries into the next write).
    pub(crate) fn keep(&mut self, from: usize, to: usize) {
        self.buf.as_mut_slice().copy_within(from..to, 0);
        self.len = to - from;
    }
}

/// The error of a layered sink (compression, encryption) handed a block
/// after a write of its file failed: nothing more goes to the disk.
pub(crate) fn failed_before(path: &Path) -> StorageError {
    StorageError::Write {
        path: path.to_owned(),
        source: std::io::Error::other("an earlier write of the file failed"),
    }
}

/// Writes one file as a stream of blocks.
///
/// A sink that discards blocks (as the benches' is), outside the crate:
///
/// ```
/// use std::path::{Path, PathBuf};
/// use wiretape_storage::{Block, BlockSink, PcapWriter, StorageError};
/// struct NullSink(u64, PathBuf);
/// impl BlockSink for NullSink {
///     fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
///         self.0 += block.data().len() as u64;
///         block.clear();
///         Ok(block)
///     }
///     fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
///         self.submit(block)
///     }
///     fn finish(&mut self, _block: Block) -> Result<(), StorageError> {
///         Ok(())
///     }
///     fn bytes(&self) -> u64 {
///         self.0
///     }
///     fn path(&self) -> &Path {
///         &self.1
///     }
///     fn block_size(&self) -> usize {
///         1 << 16
///     }
///     fn first_block(&mut self) -> Block {
///         Block::new(1 << 16)
///     }
/// }
/// let mut w = PcapWriter::new(NullSink(0, "null".into()), 65535);
/// for i in 0..1000 {
///     w.write(i, &[7; 1000]).unwrap();
/// }
/// assert_eq!(w.close().unwrap().frames, 1000);
/// ```
pub trait BlockSink: Send {
    /// Takes a filled block (the file's next bytes) and returns the block to
    /// fill next. The returned block may already hold bytes (`len > 0`): data
    /// the sink carries over and writes with the next block (an O_DIRECT sink
    /// writes only whole aligned pages); the builder appends after them.
    /// On error nothing of the block may be assumed written.
    fn submit(&mut self, block: Block) -> Result<Block, StorageError>;
    /// Puts everything so far, `block` included, in the file now (a quiet
    /// link, or before close), leaving the file exactly that long; returns
    /// the block to go on filling (it may still hold the carried-over bytes).
    fn flush(&mut self, block: Block) -> Result<Block, StorageError>;
    /// Flushes, makes the file durable and closes it.
    fn finish(&mut self, block: Block) -> Result<(), StorageError>;
    /// Bytes of the stream known to be in the file.
    fn bytes(&self) -> u64;
    /// How much of the stream's start is written: every write below it
    /// has completed (an engine with writes in flight: the lowest of them;
    /// at most [`BlockSink::bytes`]). What a sink in front of this one
    /// (compression, encryption) must still be able to give back after a
    /// failure lies past it ([`BlockSink::take_unwritten`]).
    fn written(&self) -> u64 {
        self.bytes()
    }
    /// Whether the stream's offsets are the file's (false: a layer below
    /// or in this sink changes the bytes on their way, as encryption does),
    /// so that a sink in front may read the file back at them.
    fn offsets_in_file(&self) -> bool {
        true
    }
    /// After a failure, cuts the file at `off` (a stream offset where
    /// [`BlockSink::offsets_in_file`]); fails where the volume takes no
    /// more writes.
    fn cut_at(&mut self, off: u64) -> std::io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.path())
            .and_then(|f| f.set_len(off))
    }
    /// The file being written.
    fn path(&self) -> &Path;
    /// Block size the sink wants (its buffers' size).
    fn block_size(&self) -> usize;
    /// A free block to start with.
    fn first_block(&mut self) -> Block;
    /// Engine statistics (writes in flight, latency), if it keeps them.
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
    /// The latency of every block write so far (µs), if it measures it.
    fn latency(&self) -> Option<&wiretape_timestamp::hist::Histogram<u64>> {
        None
    }
    /// Where blocks went in a compressed file, each once, in order (plain
    /// sinks: none; see [`wiretape_files::compress::Placed`]).
    fn take_placed(&mut self, _out: &mut Vec<wiretape_files::compress::Placed>) {}
    /// Takes a filled block whose length is a multiple of 4096 (the file's
    /// next bytes), then `ext` (the bytes after it), and returns the block
    /// to fill next. `ext` is finished (its memory the owner's again) once
    /// its bytes are in the file, or failed. This default copies `ext`
    /// through blocks; the io_uring sink writes it from where it lies.
    fn submit_external(
        &mut self,
        block: Block,
        ext: crate::external::External,
    ) -> Result<Block, StorageError> {
        let b = self.submit(block)?;
        copy_external(self, b, ext).map_err(|(e, _, _)| e)
    }
    /// A run given to [`BlockSink::submit_external`] is written from where
    /// it lies only while fewer than `max` bytes wait for the disk (queued or
    /// in flight) in `shared`: the sum over the sinks that share it (one
    /// queue's files: the one written and those still closing), each adding
    /// what it has waiting. Otherwise the run is copied and its memory given
    /// back at once (the io_uring sink: a run laid out in a packet ring holds
    /// its ring block until the disk has it, so a disk that fell behind must
    /// not get it). 0: every run copied. Sinks that always copy ignore it.
    fn set_direct_backlog(
        &mut self,
        _max: u64,
        _shared: std::sync::Arc<std::sync::atomic::AtomicI64>,
    ) {
    }
    /// Whether runs given to [`BlockSink::submit_external`] wait in the sink
    /// for company (to go out merged with the next ones) and so hold their
    /// owner's memory: then [`BlockSink::kick`] is due soon.
    fn runs_waiting(&self) -> bool {
        false
    }
    /// Sends runs that waited long enough for company on their way now. The
    /// caller calls it whenever it has nothing else to do (a dry ring): a
    /// packet ring the kernel cannot fill because its next block waits here
    /// hands over nothing more, so no later run would ever come to send it.
    fn kick(&mut self) {}
    /// Orders this file after the one before it on disk: none of its
    /// writes goes to the kernel before `gate` opens (that file's last
    /// write done, [`BlockSink::open_when_done`]); blocks wait in RAM
    /// meanwhile. So a crash never leaves frames of a later file without
    /// those of the file before (a rotation closes the old file on a
    /// helper thread while the new one fills). Sinks without files ignore it.
    fn write_after(&mut self, _gate: Arc<Gate>) {}
    /// Opens `gate` once every write of this file is done (at
    /// [`BlockSink::finish`], or when the sink is dropped unfinished).
    fn open_when_done(&mut self, _gate: Arc<Gate>) {}
    /// After a failed write: the stream from a record boundary at or
    /// before the failed offset to its end, as far as it is still in RAM
    /// (a store with several volumes writes its frames to another volume,
    /// [`crate::volume`]). The records ending at or before
    /// [`Unwritten::kept`] stay in the file (it is cut after the last of
    /// them); the others are the caller's to write elsewhere. Sinks that
    /// cannot give them back: none. A compressed or encrypted sink gives
    /// back the plain records its file does not keep whole (its inner
    /// sink's `kept` decides: the file keeps every compressed unit, or age
    /// chunk, that ends at or before it; and, where the file cannot be cut
    /// there, every one after it that a failed write put on disk whole:
    /// nothing is both in the file and given back).
    fn take_unwritten(&mut self) -> Option<Unwritten> {
        None
    }
}

/// What a failed sink gives back ([`BlockSink::take_unwritten`]).
pub struct Unwritten {
    /// Stream offset of the first byte of `blocks`: a record boundary, or
    /// 0 (then the blocks start with the file header).
    pub off: u64,
    /// The file keeps every record that ends at or before this offset
    /// (the last one written whole, on disk before the failed write; or,
    /// where the volume refused to cut the file there, the end of what
    /// the failed write and those beside it put on disk as it was to be:
    /// readers read those records, so they are not given back too).
    pub kept: u64,
    /// The stream from `off` on, in order.
    pub blocks: Vec<Block>,
}

/// The order of one queue's files on disk ([`BlockSink::write_after`]):
/// open once the file before is written.
#[derive(Debug, Default)]
pub struct Gate(AtomicBool);

impl Gate {
    /// The file before is written: the next one may go.
    pub fn open(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether it is open.
    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A sink's wait for the file before it ([`BlockSink::write_after`]).
#[derive(Debug, Default)]
pub(crate) struct After(Option<Arc<Gate>>);

impl After {
    pub(crate) fn set(&mut self, gate: Arc<Gate>) {
        self.0 = Some(gate);
    }

    /// Whether writes must still wait (once seen open, the gate is
    /// forgotten: one branch per call from then on).
    #[inline]
    pub(crate) fn holds(&mut self) -> bool {
        match &self.0 {
            None => false,
            Some(g) if g.is_open() => {
                self.0 = None;
                false
            }
            Some(_) => true,
        }
    }

    /// Waits until the file before is written (its close runs on another
    /// thread and only waits for its own writes).
    pub(crate) fn wait(&mut self) {
        while self.holds() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// The gate a sink opens when its file is written, or when it is dropped
/// unfinished ([`BlockSink::open_when_done`]).
#[derive(Debug, Default)]
pub(crate) struct Opens(Option<Arc<Gate>>);

impl Opens {
    pub(crate) fn set(&mut self, gate: Arc<Gate>) {
        self.0 = Some(gate);
    }

    pub(crate) fn open(&mut self) {
        if let Some(g) = self.0.take() {
            g.open();
        }
    }
}

impl Drop for Opens {
    fn drop(&mut self) {
        self.open();
    }
}

/// Copies `ext` into the blocks of `sink`, starting with `b` (the block being
/// filled), and finishes it: its memory is free again at once (the copy goes
/// out with the next submit or flush). Returns the block to fill next; on a
/// failed submit, the error, the run and how many of its bytes went into
/// blocks handed to the sink (which keeps the failed one: the caller keeps
/// the rest, see [`BlockSink::take_unwritten`]).
#[allow(clippy::result_large_err)]
pub(crate) fn copy_external<S: BlockSink + ?Sized>(
    sink: &mut S,
    mut b: Block,
    ext: crate::external::External,
) -> Result<Block, (StorageError, crate::external::External, usize)> {
    let total = ext.len();
    let mut done = 0;
    while done < total {
        let (buf, len) = b.space();
        let n = (total - done).min(buf.len() - *len);
        buf[*len..*len + n].copy_from_slice(&ext.bytes()[done..done + n]);
        *len += n;
        done += n;
        if *len == buf.len() {
            b = match sink.submit(b) {
                Ok(b) => b,
                Err(e) => return Err((e, ext, done)),
            };
        }
    }
    ext.finish(true);
    Ok(b)
}

/// What a write engine reports for backpressure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SinkStats {
    /// Block writes issued to the disk (0 for the buffered sink, which
    /// does not count them).
    pub writes: u64,
    /// Writes submitted and not yet completed, now (0 for the buffered sink).
    pub in_flight: u32,
    /// Times the builder had to wait for a free block.
    pub waits: u64,
    /// Median time from submitting a write to its completion, µs (0 with
    /// no completed write, and for the buffered sink).
    pub latency_p50_us: f64,
    /// 99th percentile of that write latency, µs (0 likewise).
    pub latency_p99_us: f64,
    /// Most bytes of filled blocks that waited in RAM for the disk.
    pub peak_buffered_bytes: u64,
    /// RAM taken from the shared budget beyond the registered blocks.
    pub extra_buffer_bytes: u64,
    /// Filled blocks waiting in RAM for a write slot now.
    pub pending: u32,
    /// Writes issued again after room was made on a full disk.
    pub full_retries: u64,
    /// Runs given to [`BlockSink::submit_external`] written from where they
    /// lie (the io_uring sink; the others copy every run).
    pub runs_direct: u64,
}

/// Frees disk space when a write hits ENOSPC (`--on-full rotate`): given the
/// file being written (never to be deleted), returns whether it freed any.
pub type MakeRoom = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// A file written with plain `write(2)` (buffered by the page cache).
pub struct FileSink {
    file: Option<File>,
    path: PathBuf,
    bytes: u64,
    block_size: usize,
    spare: Option<Block>,
    make_room: Option<MakeRoom>,
    retries: u64,
    /// The file before this one is still being written: blocks wait here.
    after: After,
    held: std::collections::VecDeque<Block>,
    opens: Opens,
    /// Blocks a failed write left in RAM ([`BlockSink::take_unwritten`]).
    unwritten: Vec<Block>,
    /// Bytes past `bytes` that a failed write put in the file and the
    /// volume would not let us cut (read-only): the file keeps them.
    landed: u64,
}

impl FileSink {
    /// Creates `path`; fails if it exists (wiretape never overwrites a capture).
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, StorageError> {
        Self::with_block_size(path, crate::block::DEFAULT_BLOCK_SIZE)
    }

    /// As [`FileSink::create`], handing out blocks of `block_size` bytes.
    pub fn with_block_size(
        path: impl Into<PathBuf>,
        block_size: usize,
    ) -> Result<Self, StorageError> {
        let path = path.into();
        let file = crate::sys::create_new(&path, 0)?;
        Ok(FileSink {
            file: Some(file),
            path,
            bytes: 0,
            block_size,
            spare: None,
            make_room: None,
            retries: 0,
            after: After::default(),
            held: std::collections::VecDeque::new(),
            opens: Opens::default(),
            unwritten: Vec::new(),
            landed: 0,
        })
    }

    /// On ENOSPC, call `f` to free space and write again.
    pub fn set_make_room(&mut self, f: Option<MakeRoom>) {
        self.make_room = f;
    }

    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let f = self.file.as_mut().ok_or_else(|| StorageError::Write {
            path: self.path.clone(),
            source: std::io::Error::other("file already closed"),
        })?;
        loop {
            let (done, r) = write_counting(f, data);
            match r {
                Ok(()) => {
                    self.bytes += data.len() as u64;
                    return Ok(());
                }
                Err(e) => {
                    // A short write leaves part of the block in the file: cut
                    // the file back to the last whole block so it stays valid.
                    let cut = f.set_len(self.bytes);
                    use std::io::Seek;
                    let _ = f.seek(std::io::SeekFrom::Start(self.bytes));
                    let full = matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
                    if full && self.make_room.as_ref().is_some_and(|m| m(&self.path)) {
                        // The same bytes at the same offset (over any that
                        // landed: a write is idempotent).
                        self.retries += 1;
                        continue;
                    }
                    // Where the volume refuses the cut (gone read-only), the
                    // bytes that landed stay: readers read the records in
                    // them, so they are not given back too (the one they
                    // end inside is a torn tail, and given back).
                    self.landed = if cut.is_ok() { 0 } else { done as u64 };
                    return Err(StorageError::from_write(&self.path, e));
                }
            }
        }
    }
}

/// Writes all of `data` to `f`: the bytes written before an error, and
/// the error.
fn write_counting(f: &mut File, data: &[u8]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    while done < data.len() {
        match f.write(&data[done..]) {
            Ok(0) => return (done, Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

impl BlockSink for FileSink {
    fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
        if self.after.holds() {
            // The file before is still being written: this block waits
            // (a new one to fill meanwhile; only until that file is done).
            self.held.push_back(block);
            return Ok(Block::new(self.block_size));
        }
        while let Some(b) = self.held.pop_front() {
            if let Err(e) = self.write_all(b.data()) {
                // Kept, in order, for another volume.
                self.unwritten.push(b);
                self.unwritten.extend(self.held.drain(..));
                self.unwritten.push(block);
                return Err(e);
            }
        }
        if let Err(e) = self.write_all(block.data()) {
            self.unwritten.push(block);
            return Err(e);
        }
        block.clear();
        Ok(block)
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        self.after.wait();
        self.submit(block)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        self.after.wait();
        self.submit(block)?;
        // In the page cache: a crash of the process keeps it.
        self.opens.open();
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
            crate::sys::unlock(&f);
        }
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn first_block(&mut self) -> Block {
        self.spare
            .take()
            .unwrap_or_else(|| Block::new(self.block_size))
    }

    fn stats(&self) -> SinkStats {
        SinkStats {
            full_retries: self.retries,
            ..SinkStats::default()
        }
    }

    fn write_after(&mut self, gate: Arc<Gate>) {
        self.after.set(gate);
    }

    fn open_when_done(&mut self, gate: Arc<Gate>) {
        self.opens.set(gate);
    }

    /// Copies the run (see [`crate::external`]); after a failed write its
    /// bytes not in the file are kept with the blocks, in order
    /// ([`BlockSink::take_unwritten`]): copied only then.
    fn submit_external(
        &mut self,
        block: Block,
        ext: crate::external::External,
    ) -> Result<Block, StorageError> {
        let (e, ext, done) = match self.submit(block) {
            Ok(b) => match copy_external(self, b, ext) {
                Ok(b) => return Ok(b),
                Err(failed) => failed,
            },
            Err(e) => (e, ext, 0),
        };
        let rest = &ext.bytes()[done..];
        if !rest.is_empty() {
            self.unwritten.push(Block::copy_of(rest));
        }
        ext.finish(false);
        Err(e)
    }

    fn take_unwritten(&mut self) -> Option<Unwritten> {
        let blocks = std::mem::take(&mut self.unwritten);
        (!blocks.is_empty()).then_some(Unwritten {
            off: self.bytes,
            kept: self.bytes + self.landed,
            blocks,
        })
    }
}

/// Blocks written to any [`Write`]: stdout, a pipe, a file opened by the
/// caller (what `extract` writes its output through). `finish` flushes the
/// writer; it does not sync or close it.
pub struct WriteSink<W: Write + Send> {
    out: W,
    /// What the output is called in errors (`-` for stdout).
    name: PathBuf,
    bytes: u64,
    block_size: usize,
    spare: Option<Block>,
}

impl<W: Write + Send> WriteSink<W> {
    /// Writes to `out`, named `name` in errors, in blocks of `block_size`.
    pub fn new(out: W, name: impl Into<PathBuf>, block_size: usize) -> Self {
        WriteSink {
            out,
            name: name.into(),
            bytes: 0,
            block_size,
            spare: None,
        }
    }
}

impl<W: Write + Send> BlockSink for WriteSink<W> {
    fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
        self.out
            .write_all(block.data())
            .map_err(|e| StorageError::from_write(&self.name, e))?;
        self.bytes += block.len() as u64;
        block.clear();
        Ok(block)
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        let b = self.submit(block)?;
        self.out
            .flush()
            .map_err(|e| StorageError::from_write(&self.name, e))?;
        Ok(b)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        let b = self.flush(block)?;
        self.spare = Some(b);
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.bytes
    }

    fn path(&self) -> &Path {
        &self.name
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn first_block(&mut self) -> Block {
        self.spare
            .take()
            .unwrap_or_else(|| Block::new(self.block_size))
    }
}

/// How files are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// O_DIRECT through io_uring where the filesystem takes it, else buffered.
    Auto,
    /// O_DIRECT through io_uring, or fail.
    Direct,
    /// Plain buffered write(2) through the page cache.
    Buffered,
}

impl std::str::FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "direct" => Ok(IoMode::Direct),
            "buffered" => Ok(IoMode::Buffered),
            _ => Err(format!(
                "unknown I/O mode '{s}': use auto, direct or buffered"
            )),
        }
    }
}

/// An engine made ahead of its file ([`AnySink::prepare`]).
pub enum PreparedSink {
    /// The io_uring O_DIRECT engine, its ring and registered blocks made.
    Direct(Box<crate::uring::UringEngine>),
    /// The buffered engine (nothing to make ahead): its block size in bytes.
    Buffered(usize),
}

impl PreparedSink {
    /// Creates `path` (never overwrites) and returns its sink.
    pub fn open(self, path: impl Into<PathBuf>) -> Result<AnySink, StorageError> {
        Ok(match self {
            PreparedSink::Direct(e) => AnySink::Direct(Box::new(e.open(path)?)),
            PreparedSink::Buffered(bs) => AnySink::Buffered(FileSink::with_block_size(path, bs)?),
        })
    }
}

/// Either engine, chosen at run time, with static dispatch.
pub enum AnySink {
    /// io_uring with O_DIRECT ([`crate::uring::UringSink`]).
    Direct(Box<crate::uring::UringSink>),
    /// Buffered `write(2)` through the page cache ([`FileSink`]).
    Buffered(FileSink),
    /// Either of them behind a compressor ([`crate::compress::CompressSink`]).
    Compressed(Box<crate::compress::CompressSink<AnySink>>),
    /// Any of them behind age encryption ([`crate::crypt::AgeSink`]; a
    /// compressor, when on, is in front of it).
    Encrypted(Box<crate::crypt::AgeSink<AnySink>>),
}

impl AnySink {
    /// Creates `path` with the engine `mode` asks for. `direct_ok` is the
    /// answer of [`crate::uring::direct_supported`] for its directory (asked
    /// once per directory by the caller).
    pub fn create(
        path: impl Into<PathBuf>,
        mode: IoMode,
        direct_ok: bool,
        block_size: usize,
        nbufs: usize,
        budget: Option<std::sync::Arc<std::sync::atomic::AtomicI64>>,
    ) -> Result<Self, StorageError> {
        let path = path.into();
        match mode {
            IoMode::Buffered => Ok(AnySink::Buffered(FileSink::with_block_size(
                path, block_size,
            )?)),
            IoMode::Auto if !direct_ok => Ok(AnySink::Buffered(FileSink::with_block_size(
                path, block_size,
            )?)),
            IoMode::Auto | IoMode::Direct => Ok(AnySink::Direct(Box::new(
                crate::uring::UringSink::with_buffer(
                    path,
                    block_size,
                    nbufs,
                    crate::uring::Growth::Extend,
                    budget,
                )?,
            ))),
        }
    }

    /// Whether the file is written with io_uring and O_DIRECT (false: buffered).
    pub fn is_direct(&self) -> bool {
        match self {
            AnySink::Direct(_) => true,
            AnySink::Buffered(_) => false,
            AnySink::Compressed(c) => c.inner().is_direct(),
            AnySink::Encrypted(c) => c.inner().is_direct(),
        }
    }

    /// This sink behind a compressor (`compress` not none), else itself.
    pub fn compressed(
        self,
        compress: wiretape_files::compress::Compress,
        pool: Option<&std::sync::Arc<crate::compress::Pool>>,
    ) -> Result<Self, StorageError> {
        match pool {
            Some(p) if compress.is_on() => Ok(AnySink::Compressed(Box::new(
                crate::compress::CompressSink::new(self, compress, std::sync::Arc::clone(p))?,
            ))),
            _ => Ok(self),
        }
    }

    /// This sink behind age encryption to `to` (some recipients), else
    /// itself. Apply before [`AnySink::compressed`]: compression comes
    /// first in the stream, encryption last.
    pub fn encrypted(
        self,
        to: Option<&wiretape_files::crypt::Recipients>,
    ) -> Result<Self, StorageError> {
        match to {
            Some(r) if !r.is_empty() => Ok(AnySink::Encrypted(Box::new(
                crate::crypt::AgeSink::new(self, r)?,
            ))),
            _ => Ok(self),
        }
    }

    /// The slow part of [`AnySink::create`] (the io_uring engine and its
    /// blocks), done ahead, e.g. on a helper thread; [`PreparedSink::open`]
    /// then only creates the file.
    pub fn prepare(
        mode: IoMode,
        direct_ok: bool,
        block_size: usize,
        nbufs: usize,
        budget: Option<std::sync::Arc<std::sync::atomic::AtomicI64>>,
    ) -> std::io::Result<PreparedSink> {
        Ok(match mode {
            IoMode::Buffered => PreparedSink::Buffered(block_size),
            IoMode::Auto if !direct_ok => PreparedSink::Buffered(block_size),
            IoMode::Auto | IoMode::Direct => {
                PreparedSink::Direct(Box::new(crate::uring::UringSink::prepare(
                    block_size,
                    nbufs,
                    crate::uring::Growth::Extend,
                    budget,
                )?))
            }
        })
    }

    /// Stats for a live display: latency of the latest writes.
    pub fn live_stats(&self) -> SinkStats {
        match self {
            AnySink::Direct(s) => s.live_stats(),
            AnySink::Buffered(s) => s.stats(),
            AnySink::Compressed(s) => s.inner().live_stats(),
            AnySink::Encrypted(s) => s.inner().live_stats(),
        }
    }

    /// See [`MakeRoom`].
    pub fn set_make_room(&mut self, f: Option<MakeRoom>) {
        match self {
            AnySink::Direct(s) => s.set_make_room(f),
            AnySink::Buffered(s) => s.set_make_room(f),
            AnySink::Compressed(s) => s.inner_mut().set_make_room(f),
            AnySink::Encrypted(s) => s.inner_mut().set_make_room(f),
        }
    }
}

macro_rules! both {
    ($s:expr, $x:ident => $e:expr) => {
        match $s {
            AnySink::Direct($x) => $e,
            AnySink::Buffered($x) => $e,
            AnySink::Compressed($x) => $e,
            AnySink::Encrypted($x) => $e,
        }
    };
}

impl BlockSink for AnySink {
    #[inline]
    fn submit(&mut self, block: Block) -> Result<Block, StorageError> {
        both!(self, s => s.submit(block))
    }
    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        both!(self, s => s.flush(block))
    }
    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        both!(self, s => s.finish(block))
    }
    fn bytes(&self) -> u64 {
        both!(self, s => s.bytes())
    }
    fn path(&self) -> &Path {
        both!(self, s => s.path())
    }
    fn block_size(&self) -> usize {
        both!(self, s => s.block_size())
    }
    fn first_block(&mut self) -> Block {
        both!(self, s => s.first_block())
    }
    fn stats(&self) -> SinkStats {
        both!(self, s => s.stats())
    }
    fn latency(&self) -> Option<&wiretape_timestamp::hist::Histogram<u64>> {
        both!(self, s => s.latency())
    }
    fn take_placed(&mut self, out: &mut Vec<wiretape_files::compress::Placed>) {
        both!(self, s => s.take_placed(out))
    }
    fn submit_external(
        &mut self,
        block: Block,
        ext: crate::external::External,
    ) -> Result<Block, StorageError> {
        both!(self, s => s.submit_external(block, ext))
    }
    fn set_direct_backlog(
        &mut self,
        max: u64,
        shared: std::sync::Arc<std::sync::atomic::AtomicI64>,
    ) {
        both!(self, s => s.set_direct_backlog(max, shared))
    }
    fn runs_waiting(&self) -> bool {
        both!(self, s => s.runs_waiting())
    }
    fn kick(&mut self) {
        both!(self, s => s.kick())
    }
    fn write_after(&mut self, gate: Arc<Gate>) {
        both!(self, s => s.write_after(gate))
    }
    fn open_when_done(&mut self, gate: Arc<Gate>) {
        both!(self, s => s.open_when_done(gate))
    }
    fn written(&self) -> u64 {
        both!(self, s => s.written())
    }
    fn offsets_in_file(&self) -> bool {
        both!(self, s => s.offsets_in_file())
    }
    fn cut_at(&mut self, off: u64) -> std::io::Result<()> {
        both!(self, s => s.cut_at(off))
    }
    fn take_unwritten(&mut self) -> Option<Unwritten> {
        both!(self, s => s.take_unwritten())
    }
}
