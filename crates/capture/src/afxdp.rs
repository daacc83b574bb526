//! The AF_XDP engine: the XDP program in `bpf/steer.bpf.c` redirects each
//! RX queue into its own AF_XDP socket and stamps each frame with the
//! kernel's TAI time (or the NIC's) in the XDP metadata. Per queue the
//! pipeline's poll thread takes descriptors from the RX ring ([`AfXdpRx`])
//! and its writer thread reads the frames from the UMEM and gives them back
//! through the fill ring ([`AfXdpFrames`]). So the UMEM bounds what is in
//! flight: when the writer falls behind, the fill ring runs dry and the
//! kernel counts the drops, which [`Engine::counters`] reports.

use crate::bpf::{SteerProgram, XdpCutoff, XdpLink, XdpMode, MAX_QUEUES};
use crate::engine::{cpu_in_turn, Engine, EngineCounters, EngineQueue, FrameStore, RxQueue};
use crate::link::{LinkMonitor, LinkStatus};
use crate::xsk::{self, BusyPoll, FillRing, RxRing, Umem, XskConfig, XskFd};
use crate::{sys, CaptureError, CaptureFilter, Desc, StartInfo};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wiretape_timestamp::{AutoClock, RealtimeClock, Stamper, TaiToUtc, TsMode};

/// Settings of the AF_XDP engine.
#[derive(Clone, Debug)]
pub struct CaptureConfig {
    /// The interface.
    pub ifname: String,
    /// RX queues to capture; None = all.
    pub queues: Option<Vec<u32>>,
    /// CPUs for the poll threads (queue i on cpus[i % len]); None = the
    /// process's allowed CPUs in turn.
    pub cpus: Option<Vec<usize>>,
    /// CPUs for the writer threads (queue i's writer on cpus[i % len]);
    /// None = not pinned (the scheduler places them).
    pub writer_cpus: Option<Vec<usize>>,
    /// None = native, falling back to generic.
    pub xdp_mode: Option<XdpMode>,
    /// None = zero-copy, falling back to copy.
    pub zero_copy: Option<bool>,
    /// UMEM frames per queue (power of two).
    pub frames: u32,
    /// Bytes per UMEM frame (2048 or 4096).
    pub frame_size: u32,
    /// The capture filter, decided in the XDP program (compiled for
    /// Ethernet); None: every frame.
    pub filter: Option<CaptureFilter>,
    /// Busy polling (`--busy-poll`): each socket gets the busy-poll options
    /// and the poll thread runs the driver's NAPI itself, one recvfrom per
    /// round (see [`BusyPoll`]); None: the driver's interrupts and softirq
    /// do (the default).
    pub busy_poll: Option<BusyPoll>,
    /// The per-connection cutoff (`--cutoff SIZE --cutoff-flows N`),
    /// applied in the XDP program after the filter; None: off.
    pub cutoff: Option<XdpCutoff>,
}

impl CaptureConfig {
    /// The defaults, on `ifname`.
    pub fn new(ifname: impl Into<String>) -> Self {
        CaptureConfig {
            ifname: ifname.into(),
            queues: None,
            cpus: None,
            writer_cpus: None,
            xdp_mode: None,
            zero_copy: None,
            frames: 32768,
            frame_size: 2048,
            filter: None,
            busy_poll: None,
            cutoff: None,
        }
    }
}

/// The AF_XDP engine, attached. Dropping it detaches the program.
pub struct AfXdp {
    prog: SteerProgram,
    link: Option<XdpLink>,
    fds: Vec<(u32, Arc<XskFd>)>,
    queues: Vec<EngineQueue<AfXdpRx, AfXdpFrames>>,
    detached: Arc<AtomicBool>,
    info: StartInfo,
    /// Link events of the interface (None: netlink refused; then only the
    /// sockets' error state tells).
    monitor: Option<std::sync::Mutex<LinkMonitor>>,
}

