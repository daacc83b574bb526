//! The netmap engine proper (safe code): opening the rings, the poll
//! thread's walk ([`NetmapRx`]), the writer's frame half ([`NetmapFrames`]),
//! per-sync timestamps, and the synthetic region for tests and benches.

use super::layout::NS_MOREFRAG;
use super::ring::{self, build_synthetic, Buffers, RingInfo, RxRing};
pub use super::ring::{KernelRing, RingStamp, SyntheticSpec};
pub use super::sys::DevPort;
use super::sys::RegisterError;
use super::NetmapConfig;
use crate::engine::{cpu_in_turn, Engine, EngineCounters, EngineQueue, FrameStore, RxQueue};
use crate::{sys, CaptureError, Desc, StartInfo};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiretape_timestamp::{AutoClock, Clock, RealtimeClock, StampStats, Stamper, TaiToUtc, TsMode};

/// What the poll thread asks of the kernel: the seam between the ring walk
/// (real code, always) and the kernel (a `/dev/netmap` descriptor, or a test
/// playing the kernel).
pub trait RxSync: Send + 'static {
    /// `NIOCRXSYNC`: the kernel takes back the slots before `head`, moves
    /// `tail` past the frames received, and stamps `ring->ts`.
    fn rxsync(&mut self) -> io::Result<()>;
    /// Waits up to `timeout` for frames past `cur` (`poll(POLLIN)`).
    fn wait(&mut self, timeout: Duration);
}

/// The sync of a synthetic ring whose kernel thread publishes on its own:
/// `rxsync` does nothing, `wait` sleeps briefly.
pub struct NoSync;

impl RxSync for NoSync {
    fn rxsync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn wait(&mut self, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_micros(100)));
    }
}

/// One RX ring, opened and checked, with its sync: the engine's input.
pub struct NetmapPort<P> {
    queue: u32,
    ring: RxRing,
    info: RingInfo,
    sync: P,
}

impl<P> NetmapPort<P> {
    /// The ring's number (the queue it records).
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Slots in the ring.
    pub fn slots(&self) -> u32 {
        self.info.slots
    }

    /// The same ring with another sync.
    pub fn with_sync<Q: RxSync>(self, sync: Q) -> NetmapPort<Q> {
        NetmapPort {
            queue: self.queue,
            ring: self.ring,
            info: self.info,
            sync,
        }
    }
}

/// A region laid out exactly as the kernel lays it out (`netmap_mem2.c`:
/// if pool, ring pool, buffer pool in one page-aligned mapping; one
/// `netmap_if` per ring as `NR_REG_ONE_NIC` makes them, `ring_ofs` relative
/// to it, `buf_ofs` relative to each ring), with our end of each ring opened
/// through the same checks as a real one, and the kernel's end of each
/// ([`KernelRing`]) for a test or bench to play.
pub fn synthetic(spec: &SyntheticSpec) -> io::Result<(Vec<NetmapPort<NoSync>>, Vec<KernelRing>)> {
    let mut ports = Vec::new();
    let mut kernels = Vec::new();
    for (q, (ring, info, k)) in build_synthetic(spec)?.into_iter().enumerate() {
        ports.push(NetmapPort {
            queue: q as u32,
            ring,
            info,
            sync: NoSync,
        });
        kernels.push(k);
    }
    Ok((ports, kernels))
}

/// Counters of one queue, shared by its threads and the engine.
#[derive(Default)]
struct Shared {
    seen: AtomicU64,
    bytes: AtomicU64,
    filtered: AtomicU64,
    /// Frames never handed out: spread over several slots (`NS_MOREFRAG`),
    /// or a slot outside the region (a kernel bug).
    other: AtomicU64,
    error: Mutex<Option<String>>,
}

/// Where the writer is: everything before this free-running slot position
/// was given back. The writer advances it; the poll thread moves it past
/// skipped slots when the writer holds nothing (compare-exchange).
#[derive(Default)]
struct Handoff {
    released: AtomicU64,
}

