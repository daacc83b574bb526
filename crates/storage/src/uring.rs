//! [`UringSink`]: one file written with O_DIRECT through io_uring, several
//! aligned blocks in flight, registered buffers, space allocated ahead.
//!
//! O_DIRECT wants aligned offsets and lengths. The builder fills blocks with
//! whole records; this sink writes the aligned part of each block and carries
//! the unaligned tail (< 4 KiB) into the next block, so the file is one
//! contiguous record stream. A flush (quiet link, close) writes the tail
//! padded to a page, waits, and cuts the file to its exact length with
//! `ftruncate`, so the file is a valid capture after every flush.
//!
//! This module is the policy (when to grow the file, merge writes, register
//! a lazy slab, what a completion means) and is safe code; registering
//! buffers with the kernel and pushing submission entries that point into
//! them is `submit`'s, the one place with `unsafe`, its invariant written
//! there: a buffer whose write is in flight is owned by the write's entry
//! in `in_flight` (or `ext_flight`) and is neither touched nor freed until
//! its completion is reaped; all buffers outlive the ring (see `Drop`).
//!
//! Only the sink's own blocks are ever issued: each carries a lease (this
//! sink's id, its slot) minted here and nowhere else, one block per slot
//! (see "Who owns a block" in [`crate::sink`]). A block without our lease
//! (from `Block::new`, another sink's) is copied into blocks of ours; its
//! slot is never trusted.

use crate::sink::{Block, BlockSink, Lease, SinkStats};
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
use wiretape_files::aligned::{AlignedBuf, Slab, ALIGN};
use wiretape_files::StorageError;
use wiretape_timestamp::hist::{self, Histogram};

#[allow(unsafe_code)]
mod submit;
use submit::Iovecs;

/// How much to allocate ahead of the write position.
const FALLOC_STEP: u64 = 64 << 20;
/// Space is allocated ahead only while the disk has this much free.
const EXTEND_MIN_FREE: u64 = 16 * FALLOC_STEP;
/// The live latency (the progress line's p50/p99) covers about this long.
const RECENT_NS: u64 = 1_000_000_000;
/// user_data of fallocate entries (write entries carry their buffer index).
const FALLOC_TAG: u64 = u64::MAX;
/// The default of [`BlockSink::set_direct_backlog`]: a quarter of the
/// packet engine's default ring (64 MiB per queue).
pub const DIRECT_BACKLOG_MAX: u64 = 16 << 20;
/// Once the disk was found behind ([`BlockSink::set_direct_backlog`]), runs
/// are copied for this long (from the last time it was found behind).
const BEHIND_HOLD: std::time::Duration = std::time::Duration::from_millis(500);
/// user_data of external writes: this bit and their index in `ext_flight`.
const EXT_TAG: u64 = 1 << 62;

/// Ids of engines (and the sinks made from them): the owner in a [`Lease`].
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The token [`Block::leased`] wants: only this module can make one, so only
/// the io_uring sink mints blocks that name its buffers.
pub(crate) struct Mint(());

fn leased(owner: u64, slot: usize, buf: AlignedBuf) -> Block {
    let lease = Lease {
        owner,
        slot: slot as u16,
    };
    Block::leased(buf, lease, &Mint(()))
}

/// How the file grows ahead of the writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// Allocate ahead but keep the size (FALLOC_FL_KEEP_SIZE): the file is
    /// always exactly its data. Every write extends the file, and on ext4
    /// and XFS an extending direct write cannot be issued without blocking
    /// (it needs the inode lock exclusively), so io_uring hands each one to
    /// an io-wq worker thread: 12% of the capture CPU at 300 kpps x 1514 B
    /// (`perf`, issue 15). Measured on this project's ext4/virtio disk
    /// (examples/diskbench.rs) it is as fast as `Extend` (420-460 MB/s both):
    /// the disk is the limit there, the workers' CPU is the cost.
    KeepSize,
    /// Keep the file's size a step (64 MiB) ahead of the writes (fallocate
    /// mode 0, asynchronous): writes land below the end of the file, so
    /// they are overwrites of allocated blocks that io_uring issues inline,
    /// without io-wq workers, and run in parallel. The file is cut to its
    /// exact length at every flush and at close; until then, and after a
    /// crash, it ends in zeros, which this project's readers and `repair`
    /// treat as the end (the recorder trims them when it starts again). A
    /// filesystem without fallocate, a failed one, or a disk with less than
    /// 1 GiB free falls back to `KeepSize` for the rest of the file. The
    /// default.
    Extend,
}

/// At most this many consecutive blocks go out as one write ([`UringSink::pump`]).
const MERGE: usize = 4;
/// ... and at most this many bytes (a common `max_sectors_kb`; a device
/// with smaller requests splits them, which costs nothing over separate writes).
const MERGE_BYTES: u64 = 4 << 20;
/// Blocks that follow each other closer than this are merged.
const MERGE_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// One write in flight: the blocks it covers (one, or a few merged) with
/// the length and offset of each one's part, and for a merged write the
/// iovecs the kernel reads (kept here, at a stable address, until the
/// completion).
struct InFlight {
    parts: Vec<(Block, u32, u64)>,
    _iov: Iovecs,
    at: Instant,
    /// The stream's end (bytes submitted) when it was issued.
    stream: u64,
    /// Fault injection: this write was not issued and completes with EIO.
    fault: bool,
}

impl InFlight {
    fn off(&self) -> u64 {
        self.parts[0].2
    }
    fn len(&self) -> u64 {
        self.parts.iter().map(|p| p.1 as u64).sum()
    }
}

/// Fault injection for tests of a failing disk (`WIRETAPE_FAULT_WRITE_EIO=N`,
/// read once; only with the cargo feature `fault-injection`, which the
/// workspace's tests turn on): from the Nth block write of the process on,
/// the engine issues a no-op instead of the write and reports EIO for it,
/// as a disk that fails does. Everything after (the writer's failure,
/// cutting the file back to its last complete record, the accounting, the
/// stop) is the real code.
#[cfg(feature = "fault-injection")]
fn inject_eio() -> bool {
    static AT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let Some(at) = *AT.get_or_init(|| {
        std::env::var("WIRETAPE_FAULT_WRITE_EIO")
            .ok()
            .and_then(|v| v.parse().ok())
    }) else {
        return false;
    };
    WRITES.fetch_add(1, Ordering::Relaxed) + 1 >= at
}

/// Without the feature `fault-injection` (every shipped build) no write
/// ever fails on purpose, and no environment variable is read.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn inject_eio() -> bool {
    false
}

/// One file written with O_DIRECT through io_uring.
pub struct UringSink {
    ring: IoUring,
    /// The owner in the leases of our blocks.
    owner: u64,
    file: Option<File>,
    path: PathBuf,
    block_size: usize,
    free: Vec<Block>,
    /// Writes in flight, under the slot of their first block.
    in_flight: Vec<Option<InFlight>>,
    /// Per slot: the block is in a write in flight (its own or a merged one).
    busy: Vec<bool>,
    /// Writes that carried more than one block.
    merged: u64,
    /// When the last full block was queued, and whether it came less than
    /// MERGE_WAIT after the one before.
    last_push: Instant,
    streaming: bool,
    n_in_flight: u32,
    /// Blocks 0..n_registered are registered with the ring (WriteFixed).
    n_registered: usize,
    /// ... as one buffer, index 0 (a slab), not one index per block.
    one_buffer: bool,
    /// ... and merged writes of them go out as WRITEV_FIXED.
    writev_fixed: bool,
    /// The slab, when it is to be registered once the sink is busy.
    register_later: Option<LateSlab>,
    /// Blocks issued (a merged write counts each).
    blocks_written: u64,
    /// Filled blocks waiting for a write slot (the RAM buffer).
    pending: VecDeque<(Block, u32, u64)>,
    /// Most writes in flight at once.
    qd: u32,
    /// Shared budget (bytes) for blocks beyond the registered ones.
    budget: Option<Arc<AtomicI64>>,
    extra: usize,
    peak_pending: usize,
    /// fallocate entries in flight.
    fallocs: u32,
    /// File offset of the next aligned write.
    off: u64,
    /// KeepSize: allocated up to here. Extend: the file's size is at least
    /// this (a completed fallocate, or a cut).
    allocated: u64,
    /// Extend: the size the fallocate in flight sets.
    ahead: u64,
    growth: Growth,
    /// The first failure: (offset of the failed write, error).
    failed: Option<(u64, std::io::Error)>,
    writes: u64,
    waits: u64,
    /// Every completed write's latency (submit to completion), µs.
    lat: Histogram<u64>,
    /// The latest writes' (since `recent_from`, at most about 2 s): the
    /// live figure.
    recent: Histogram<u64>,
    recent_from: Instant,
    /// The file is registered with the ring (IORING_REGISTER_FILES, slot 0).
    fixed_file: bool,
    /// Called on ENOSPC to free space (`--on-full rotate`); the failed write
    /// is then issued again.
    make_room: Option<crate::sink::MakeRoom>,
    retries: u64,
    /// External writes in flight (see [`crate::external`]), by index.
    ext_flight: Vec<Option<ExtFlight>>,
    /// External runs waiting to go out (merged as blocks are, see `pump`),
    /// each with its offset.
    ext_pending: VecDeque<(crate::external::External, u64)>,
    /// Runs are written from where they lie only while at most this many
    /// bytes wait for the disk ([`BlockSink::set_direct_backlog`]).
    direct_backlog_max: u64,
    /// Runs written from where they lie.
    runs_direct: u64,
    /// Runs are copied until then: the disk was found behind.
    behind_until: Instant,
    /// Bytes submitted while the latest write to complete was on its way.
    last_arrived: u64,
    /// The count of bytes waiting shared with the queue's other files, and
    /// what this sink last added to it.
    unwritten_shared: Option<Arc<AtomicI64>>,
    unwritten_published: i64,
    /// When the last run was queued, and whether it came less than
    /// MERGE_WAIT after the one before.
    ext_last_push: Instant,
    ext_streaming: bool,
    /// When the oldest run in `ext_pending` was queued.
    ext_since: Instant,
    /// The file before this one is still being written: nothing goes to
    /// the kernel yet ([`BlockSink::write_after`]).
    after: crate::sink::After,
    /// Opened when this file is written ([`BlockSink::open_when_done`]).
    opens: crate::sink::Opens,
    /// Written blocks kept while a write at a lower offset is still on its
    /// way (and, after a failure, every block at or past the failed
    /// offset): what [`BlockSink::take_unwritten`] gives back.
    held: Vec<(Block, u32, u64)>,
    /// Blocks handed in after the failure (the writer's, with its latest
    /// frames), with the offset of their first byte.
    orphans: Vec<(Block, u64)>,
    /// Runs laid out in place written whole while a write below them was
    /// still on its way (or at or past a failed offset), each with its
    /// offset: their owner's memory is kept until no write below them can
    /// fail any more, so that a failure there finds their bytes (copied
    /// out then, [`UringSink::keep_run`]). Never copied on the good path.
    held_runs: Vec<(crate::external::External, u64)>,
    /// The file's length after the last flush: all of it written, and
    /// what a failed write after it rewrote of its last page was the same
    /// bytes, so the file keeps it whatever fails next (see `kept`).
    flushed: u64,
    /// Copies of runs the file does not keep (their write failed, or a
    /// failure left them unwritten), with their offsets: given back with
    /// the blocks ([`BlockSink::take_unwritten`]).
    runs_back: Vec<(Block, u64)>,
    /// After a failure the volume would not let us cut: the file holds
    /// the stream byte for byte up to here (see `keep_landed`), 0 before.
    landed: u64,
    /// Record boundaries (the end of each block the writer handed in):
    /// the largest at or below the lowest offset not yet written, and all
    /// above it.
    bounds: VecDeque<u64>,
}