impl AfXdp {
    /// Checks the settings against the interface without touching it: it
    /// exists, has the queues asked for, has no XDP program attached, and
    /// suits the filter. Returns its index and the queues to record. [`open`]
    /// does this first; a run over several interfaces checks them all
    /// before it opens any, so one bad interface attaches nothing anywhere.
    ///
    /// [`open`]: AfXdp::open
    pub fn check(cfg: &CaptureConfig) -> Result<(u32, Vec<u32>), CaptureError> {
        if !cfg.frames.is_power_of_two() || cfg.frames < 64 {
            return Err(CaptureError::Config(format!(
                "--frames {} must be a power of two >= 64",
                cfg.frames
            )));
        }
        if cfg.frame_size != 2048 && cfg.frame_size != 4096 {
            return Err(CaptureError::Config(format!(
                "--frame-size {} must be 2048 or 4096",
                cfg.frame_size
            )));
        }
        let ifname = cfg.ifname.clone();
        let ifindex =
            sys::ifindex(&ifname).ok_or_else(|| CaptureError::NoSuchInterface(ifname.clone()))?;
        let count = sys::rx_queue_count(&ifname)
            .unwrap_or(1)
            .clamp(1, MAX_QUEUES);
        let queues = crate::engine::queues_of(&ifname, count, cfg.queues.as_deref())?;
        crate::engine::check_filter_link(&ifname, cfg.filter.is_some())?;
        if let Some(bp) = cfg.busy_poll {
            if bp.usecs == 0 || bp.budget == 0 {
                return Err(CaptureError::Config(format!(
                    "--busy-poll {} with budget {}: both must be at least 1",
                    bp.usecs, bp.budget
                )));
            }
        }
        crate::bpf::refuse_attached(ifindex, &ifname)?;
        Ok((ifindex, queues))
    }

    /// Checks the settings ([`AfXdp::check`]), opens a socket per queue,
    /// loads and attaches the program (refusing one already attached) and
    /// registers the sockets. Nothing stays attached when it fails.
    pub fn open(cfg: &CaptureConfig, ts_mode: TsMode) -> Result<AfXdp, CaptureError> {
        let (ifindex, queues) = Self::check(cfg)?;
        let ifname = cfg.ifname.clone();
        sys::raise_memlock();
        let xcfg = XskConfig {
            frames: cfg.frames,
            frame_size: cfg.frame_size,
            zero_copy: cfg.zero_copy,
        };
        let mut socks = Vec::new();
        let mut zc_refused = None;
        for &q in &queues {
            let (x, refused) =
                xsk::open(ifindex, q, &xcfg).map_err(|e| socket_error(&ifname, q, e))?;
            if let Some(r) = refused {
                // What the driver said, named: veth and lo refuse, as does
                // any driver without AF_XDP zero-copy support.
                let who = match sys::driver_name(&ifname) {
                    Some(d) => format!("driver {d}"),
                    None => format!("the driver of {ifname}"),
                };
                zc_refused = Some(format!("zero-copy refused by {who}: {r}"));
            }
            if let Some(bp) = cfg.busy_poll {
                // Before the program is attached: a refusal attaches nothing.
                x.fd.set_busy_poll(bp)
                    .map_err(|(option, source)| CaptureError::BusyPoll {
                        ifname: ifname.clone(),
                        queue: q,
                        option,
                        source,
                    })?;
            }
            socks.push((q, x));
        }
        let (prog, link, native_refused, hw_refused) =
            load_and_attach(cfg, ts_mode, ifindex, &ifname)?;
        for (q, x) in &socks {
            prog.register(*q, x.fd.raw())?;
        }

        let allowed = sys::allowed_cpus();
        let tai = TaiToUtc::measure();
        let link_bps = sys::link_speed_bps(&ifname);
        let detached = Arc::new(AtomicBool::new(false));
        let mut info = StartInfo {
            engine: "afxdp",
            ifname: ifname.clone(),
            ifindex,
            source: None,
            queues: queues.clone(),
            xdp_mode: Some(link.mode),
            bind_mode: socks.first().map(|(_, x)| x.mode),
            zero_copy_refused: zc_refused,
            native_refused,
            cpus: Vec::new(),
            writer_cpus: Vec::new(),
            tai_offset_s: tai.offset().as_secs(),
            ts_mode,
            link_bps,
            clock: "clock_gettime",
            hw_refused,
            frames: cfg.frames,
            frame_size: cfg.frame_size,
            interfaces: Vec::new(),
            mapped_file: None,
            busy_poll: cfg.busy_poll,
            in_place: false,
            rx_queues: None,
        };
        let mut fds = Vec::new();
        let mut out = Vec::new();
        for (i, (q, x)) in socks.into_iter().enumerate() {
            let cpu = cpu_in_turn(cfg.cpus.as_deref(), &allowed, i);
            let writer_cpu = cpu_in_turn(cfg.writer_cpus.as_deref(), &[], i);
            info.cpus.push(cpu);
            info.writer_cpus.push(writer_cpu);
            // Clock modes get the calibrated TSC; xdp/hw only need a
            // fallback for frames without a stamp.
            let clock = if ts_mode.uses_xdp_meta() || ts_mode == TsMode::Off {
                AutoClock::Realtime(RealtimeClock)
            } else {
                AutoClock::new()
            };
            info.clock = clock.name();
            let stamper = Stamper::new(ts_mode, clock, tai).with_link_speed(link_bps);
            let xsk::Xsk {
                fd, umem, rx, fill, ..
            } = x;
            fds.push((q, fd.clone()));
            out.push(EngineQueue {
                queue: q,
                rx: AfXdpRx {
                    ring: rx,
                    fd,
                    detached: detached.clone(),
                    empty_looks: 0,
                    busy_poll: cfg.busy_poll,
                },
                frames: AfXdpFrames { umem, fill },
                stamper: Some(stamper),
                cpu,
                writer_cpu,
            });
        }
        let monitor = LinkMonitor::new(&ifname, ifindex)
            .ok()
            .map(std::sync::Mutex::new);
        Ok(AfXdp {
            prog,
            link: Some(link),
            fds,
            queues: out,
            detached,
            info,
            monitor,
        })
    }
}

