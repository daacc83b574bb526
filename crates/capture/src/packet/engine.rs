//! The TPACKET_V3 engine proper (safe code): opening the sockets, the poll
//! thread's block walk ([`PacketRx`]), the writer's frame half
//! ([`PacketFrames`]) and the counters.

use super::ring::{FrameHead, Layout, Ring, RingRun, RunFlags, Socket, TP_STATUS_TS_RAW_HARDWARE};
use super::PacketConfig;
use crate::engine::{
    cpu_in_turn, Engine, EngineCounters, EngineQueue, FrameStore, LaidOutRun, RxQueue,
};
use crate::{sys, CaptureError, Desc, LinkMonitor, LinkStatus, StartInfo};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use wiretape_timestamp::{AutoClock, RealtimeClock, Stamper, TaiToUtc, TsMode};

/// Counters of one queue, shared by its poll thread and the engine.
#[derive(Default)]
struct Shared {
    /// Frames walked (every frame of every block handed over).
    walked: AtomicU64,
    bytes: AtomicU64,
    filtered: AtomicU64,
    hw_stamped: AtomicU64,
    /// Frames whose header leaves its block (a kernel bug): never handed out.
    other: AtomicU64,
    /// Frames the kernel dropped for want of a free block, summed over
    /// `PACKET_STATISTICS` reads (each read resets the kernel's count).
    drops: Mutex<u64>,
}

/// When the engine was stopped (the gates closed).
#[derive(Default)]
struct Stop {
    at: OnceLock<Instant>,
}

/// The TPACKET_V3 engine (see the module docs). Dropping it closes the
/// sockets.
pub struct Packet {
    queues: Vec<EngineQueue<PacketRx, PacketFrames>>,
    socks: Vec<(u32, Arc<Socket>, Arc<Shared>)>,
    stop: Arc<Stop>,
    info: StartInfo,
    monitor: Option<Mutex<LinkMonitor>>,
}

fn socket_error(ifname: &str, queue: u32, what: &str, e: io::Error) -> CaptureError {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            ": run as root, or give wiretape CAP_NET_RAW (and CAP_IPC_LOCK for the ring)"
        }
        Some(libc::ENOMEM) => {
            ": the kernel could not allocate the ring: ask for fewer or smaller --packet-blocks/--packet-block-kib"
        }
        Some(libc::EINVAL) if what == "PACKET_FANOUT" => {
            ": another process uses this fanout group id, or the kernel lacks PACKET_FANOUT_QM; record one queue (--queues 0) or retry"
        }
        _ => "",
    };
    CaptureError::PacketSocket {
        ifname: ifname.to_owned(),
        queue,
        what: what.to_owned(),
        source: e,
        hint,
    }
}

/// Refuses the stamping modes the engine cannot do; true when the kernel
/// stamps each frame (hw: the NIC's stamp where it gives one; xdp: the
/// kernel's software stamp), false when the poll thread does (the others).
fn kernel_stamps(ts: TsMode) -> bool {
    matches!(ts, TsMode::Hw | TsMode::Xdp)
}