/// An external write in flight: the runs it covers (each lent by its owner
/// until it is dropped), at consecutive offsets from `off`, when it went out.
struct ExtFlight {
    parts: Vec<crate::external::External>,
    off: u64,
    _iov: Iovecs,
    at: Instant,
    /// The stream's end (bytes submitted) when it was issued.
    stream: u64,
    fault: bool,
}

/// A prepared engine: ring and registered blocks, no file yet
/// ([`UringSink::prepare`]). Its blocks are registered with its ring, so
/// the two never part; [`UringEngine::open`] makes the sink.
pub struct UringEngine {
    ring: IoUring,
    owner: u64,
    free: Vec<Block>,
    n_registered: usize,
    one_buffer: bool,
    writev_fixed: bool,
    register_later: Option<LateSlab>,
    block_size: usize,
    nbufs: usize,
    growth: Growth,
    budget: Option<Arc<AtomicI64>>,
}

/// A slab of blocks not registered yet (see [`UringSink::prepare`]'s lazy
/// twin, `build`).
#[derive(Clone, Copy)]
struct LateSlab {
    base: usize,
    len: usize,
    /// The blocks carved from it (slots 0..blocks).
    blocks: usize,
    /// Merged writes may then go out as WRITEV_FIXED (probed).
    writev_fixed: bool,
}

/// A lazy slab is registered once the sink has written this many times its
/// blocks' worth.
const REGISTER_AFTER: u64 = 2;

impl UringEngine {
    /// Creates `path` (never overwrites) and returns the sink writing it.
    pub fn open(self, path: impl Into<PathBuf>) -> Result<UringSink, StorageError> {
        let path = path.into();
        let file = crate::sys::create_new(&path, libc::O_DIRECT)?;
        let ring = self.ring;
        // A registered file saves the kernel an fd lookup per write.
        let fixed_file = ring.submitter().register_files(&[file.as_raw_fd()]).is_ok();
        let nbufs = self.nbufs;
        Ok(UringSink {
            ring,
            owner: self.owner,
            file: Some(file),
            path,
            block_size: self.block_size,
            free: self.free,
            in_flight: (0..nbufs).map(|_| None).collect(),
            busy: vec![false; nbufs],
            merged: 0,
            last_push: Instant::now(),
            streaming: false,
            n_in_flight: 0,
            n_registered: self.n_registered,
            one_buffer: self.one_buffer,
            writev_fixed: self.writev_fixed,
            register_later: self.register_later,
            blocks_written: 0,
            pending: VecDeque::new(),
            qd: nbufs as u32,
            budget: self.budget,
            extra: 0,
            peak_pending: 0,
            fallocs: 0,
            off: 0,
            allocated: 0,
            ahead: 0,
            growth: self.growth,
            failed: None,
            writes: 0,
            waits: 0,
            lat: hist::latency_us(),
            recent: hist::latency_us(),
            recent_from: Instant::now(),
            fixed_file,
            make_room: None,
            retries: 0,
            ext_flight: Vec::new(),
            ext_pending: VecDeque::new(),
            ext_last_push: Instant::now(),
            ext_streaming: false,
            ext_since: Instant::now(),
            direct_backlog_max: DIRECT_BACKLOG_MAX,
            runs_direct: 0,
            behind_until: Instant::now(),
            last_arrived: 0,
            unwritten_shared: None,
            unwritten_published: 0,
            after: Default::default(),
            opens: Default::default(),
            held: Vec::new(),
            orphans: Vec::new(),
            held_runs: Vec::new(),
            flushed: 0,
            runs_back: Vec::new(),
            landed: 0,
            bounds: VecDeque::new(),
        })
    }
}