/// The netmap engine, its rings registered. Dropping it closes the
/// descriptors (the interface leaves netmap mode).
pub struct Netmap<P: RxSync = DevPort> {
    queues: Vec<EngineQueue<NetmapRx<P>, NetmapFrames>>,
    shared: Vec<(u32, Arc<Shared>)>,
    stopped: Arc<AtomicBool>,
    info: StartInfo,
}

/// Refuses the stamping modes netmap cannot do.
fn check_ts(ts: TsMode) -> Result<(), CaptureError> {
    if ts.uses_xdp_meta() {
        return Err(CaptureError::Config(format!(
            "--ts {} needs the XDP program, which only --engine afxdp has: netmap stamps each ring \
             sync, so use --ts hybrid (the default), wdts, udts, batch, kpt or off",
            ts.name()
        )));
    }
    Ok(())
}

fn register_error(ifname: &str, queue: u32, e: io::Error) -> CaptureError {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (run as root: /dev/netmap is root's)",
        Some(libc::EBUSY) => {
            " (another netmap client holds this ring: stop it, or record other --queues)"
        }
        Some(libc::EINVAL) => {
            " (the netmap module refused the request: it must speak API 14 as wiretape does; see `dmesg`)"
        }
        Some(libc::ENOMEM) => {
            " (netmap is out of buffers or rings: ask for fewer --netmap-slots or raise the module's buf_num)"
        }
        Some(libc::ENXIO) | Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            " (netmap cannot bind this interface: see `dmesg`; its driver may lack netmap support and the module's admode forbid emulation)"
        }
        _ => " (see `dmesg` for netmap's reason)",
    };
    CaptureError::NetmapRegister {
        ifname: ifname.to_owned(),
        queue,
        source: e,
        hint,
    }
}

impl Netmap<DevPort> {
    /// Checks the settings, then registers one descriptor per RX ring and
    /// maps its region. Nothing stays registered when it fails.
    pub fn open(cfg: &NetmapConfig, ts: TsMode) -> Result<Self, CaptureError> {
        check_ts(ts)?;
        let ifname = cfg.ifname.clone();
        if sys::ifindex(&ifname).is_none() {
            return Err(CaptureError::NoSuchInterface(ifname));
        }
        if let Some(s) = cfg.slots {
            if !(64..=16384).contains(&s) {
                return Err(CaptureError::Config(format!(
                    "--netmap-slots {s} must be between 64 and 16384"
                )));
            }
        }
        if !super::sys::present() {
            return Err(CaptureError::NetmapMissing);
        }
        let count = sys::rx_queue_count(&ifname).unwrap_or(1).max(1);
        let queues = crate::engine::queues_of(&ifname, count, cfg.queues.as_deref())?;
        crate::engine::check_filter_link(&ifname, cfg.filter.is_some())?;
        let mut ports = Vec::new();
        for &q in &queues {
            let (fd, ring, info) = super::sys::register(&ifname, q, cfg.slots.unwrap_or(0))
                .map_err(|e| match e {
                    RegisterError::Io(e) => register_error(&ifname, q, e),
                    RegisterError::Layout(what) => CaptureError::NetmapLayout {
                        ifname: ifname.clone(),
                        what,
                    },
                })?;
            ports.push(NetmapPort {
                queue: q,
                ring,
                info,
                sync: DevPort::new(fd),
            });
        }
        Self::from_ports(&ifname, ports, cfg, ts)
    }
}