impl Packet {
    /// Checks the settings, then opens, maps, binds and joins one socket per
    /// queue, and only then lets frames in. Nothing stays open when it fails.
    pub fn open(cfg: &PacketConfig, ts: TsMode) -> Result<Self, CaptureError> {
        let ifname = cfg.ifname.clone();
        let Some(ifindex) = sys::ifindex(&ifname) else {
            return Err(CaptureError::NoSuchInterface(ifname));
        };
        cfg.check_sizes()?;
        let bs = cfg.block_size;
        let count = cfg.check_interface()?;
        let allowed = sys::allowed_cpus();
        let cpus_usable = match cfg.cpus.as_deref() {
            Some(c) if !c.is_empty() => {
                let mut c = c.to_vec();
                c.sort_unstable();
                c.dedup();
                c.len()
            }
            _ => allowed.len(),
        }
        .max(1) as u32;
        // check_interface refused a count out of 1..=count.
        let sockets = cfg.sockets.unwrap_or(count.min(cpus_usable));
        // Socket n reads the queues q with q mod sockets = n: labelled by
        // its first queue, n.
        let queues: Vec<u32> = (0..sockets).collect();
        crate::engine::check_filter_link(&ifname, cfg.filter.is_some())?;
        let kernel = kernel_stamps(ts);
        if cfg.in_place && !kernel {
            return Err(CaptureError::Config(format!(
                "--ts {}: frames laid out in place carry the kernel's stamps; use --ts hw (the default) or leave --packet-in-place out",
                ts.name()
            )));
        }
        // One fanout group id per run and interface (16 bits; the kernel
        // refuses to mix types in a group, so a clash fails loudly).
        let group = ((std::process::id() as u16) ^ (ifindex as u16).rotate_left(8)) | 1;
        // A socket reading several queues gets their blocks together: the
        // ring memory per interface is the same however many sockets.
        let blocks_of = |q: u32| -> u32 {
            let shared = (count - q).div_ceil(sockets);
            cfg.blocks.saturating_mul(shared).min(65536)
        };
        let mut opened = Vec::new();
        for &q in &queues {
            let blocks = blocks_of(q);
            let sock = Socket::new().map_err(|e| socket_error(&ifname, q, "socket", e))?;
            sock.setup(ts == TsMode::Hw)
                .map_err(|e| socket_error(&ifname, q, "PACKET_VERSION", e))?;
            if cfg.in_place {
                sock.reserve(2)
                    .map_err(|e| socket_error(&ifname, q, "PACKET_RESERVE", e))?;
            }
            sock.rx_ring(bs, blocks, cfg.retire_ms)
                .map_err(|e| socket_error(&ifname, q, "PACKET_RX_RING", e))?;
            let ring =
                Ring::map(&sock, bs, blocks).map_err(|e| socket_error(&ifname, q, "mmap", e))?;
            sock.bind(ifindex)
                .map_err(|e| socket_error(&ifname, q, "bind", e))?;
            if queues.len() > 1 {
                sock.join_fanout(group)
                    .map_err(|e| socket_error(&ifname, q, "PACKET_FANOUT", e))?;
            }
            opened.push((q, Arc::new(sock), Arc::new(ring)));
        }
        let tai = TaiToUtc::measure();
        let stop = Arc::new(Stop::default());
        let mut info = StartInfo {
            engine: "packet",
            ifname: ifname.clone(),
            ifindex,
            source: None,
            queues: queues.clone(),
            xdp_mode: None,
            bind_mode: None,
            zero_copy_refused: None,
            native_refused: None,
            cpus: Vec::new(),
            writer_cpus: Vec::new(),
            tai_offset_s: tai.offset().as_secs(),
            ts_mode: ts,
            link_bps: sys::link_speed_bps(&ifname),
            clock: if kernel {
                "kernel (per frame)"
            } else {
                "poller"
            },
            hw_refused: None,
            frames: blocks_of(0),
            frame_size: bs,
            interfaces: Vec::new(),
            mapped_file: None,
            busy_poll: None,
            in_place: cfg.in_place,
            rx_queues: Some(count),
        };
        let grace = Duration::from_millis(cfg.retire_ms as u64 * 3 + 20);
        let mut out = Vec::new();
        let mut socks = Vec::new();
        for (i, (q, sock, ring)) in opened.into_iter().enumerate() {
            let cpu = cpu_in_turn(cfg.cpus.as_deref(), &allowed, i);
            let writer_cpu = cpu_in_turn(cfg.writer_cpus.as_deref(), &[], i);
            info.cpus.push(cpu);
            info.writer_cpus.push(writer_cpu);
            let stamper = (!kernel).then(|| {
                let clock = match ts {
                    TsMode::Off => AutoClock::Realtime(RealtimeClock),
                    _ => AutoClock::new(),
                };
                info.clock = clock.name();
                Stamper::new(ts, clock, tai).with_link_speed(info.link_bps)
            });
            let shared = Arc::new(Shared::default());
            let released = Arc::new(AtomicU64::new(0));
            let runs = Arc::new(RunQueue::default());
            let flags = Arc::new(RunFlags::new(ring.blocks()));
            socks.push((q, sock.clone(), shared.clone()));
            out.push(EngineQueue {
                queue: q,
                rx: PacketRx {
                    ring: ring.clone(),
                    sock,
                    next_block: 0,
                    walk: None,
                    pending: VecDeque::new(),
                    handed: 0,
                    released: released.clone(),
                    filter: cfg.filter.as_ref().map(|f| f.program.clone()),
                    kernel_stamps: kernel,
                    shared,
                    stop: stop.clone(),
                    grace,
                    in_place: cfg.in_place,
                    in_place_min_slot: cfg.in_place_min_slot,
                    runs: runs.clone(),
                    flags,
                    last_block_ns: 0,
                    block_every_ns: 0,
                    retire: Duration::from_millis(cfg.retire_ms as u64),
                },
                frames: PacketFrames {
                    ring,
                    released,
                    runs,
                    taken: 0,
                    seen: 0,
                    next: None,
                    in_place: cfg.in_place,
                },
                stamper,
                cpu,
                writer_cpu,
            });
        }
        // Every socket is bound and in its group: let frames in.
        for (q, sock, _) in &socks {
            sock.open_gate()
                .map_err(|e| socket_error(&ifname, *q, "SO_DETACH_FILTER", e))?;
        }
        let monitor = LinkMonitor::new(&ifname, ifindex).ok().map(Mutex::new);
        Ok(Packet {
            queues: out,
            socks,
            stop,
            info,
            monitor,
        })
    }
}

