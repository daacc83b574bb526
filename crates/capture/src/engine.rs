//! The engine seam: what every capture engine gives the pipeline.
//!
//! An engine (AF_XDP, netmap, a capture file for tests and benches) is opened by its own constructor, which checks everything and
//! attaches what it must. It then hands out its RX queues, each split in the
//! two halves the pipeline runs on two threads:
//! - [`RxQueue`]: takes batches of received frames as [`Desc`] tokens (the
//!   poll thread: it also stamps them);
//! - [`FrameStore`]: reads a token's bytes and gives the frame back to the
//!   engine once they are copied (the writer thread).
//!
//! [`Engine::counters`] says what the engine saw and dropped per queue, so
//! the pipeline can account for every frame; [`Engine::stop`] ends the input
//! (the XDP program is detached; a file stops being read), after which each
//! [`RxQueue`] drains what is already received and then reports
//! [`RxQueue::ended`].

use crate::bpf::XdpMode;
use crate::xsk::{BindMode, XskStats};
use crate::Desc;
use std::path::PathBuf;
use std::time::Duration;
use wiretape_timestamp::{AutoClock, StampStats, Stamper, TsMode};

/// The receive half of one queue (owned by the pipeline's poll thread).
pub trait RxQueue: Send + 'static {
    /// Takes up to `max` received frames, appending them to `out`; returns how many.
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize;
    /// Waits up to `timeout` for frames (returns early when some may have arrived).
    fn wait(&mut self, timeout: Duration);
    /// True once no frame can come any more: the engine was stopped and the
    /// queue is drained, or its source ended. Called after `take` found
    /// nothing; it may wait a little to be sure.
    fn ended(&mut self) -> bool;
    /// Where the stamps came from, for an engine that stamps its frames
    /// itself ([`EngineQueue::stamper`] None); None otherwise.
    fn stamp_stats(&self) -> Option<StampStats> {
        None
    }
    /// Some(spin) when `take` busy polls the driver (AF_XDP `--busy-poll`):
    /// the poll thread then keeps taking a dry ring for `spin` before it
    /// falls back to its sleeps. None (the default): no busy polling.
    fn busy_poll(&self) -> Option<Duration> {
        None
    }
    /// How long the poll thread should sleep when the ring runs dry, if
    /// the engine knows better than the stage's default (the packet engine:
    /// most of the time a block takes to fill). None: the default.
    fn pause_hint(&self) -> Option<Duration> {
        None
    }
}

/// The frame half of one queue (owned by the pipeline's writer thread).
pub trait FrameStore: Send + 'static {
    /// The captured bytes of a frame of this queue and its length on the
    /// wire (more than its bytes when the source cut it, as a capture file's
    /// snap length does). Panics for a token of another queue: that is a
    /// bug, never a silent wrong read.
    fn frame(&self, d: &Desc) -> (&[u8], u32);
    /// Gives frames back to the engine (their bytes are copied), in the
    /// order they were taken: an engine may rely on it (the file engine
    /// checks it and panics otherwise).
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>);
    /// Called by the writer for every frame it takes, in order: whether the
    /// engine laid it out in place (its bytes already stand in a run of
    /// pcapng blocks, written by [`FrameStore::run_due`]'s caller) rather
    /// than for copying. Engines that lay nothing out keep the default.
    #[inline(always)]
    fn laid_out(&mut self, _d: &Desc) -> bool {
        false
    }
    /// The next run laid out in place whose frames all went through
    /// [`FrameStore::laid_out`] already, if any: the writer writes it as it
    /// lies before it writes any later frame (so files keep the order), and
    /// asks again until None, after every batch and before it closes.
    #[inline(always)]
    fn run_due(&mut self) -> Option<Box<dyn LaidOutRun>> {
        None
    }
}

/// A run of pcapng blocks an engine laid out in place (the TPACKET_V3
/// engine's ring block, see [`crate::packet`]): its bytes (whole pages),
/// to be written as they lie; the engine gets its memory back when the
/// run is dropped.
pub trait LaidOutRun: AsRef<[u8]> + Send {
    /// Frames it holds.
    fn frames(&self) -> u64;
    /// The first one's stamp (UTC ns).
    fn first_ns(&self) -> u64;
}

/// One queue of an engine, ready to run.
pub struct EngineQueue<R, F> {
    /// The queue's number.
    pub queue: u32,
    /// Its receive half.
    pub rx: R,
    /// Its frame half.
    pub frames: F,
    /// How the poll thread stamps frames; None when the engine stamped them.
    pub stamper: Option<Stamper<AutoClock>>,
    /// CPU for the poll thread.
    pub cpu: Option<usize>,
    /// CPU for the writer thread.
    pub writer_cpu: Option<usize>,
}

/// What an engine saw and dropped on one queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Frames that reached the queue (the XDP program's own count; a file's records read).
    pub seen: u64,
    /// Their bytes.
    pub seen_bytes: u64,
    /// Frames the NIC stamped.
    pub hw_stamped: u64,
    /// Seen frames the capture filter rejected (the XDP program passed them
    /// to the stack; a file's records skipped): not a drop, not written.
    pub filtered: u64,
    /// Seen frames the capture filter kept and the per-connection cutoff
    /// (`--cutoff`) did not: not a drop, not written.
    pub cutoff: u64,
    /// Their bytes (captured).
    pub cutoff_bytes: u64,
    /// Connections evicted from the cutoff's full table (they start again
    /// from zero).
    pub cutoff_flows_evicted: u64,
    /// Dropped: the RX ring was full (the poll thread fell behind).
    pub rx_ring_full: u64,
    /// Dropped: no free frame (the writer fell behind).
    pub fill_ring_empty: u64,
    /// Dropped for other reasons (e.g. a frame larger than a UMEM frame).
    pub other: u64,
    /// The kernel's raw socket statistics (AF_XDP).
    pub kernel: XskStats,
}