impl AfXdp {
    /// The AF_XDP socket of `queue` (its statistics, options, NAPI id);
    /// None for a queue not recorded.
    pub fn socket(&self, queue: u32) -> Option<&XskFd> {
        self.fds
            .iter()
            .find(|(q, _)| *q == queue)
            .map(|(_, fd)| &**fd)
    }
}

fn socket_error(ifname: &str, queue: u32, e: std::io::Error) -> CaptureError {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (run as root, or grant CAP_NET_RAW and CAP_IPC_LOCK)"
        }
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) => {
            " (not enough locked memory: lower --frames or raise `ulimit -l`)"
        }
        Some(libc::EBUSY) => " (another AF_XDP socket is bound to this queue)",
        Some(libc::EOPNOTSUPP) => " (the driver refused zero-copy; leave --zero-copy off)",
        _ => "",
    };
    CaptureError::Socket {
        ifname: ifname.to_owned(),
        queue,
        source: e,
        hint,
    }
}

impl Engine for AfXdp {
    type Rx = AfXdpRx;
    type Frames = AfXdpFrames;

    fn info(&self) -> &StartInfo {
        &self.info
    }

    fn take_queues(&mut self) -> Vec<EngineQueue<AfXdpRx, AfXdpFrames>> {
        std::mem::take(&mut self.queues)
    }

    fn counters(&self, queue: u32) -> EngineCounters {
        let c = self.prog.counters(queue);
        let kernel = self
            .fds
            .iter()
            .find(|(q, _)| *q == queue)
            .and_then(|(_, fd)| fd.stats().ok())
            .unwrap_or_default();
        let fill_ring_empty = kernel.rx_fill_ring_empty_descs.min(kernel.rx_dropped);
        // The cutoff's evictions, for the whole table: connections added
        // minus those present, counted once the program is detached (the
        // kernel's LRU map does not report what it evicts; counting the
        // table takes a syscall per entry, too many for a progress line).
        // Reported on the first queue so that the queues sum to it.
        let cutoff_flows_evicted = if self.prog.cutoff().is_some()
            && self.link.is_none()
            && self.fds.first().is_some_and(|(q, _)| *q == queue)
        {
            let inserts: u64 = self
                .fds
                .iter()
                .map(|(q, _)| self.prog.counters(*q).cutoff_inserts)
                .sum();
            inserts.saturating_sub(self.prog.cutoff_flows_present())
        } else {
            0
        };
        EngineCounters {
            seen: c.seen,
            seen_bytes: c.bytes,
            hw_stamped: c.hw,
            filtered: c.filtered,
            cutoff: c.cutoff,
            cutoff_bytes: c.cutoff_bytes,
            cutoff_flows_evicted,
            rx_ring_full: kernel.rx_ring_full,
            fill_ring_empty,
            other: kernel.rx_dropped - fill_ring_empty,
            kernel,
        }
    }

    fn link_status(&self) -> LinkStatus {
        let seen = match &self.monitor {
            Some(m) => m.lock().unwrap_or_else(|e| e.into_inner()).poll(),
            None => LinkStatus::Up,
        };
        if matches!(seen, LinkStatus::Gone(_)) {
            return seen;
        }
        // The sockets' error state: the kernel sets ENETDOWN on each when
        // it unbinds them from a device that went away (a driver reset
        // that tears the queues down does the same).
        for (q, fd) in &self.fds {
            if let Some(e) = fd.take_error() {
                return LinkStatus::Gone(format!(
                    "the AF_XDP socket of {} queue {q} failed: {e}",
                    self.info.ifname
                ));
            }
        }
        seen
    }