impl<P: RxSync> Netmap<P> {
    /// The engine over rings already opened (by [`Netmap::open`], or
    /// [`synthetic`] with any [`RxSync`]). `ifname` names the files; `cfg`
    /// gives the CPUs and the filter (its interface and queues are not used).
    pub fn from_ports(
        ifname: &str,
        ports: Vec<NetmapPort<P>>,
        cfg: &NetmapConfig,
        ts: TsMode,
    ) -> Result<Self, CaptureError> {
        check_ts(ts)?;
        if ports.is_empty() {
            return Err(CaptureError::Config("netmap: no ring to record".into()));
        }
        let allowed = sys::allowed_cpus();
        let tai = TaiToUtc::measure();
        let link_bps = sys::link_speed_bps(ifname);
        let stopped = Arc::new(AtomicBool::new(false));
        let mut info = StartInfo {
            engine: "netmap",
            ifname: ifname.to_owned(),
            ifindex: sys::ifindex(ifname).unwrap_or(0),
            source: None,
            queues: ports.iter().map(|p| p.queue).collect(),
            xdp_mode: None,
            bind_mode: None,
            zero_copy_refused: None,
            native_refused: None,
            cpus: Vec::new(),
            writer_cpus: Vec::new(),
            tai_offset_s: tai.offset().as_secs(),
            ts_mode: ts,
            link_bps,
            clock: "netmap ring->ts",
            hw_refused: None,
            frames: ports[0].info.slots,
            frame_size: ports[0].info.buf_size,
            interfaces: Vec::new(),
            mapped_file: None,
            busy_poll: None,
            in_place: false,
            rx_queues: None,
        };
        let mut queues = Vec::new();
        let mut shared = Vec::new();
        for (i, p) in ports.into_iter().enumerate() {
            let cpu = cpu_in_turn(cfg.cpus.as_deref(), &allowed, i);
            let writer_cpu = cpu_in_turn(cfg.writer_cpus.as_deref(), &[], i);
            info.cpus.push(cpu);
            info.writer_cpus.push(writer_cpu);
            // Who stamps: the engine, per sync, from ring->ts (batch, udts,
            // wdts, hybrid); the stage's poll thread, per frame (kpt, off).
            let (engine_stamper, stage_stamper) = match ts {
                TsMode::Kpt | TsMode::Off => {
                    let clock = if ts == TsMode::Kpt {
                        AutoClock::new()
                    } else {
                        AutoClock::Realtime(RealtimeClock)
                    };
                    info.clock = clock.name();
                    (None, Some(Stamper::new(ts, clock, tai)))
                }
                _ => {
                    // Hybrid's KPT batches read the poller's clock after
                    // the first frame; the others only read ring->ts (or,
                    // without it, the vDSO).
                    let poll = if ts == TsMode::Hybrid {
                        AutoClock::new()
                    } else {
                        AutoClock::Realtime(RealtimeClock)
                    };
                    info.clock = match (ts, poll.name()) {
                        (TsMode::Hybrid, "tsc") => "netmap ring->ts+tsc",
                        (TsMode::Hybrid, _) => "netmap ring->ts+clock_gettime",
                        _ => "netmap ring->ts",
                    };
                    let clock = SyncClock {
                        ts: 0,
                        fresh: false,
                        poll,
                    };
                    (
                        Some(Stamper::new(ts, clock, tai).with_link_speed(link_bps)),
                        None,
                    )
                }
            };
            let sh = Arc::new(Shared::default());
            let (head, _, _) = p.ring.pointers();
            let handoff = Arc::new(Handoff {
                released: AtomicU64::new(head as u64),
            });
            let n = p.ring.slots();
            let frames = NetmapFrames {
                bufs: p.ring.buffers(),
                handoff: handoff.clone(),
                slots: n as u64,
            };
            let rx = NetmapRx {
                ring: p.ring,
                sync: p.sync,
                slots: n,
                next: head,
                tail: head,
                next_pos: head as u64,
                handed_pos: head as u64,
                skip: 0,
                handoff,
                staged: VecDeque::new(),
                stamper: engine_stamper,
                filter: cfg.filter.as_ref().map(|f| f.program.clone()),
                in_frag: false,
                busy: false,
                shared: sh.clone(),
                stopped: stopped.clone(),
                final_sync: false,
                failed: false,
            };
            shared.push((p.queue, sh));
            queues.push(EngineQueue {
                queue: p.queue,
                rx,
                frames,
                stamper: stage_stamper,
                cpu,
                writer_cpu,
            });
        }
        Ok(Netmap {
            queues,
            shared,
            stopped,
            info,
        })
    }