/// Does the filesystem under `dir` take O_DIRECT? (tmpfs may not.)
pub fn direct_supported(dir: &Path) -> bool {
    let probe = dir.join(format!(".wiretape-odirect-{}", std::process::id()));
    let ok = crate::sys::create_new(&probe, libc::O_DIRECT).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

impl UringSink {
    /// Creates `path` (never overwrites) with `nbufs` buffers of `block_size`.
    pub fn create(
        path: impl Into<PathBuf>,
        block_size: usize,
        nbufs: usize,
    ) -> Result<Self, StorageError> {
        Self::with_growth(path, block_size, nbufs, Growth::Extend)
    }

    /// As [`UringSink::create`], choosing how the file grows.
    pub fn with_growth(
        path: impl Into<PathBuf>,
        block_size: usize,
        nbufs: usize,
        growth: Growth,
    ) -> Result<Self, StorageError> {
        Self::with_buffer(path, block_size, nbufs, growth, None)
    }

    /// `nbufs` registered blocks, at most `nbufs` writes in flight; under
    /// pressure more blocks are allocated from `budget` (bytes, shared by
    /// every file of a recording) and queue in RAM until the disk takes them.
    pub fn with_buffer(
        path: impl Into<PathBuf>,
        block_size: usize,
        nbufs: usize,
        growth: Growth,
        budget: Option<Arc<AtomicI64>>,
    ) -> Result<Self, StorageError> {
        let path = path.into();
        let engine = Self::build(block_size, nbufs, growth, budget, false).map_err(|source| {
            StorageError::Create {
                path: path.clone(),
                source,
            }
        })?;
        engine.open(path)
    }

    /// Everything but the file: the ring, the blocks (allocated, registered).
    /// This is the slow part of opening (10-60 ms measured under load,
    /// mostly allocating the blocks), so a rotating writer prepares the next
    /// engine on a helper thread and only creates the file on the spot.
    pub fn prepare(
        block_size: usize,
        nbufs: usize,
        growth: Growth,
        budget: Option<Arc<AtomicI64>>,
    ) -> std::io::Result<UringEngine> {
        Self::build(block_size, nbufs, growth, budget, true)
    }

    /// On ENOSPC, call `f` to free space and write again (until it says it
    /// freed nothing).
    pub fn set_make_room(&mut self, f: Option<crate::sink::MakeRoom>) {
        self.make_room = f;
    }

    /// Whether the file is registered with the ring (fixed file).
    pub fn fixed_file(&self) -> bool {
        self.fixed_file
    }

    fn fd(&self) -> i32 {
        self.file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1)
    }

    fn error(&self) -> Option<StorageError> {
        self.failed.as_ref().map(|(_, e)| {
            StorageError::from_write(&self.path, std::io::Error::new(e.kind(), e.to_string()))
                .with_errno(e.raw_os_error())
        })
    }

    /// Queues a write of `len` bytes of `block` at `off`: in flight at once
    /// if a slot is free, else in the RAM buffer.
    fn push_write(&mut self, block: Block, len: u32, off: u64) -> Result<(), StorageError> {
        self.pending.push_back((block, len, off));
        self.peak_pending = self.peak_pending.max(self.pending.len());
        let now = Instant::now();
        self.streaming = now.duration_since(self.last_push) < MERGE_WAIT;
        self.last_push = now;
        self.pump(false)
    }

    /// Moves queued writes into flight while slots are free, consecutive
    /// blocks merged into one write (up to [`MERGE`] blocks, [`MERGE_BYTES`]).
    ///
    /// Every write costs a request to the device (here a VM exit to notify
    /// virtio-blk, an interrupt, an io-wq wake-up), so while blocks come
    /// fast (the last one less than [`MERGE_WAIT`] before this one) or a
    /// write is in flight, up to [`MERGE`] full blocks wait for each other
    /// and go out as one. Never when `force` (a flush, the close, or no free
    /// block left): then what is queued goes now. A slow trickle of blocks
    /// is written one by one as before; a block held at the end of a burst
    /// goes out with the next block or the next flush (`--flush-interval`,
    /// the bound a partly filled block has anyway).
    fn pump(&mut self, force: bool) -> Result<(), StorageError> {
        if self.after.holds() {
            return Ok(());
        }
        // Runs first: each holds its owner's memory (a packet ring's
        // block) until written; a block is ours and can wait.
        self.pump_ext(force)?;
        // A run after a queued block holds its owner's memory until that
        // block is written (see `held_runs`): such blocks go now.
        let force = force || self.runs_wait_on_blocks();
        while self.n_in_flight < self.qd && !self.pending.is_empty() {
            if !force && (self.streaming || self.n_in_flight > 0) && self.pending.len() < MERGE {
                break;
            }
            let first = self.pending.pop_front().expect("not empty");
            let (mut end, mut bytes) = (first.2 + first.1 as u64, first.1 as u64);
            let mut parts = vec![first];
            while parts.len() < MERGE {
                match self.pending.front() {
                    Some((_, len, off)) if *off == end && bytes + *len as u64 <= MERGE_BYTES => {
                        end += *len as u64;
                        bytes += *len as u64;
                        parts.push(self.pending.pop_front().expect("not empty"));
                    }
                    _ => break,
                }
            }
            self.issue(parts)?;
        }
        Ok(())
    }

    /// As [`UringSink::pump`], for the runs written from where they lie.
    fn pump_ext(&mut self, force: bool) -> Result<(), StorageError> {
        if self.after.holds() {
            return Ok(());
        }
        while self.n_in_flight < self.qd && !self.ext_pending.is_empty() {
            if !force
                && (self.ext_streaming || self.n_in_flight > 0)
                && self.ext_pending.len() < MERGE
            {
                break;
            }
            let first = self.ext_pending.pop_front().expect("not empty");
            let mut end = first.1 + first.0.len() as u64;
            let mut bytes = first.0.len() as u64;
            let off = first.1;
            let mut parts = vec![first.0];
            while parts.len() < MERGE {
                match self.ext_pending.front() {
                    Some((e, o)) if *o == end && bytes + e.len() as u64 <= MERGE_BYTES => {
                        end += e.len() as u64;
                        bytes += e.len() as u64;
                        parts.push(self.ext_pending.pop_front().expect("not empty").0);
                    }
                    _ => break,
                }
            }
            self.issue_external(parts, off)?;
        }
        Ok(())
    }

    /// Drops the ring's reference to the file now (nothing is in flight):
    /// the kernel tears a ring down asynchronously, after we drop it, and
    /// until then a registered file stays open, so the space of a file
    /// deleted meanwhile (retention on a full disk) would not come back.
    fn release_file(&mut self) {
        if self.fixed_file {
            let _ = self.ring.submitter().unregister_files();
            self.fixed_file = false;
        }
    }

    /// Whether the disk has room for allocating ahead.
    fn room_ahead(&self) -> bool {
        self.file
            .as_ref()
            .and_then(crate::sys::free_bytes)
            .is_some_and(|free| free >= EXTEND_MIN_FREE)
    }

    /// The registered buffer index a write from block `slot` names, if the
    /// block is registered.
    fn buf_index(&self, slot: u16) -> Option<u16> {
        ((slot as usize) < self.n_registered).then_some(if self.one_buffer { 0 } else { slot })
    }

    /// Allocates ahead of a write of `len` bytes at `off` when it comes
    /// near the end of what is allocated (see [`Growth`]).
    fn grow(&mut self, off: u64, len: u64) {
        let near_end = match self.growth {
            Growth::KeepSize => off + len > self.allocated,
            Growth::Extend => self.fallocs == 0 && off + len + FALLOC_STEP / 2 > self.allocated,
        };
        // Not on a nearly full disk: a step would take space that writes
        // (this file's, the other queues' files') need, for as long as the
        // fallocate runs, or for good (on ext4 a failed fallocate keeps
        // what it got). Once per step: a statfs per 64 MiB.
        if near_end && !self.room_ahead() {
            // Plain extending writes for the rest of this file.
            self.growth = Growth::KeepSize;
            self.allocated = u64::MAX;
        } else if near_end {
            match self.growth {
                Growth::KeepSize => {
                    // Allocate ahead, asynchronously: on ext4 fallocate waits
                    // for all direct I/O in flight, which must never stall
                    // the writer thread. Filesystems without fallocate
                    // simply allocate on write.
                    let from = self.allocated.max(off);
                    self.fallocate(from, FALLOC_STEP, libc::FALLOC_FL_KEEP_SIZE);
                    self.allocated = (from + FALLOC_STEP).max(off + len);
                }
                Growth::Extend => {
                    // Within half a step of the end: ask for the next step
                    // (the same asynchronous fallocate, which sets the
                    // size). Writes beyond the size until it completes
                    // extend the file themselves (correct, only through
                    // io-wq).
                    self.ahead = off + len + FALLOC_STEP;
                    let from = self.allocated;
                    self.fallocate(from, self.ahead - from, 0);
                }
            }
        }
    }

    /// A write issued at `at` completed: its latency, in the whole run's
    /// histogram and the latest writes' (once per write: a clock read and
    /// two histogram counts).
    fn record_latency(&mut self, at: Instant, stream: u64) {
        // What came in while it was on its way (see `submit_external`).
        self.last_arrived = self.off.saturating_sub(stream);
        let us = at.elapsed().as_micros() as u64;
        self.lat.saturating_record(us.max(1));
        if self.recent_from.elapsed().as_nanos() as u64 >= 2 * RECENT_NS {
            self.recent.reset();
            self.recent_from = Instant::now();
        }
        self.recent.saturating_record(us.max(1));
    }

    /// The error of a write that returned `res` (negative errno, or fewer
    /// bytes than asked: a short O_DIRECT write, the device out of room).
    fn write_error(res: i32) -> std::io::Error {
        if res < 0 {
            std::io::Error::from_raw_os_error(-res)
        } else {
            std::io::Error::from_raw_os_error(libc::ENOSPC)
        }
    }

    /// A write failed with `err`: if it is a full disk and `--on-full
    /// rotate` made room, true (the caller issues the same bytes again).
    fn made_room_for(&mut self, err: &std::io::Error) -> bool {
        let full = matches!(err.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
        if full && self.failed.is_none() {
            if let Some(f) = &self.make_room {
                if f(&self.path) {
                    self.retries += 1;
                    return true;
                }
            }
        }
        false
    }

    /// The completion `res` of external write `slot`.
    fn reap_external(&mut self, slot: usize, res: i32) -> Result<(), StorageError> {
        let Some(w) = self.ext_flight.get_mut(slot).and_then(Option::take) else {
            return Ok(());
        };
        self.n_in_flight -= 1;
        let res = if w.fault { -libc::EIO } else { res };
        let len: u64 = w.parts.iter().map(|e| e.len() as u64).sum();
        if res >= 0 && res as u64 == len {
            self.record_latency(w.at, w.stream);
            // Written: the runs go back to their owners, unless a write
            // below them may still fail (then the file keeps nothing from
            // there on and they must be given back: held until that write
            // is done, see `release_held`).
            if self.lowest_unsure().is_some_and(|low| low < w.off) {
                let mut off = w.off;
                for e in w.parts {
                    let n = e.len() as u64;
                    self.held_runs.push((e, off));
                    off += n;
                }
            } else {
                w.parts.into_iter().for_each(|e| e.finish(true));
            }
            return Ok(());
        }
        let err = Self::write_error(res);
        if self.made_room_for(&err) {
            // Room was made: the same bytes at the same offsets again.
            let mut off = w.off + len;
            for e in w.parts.into_iter().rev() {
                off -= e.len() as u64;
                self.ext_pending.push_front((e, off));
            }
            return Ok(());
        }
        if self.failed.as_ref().is_none_or(|(o, _)| w.off < *o) {
            self.failed = Some((w.off, err));
        }
        // Not in the file: copied out (now, before their memory goes back
        // to its owner), for another volume.
        let mut off = w.off;
        for e in w.parts {
            let n = e.len() as u64;
            self.keep_run(e, off);
            off += n;
        }
        Ok(())
    }

    /// A run the file does not keep, at `off`: its bytes copied (the
    /// failure path only), its memory its owner's again; given back by
    /// [`BlockSink::take_unwritten`].
    fn keep_run(&mut self, ext: crate::external::External, off: u64) {
        self.keep_rest(&ext, 0, off);
        ext.finish(false);
    }

    /// [`UringSink::keep_run`] of the run's bytes from `from` on (those
    /// before went into blocks already), at `off`.
    fn keep_rest(&mut self, ext: &crate::external::External, from: usize, off: u64) {
        let rest = &ext.bytes()[from..];
        if rest.is_empty() {
            return;
        }
        self.runs_back.push((Block::copy_of(rest), off));
    }

    /// Where the stream goes on after the blocks handed in since a failure
    /// (kept by `orphan`, which does not move `off`): where a run refused
    /// now lies.
    fn orphans_end(&self) -> u64 {
        self.orphans
            .last()
            .map_or(self.off, |(b, off)| off + b.len() as u64)
    }

    /// After a failure, where the file ends (cut there): the failed
    /// offset, or the end of the last flush when the failed write rewrote
    /// its last page (the same bytes: a failure there leaves them), or,
    /// where the volume refused the cut (read-only), the end of what
    /// landed after it as it was to be (`keep_landed`), so that a record
    /// the file keeps is never given back too.
    fn kept(&self) -> Option<u64> {
        self.failed
            .as_ref()
            .map(|f| f.0.max(self.flushed).max(self.landed))
    }

    /// After a failure, every write done: cuts the file at `kept` (where
    /// it ends in data the sink knows is there) and returns `kept`. Where
    /// the volume refuses the cut (gone read-only), what the writes past
    /// `kept` put on disk stays, and readers read every record in it: the
    /// file's bytes from `kept` on are read back and compared with `want`
    /// (the stream from `kept` on, as it was to be written), and the end
    /// of the longest prefix that is there byte for byte is returned
    /// (noted: a later cut goes no lower). Byte for byte, not by length:
    /// the zeros of space allocated ahead, or of a write that never came,
    /// are not the records. A record that ends in that prefix is in the
    /// file as written; one that ends past it is not (a torn tail, or one
    /// cut short by bytes that are not its own): the caller gives it back.
    /// A read that fails keeps `kept` (everything past it given back, as
    /// when the cut succeeds). Once per failure; `--on-full rotate`'s
    /// retry after making room never comes here (it fails nothing).
    fn keep_landed(&mut self, kept: u64, want: &[u8]) -> u64 {
        use std::os::unix::fs::FileExt;
        let Some(f) = &self.file else {
            return kept;
        };
        let len = match f.metadata() {
            Ok(m) if m.len() > kept => m.len(),
            _ => return kept,
        };
        if f.set_len(kept).is_ok() {
            self.allocated = kept;
            return kept;
        }
        // Read through the page cache (this descriptor is O_DIRECT, which
        // wants aligned buffers and offsets), a chunk at a time.
        let Ok(f) = File::open(&self.path) else {
            return kept;
        };
        let upto = len.min(kept + want.len() as u64);
        let mut disk = vec![0u8; (upto - kept).min(1 << 20) as usize];
        let mut at = kept;
        while at < upto {
            let n = (upto - at).min(disk.len() as u64) as usize;
            if f.read_exact_at(&mut disk[..n], at).is_err() {
                break;
            }
            let mine = &want[(at - kept) as usize..][..n];
            let same = disk[..n]
                .iter()
                .zip(mine)
                .position(|(a, b)| a != b)
                .unwrap_or(n);
            at += same as u64;
            if same < n {
                break;
            }
        }
        self.landed = at;
        at
    }

    /// Whether no run is in flight (one branch: no slot was ever made).
    fn ext_flight_none(&self) -> bool {
        self.ext_flight.iter().all(Option::is_none)
    }

    /// The lowest offset whose write may still fail (queued or in
    /// flight) or failed.
    fn lowest_unsure(&self) -> Option<u64> {
        let blocks = self.in_flight.iter().flatten().map(InFlight::off);
        let runs = self.ext_flight.iter().flatten().map(|w| w.off);
        // Both queues are in offset order (a write issued again after room
        // was made goes back to the front): their first is their lowest.
        let queued = self.pending.front().map(|p| p.2);
        let runs_queued = self.ext_pending.front().map(|e| e.1);
        blocks
            .chain(runs)
            .chain(queued)
            .chain(runs_queued)
            .chain(self.failed.as_ref().map(|f| f.0))
            .min()
    }

    /// Whether a run (queued, in flight, or held) lies after a block still
    /// queued (a file's first block, a filler, copied frames): that block
    /// must not wait for company.
    fn runs_wait_on_blocks(&self) -> bool {
        if self.ext_pending.is_empty() && self.held_runs.is_empty() && self.ext_flight_none() {
            return false;
        }
        let Some(low) = self.pending.front().map(|p| p.2) else {
            return false;
        };
        let flight = self.ext_flight.iter().flatten().map(|w| w.off);
        let queued = self.ext_pending.iter().map(|e| e.1);
        let held = self.held_runs.iter().map(|r| r.1);
        flight.chain(queued).chain(held).any(|o| o > low)
    }

    /// Reaps completions, waiting for at least `want` if that many are in flight.
    fn reap_wait(&mut self, want: usize) -> Result<(), StorageError> {
        let want = want.min((self.n_in_flight + self.fallocs) as usize);
        if want > 0 {
            match self.ring.submit_and_wait(want) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(StorageError::from_write(&self.path, e)),
            }
        }
        let done: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (idx, res) in done {
            if idx != FALLOC_TAG && idx & EXT_TAG != 0 {
                self.reap_external((idx & !EXT_TAG) as usize, res)?;
                continue;
            }
            if idx == FALLOC_TAG {
                // Best effort: a failure only means allocation on write.
                self.fallocs -= 1;
                if self.growth == Growth::Extend {
                    if res >= 0 {
                        self.allocated = self.allocated.max(self.ahead);
                    } else {
                        // No fallocate here, or no room for a step ahead:
                        // extending writes for the rest of this file.
                        self.growth = Growth::KeepSize;
                    }
                }
                continue;
            }
            let Some(w) = self.in_flight.get_mut(idx as usize).and_then(Option::take) else {
                continue;
            };
            self.n_in_flight -= 1;
            let (off, len) = (w.off(), w.len());
            let InFlight {
                parts,
                at,
                fault,
                stream,
                ..
            } = w;
            for (b, _, _) in &parts {
                self.busy[b.lease().expect("ours").slot as usize] = false;
            }
            let res = if fault { -libc::EIO } else { res };
            if res < 0 || res as u64 != len {
                let err = Self::write_error(res);
                if self.made_room_for(&err) {
                    // Room was made: the same bytes, at the same offsets,
                    // once more (a write is idempotent).
                    for p in parts.into_iter().rev() {
                        self.pending.push_front(p);
                    }
                    continue;
                }
                if self.failed.as_ref().is_none_or(|(o, _)| off < *o) {
                    self.failed = Some((off, err));
                }
            } else {
                self.record_latency(at, stream);
            }
            self.held.extend(parts);
        }
        self.release_held();
        Ok(())
    }

    /// Frees the written blocks no write below them waits for any more
    /// (kept until then: a failure there would need them again), and none
    /// at or past a failed offset.
    fn release_held(&mut self) {
        let low = self.lowest_unsure().unwrap_or(u64::MAX);
        let mut i = 0;
        while i < self.held_runs.len() {
            if self.held_runs[i].1 < low {
                self.held_runs.swap_remove(i).0.finish(true);
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].2 < low {
                let (mut b, _, _) = self.held.swap_remove(i);
                b.clear();
                self.free.push(b);
            } else {
                i += 1;
            }
        }
    }

    /// Notes that the stream's bytes up to `end` are whole records (a
    /// block handed in ends on one), forgetting those no rescue can need.
    fn note_bound(&mut self, end: u64) {
        if self.bounds.back().is_some_and(|b| *b >= end) {
            return;
        }
        self.bounds.push_back(end);
        if self.bounds.len() < 8 {
            return;
        }
        let flight = self.in_flight.iter().flatten().map(InFlight::off);
        let waiting = self.pending.iter().chain(&self.held).map(|p| p.2);
        let low = flight.chain(waiting).min().unwrap_or(self.off);
        while self.bounds.len() >= 2 && self.bounds[1] <= low {
            self.bounds.pop_front();
        }
    }

    /// Keeps a block handed in after the failure: its frames go to another
    /// volume ([`BlockSink::take_unwritten`]).
    fn orphan(&mut self, block: Block) {
        if block.is_empty() {
            self.give_back(block);
        } else {
            self.orphans.push((block, self.off));
        }
    }

    fn wait_all(&mut self) -> Result<(), StorageError> {
        loop {
            self.pump(true)?;
            // A file closing after a rotation drains here: the queue's next
            // file sees what it still has waiting.
            self.publish_unwritten();
            if self.n_in_flight == 0 && self.fallocs == 0 {
                if self.pending.is_empty() && self.ext_pending.is_empty() {
                    return Ok(());
                }
                // Held for the file before this one, which is finishing.
                self.after.wait();
                continue;
            }
            self.reap_wait(1)?;
        }
    }

    fn take_free(&mut self) -> Result<Block, StorageError> {
        self.reap_wait(0)?;
        self.pump(false)?;
        if self.free.is_empty() {
            // Grow the RAM buffer from the shared budget, if it allows.
            if let Some(b) = &self.budget {
                if b.fetch_sub(self.block_size as i64, Ordering::AcqRel) >= self.block_size as i64 {
                    let idx = self.in_flight.len();
                    if idx < u16::MAX as usize {
                        self.in_flight.push(None);
                        self.busy.push(false);
                        self.extra += 1;
                        return Ok(leased(self.owner, idx, AlignedBuf::new(self.block_size)));
                    }
                }
                b.fetch_add(self.block_size as i64, Ordering::AcqRel);
            }
            self.waits += 1;
            while self.free.is_empty() {
                // No block left: what waits to be merged goes now.
                self.pump(true)?;
                if self.n_in_flight == 0 && self.fallocs == 0 {
                    if self.pending.is_empty() {
                        // Nothing will come back: the caller holds every
                        // block (waiting would spin for ever).
                        return Err(StorageError::Write {
                            path: self.path.clone(),
                            source: std::io::Error::other(
                                "no free block: the caller holds every block of this sink",
                            ),
                        });
                    }
                    // Held for the file before this one, which is finishing.
                    self.after.wait();
                    continue;
                }
                self.reap_wait(1)?;
            }
        }
        Ok(self.free.pop().expect("a free block"))
    }

    /// Writes the whole of `block` now (tail padded), waits, cuts the file to
    /// the exact stream length, and returns the block holding the tail.
    fn write_now(&mut self, mut block: Block) -> Result<Block, StorageError> {
        let len = block.len();
        let padded = len.div_ceil(ALIGN) * ALIGN;
        let aligned = len / ALIGN * ALIGN;
        let lease = block.lease();
        if padded > 0 {
            // Zero the padding: it is cut off below, but never junk on disk.
            block.buf_mut()[len..padded].fill(0);
            let off = self.off;
            self.push_write(block, padded as u32, off)?;
            self.wait_all()?;
            if let Some(e) = self.error() {
                return Err(e);
            }
            if let Some(f) = &self.file {
                f.set_len(self.off + len as u64)
                    .map_err(|e| StorageError::from_write(&self.path, e))?;
            }
            self.flushed = self.off + len as u64;
            // Cutting the file freed what was allocated beyond it.
            self.allocated = self.off + len as u64;
            let pos = self
                .free
                .iter()
                .position(|b| b.lease() == lease)
                .expect("the block just written is free");
            block = self.free.swap_remove(pos);
        } else {
            self.wait_all()?;
            if let Some(e) = self.error() {
                return Err(e);
            }
            // Nothing of the stream waits here (it ended on a page, as an
            // external run leaves it): the file ends at `off`, not in the
            // space allocated ahead.
            if self.allocated > self.off {
                if let Some(f) = &self.file {
                    f.set_len(self.off)
                        .map_err(|e| StorageError::from_write(&self.path, e))?;
                }
                self.allocated = self.off;
            }
            self.flushed = self.off;
        }
        // The partial page is written again with the next block.
        block.keep(aligned, len);
        self.off += aligned as u64;
        Ok(block)
    }

    /// Whether `block` is one of ours (then it is not in flight: we would
    /// hold it).
    fn owns(&self, block: &Block) -> bool {
        block.lease().is_some_and(|l| l.owner == self.owner)
    }

    /// Writes the aligned part of a block not ours through copies into our
    /// own blocks, and keeps its tail (< a page) at its front.
    fn write_foreign(&mut self, block: &mut Block) -> Result<(), StorageError> {
        let len = block.len();
        let aligned = len / ALIGN * ALIGN;
        let mut done = 0;
        while done < aligned {
            let n = (aligned - done).min(self.block_size);
            let mut own = self.take_free()?;
            own.buf_mut()[..n].copy_from_slice(&block.data()[done..done + n]);
            own.set_len(n);
            let off = self.off;
            self.push_write(own, n as u32, off)?;
            self.off += n as u64;
            done += n;
        }
        block.keep(aligned, len);
        Ok(())
    }

    /// `block` as one of ours: itself, or (not ours) a copy, its whole
    /// pages written first.
    fn adopt(&mut self, mut block: Block) -> Result<Block, StorageError> {
        if self.owns(&block) {
            return Ok(block);
        }
        self.write_foreign(&mut block)?;
        let mut own = self.take_free()?;
        own.buf_mut()[..block.len()].copy_from_slice(block.data());
        own.set_len(block.len());
        Ok(own)
    }

    /// Gives a block back to the free list if it is ours (else drops it).
    fn give_back(&mut self, block: Block) {
        if self.owns(&block) {
            self.free.push(block);
        }
    }
}