impl Engine for Packet {
    type Rx = PacketRx;
    type Frames = PacketFrames;

    fn info(&self) -> &StartInfo {
        &self.info
    }

    fn take_queues(&mut self) -> Vec<EngineQueue<PacketRx, PacketFrames>> {
        std::mem::take(&mut self.queues)
    }

    fn counters(&self, queue: u32) -> EngineCounters {
        let Some((_, sock, s)) = self.socks.iter().find(|(q, _, _)| *q == queue) else {
            return EngineCounters::default();
        };
        // The walk's counts are read before the kernel's: seen never runs
        // ahead of written + filtered + drops.
        let walked = s.walked.load(Ordering::Acquire);
        let drops = {
            let mut d = s.drops.lock().unwrap_or_else(|e| e.into_inner());
            if let Ok((_, dropped)) = sock.stats() {
                *d += dropped;
            }
            *d
        };
        EngineCounters {
            seen: walked + drops,
            seen_bytes: s.bytes.load(Ordering::Relaxed),
            hw_stamped: s.hw_stamped.load(Ordering::Relaxed),
            filtered: s.filtered.load(Ordering::Relaxed),
            rx_ring_full: drops,
            other: s.other.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn stop(&mut self) {
        if self.stop.at.get().is_some() {
            return;
        }
        for (_, sock, _) in &self.socks {
            // Should closing a gate fail, the queue still ends after the
            // grace (frames arriving meanwhile are recorded and counted).
            let _ = sock.close_gate();
        }
        let _ = self.stop.at.set(Instant::now());
    }

    fn link_status(&self) -> LinkStatus {
        let seen = match &self.monitor {
            Some(m) => m.lock().unwrap_or_else(|e| e.into_inner()).poll(),
            None => LinkStatus::Up,
        };
        if matches!(seen, LinkStatus::Gone(_)) {
            return seen;
        }
        for (q, sock, _) in &self.socks {
            if let Some(e) = sock.take_error() {
                return LinkStatus::Gone(format!(
                    "the AF_PACKET socket of {} queue {q} failed: {e}",
                    self.info.ifname
                ));
            }
        }
        seen
    }
}

impl Drop for Packet {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the walk is in the block it is reading.
struct Walk {
    block: u32,
    /// Offset of the next frame's header.
    off: u32,
    /// Frames left in the block.
    left: u32,
    /// The block is being laid out in place.
    lay: Option<Layout>,
}

/// Runs laid out by the poll thread, in order, for the writer.
#[derive(Default)]
struct RunQueue {
    q: Mutex<VecDeque<RingRun>>,
    /// Runs pushed so far (the writer looks at the queue only when it grew).
    pushed: AtomicU64,
}

/// The poll thread's half of one queue: walks the blocks the kernel handed
/// over, in ring order, and gives each back once the writer returned every
/// frame taken from it.
pub struct PacketRx {
    ring: Arc<Ring>,
    sock: Arc<Socket>,
    next_block: u32,
    walk: Option<Walk>,
    /// Blocks walked (or being walked) and not yet given back, each with
    /// the count of frames handed out up to its end, and its first bytes
    /// to put back when it was laid out in place.
    pending: VecDeque<(u32, u64, Option<[u32; 2]>)>,
    /// Frames handed out so far.
    handed: u64,
    /// Frames the writer gave back so far.
    released: Arc<AtomicU64>,
    filter: Option<wiretape_filter::Program>,
    kernel_stamps: bool,
    shared: Arc<Shared>,
    stop: Arc<Stop>,
    /// How long after the stop a block may still be handed over (the
    /// kernel's retire timer).
    grace: Duration,
    /// Lay blocks out in place as runs of pcapng blocks (see the module
    /// docs), those whose mean slot is at least `in_place_min_slot`.
    in_place: bool,
    in_place_min_slot: u32,
    runs: Arc<RunQueue>,
    /// Blocks whose run is out to be written.
    flags: Arc<RunFlags>,
    /// When the last block was handed over (monotonic ns), and the mean
    /// time between blocks (for [`RxQueue::pause_hint`]).
    last_block_ns: u64,
    block_every_ns: u64,
    retire: Duration,
}

impl PacketRx {
    /// Whether the next block in ring order is handed over and not walked
    /// yet: still ours from the last lap (its frames not all given back)
    /// is not new.
    #[inline]
    fn next_ready(&self) -> bool {
        let b = self.next_block;
        self.pending.front().is_none_or(|p| p.0 != b) && self.ring.is_user(b)
    }

    /// Gives back the blocks whose frames the writer has all returned.
    #[inline]
    fn release_done(&mut self) {
        let released = self.released.load(Ordering::Acquire);
        while let Some(&(b, end, head)) = self.pending.front() {
            let walking = self.walk.as_ref().is_some_and(|w| w.block == b);
            if walking || released < end || self.flags.is_out(b) {
                break;
            }
            if let Some(head) = head {
                self.ring.restore_head(b, head);
            }
            self.ring.release(b);
            self.pending.pop_front();
        }
    }

    /// Walks up to `max` frames, appending their tokens to `out`.
    #[inline]
    fn walk(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        let ring_arc = self.ring.clone();
        let ring = &*ring_arc;
        let (mut made, mut looked) = (0usize, 0u64);
        let (mut bytes, mut filtered, mut hw, mut other) = (0u64, 0u64, 0u64, 0u64);
        while made < max {
            if self.walk.is_none() {
                if !self.next_ready() {
                    break;
                }
                let b = self.next_block;
                let (n, first) = ring.block_head(b);
                // Once per block: how often blocks come.
                let now = wiretape_timestamp::monotonic_ns();
                if self.last_block_ns > 0 {
                    let gap = now - self.last_block_ns;
                    self.block_every_ns = (3 * self.block_every_ns + gap) / 4;
                }
                self.last_block_ns = now;
                let lay = (self.in_place
                    && ring.mean_slot(b, n, first) >= self.in_place_min_slot
                    && ring.can_lay_out(b, n, first))
                .then(Layout::default);
                let head = lay.as_ref().map(|_| ring.head8(b));
                self.pending.push_back((b, self.handed, head));
                self.walk = Some(Walk {
                    block: b,
                    off: first,
                    left: n,
                    lay,
                });
            }
            let w = self.walk.as_mut().expect("a block being walked");
            if w.left == 0 {
                self.end_block();
                continue;
            }
            let (b, off) = (w.block, w.off);
            w.left -= 1;
            looked += 1;
            let Some(h) = ring.frame_head(b, off) else {
                // A header outside the block: the rest of it cannot be
                // trusted either; count them and move on.
                other += 1 + w.left as u64;
                looked += w.left as u64;
                w.left = 0;
                continue;
            };
            w.off = if h.next == 0 {
                // The last frame: nothing may follow.
                w.left = 0;
                off
            } else {
                off.saturating_add(h.next)
            };
            bytes += h.len as u64;
            let h: FrameHead = ring.put_back_vlan(b, off, h);
            if let Some(f) = &self.filter {
                let (frame, wire) = ring.frame_at(b, off, &h);
                if !f.matches(frame, wire) {
                    filtered += 1;
                    continue;
                }
            }
            hw += (h.status & TP_STATUS_TS_RAW_HARDWARE != 0) as u64;
            let mut d = match &mut w.lay {
                Some(lay) => ring.lay_frame(b, off, &h, h.ts_ns, lay),
                None => ring.desc(b, off, &h),
            };
            if self.kernel_stamps {
                d.ts = h.ts_ns;
            }
            out.push(d);
            made += 1;
            self.handed += 1;
        }
        // The block being walked (or just walked) ends, so far, here: once
        // per take, not per frame.
        if let Some(last) = self.pending.back_mut() {
            last.1 = self.handed;
        }
        if self.walk.as_ref().is_some_and(|w| w.left == 0) {
            // Its last frame taken: the block is walked.
            self.end_block();
        }
        if looked > 0 {
            let sh = &self.shared;
            sh.bytes.fetch_add(bytes, Ordering::Relaxed);
            if filtered > 0 {
                sh.filtered.fetch_add(filtered, Ordering::Relaxed);
            }
            if hw > 0 {
                sh.hw_stamped.fetch_add(hw, Ordering::Relaxed);
            }
            if other > 0 {
                sh.other.fetch_add(other, Ordering::Relaxed);
            }
            // Walked last (release): whoever reads it sees the rest.
            sh.walked.fetch_add(looked, Ordering::Release);
        }
        made
    }
}

impl PacketRx {
    /// The block being walked is walked: its frames handed out end here,
    /// and, laid out in place, its run goes to the writer.
    fn end_block(&mut self) {
        let Some(mut w) = self.walk.take() else {
            return;
        };
        if let Some(last) = self.pending.back_mut() {
            last.1 = self.handed;
        }
        if let Some(lay) = &mut w.lay {
            if let Some(len) = self.ring.lay_end(w.block, lay) {
                let run = RingRun::new(
                    self.ring.clone(),
                    self.flags.clone(),
                    w.block,
                    len,
                    lay,
                    self.handed,
                );
                self.runs
                    .q
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_back(run);
                self.runs.pushed.fetch_add(1, Ordering::Release);
            }
        }
        self.next_block = if w.block + 1 == self.ring.blocks() {
            0
        } else {
            w.block + 1
        };
    }
}

impl RxQueue for PacketRx {
    #[inline]
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        self.release_done();
        let n = self.walk(max, out);
        if self.walk.is_none() {
            // A block walked to its end whose frames were all filtered (or
            // all given back already) goes back at once.
            self.release_done();
        }
        n
    }

    fn wait(&mut self, timeout: Duration) {
        self.release_done();
        if self.walk.is_some() || self.next_ready() {
            return;
        }
        // While a block handed over is still ours (frames or its run not
        // back yet), the kernel's poll says "readable" at once (it looks at
        // the block before its current one): poll would spin. Sleep then.
        if self.stop.at.get().is_some() || !self.pending.is_empty() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        }
        self.sock.wait(timeout);
    }

    /// Three quarters of the time a block takes to fill (between 1 ms and
    /// the retire timeout): a dry ring is looked at about once per block,
    /// not every millisecond.
    fn pause_hint(&self) -> Option<Duration> {
        if self.block_every_ns == 0 {
            return None;
        }
        let d = Duration::from_nanos(self.block_every_ns * 3 / 4);
        Some(d.clamp(
            Duration::from_millis(1),
            self.retire.max(Duration::from_millis(1)),
        ))
    }

    fn ended(&mut self) -> bool {
        let Some(at) = self.stop.at.get() else {
            return false;
        };
        if self.walk.is_some() || self.next_ready() {
            return false;
        }
        // The gates are closed; the last partly filled block is handed over
        // by the kernel's retire timer within `retire_ms`.
        at.elapsed() >= self.grace
    }
}

/// The writer's half of one queue: reads frames in the ring, counts them
/// back, and takes the runs laid out in place.
pub struct PacketFrames {
    ring: Arc<Ring>,
    released: Arc<AtomicU64>,
    runs: Arc<RunQueue>,
    /// Runs taken from the queue so far.
    taken: u64,
    /// Frames the writer took so far ([`FrameStore::laid_out`] calls).
    seen: u64,
    /// The next run, taken from the queue, due once `seen` reaches its end.
    next: Option<RingRun>,
    /// Blocks may be laid out in place (else no run ever comes).
    in_place: bool,
}

impl LaidOutRun for RingRun {
    fn frames(&self) -> u64 {
        self.frames
    }
    fn first_ns(&self) -> u64 {
        self.first_ns
    }
}

impl FrameStore for PacketFrames {
    #[inline(always)]
    fn frame(&self, d: &Desc) -> (&[u8], u32) {
        self.ring.frame(d)
    }

    #[inline]
    fn laid_out(&mut self, d: &Desc) -> bool {
        self.seen += 1;
        Ring::is_laid_out(d)
    }

    #[inline]
    fn run_due(&mut self) -> Option<Box<dyn LaidOutRun>> {
        if !self.in_place {
            return None;
        }
        if self.next.is_none() {
            if self.runs.pushed.load(Ordering::Acquire) == self.taken {
                return None;
            }
            self.next = self
                .runs
                .q
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            self.taken += self.next.is_some() as u64;
        }
        match &self.next {
            Some(r) if r.end <= self.seen => {
                self.next.take().map(|r| Box::new(r) as Box<dyn LaidOutRun>)
            }
            _ => None,
        }
    }

    #[inline]
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>) {
        let owner = self.ring.owner();
        let mut n = 0u64;
        for d in descs {
            assert!(d.owner() == owner, "Desc of another frame area");
            n += 1;
        }
        if n > 0 {
            self.released.fetch_add(n, Ordering::Release);
        }
    }
}