    /// The first sync error of any ring (the ring stopped there), if one failed.
    pub fn error(&self) -> Option<String> {
        self.shared
            .iter()
            .find_map(|(_, s)| s.error.lock().expect("error").clone())
    }
}

impl<P: RxSync> Engine for Netmap<P> {
    type Rx = NetmapRx<P>;
    type Frames = NetmapFrames;

    fn info(&self) -> &StartInfo {
        &self.info
    }

    fn take_queues(&mut self) -> Vec<EngineQueue<NetmapRx<P>, NetmapFrames>> {
        std::mem::take(&mut self.queues)
    }

    fn counters(&self, queue: u32) -> EngineCounters {
        let Some((_, s)) = self.shared.iter().find(|(q, _)| *q == queue) else {
            return EngineCounters::default();
        };
        EngineCounters {
            seen: s.seen.load(Ordering::Relaxed),
            seen_bytes: s.bytes.load(Ordering::Relaxed),
            filtered: s.filtered.load(Ordering::Relaxed),
            other: s.other.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn stop(&mut self) {
        self.stopped.store(true, Ordering::Release);
    }
}

impl<P: RxSync> Drop for Netmap<P> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The clock of the engine's stamper: `ring->ts` of the sync being stamped
/// on its first read (the batch time t(k+1)), then the poller's clock (the
/// per-frame reads of hybrid's KPT batches); the poller's clock also when
/// the kernel left `ring->ts` unset.
struct SyncClock {
    ts: u64,
    fresh: bool,
    poll: AutoClock,
}

impl Clock for SyncClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        if std::mem::take(&mut self.fresh) && self.ts != 0 {
            return self.ts;
        }
        self.poll.now_ns()
    }
}

/// The poll thread's half of one ring: syncs, walks the slots the kernel
/// handed over, and gives slots back once the writer is done with them.
///
/// Positions are free-running counts of slots (slot = position mod slots),
/// starting at the ring's `head`: `next_pos` is the next slot to look at
/// (`cur`), `handed_pos` the end of the last slot handed out as a token, the
/// writer's `released` the end of the last one it gave back. `head` goes to
/// `released`; once everything handed out is back, the slots skipped since
/// (filtered frames, fragments) go back too: `released` moves to `next_pos`.
/// Each token carries the slots skipped before it, so the writer knows the
/// exact slot each token it gives back must have.
pub struct NetmapRx<P> {
    ring: RxRing,
    sync: P,
    slots: u32,
    /// The next slot to look at (what `cur` is set to).
    next: u32,
    /// `tail` as last read.
    tail: u32,
    next_pos: u64,
    handed_pos: u64,
    /// Slots skipped since the last token (carried by the next one).
    skip: u32,
    handoff: Arc<Handoff>,
    /// Engine-stamped modes: the tokens of the last sync, stamped together.
    staged: VecDeque<Desc>,
    stamper: Option<Stamper<SyncClock>>,
    filter: Option<wiretape_filter::Program>,
    /// In the middle of a frame spread over several slots.
    in_frag: bool,
    /// The last take returned frames (the poller did not sleep since).
    busy: bool,
    shared: Arc<Shared>,
    stopped: Arc<AtomicBool>,
    /// Stopped: the last sync is done; no new frame is taken after it.
    final_sync: bool,
    failed: bool,
}