trait WithErrno {
    fn with_errno(self, errno: Option<i32>) -> Self;
}
impl WithErrno for StorageError {
    fn with_errno(self, errno: Option<i32>) -> Self {
        match errno {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => match self {
                StorageError::Write { path, .. } => StorageError::DiskFull { path },
                other => other,
            },
            _ => self,
        }
    }
}

impl BlockSink for UringSink {
    fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
        self.note_bound(self.off + block.len() as u64);
        if let Some(e) = self.error() {
            self.orphan(block);
            return Err(e);
        }
        if !self.owns(&block) {
            // Not ours: its pages go out as copies in our blocks, and it
            // comes back holding its tail, to be filled on.
            self.write_foreign(&mut block)?;
            return Ok(block);
        }
        let aligned = block.len() / ALIGN * ALIGN;
        let tail = block.len() - aligned;
        let mut next = match self.take_free() {
            Ok(n) => n,
            Err(e) => {
                self.orphan(block);
                return Err(e);
            }
        };
        next.buf_mut()[..tail].copy_from_slice(&block.data()[aligned..]);
        next.set_len(tail);
        if aligned > 0 {
            let off = self.off;
            self.push_write(block, aligned as u32, off)?;
            self.off += aligned as u64;
        } else {
            self.free.push(block);
        }
        Ok(next)
    }

    fn submit_external(
        &mut self,
        block: Block,
        ext: crate::external::External,
    ) -> Result<Block, StorageError> {
        assert!(
            block.len().is_multiple_of(ALIGN),
            "a block before an external run ends on a page"
        );
        // On a failure the run is not written: it is copied out (now,
        // before its memory goes back to its owner) and given back after
        // the block, where it lies in the stream ([`UringSink::keep_run`]).
        let next = match self.submit(block) {
            Ok(next) => next,
            Err(e) => {
                let off = self.orphans_end();
                self.keep_run(ext, off);
                return Err(e);
            }
        };
        debug_assert!(next.is_empty(), "an aligned block leaves no tail");
        let reaped = self.reap_wait(0);
        if let Some(e) = self.error().or(reaped.err()) {
            self.give_back(next);
            let off = self.orphans_end();
            self.keep_run(ext, off);
            return Err(e);
        }
        self.publish_unwritten();
        let waiting = match &self.unwritten_shared {
            Some(s) => s.load(Ordering::Acquire).max(0) as u64,
            None => self.unwritten(),
        };
        let now = Instant::now();
        // A write during which more than the limit came in says the disk is
        // behind, even once the queue is short: one still in flight (a run
        // issued now would wait for it: on ext4 a fallocate ahead waits for
        // every write in flight with the inode locked, and every write
        // issued after it waits for that), or the last one to complete (a
        // queue that drained all at once, as a throttled disk does). Bytes,
        // not time: when the whole machine stops for a while (a VM's host
        // busy elsewhere), writes take long but nothing comes in meanwhile,
        // and nothing is at risk.
        let max = self.direct_backlog_max;
        let slow = self.last_arrived >= max
            || self
                .oldest_stream_in_flight()
                .is_some_and(|s| self.off - s >= max);
        if waiting >= self.direct_backlog_max || slow {
            // Behind: copies for a while. A ring frozen on runs still queued
            // hands over nothing, so the queue drains and looks short again
            // while the disk is as slow as before; without the hold, runs
            // would go out from the ring again, freeze it again, and so on
            // (85 % lost on the rig with the disk held to 150 MB/s).
            self.behind_until = now + BEHIND_HOLD;
        }
        if now < self.behind_until {
            // The disk is behind: written from where it lies, the run would
            // hold its owner's memory (a packet ring's block, which the
            // kernel needs back within one lap of the ring) for as long as
            // the writes queued before it take. Copied, it waits in RAM
            // like any block and its memory is free now. The runs waiting
            // to be merged get no company now: they go.
            if let Err(e) = self.pump_ext(true) {
                self.give_back(next);
                let off = self.orphans_end();
                self.keep_run(ext, off);
                return Err(e);
            }
            return crate::sink::copy_external(self, next, ext).map_err(|(e, ext, done)| {
                // The blocks it filled are kept (`orphan`); the rest after them.
                let off = self.orphans_end();
                self.keep_rest(&ext, done, off);
                e
            });
        }
        let off = self.off;
        self.off += ext.len() as u64;
        if self.ext_pending.is_empty() {
            self.ext_since = now;
        }
        self.ext_pending.push_back((ext, off));
        self.ext_streaming = now.duration_since(self.ext_last_push) < MERGE_WAIT;
        self.ext_last_push = now;
        if let Err(e) = self.pump(false) {
            self.give_back(next);
            return Err(e);
        }
        self.runs_direct += 1;
        Ok(next)
    }

    fn write_after(&mut self, gate: Arc<crate::sink::Gate>) {
        self.after.set(gate);
    }

    fn open_when_done(&mut self, gate: Arc<crate::sink::Gate>) {
        self.opens.set(gate);
    }

    fn set_direct_backlog(&mut self, max: u64, shared: Arc<AtomicI64>) {
        self.direct_backlog_max = max;
        self.unwritten_shared = Some(shared);
        self.publish_unwritten();
    }

    fn runs_waiting(&self) -> bool {
        !self.ext_pending.is_empty() || !self.held_runs.is_empty()
    }

    fn kick(&mut self) {
        if !self.held_runs.is_empty() {
            // Runs held for a write below them: its completion, if it
            // came, frees them (no syscall: the completion queue is read),
            // and a block below them still queued goes.
            if let Err(e) = self.reap_wait(0).and_then(|()| self.pump(false)) {
                if self.failed.is_none() {
                    self.failed = Some((self.off, std::io::Error::other(e.to_string())));
                }
            }
        }
        if self.ext_pending.is_empty() || self.ext_since.elapsed() < MERGE_WAIT {
            return;
        }
        if let Err(e) = self.pump_ext(true) {
            if self.failed.is_none() {
                self.failed = Some((self.off, std::io::Error::other(e.to_string())));
            }
        }
    }

    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        self.note_bound(self.off + block.len() as u64);
        if let Some(e) = self.error() {
            self.orphan(block);
            return Err(e);
        }
        let block = self.adopt(block)?;
        self.write_now(block)
    }

    fn finish(&mut self, block: Block) -> Result<(), StorageError> {
        self.note_bound(self.off + block.len() as u64);
        let r = if self.failed.is_none() {
            self.adopt(block)
                .and_then(|b| self.write_now(b))
                .map(|b| self.give_back(b))
        } else {
            self.orphan(block);
            Ok(())
        };
        // Whatever happened, nothing may be in flight when we return.
        let w = self.wait_all();
        // Every write of this file is done: the next file's may go.
        self.opens.open();
        if let Some(e) = self.error() {
            // Writes after the failed one may have landed (they run in
            // parallel), leaving a hole at the failed offset: cut the file
            // there, so that it ends in complete data and the writer's
            // recovery finds its last complete record before the hole.
            if let (Some(off), Some(f)) = (self.kept(), &self.file) {
                if f.metadata().is_ok_and(|m| m.len() > off) {
                    let _ = f.set_len(off);
                }
            }
            return Err(e);
        }
        r?;
        w?;
        if let Some(f) = self.file.take() {
            f.sync_data()
                .map_err(|e| StorageError::from_write(&self.path, e))?;
            crate::sys::unlock(&f);
            self.release_file();
        }
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.off
    }

    fn written(&self) -> u64 {
        let flight = self.in_flight.iter().flatten().map(InFlight::off);
        let runs = self.ext_flight.iter().flatten().map(|w| w.off);
        let waiting = self.pending.iter().chain(&self.held).map(|p| p.2);
        let runs_queued = self.ext_pending.iter().map(|e| e.1);
        flight
            .chain(runs)
            .chain(waiting)
            .chain(runs_queued)
            .chain(self.failed.as_ref().map(|f| f.0))
            .fold(self.off, u64::min)
    }

    fn take_unwritten(&mut self) -> Option<crate::sink::Unwritten> {
        self.failed.as_ref()?;
        // Every write still on its way ends first (none goes out anew): one
        // landing after this could not be taken back.
        while self.n_in_flight + self.fallocs > 0 {
            if self.reap_wait(1).is_err() {
                break;
            }
        }
        // The lowest failure, now that none can still come; what waits in
        // the queues below it (a block held to be merged while a run after
        // it went out) is not in the file either: the file ends there.
        let queued = self.pending.iter().map(|p| p.2);
        let queued = queued.chain(self.ext_pending.iter().map(|e| e.1)).min();
        if let (Some(q), Some(f)) = (queued, self.failed.as_mut()) {
            f.0 = f.0.min(q);
        }
        let failed = self.failed.as_ref()?.0;
        self.release_held();
        // Runs past the failure: those written (the file is cut before
        // them) and those that never went out are copied out now.
        for (e, off) in std::mem::take(&mut self.held_runs) {
            self.keep_run(e, off);
        }
        for (e, off) in std::mem::take(&mut self.ext_pending) {
            self.keep_run(e, off);
        }
        // The stream from the failed offset on, as the writes (held, queued)
        // and the blocks handed in since hold it; a later write of the same
        // page (a flush's partial page, again with more) wins.
        let mut parts: Vec<(u64, &[u8])> = self
            .held
            .iter()
            .chain(&self.pending)
            .map(|(b, len, off)| (*off, &b.data()[..(*len as usize).min(b.len())]))
            .chain(self.orphans.iter().map(|(b, off)| (*off, b.data())))
            .chain(self.runs_back.iter().map(|(b, off)| (*off, b.data())))
            .filter(|(off, _)| *off >= failed)
            .collect();
        parts.sort_by_key(|(off, d)| (*off, d.len()));
        let end = parts
            .iter()
            .map(|(off, d)| off + d.len() as u64)
            .max()
            .unwrap_or(failed);
        // The record that straddles the failed offset starts in a block
        // written before it: its bytes are read back from the file (a full
        // or read-only disk reads; one that fails reads too may lose it).
        let mut from = self
            .bounds
            .iter()
            .rev()
            .find(|b| **b <= failed)
            .copied()
            .unwrap_or(0);
        let mut head = vec![0; (failed - from) as usize];
        let read = std::fs::File::open(&self.path)
            .and_then(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut head, from));
        if read.is_err() {
            // The first record boundary past the failure, and no bytes before.
            from = match self.bounds.iter().find(|b| **b >= failed) {
                Some(b) => *b,
                None => return None,
            };
            head.clear();
        }
        let mut stream = head;
        stream.resize((end.max(from) - from) as usize, 0);
        for (off, d) in parts {
            let (at, d) = match off.checked_sub(from) {
                Some(at) => (at as usize, d),
                None => (0, d.get((from - off) as usize..).unwrap_or_default()),
            };
            stream[at..at + d.len()].copy_from_slice(d);
        }
        for (b, _, _) in std::mem::take(&mut self.held)
            .into_iter()
            .chain(std::mem::take(&mut self.pending))
        {
            self.give_back(b);
        }
        for (b, _) in std::mem::take(&mut self.orphans) {
            self.give_back(b);
        }
        self.runs_back.clear();
        let mut kept = self.kept().unwrap_or(failed);
        if read.is_ok() {
            // (`from` <= failed <= kept: the stream holds the file's bytes
            // from `kept` on as they were meant to be.)
            let want = stream.get((kept - from) as usize..).unwrap_or_default();
            kept = self.keep_landed(kept, want);
        }
        // The records the file keeps past `from` need not travel: the
        // stream given back starts at the last boundary at or before `kept`.
        let upto = kept.min(from + stream.len() as u64);
        let off = self
            .bounds
            .iter()
            .rev()
            .find(|b| **b <= upto)
            .copied()
            .unwrap_or(from)
            .max(from);
        let block = Block::copy_of(&stream[(off - from) as usize..]);
        Some(crate::sink::Unwritten {
            off,
            kept,
            blocks: vec![block],
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn block_size(&self) -> usize {
        self.block_size
    }

    fn first_block(&mut self) -> Block {
        self.free.pop().expect("a fresh sink has free blocks")
    }

    fn stats(&self) -> SinkStats {
        self.stats_of(&self.lat)
    }

    fn latency(&self) -> Option<&Histogram<u64>> {
        Some(&self.lat)
    }
}

impl UringSink {
    /// Stats with the latency of the latest writes (about the last one to
    /// two seconds; none when the disk has been idle since).
    pub fn live_stats(&self) -> SinkStats {
        if self.recent_from.elapsed().as_nanos() as u64 >= 2 * RECENT_NS {
            return self.stats_of(&hist::latency_us());
        }
        self.stats_of(&self.recent)
    }

    fn stats_of(&self, lat: &Histogram<u64>) -> SinkStats {
        let q = |p: f64| hist::quantile(lat, p) as f64;
        SinkStats {
            writes: self.writes,
            in_flight: self.n_in_flight,
            waits: self.waits,
            latency_p50_us: q(0.5),
            latency_p99_us: q(0.99),
            peak_buffered_bytes: (self.peak_pending * self.block_size) as u64,
            extra_buffer_bytes: (self.extra * self.block_size) as u64,
            pending: self.pending.len() as u32,
            full_retries: self.retries,
            runs_direct: self.runs_direct,
        }
    }

    /// The stream's end when the oldest write in flight was issued.
    fn oldest_stream_in_flight(&self) -> Option<u64> {
        let blocks = self.in_flight.iter().flatten().map(|w| w.stream);
        let runs = self.ext_flight.iter().flatten().map(|w| w.stream);
        blocks.chain(runs).min()
    }

    /// Bytes waiting for the disk: blocks and runs queued or in flight.
    fn unwritten(&self) -> u64 {
        let flight = self
            .in_flight
            .iter()
            .flatten()
            .flat_map(|w| w.parts.iter().map(|p| p.1 as u64));
        let queued = self.pending.iter().map(|p| p.1 as u64);
        let ext_q = self.ext_pending.iter().map(|e| e.0.len() as u64);
        let ext_f = self
            .ext_flight
            .iter()
            .flatten()
            .flat_map(|w| w.parts.iter().map(|e| e.len() as u64));
        flight.chain(queued).chain(ext_q).chain(ext_f).sum()
    }

    /// Adds what changed in [`UringSink::unwritten`] since the last call to
    /// the shared count ([`BlockSink::set_direct_backlog`]): before a run is
    /// weighed, and while a closing file drains (its count only falls then,
    /// so a stale one errs towards copying).
    fn publish_unwritten(&mut self) {
        if let Some(s) = &self.unwritten_shared {
            let now = self.unwritten() as i64;
            s.fetch_add(now - self.unwritten_published, Ordering::AcqRel);
            self.unwritten_published = now;
        }
    }
}

impl Drop for UringSink {
    fn drop(&mut self) {
        // Buffers must outlive every write that points into them.
        let _ = self.wait_all();
        if let Some(s) = &self.unwritten_shared {
            s.fetch_sub(self.unwritten_published, Ordering::AcqRel);
        }
        self.release_file();
        if let Some(b) = &self.budget {
            b.fetch_add((self.extra * self.block_size) as i64, Ordering::AcqRel);
        }
    }
}

/// A default RAM buffer budget: a quarter of the machine's memory, at most 4 GiB.
pub fn default_buffer_budget() -> u64 {
    let ram = crate::sys::physical_memory();
    // Inside a memory cgroup (a container, a systemd unit with MemoryMax),
    // a quarter of its limit: the RAM buffer must never get us OOM-killed.
    let limit = cgroup_memory_limit().unwrap_or(u64::MAX);
    (ram / 4).min(limit / 4).min(4 << 30)
}

/// The tightest memory limit of this process's cgroup and its ancestors
/// (cgroup v2 `memory.max`, or v1 `memory.limit_in_bytes`).
pub fn cgroup_memory_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<u64> = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (root, file) = if ctrl.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if ctrl.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        let mut p = std::path::PathBuf::from(root);
        p.push(path.trim_start_matches('/'));
        loop {
            if let Ok(v) = std::fs::read_to_string(p.join(file)) {
                if let Ok(n) = v.trim().parse::<u64>() {
                    best = Some(best.map_or(n, |b| b.min(n)));
                }
            }
            if p.as_os_str() == root || !p.pop() {
                break;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::FileSink;
    use crate::writer::PcapWriter;
    use wiretape_files::FileInfo;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wt-uring-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn frame(i: u64) -> Vec<u8> {
        (0..60 + (i as usize * 7919) % 1455)
            .map(|j| (i as usize * 31 + j) as u8)
            .collect()
    }

    /// Bytes of `p` that are not zero (space allocated ahead reads as zeros).
    fn data_bytes(p: &Path) -> usize {
        std::fs::read(p)
            .unwrap()
            .iter()
            .filter(|&&b| b != 0)
            .count()
    }

    /// A file written after another ([`BlockSink::write_after`]): none of
    /// its blocks reaches the disk before the file before it is finished,
    /// then all of them, in order; O_DIRECT and buffered, both ways.
    #[test]
    fn a_file_after_another_waits_for_it() {
        let d = tmpdir("gate");
        for (direct_old, direct_new) in [(true, true), (false, true), (true, false), (false, false)]
        {
            let sink = |p: &Path, direct: bool| -> crate::sink::AnySink {
                if direct {
                    crate::sink::AnySink::Direct(Box::new(UringSink::create(p, 65536, 4).unwrap()))
                } else {
                    crate::sink::AnySink::Buffered(FileSink::with_block_size(p, 65536).unwrap())
                }
            };
            let (pa, pb) = (d.join("a.pcap"), d.join("b.pcap"));
            let _ = (std::fs::remove_file(&pa), std::fs::remove_file(&pb));
            let gate = Arc::new(crate::sink::Gate::default());
            let mut a = PcapWriter::new(sink(&pa, direct_old), 262_144);
            a.sink_mut().open_when_done(gate.clone());
            let mut b = PcapWriter::new(sink(&pb, direct_new), 262_144);
            b.sink_mut().write_after(gate.clone());
            for i in 0..300u64 {
                a.write(1_000 + i, &frame(i)).unwrap();
            }
            // b's blocks wait in RAM: the direct sink within its own 4
            // (no RAM budget here), the buffered one as many as come.
            let n = if direct_new { 150 } else { 600 };
            for i in 0..n {
                b.write(2_000 + i, &frame(i)).unwrap();
            }
            assert_eq!(
                data_bytes(&pb),
                0,
                "{direct_old} {direct_new}: nothing of b before a is done"
            );
            assert!(!gate.is_open());
            // a finishes on another thread (as after a rotation); b's
            // flush waits for it, then goes out.
            let t = std::thread::spawn(move || a.close().unwrap());
            b.flush().unwrap();
            assert!(gate.is_open());
            assert_eq!(t.join().unwrap().frames, 300);
            assert_eq!(b.close().unwrap().frames, n);
            assert_eq!(FileInfo::scan(&pa).unwrap().packets, 300);
            assert_eq!(FileInfo::scan(&pb).unwrap().packets, n);
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A sink dropped unfinished (an error path) still lets the next go.
    #[test]
    fn a_file_dropped_unfinished_opens_the_way() {
        let d = tmpdir("gate-drop");
        let gate = Arc::new(crate::sink::Gate::default());
        let mut s = UringSink::create(d.join("a.pcap"), 65536, 4).unwrap();
        s.open_when_done(gate.clone());
        drop(s);
        assert!(gate.is_open());
        let mut f = FileSink::create(d.join("b.pcap")).unwrap();
        let g2 = Arc::new(crate::sink::Gate::default());
        f.open_when_done(g2.clone());
        drop(f);
        assert!(g2.is_open());
        std::fs::remove_dir_all(d).unwrap();
    }

    /// The O_DIRECT file is byte for byte the buffered one, and after every
    /// flush it is a valid pcap of exactly the stream's length.
    #[test]
    fn direct_file_equals_buffered_file_and_is_valid_after_each_flush() {
        let d = tmpdir("eq");
        assert!(
            direct_supported(&d),
            "{} must take O_DIRECT for this test (ext4, xfs...)",
            d.display()
        );
        let (pa, pb) = (d.join("buffered.pcap"), d.join("direct.pcap"));
        let mut a = PcapWriter::new(FileSink::with_block_size(&pa, 65536).unwrap(), 262_144);
        let mut b = PcapWriter::new(UringSink::create(&pb, 65536, 4).unwrap(), 262_144);
        let mut flushed = 0;
        for i in 0..20_000u64 {
            let f = frame(i);
            a.write(1_000_000 + i, &f).unwrap();
            b.write(1_000_000 + i, &f).unwrap();
            if i % 3_001 == 17 {
                b.flush().unwrap();
                let len = std::fs::metadata(&pb).unwrap().len();
                assert_eq!(len, b.file_bytes(), "exact length after a flush");
                assert_eq!(
                    FileInfo::scan(&pb).unwrap().packets,
                    i + 1,
                    "valid after a flush"
                );
                flushed += 1;
            }
        }
        assert!(flushed > 5);
        let sa = a.close().unwrap();
        let sb = b.close().unwrap();
        assert_eq!(sa, sb);
        assert_eq!(std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
        assert_eq!(FileInfo::scan(&pb).unwrap().packets, 20_000);
        std::fs::remove_dir_all(d).unwrap();
    }

    /// With two registered blocks the sink must grow its RAM buffer from the
    /// budget; the file is still byte for byte the buffered one, and the
    /// budget is whole again when the sink is gone.
    #[test]
    fn ram_buffer_grows_from_the_budget_and_gives_it_back() {
        let d = tmpdir("budget");
        let (pa, pb) = (d.join("buffered.pcap"), d.join("direct.pcap"));
        let budget = Arc::new(AtomicI64::new(64 << 20));
        let mut a = PcapWriter::new(FileSink::with_block_size(&pa, 65536).unwrap(), 262_144);
        let sink =
            UringSink::with_buffer(&pb, 65536, 2, Growth::KeepSize, Some(budget.clone())).unwrap();
        let mut b = PcapWriter::new(sink, 262_144);
        for i in 0..30_000u64 {
            let f = frame(i);
            a.write(i, &f).unwrap();
            b.write(i, &f).unwrap();
        }
        let st = b.sink_stats();
        assert!(
            st.extra_buffer_bytes > 0,
            "grew beyond the registered blocks: {st:?}"
        );
        assert!(budget.load(Ordering::Relaxed) < 64 << 20);
        a.close().unwrap();
        b.close().unwrap();
        assert_eq!(
            budget.load(Ordering::Relaxed),
            64 << 20,
            "budget given back"
        );
        assert_eq!(std::fs::read(&pa).unwrap(), std::fs::read(&pb).unwrap());
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn reports_latency_and_never_overwrites() {
        let d = tmpdir("lat");
        let p = d.join("x.pcap");
        let mut w = PcapWriter::new(UringSink::create(&p, 1 << 20, 4).unwrap(), 65535);
        for i in 0..50_000u64 {
            w.write(i, &frame(i)).unwrap();
        }
        let st = w.sink_stats();
        assert!(st.writes >= 30 && st.latency_p50_us > 0.0, "{st:?}");
        w.close().unwrap();
        assert!(matches!(
            UringSink::create(&p, 1 << 20, 4),
            Err(StorageError::Create { .. })
        ));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Appends `bytes` to `b` (what the builder does).
    fn fill(b: &mut Block, bytes: &[u8]) {
        let l = b.len();
        b.buf_mut()[l..l + bytes.len()].copy_from_slice(bytes);
        b.set_len(l + bytes.len());
    }

    fn pattern(seed: u8, n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 131 + seed as usize) as u8).collect()
    }

    /// Blocks that are not the sink's (a plain `Block::new`, larger than the
    /// sink's blocks; another sink's block 0, the index of ours in flight)
    /// are written correctly, as copies: never issued as one of our
    /// registered buffers, never in the place of the one in flight.
    #[test]
    fn foreign_blocks_are_copied_never_trusted() {
        let d = tmpdir("foreign");
        assert!(direct_supported(&d), "{} must take O_DIRECT", d.display());
        let bs = 16384;
        let p = d.join("a.bin");
        let mut a = UringSink::create(&p, bs, 2).unwrap();
        let mut other = UringSink::create(d.join("other.bin"), bs, 2).unwrap();
        let mut expect = Vec::new();
        // Our block 0 goes in flight; we hold our other block.
        let own = a.first_block();
        assert_eq!(own.lease().map(|l| (l.owner, l.slot)), Some((a.owner, 1)));
        let mut own0 = a.first_block();
        assert_eq!(own0.lease().unwrap().slot, 0);
        a.free.push(own);
        fill(&mut own0, &pattern(1, bs));
        expect.extend_from_slice(own0.data());
        let spare = a.submit(own0).unwrap();
        assert!(a.owns(&spare) && spare.is_empty());
        // A plain block, bigger than ours, with a tail.
        let mut plain = Block::new(3 * bs + 8192);
        fill(&mut plain, &pattern(2, 3 * bs + 5000));
        expect.extend_from_slice(plain.data());
        let mut back = a.submit(plain).unwrap();
        assert!(
            !a.owns(&back),
            "a block not ours comes back, holding its tail"
        );
        assert_eq!(back.data(), &expect[expect.len() - (5000 - 4096)..]);
        fill(&mut back, &pattern(3, 3000));
        expect.extend_from_slice(&pattern(3, 3000));
        // Another sink's block 0: its lease names slot 0, like ours.
        let theirs1 = other.first_block();
        let mut theirs = other.first_block();
        other.free.push(theirs1);
        assert_eq!(theirs.lease().unwrap().slot, 0);
        assert!(!a.owns(&theirs));
        fill(&mut theirs, back.data());
        fill(&mut theirs, &pattern(4, bs - 4000));
        expect.extend_from_slice(&pattern(4, bs - 4000));
        let back = a.submit(theirs).unwrap();
        assert_eq!(back.lease().unwrap().owner, other.owner, "theirs, back");
        // A flush with it: the file is exactly the stream.
        let mine = a.flush(back).unwrap();
        assert!(a.owns(&mine), "flush hands back one of ours");
        assert_eq!(std::fs::read(&p).unwrap(), expect);
        assert_eq!(a.bytes() + mine.len() as u64, expect.len() as u64);
        a.give_back(spare); // (a caller would have dropped it)
        a.finish(mine).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expect);
        // Every block of ours is back, each slot once, none of theirs.
        let mut slots: Vec<_> = a.free.iter().map(|b| b.lease().unwrap()).collect();
        slots.sort_by_key(|l| l.slot);
        let want: Vec<_> = (0..2)
            .map(|slot| Lease {
                owner: a.owner,
                slot,
            })
            .collect();
        assert_eq!(slots, want);
        // The other sink goes on with what it has left.
        let mut w = crate::writer::PcapWriter::new(other, 65535);
        w.write(1, &[7; 100]).unwrap();
        w.close().unwrap();
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Blocks filled faster than the disk takes them go out merged, several
    /// to a write, and the file is still exactly the stream, block for
    /// block, after flushes in between and at the close.
    #[test]
    fn consecutive_blocks_merge_into_one_write_and_land_in_order() {
        let d = tmpdir("merge");
        assert!(direct_supported(&d), "{} must take O_DIRECT", d.display());
        let p = d.join("m.bin");
        let bs = 65536;
        let mut s = UringSink::create(&p, bs, 16).unwrap();
        let mut expect = Vec::new();
        let mut b = s.first_block();
        for i in 0..600u32 {
            // Lengths that leave tails of every size, carried on.
            let n = bs - b.len() - (i as usize * 523) % 4000;
            fill(&mut b, &pattern(i as u8, n));
            expect.extend_from_slice(&pattern(i as u8, n));
            b = if i % 97 == 96 {
                s.flush(b).unwrap()
            } else {
                s.submit(b).unwrap()
            };
        }
        let merged = s.merged;
        let writes = s.stats().writes;
        // The blocks are one registered slab buffer (merged writes then go
        // out as WRITEV_FIXED where the kernel has it: Linux 6.15).
        assert!(s.one_buffer, "blocks not registered as one buffer");
        eprintln!("writev_fixed: {}", s.writev_fixed);
        s.finish(b).unwrap();
        assert!(merged > 0, "no write was merged ({writes} block writes)");
        assert_eq!(std::fs::read(&p).unwrap(), expect);
        std::fs::remove_dir_all(d).unwrap();
    }

    /// A sink's first file has its blocks registered only once it is busy
    /// (until then its pages come as written: an idle queue's file costs
    /// a page, not its blocks); a prepared engine (rotation) registers at
    /// once. The stream is exact across the switch.
    #[test]
    fn a_first_file_registers_its_blocks_once_busy() {
        let d = tmpdir("late");
        let p = d.join("l.bin");
        let (bs, nb) = (65536, 4);
        let e = UringSink::prepare(bs, nb, Growth::Extend, None).unwrap();
        assert_eq!(e.n_registered, nb, "a prepared engine registers at once");
        assert!(e.register_later.is_none());
        let mut s = UringSink::create(&p, bs, nb).unwrap();
        assert_eq!(s.n_registered, 0, "registered before any write");
        assert!(s.register_later.is_some());
        let mut expect = Vec::new();
        let mut b = s.first_block();
        let mut registered_at = None;
        for i in 0..40u32 {
            let n = bs - b.len() - (i as usize * 311) % 4000;
            fill(&mut b, &pattern(i as u8, n));
            expect.extend_from_slice(&pattern(i as u8, n));
            b = s.submit(b).unwrap();
            if registered_at.is_none() && s.n_registered > 0 {
                registered_at = Some(s.blocks_written);
            }
        }
        let at = registered_at.expect("never registered");
        assert!(
            at > REGISTER_AFTER * nb as u64 && at <= REGISTER_AFTER * nb as u64 + MERGE as u64,
            "registered after {at} blocks"
        );
        assert!(s.one_buffer && s.register_later.is_none());
        s.finish(b).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expect);
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Growth::Extend keeps the file's size a step ahead of the writes (so
    /// they are overwrites, issued without io-wq workers), and a flush or
    /// the close cuts it to exactly the stream.
    #[test]
    fn extends_ahead_and_is_exact_after_flush_and_close() {
        let d = tmpdir("extend");
        let p = d.join("e.bin");
        let bs = 65536;
        let mut s = UringSink::create(&p, bs, 4).unwrap();
        assert_eq!(s.growth, Growth::Extend);
        let mut expect = Vec::new();
        let mut b = s.first_block();
        for i in 0..40u32 {
            let n = bs - b.len();
            fill(&mut b, &pattern(i as u8, n));
            expect.extend_from_slice(&pattern(i as u8, n));
            b = s.submit(b).unwrap();
        }
        s.wait_all().unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        assert!(
            len >= expect.len() as u64 + FALLOC_STEP / 2,
            "size {len} not ahead of the {} bytes written",
            expect.len()
        );
        assert_eq!(s.growth, Growth::Extend, "fell back to KeepSize");
        fill(&mut b, &pattern(99, 1000));
        expect.extend_from_slice(&pattern(99, 1000));
        b = s.flush(b).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expect, "exact after a flush");
        fill(&mut b, &pattern(98, 3000));
        expect.extend_from_slice(&pattern(98, 3000));
        s.finish(b).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expect, "exact after the close");
        std::fs::remove_dir_all(d).unwrap();
    }

    /// When the caller holds every block of the sink, a write that needs
    /// one is an error, not a wait for ever.
    #[test]
    fn no_free_block_is_an_error_not_a_hang() {
        let d = tmpdir("held");
        let mut s = UringSink::create(d.join("a.bin"), 8192, 2).unwrap();
        let (b0, b1) = (s.first_block(), s.first_block());
        let mut plain = Block::new(8192);
        fill(&mut plain, &[5; 8192]);
        let e = s.submit(plain).err().expect("no block to copy into");
        assert!(e.to_string().contains("no free block"), "{e}");
        drop((b0, b1));
        std::fs::remove_dir_all(d).unwrap();
    }

    /// Runs laid out in place into a file whose writes start failing
    /// mid-file (its descriptor made read-only: every write after gets
    /// EBADF, as on a volume gone bad), written from where they lie and
    /// copied (the disk behind): the runs whose write failed, was in flight
    /// or queued, or came after, are given back with the blocks, copied out
    /// then: the file keeps frames 0..k, the sink gives back k..n, each
    /// once, in order, byte for byte (count and bytes).
    #[test]
    fn runs_a_failed_file_does_not_keep_are_given_back() {
        use wiretape_files::{Format, PcapReader, Record};
        let d = tmpdir("runsback");
        for (case, backlog) in [("in place", DIRECT_BACKLOG_MAX), ("copied", 0)] {
            let path = d.join(format!("{}.pcapng", case.replace(' ', "-")));
            let mut sink = crate::sink::AnySink::Direct(Box::new(
                UringSink::create(&path, 1 << 16, 4).unwrap(),
            ));
            let shared = Arc::new(AtomicI64::new(0));
            BlockSink::set_direct_backlog(&mut sink, backlog, shared);
            let mut w = PcapWriter::with_format(sink, 262_144, Format::PcapNg, "t");
            let mut i = 0u64;
            let run = |i: &mut u64| {
                let fs: Vec<_> = (*i..*i + 7).map(|k| (k, frame(k))).collect();
                *i += 7;
                crate::external::tests::run(&fs)
            };
            for _ in 0..4 {
                w.write_external(run(&mut i)).unwrap();
                w.write(i, &frame(i)).unwrap();
                i += 1;
            }
            w.flush().unwrap();
            let healthy = i;
            let crate::sink::AnySink::Direct(s) = w.sink_mut() else {
                unreachable!()
            };
            s.wait_all().unwrap();
            s.release_file();
            s.file = Some(File::open(&path).unwrap());
            let mut refused = false;
            for _ in 0..64 {
                let r = w.write_external(run(&mut i));
                if r.is_err() {
                    refused = true;
                    break;
                }
                if w.write(i, &frame(i)).is_err() {
                    i += 1;
                    refused = true;
                    break;
                }
                i += 1;
            }
            assert!(refused, "{case}: the failure is seen");
            let u = w.take_unwritten().expect("given back");
            let header = Format::PcapNg.file_header(262_144, "t", 1);
            let (back, _, _) = crate::writer::split_unwritten(&header, &u);
            let (st, _) = w.close_keeping_sink();
            let st = st.expect_err("the close reports the failure").0;
            let kept = st.frames;
            assert!(kept >= healthy, "{case}: {kept} kept of {healthy} flushed");
            assert_eq!(st.lost, i - kept, "{case}: the rest counted lost here");
            let mut r = PcapReader::open(&path).unwrap();
            let mut rec = Record::default();
            let mut k = 0u64;
            while r.next_into(&mut rec).unwrap() {
                assert_eq!((rec.ts_ns, &rec.data), (k, &frame(k)), "{case}: kept {k}");
                k += 1;
            }
            assert_eq!(k, kept, "{case}: the file holds what the writer says");
            let frames: Vec<u64> = back.iter().map(|(m, _)| m.ts_ns).collect();
            assert_eq!(
                frames,
                (kept..i).collect::<Vec<_>>(),
                "{case}: every frame the file does not keep is given back, once, in order"
            );
            for (m, data) in &back {
                assert_eq!(data, &frame(m.ts_ns), "{case}: frame {}", m.ts_ns);
                assert_eq!(m.orig_len as usize, data.len());
            }
            let bytes = |r: std::ops::Range<u64>| r.map(|k| frame(k).len() as u64).sum::<u64>();
            let back_bytes: u64 = back.iter().map(|(m, _)| m.caplen as u64).sum();
            assert_eq!(
                (st.bytes, back_bytes),
                (bytes(0..kept), bytes(kept..i)),
                "{case}: bytes kept and given back"
            );
        }
        std::fs::remove_dir_all(d).unwrap();
    }

    /// The io_uring sink on a volume that fills mid-write and refuses the
    /// cut (a real tmpfs of 1 MiB, which takes O_DIRECT since Linux 6.6;
    /// the file append-only, as a filesystem gone read-only refuses
    /// `ftruncate`): the write at the failed offset landed in part (short)
    /// and writes beside it may have landed too, so the file holds records
    /// past the failed offset that readers read; the sink keeps those that
    /// are there byte for byte and gives back only the others: each frame
    /// once, in the file or given back (issue 37; before, every record
    /// past the failed offset was given back, those in the file too).
    #[test]
    fn an_io_uring_file_whose_cut_is_refused_keeps_what_landed_and_gives_back_the_rest() {
        for refused in [true, false] {
            let Some(mnt) = crate::writer::tests::Tmpfs::mount(&format!("uring-uncut-{refused}"))
            else {
                return;
            };
            // The engine `record` picks here: O_DIRECT taken (else `record`
            // would fall back to the buffered sink, tested beside the writer).
            assert!(direct_supported(&mnt.0), "O_DIRECT on tmpfs (Linux >= 6.6)");
            let path = mnt.capture();
            let sink = UringSink::create(&path, 1 << 17, 4).unwrap();
            if refused {
                mnt.refuse_cuts();
            }
            let what = format!("io_uring, cut refused {refused}");
            let (sink, off, kept) = crate::writer::tests::exercise(
                sink,
                false,
                false,
                &path,
                &wiretape_files::ReadOptions::new(),
                &what,
            );
            let failed = sink.failed.as_ref().expect("a write failed").0;
            let len = std::fs::metadata(&path).unwrap().len();
            eprintln!(
                "{what}: O_DIRECT, growth {:?}: failed at {failed}, file {len} B, \
                 kept {kept}, given back from {off}",
                sink.growth
            );
            assert!(off <= kept, "{what}: given back from {off}, kept {kept}");
            if refused {
                // Bytes landed past the failed offset (a short write, or one
                // beside it): else this tried nothing. The file is not cut.
                assert!(len > failed, "{what}: bytes landed past {failed} ({len} B)");
                // ... and the sink saw that they hold records the file keeps.
                assert!(kept > failed, "{what}: kept {kept}, failed at {failed}");
            } else {
                // Cut at the failed offset (and then by the writer at its
                // last whole record): what landed past it is gone.
                assert_eq!(kept, failed, "{what}: kept");
                assert!(len <= failed, "{what}: {len} B, failed at {failed}");
            }
            drop(sink);
            drop(mnt);
        }
    }
}