    fn stop(&mut self) {
        if self.link.take().is_some() {
            // Frames the program redirected just before the detach may still
            // be on their way into the rings (end of the NAPI poll): wait.
            std::thread::sleep(Duration::from_millis(30));
        }
        self.detached.store(true, Ordering::Release);
    }
}

impl Drop for AfXdp {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The RX ring of one queue's socket.
pub struct AfXdpRx {
    ring: RxRing,
    fd: Arc<XskFd>,
    detached: Arc<AtomicBool>,
    empty_looks: u32,
    busy_poll: Option<BusyPoll>,
}

impl RxQueue for AfXdpRx {
    #[inline]
    fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        if self.busy_poll.is_some() {
            // Run the driver's NAPI here (up to the budget), then take what
            // it put in the ring: one syscall per round, not per frame.
            self.fd.busy_poll();
        }
        let n = self.ring.take(max, out);
        if n > 0 {
            self.empty_looks = 0;
        }
        n
    }

    fn wait(&mut self, timeout: Duration) {
        self.fd
            .wait_rx(timeout.as_millis().min(i32::MAX as u128) as i32);
    }

    fn busy_poll(&self) -> Option<Duration> {
        self.busy_poll
            .map(|bp| Duration::from_micros(bp.usecs as u64))
    }

    fn ended(&mut self) -> bool {
        if !self.detached.load(Ordering::Acquire) {
            return false;
        }
        // Nothing new can arrive once detached; look a few times to be sure
        // the last NAPI batch has landed.
        self.empty_looks += 1;
        if self.empty_looks >= 3 {
            return true;
        }
        self.fd.wait_rx(5);
        false
    }
}

/// The UMEM and fill ring of one queue's socket.
pub struct AfXdpFrames {
    umem: Arc<Umem>,
    fill: FillRing,
}

impl FrameStore for AfXdpFrames {
    #[inline(always)]
    fn frame(&self, d: &Desc) -> (&[u8], u32) {
        (self.umem.frame(d), d.len())
    }

    #[inline]
    fn give_back(&mut self, descs: std::vec::Drain<'_, Desc>) {
        self.fill.give(descs);
    }
}

/// Loads the program and attaches it, trying what the config allows in
/// order: native XDP with NIC stamps (mode hw), native without, generic.
/// Returns the program, the link, and why native / NIC stamps were refused.
fn load_and_attach(
    cfg: &CaptureConfig,
    ts_mode: TsMode,
    ifindex: u32,
    ifname: &str,
) -> Result<(SteerProgram, XdpLink, Option<String>, Option<String>), CaptureError> {
    let want_hw = ts_mode == TsMode::Hw;
    let modes: &[XdpMode] = match cfg.xdp_mode {
        Some(XdpMode::Native) => &[XdpMode::Native],
        Some(XdpMode::Generic) => &[XdpMode::Generic],
        None => &[XdpMode::Native, XdpMode::Generic],
    };
    let mut native_refused = None;
    let mut hw_refused = None;
    let mut last_err = None;
    for &mode in modes {
        let hw_choices: &[bool] = if want_hw && mode == XdpMode::Native {
            &[true, false]
        } else {
            &[false]
        };
        if want_hw && mode == XdpMode::Generic && hw_refused.is_none() {
            hw_refused = Some("device-bound programs cannot run in generic XDP mode".to_string());
        }
        for &hw in hw_choices {
            let mut prog = if hw {
                match SteerProgram::load_with(Some(ifindex), cfg.cutoff) {
                    Ok(p) => p,
                    Err(e @ CaptureError::Permission(_)) => return Err(e),
                    Err(e) => {
                        hw_refused =
                            Some(format!("the driver gives no XDP receive timestamps ({e})"));
                        continue;
                    }
                }
            } else {
                SteerProgram::load_with(None, cfg.cutoff)?
            };
            // Before the attach: a refused filter leaves nothing attached.
            if let Some(f) = &cfg.filter {
                prog.install_filter(f)?;
            }
            match prog.attach(ifindex, ifname, mode) {
                Ok(link) => return Ok((prog, link, native_refused, hw_refused)),
                Err(e @ (CaptureError::AlreadyAttached { .. } | CaptureError::Permission(_))) => {
                    return Err(e)
                }
                Err(e) if hw => {
                    hw_refused = Some(format!("the device-bound program did not attach ({e})"))
                }
                Err(e) => {
                    if mode == XdpMode::Native {
                        native_refused = Some(e.to_string());
                    }
                    last_err = Some(e);
                }
            }
        }
    }
    Err(last_err.unwrap_or_else(|| CaptureError::Bpf("no XDP mode could be attached".into())))
}