/// A capture engine (see the module docs).
pub trait Engine: Send {
    /// The receive half of its queues.
    type Rx: RxQueue;
    /// The frame half of its queues.
    type Frames: FrameStore;
    /// How it came up.
    fn info(&self) -> &StartInfo;
    /// Hands out the queues (once; later calls return none).
    fn take_queues(&mut self) -> Vec<EngineQueue<Self::Rx, Self::Frames>>;
    /// What it saw and dropped on `queue` so far (a few syscalls: once a second or at the end).
    fn counters(&self, queue: u32) -> EngineCounters;
    /// Ends the input: no new frame arrives; queues drain, then end.
    fn stop(&mut self);
    /// How the input's link is (the control loop asks a few times a
    /// second): an engine that watches an interface says when it went down
    /// or away; the default (a file, say) is always up.
    fn link_status(&self) -> crate::LinkStatus {
        crate::LinkStatus::Up
    }
}

/// How an engine came up.
#[derive(Clone, Debug)]
pub struct StartInfo {
    /// "afxdp", "netmap" or "file".
    pub engine: &'static str,
    /// The interface (for a file: its name, made safe for file names).
    pub ifname: String,
    /// Its index (0 for a file).
    pub ifindex: u32,
    /// The capture file read (the file engine).
    pub source: Option<PathBuf>,
    /// The queues recorded.
    pub queues: Vec<u32>,
    /// Where the XDP program runs (AF_XDP).
    pub xdp_mode: Option<XdpMode>,
    /// Zero-copy or copy (AF_XDP).
    pub bind_mode: Option<BindMode>,
    /// Why zero-copy was not used (driver refused), when it was tried.
    pub zero_copy_refused: Option<String>,
    /// Why native mode was not used, when generic is in effect after a fallback.
    pub native_refused: Option<String>,
    /// Where each queue's poll thread is pinned.
    pub cpus: Vec<Option<usize>>,
    /// Where each queue's writer thread is pinned (None: not pinned).
    pub writer_cpus: Vec<Option<usize>>,
    /// The kernel's TAI-UTC offset.
    pub tai_offset_s: u64,
    /// How frames are stamped.
    pub ts_mode: TsMode,
    /// Link speed (ethtool), used by hybrid's saturation test.
    pub link_bps: Option<u64>,
    /// The poll threads' clock (kpt, batch, udts, wdts, hybrid): tsc or clock_gettime.
    pub clock: &'static str,
    /// Why NIC timestamps are not asked for, in mode hw (then: xdp stamps).
    pub hw_refused: Option<String>,
    /// Frames per queue the engine holds (UMEM frames; a file's arena slots).
    pub frames: u32,
    /// Bytes per frame buffer.
    pub frame_size: u32,
    /// A run over several interfaces ([`crate::MultiEngine`]): each
    /// interface's own info, in order (their queues follow each other in
    /// the run's queue list); empty for one interface.
    pub interfaces: Vec<StartInfo>,
    /// The file engine reads its file in place: the bytes mapped (its
    /// `frames` are then only the ring that takes over should the walk
    /// meet a record it does not take); None: every other engine, and a
    /// file read into the ring.
    pub mapped_file: Option<u64>,
    /// Busy polling of the AF_XDP sockets (`--busy-poll`); None: off.
    pub busy_poll: Option<crate::BusyPoll>,
    /// The packet engine lays its ring blocks out in place as pcapng runs
    /// written as they lie (frames not copied); false for the others.
    pub in_place: bool,
    /// The packet engine: the interface's RX queues, which its sockets
    /// ([`StartInfo::queues`], one per queue or fewer) read together; None
    /// for the others (a socket per queue recorded).
    pub rx_queues: Option<u32>,
}

/// The RX queues to record on `ifname`, which has `count`: all of them
/// (`requested` None) or the ones asked for, each checked to exist.
pub(crate) fn queues_of(
    ifname: &str,
    count: u32,
    requested: Option<&[u32]>,
) -> Result<Vec<u32>, crate::CaptureError> {
    match requested {
        None => Ok((0..count).collect()),
        Some(list) => match list.iter().find(|&&q| q >= count) {
            Some(&q) => Err(crate::CaptureError::NoSuchQueue {
                ifname: ifname.to_owned(),
                queue: q,
                count,
                last: count - 1,
            }),
            None => Ok(list.to_vec()),
        },
    }
}

/// A capture filter is compiled for Ethernet: refuses an interface whose
/// frames are not (ARPHRD_ETHER = 1; unknown passes).
pub(crate) fn check_filter_link(ifname: &str, filter: bool) -> Result<(), crate::CaptureError> {
    match crate::sys::arphrd(ifname) {
        Some(arphrd) if filter && arphrd != 1 => Err(crate::CaptureError::FilterLinkType {
            ifname: ifname.to_owned(),
            arphrd,
        }),
        _ => Ok(()),
    }
}

/// CPU of item `i` of a list given in turn (`--cpus`), else of `fallback` in turn.
pub(crate) fn cpu_in_turn(list: Option<&[usize]>, fallback: &[usize], i: usize) -> Option<usize> {
    match list {
        Some(c) if !c.is_empty() => Some(c[i % c.len()]),
        Some(_) => None,
        None => fallback.get(i % fallback.len().max(1)).copied(),
    }
}