impl<P: RxSync> NetmapRx<P> {
    /// Moves `head` to what the writer gave back and `cur` to `next`.
    #[inline]
    fn publish(&mut self) {
        let mut released = self.handoff.released.load(Ordering::Acquire);
        if released == self.handed_pos && self.next_pos != released {
            // The writer holds nothing (it only moves `released` while it
            // holds tokens): the slots skipped since go back as well.
            if self
                .handoff
                .released
                .compare_exchange(released, self.next_pos, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                released = self.next_pos;
                self.handed_pos = self.next_pos;
                self.skip = 0;
            }
        }
        self.ring
            .publish((released % self.slots as u64) as u32, self.next);
    }

    /// Gives slots back and syncs; true when new slots are ours.
    fn sync(&mut self) -> bool {
        if self.stopped.load(Ordering::Acquire) {
            if self.final_sync {
                return false;
            }
            self.final_sync = true;
        }
        self.publish();
        if let Err(e) = self.sync.rxsync() {
            let mut err = self.shared.error.lock().expect("error");
            err.get_or_insert_with(|| format!("netmap NIOCRXSYNC failed: {e}"));
            self.failed = true;
            return false;
        }
        let tail = self.ring.tail();
        // The kernel never publishes a tail outside the ring; check anyway
        // so that a bug there cannot become a wild read here.
        assert!(tail < self.slots, "netmap tail {tail} outside the ring");
        self.tail = tail;
        self.next != tail
    }

    /// Stamps the frames of one sync: t(k+1) is its `ring->ts`.
    #[inline]
    fn stamp(&mut self, frames: &mut [Desc], saturated: bool) {
        if frames.is_empty() {
            return;
        }
        let ts = self.ring.ts_ns();
        let st = self.stamper.as_mut().expect("an engine-stamped mode");
        let c = st.clock();
        c.ts = ts;
        c.fresh = true;
        st.stamp(frames, saturated);
    }

    /// Walks the slots from `next` towards `tail`, appending at most `max`
    /// tokens to `out`; returns how many. Nothing per frame but reading the
    /// slot, the bounds checks and the token.
    #[inline]
    fn walk(&mut self, max: usize, out: &mut impl Push) -> usize {
        let n = self.slots;
        let avail = (self.tail + n - self.next) % n;
        let (ring, filter) = (&self.ring, &self.filter);
        let (mut i, mut looked, mut made) = (self.next, 0u32, 0usize);
        let (mut skip, mut in_frag) = (self.skip, self.in_frag);
        let (mut bytes, mut filtered, mut other, mut frag_frames) = (0u64, 0u64, 0u64, 0u64);
        let mut handed_end = 0u32;
        while looked < avail && made < max {
            let s = ring.slot(i);
            looked += 1;
            bytes += s.len as u64;
            let more = s.flags & NS_MOREFRAG != 0;
            let mut handed = false;
            if more || in_frag {
                // A frame spread over several slots: never handed out
                // (drops.other), counted once, at its last slot.
                in_frag = more;
                frag_frames += !more as u64;
            } else {
                let keep = match filter {
                    None => Some(true),
                    Some(f) => ring.frame(s).map(|b| f.matches(b, s.len)),
                };
                match keep {
                    Some(true) => match ring.desc(i, s, skip) {
                        Some(d) => {
                            out.push(d);
                            made += 1;
                            handed_end = looked;
                            handed = true;
                        }
                        None => other += 1,
                    },
                    Some(false) => filtered += 1,
                    None => other += 1,
                }
            }
            // A slot not handed out is carried by the next token.
            skip = if handed { 0 } else { skip + 1 };
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        if made > 0 {
            self.handed_pos = self.next_pos + handed_end as u64;
        }
        (self.skip, self.in_frag) = (skip, in_frag);
        self.next = i;
        self.next_pos += looked as u64;
        if looked > 0 {
            // Seen before written, so seen >= written + filtered at every instant.
            let sh = &self.shared;
            sh.seen.fetch_add(
                made as u64 + filtered + other + frag_frames,
                Ordering::Relaxed,
            );
            sh.bytes.fetch_add(bytes, Ordering::Relaxed);
            if filtered > 0 {
                sh.filtered.fetch_add(filtered, Ordering::Relaxed);
            }
            if other + frag_frames > 0 {
                sh.other.fetch_add(other + frag_frames, Ordering::Relaxed);
            }
        }
        made
    }
}

/// Where a walk puts its tokens.
trait Push {
    fn push(&mut self, d: Desc);
}

impl Push for Vec<Desc> {
    #[inline(always)]
    fn push(&mut self, d: Desc) {
        Vec::push(self, d)
    }
}

impl Push for VecDeque<Desc> {
    #[inline(always)]
    fn push(&mut self, d: Desc) {
        self.push_back(d)
    }
}

impl<P: RxSync> RxQueue for NetmapRx<P> {
    #[inline]
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        if self.failed {
            return 0;
        }
        if self.stamper.is_none() {
            // Stamped by the stage (kpt, off): straight into `out`.
            if self.next == self.tail && !self.sync() {
                self.busy = false;
                return 0;
            }
            let n = self.walk(max, out);
            self.busy = n > 0;
            return n;
        }
        // Stamped here: all frames of a sync are one batch for the stamper,
        // whatever `max` the stage takes them in.
        if self.staged.is_empty() {
            if self.next == self.tail && !self.sync() {
                self.busy = false;
                return 0;
            }
            let slots = (self.tail + self.slots - self.next) % self.slots;
            let saturated = self.busy || slots as usize >= max;
            if slots as usize <= max {
                // The whole sync fits this take: no staging.
                let start = out.len();
                let n = self.walk(max, out);
                self.stamp(&mut out[start..], saturated);
                self.busy = n > 0;
                return n;
            }
            let mut staged = std::mem::take(&mut self.staged);
            staged.clear();
            self.walk(usize::MAX, &mut staged);
            self.stamp(staged.make_contiguous(), saturated);
            self.staged = staged;
            if self.staged.is_empty() {
                self.busy = false;
                return 0;
            }
        }
        let k = self.staged.len().min(max);
        out.extend(self.staged.drain(..k));
        self.busy = true;
        k
    }

