//! Where blocks go. [`BlockSink`] is the seam between block building and the
//! engine that writes blocks: a filled [`Block`] goes in, an empty one to fill
//! next comes out. [`FileSink`] is the plain buffered `write(2)` engine;
//! [`crate::uring::UringSink`] the io_uring O_DIRECT one; [`AnySink`] picks.

use crate::aligned::AlignedBuf;
use crate::StorageError;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// An aligned buffer and how much of it holds data.
pub struct Block {
    pub buf: AlignedBuf,
    pub len: usize,
    /// The sink's name for the buffer (io_uring registered-buffer index).
    pub idx: u16,
}

impl Block {
    pub fn new(size: usize) -> Self {
        Block {
            buf: AlignedBuf::new(size),
            len: 0,
            idx: 0,
        }
    }
    pub fn data(&self) -> &[u8] {
        &self.buf.as_slice()[..self.len]
    }
}

/// Writes one file as a stream of blocks.
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
    fn path(&self) -> &Path;
    /// Block size the sink wants (its buffers' size).
    fn block_size(&self) -> usize;
    /// A free block to start with.
    fn first_block(&mut self) -> Block;
    /// Engine statistics (writes in flight, latency), if it keeps them.
    fn stats(&self) -> SinkStats {
        SinkStats::default()
    }
}

/// What a write engine reports for backpressure.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SinkStats {
    pub writes: u64,
    pub in_flight: u32,
    /// Times the builder had to wait for a free block.
    pub waits: u64,
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// Most bytes of filled blocks that waited in RAM for the disk.
    pub peak_buffered_bytes: u64,
    /// RAM taken from the shared budget beyond the registered blocks.
    pub extra_buffer_bytes: u64,
    /// Filled blocks waiting in RAM for a write slot now.
    pub pending: u32,
    /// Writes issued again after room was made on a full disk.
    pub full_retries: u64,
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
}

impl FileSink {
    /// Creates `path`; fails if it exists (wiretape never overwrites a capture).
    pub fn create(path: impl Into<PathBuf>) -> Result<Self, StorageError> {
        Self::with_block_size(path, crate::block::DEFAULT_BLOCK_SIZE)
    }

    pub fn with_block_size(
        path: impl Into<PathBuf>,
        block_size: usize,
    ) -> Result<Self, StorageError> {
        let path = path.into();
        let file = crate::create_new(&path, 0)?;
        Ok(FileSink {
            file: Some(file),
            path,
            bytes: 0,
            block_size,
            spare: None,
            make_room: None,
            retries: 0,
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
            match f.write_all(data) {
                Ok(()) => {
                    self.bytes += data.len() as u64;
                    return Ok(());
                }
                Err(e) => {
                    // A short write leaves part of the block in the file: cut
                    // the file back to the last whole block so it stays valid.
                    let _ = f.set_len(self.bytes);
                    use std::io::Seek;
                    let _ = f.seek(std::io::SeekFrom::Start(self.bytes));
                    let full = matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
                    if full && self.make_room.as_ref().is_some_and(|m| m(&self.path)) {
                        self.retries += 1;
                        continue;
                    }
                    return Err(StorageError::from_write(&self.path, e));
                }
            }
        }
    }
}

impl BlockSink for FileSink {
    fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
        self.write_all(&block.buf.as_slice()[..block.len])?;
        block.len = 0;
        Ok(block)
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        self.submit(block)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        self.submit(block)?;
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
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
    Direct(Box<crate::uring::UringEngine>),
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
    Direct(Box<crate::uring::UringSink>),
    Buffered(FileSink),
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
                    crate::uring::Growth::KeepSize,
                    budget,
                )?,
            ))),
        }
    }

    pub fn is_direct(&self) -> bool {
        matches!(self, AnySink::Direct(_))
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
                    crate::uring::Growth::KeepSize,
                    budget,
                )?))
            }
        })
    }

    /// Stats for a live display: latency over the last ~1000 writes.
    pub fn live_stats(&self) -> SinkStats {
        match self {
            AnySink::Direct(s) => s.stats_over(1024),
            AnySink::Buffered(s) => s.stats(),
        }
    }

    /// See [`MakeRoom`].
    pub fn set_make_room(&mut self, f: Option<MakeRoom>) {
        match self {
            AnySink::Direct(s) => s.set_make_room(f),
            AnySink::Buffered(s) => s.set_make_room(f),
        }
    }
}

macro_rules! both {
    ($s:expr, $x:ident => $e:expr) => {
        match $s {
            AnySink::Direct($x) => $e,
            AnySink::Buffered($x) => $e,
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
}