    fn wait(&mut self, timeout: Duration) {
        if self.failed || self.final_sync {
            return;
        }
        // poll() syncs too: give back what the writer returned first.
        self.publish();
        self.sync.wait(timeout);
    }

    fn ended(&mut self) -> bool {
        self.failed
            || (self.stopped.load(Ordering::Acquire)
                && self.final_sync
                && self.staged.is_empty()
                && self.next == self.tail)
    }

    fn stamp_stats(&self) -> Option<StampStats> {
        self.stamper.as_ref().map(|s| s.stats)
    }
}

/// The writer's half of one ring: reads buffers, gives tokens back in order.
pub struct NetmapFrames {
    bufs: Buffers,
    handoff: Arc<Handoff>,
    slots: u64,
}

impl FrameStore for NetmapFrames {
    #[inline(always)]
    fn frame(&self, d: &Desc) -> (&[u8], u32) {
        (self.bufs.frame(d), d.len())
    }

    #[inline]
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>) {
        if descs.len() == 0 {
            return;
        }
        let (owner, n) = (self.bufs.owner(), self.slots);
        let mut released = self.handoff.released.load(Ordering::Acquire);
        // The slot of `released`: one division per batch, then stepped.
        let mut slot = released % n;
        for d in descs {
            assert!(d.owner() == owner, "Desc of another frame area");
            // Exactly where the poll thread handed it out: right after the
            // last slot given back, past the slots skipped in between. A
            // token given back before an earlier one cannot be there (fewer
            // than a ring's slots are in flight).
            let skip = ring::skip_of(&d) as u64;
            slot += skip;
            if slot >= n {
                slot -= n;
            }
            assert!(
                slot == ring::slot_of(&d) as u64,
                "frames given back out of order"
            );
            released += skip + 1;
            slot += 1;
            if slot == n {
                slot = 0;
            }
        }
        self.handoff.released.store(released, Ordering::Release);
    }
}
