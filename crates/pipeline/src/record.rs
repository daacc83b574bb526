//! [`record`]: a whole recording, from an engine through the stage into a
//! store of files, with progress events and exact accounting at the end.

use crate::live::{self, Hub, LiveConfig, LiveReport};
use crate::replay::FileSource;
use crate::report::{Gap, RecordReport, Snapshot};
use crate::stage::{FrameSink, Running, StageConfig, StopReason};
use crate::PipelineError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape_capture::{
    sys, AfXdp, CaptureConfig, CaptureError, CaptureFilter, Engine, FileConfig, FileEngine,
    LinkStatus, MultiEngine, NetmapConfig, Packet, PacketConfig, RecordSource, StartInfo,
};
use wiretape_storage::{
    RotatingWriter, StorageConfig, StorageError, StorageProgress, Store, WriterReport,
};
use wiretape_timestamp::{realtime_ns, TsMode};

/// Where frames come from.
#[derive(Clone, Debug)]
pub enum Input {
    /// An interface, through the AF_XDP engine.
    Interface(CaptureConfig),
    /// A capture file, through the file engine (no privileges needed).
    File(FileConfig),
    /// An interface, through the netmap engine (cargo feature `netmap`;
    /// without it, [`record`] says how to build it).
    Netmap(NetmapConfig),
    /// Several interfaces in one run, each through its own AF_XDP engine
    /// (its own XDP program): pollers and writers per (interface, queue),
    /// files named by interface and queue, one `-c` budget for all. All are
    /// checked before any is attached. `cpus` and `writer_cpus` of the first
    /// config cover all queues of all interfaces, in order.
    Interfaces(Vec<CaptureConfig>),
    /// One or more interfaces through the TPACKET_V3 engine (`--engine
    /// packet`): one AF_PACKET socket and ring per queue. Several
    /// interfaces run as one, as [`Input::Interfaces`] does.
    Packet(Vec<PacketConfig>),
}

/// Everything a recording needs, nested by concern.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    /// Where frames come from.
    pub input: Input,
    /// How they are stamped. For a file, [`TsMode::Off`] keeps its stamps.
    pub ts: TsMode,
    /// How the per-queue stage runs (batch, idle sleep, `-c COUNT`).
    pub stage: StageConfig,
    /// How files are written.
    pub storage: StorageConfig,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// A capture filter (a tcpdump expression, `man pcap-filter`): only the
    /// frames it accepts are written, the others are counted in
    /// `filtered`. Compiled by [`record`] for the input's link type and the
    /// snap length; it replaces any filter set in the input's config.
    pub filter: Option<String>,
    /// Live consumers: the time-travel ring, PCAP-over-IP, the control
    /// socket, recording without files (see [`crate::live`]).
    pub live: LiveConfig,
    /// When the interface goes away (deleted, unplugged), wait for it to
    /// come back and record on into new files (the gap is in the report's
    /// `gaps`), instead of stopping with an error. One AF_XDP interface
    /// only; the live side (subscribers, ring, server) ends at the first gap.
    pub wait_iface: bool,
    /// How the notices of a vanished interface name
    /// [`RecordConfig::wait_iface`] (`wait_iface`, [`crate::options::Opt::WaitIface`]'s
    /// `Display`; a command line: its flag).
    pub wait_iface_name: String,
    /// Requests from outside while it runs (signals).
    pub controls: Controls,
}

/// Requests to a running [`record`], set from any thread (a signal
/// handler's flag): the control loop looks every 20 ms and clears them.
#[derive(Clone, Debug, Default)]
pub struct Controls {
    /// Start a new file on every queue (at its next frame) and finish the
    /// old ones (SIGHUP).
    pub rotate: Arc<AtomicBool>,
    /// Send a [`Event::Progress`] now (the caller clears it once it has
    /// shown it: SIGUSR2's summary without stopping).
    pub status: Arc<AtomicBool>,
}

impl RecordConfig {
    /// The defaults: record interface `ifname` into `dir`.
    pub fn interface(ifname: &str, dir: impl Into<std::path::PathBuf>) -> Self {
        RecordConfig {
            input: Input::Interface(CaptureConfig::new(ifname)),
            ts: TsMode::Hw,
            stage: StageConfig::default(),
            storage: StorageConfig::new(dir),
            duration: None,
            filter: None,
            live: LiveConfig::default(),
            wait_iface: false,
            wait_iface_name: crate::options::Opt::WaitIface.to_string(),
            controls: Controls::default(),
        }
    }

    /// The defaults: feed capture file `path` into `dir`, keeping its stamps.
    pub fn file(path: impl Into<std::path::PathBuf>, dir: impl Into<std::path::PathBuf>) -> Self {
        RecordConfig {
            input: Input::File(FileConfig::new(path)),
            ts: TsMode::Off,
            stage: StageConfig::default(),
            storage: StorageConfig::new(dir),
            duration: None,
            filter: None,
            live: LiveConfig::default(),
            wait_iface: false,
            wait_iface_name: crate::options::Opt::WaitIface.to_string(),
            controls: Controls::default(),
        }
    }

    /// The defaults: record interface `ifname` into `dir` through netmap,
    /// stamped `hybrid` (netmap stamps ring syncs; see the capture crate).
    pub fn netmap(ifname: &str, dir: impl Into<std::path::PathBuf>) -> Self {
        RecordConfig {
            input: Input::Netmap(NetmapConfig::new(ifname)),
            ts: TsMode::Hybrid,
            stage: StageConfig::default(),
            storage: StorageConfig::new(dir),
            duration: None,
            filter: None,
            live: LiveConfig::default(),
            wait_iface: false,
            wait_iface_name: crate::options::Opt::WaitIface.to_string(),
            controls: Controls::default(),
        }
    }

    /// The defaults: record interfaces `ifnames` into `dir` in one run.
    pub fn interfaces(ifnames: &[&str], dir: impl Into<std::path::PathBuf>) -> Self {
        let mut c = RecordConfig::interface(ifnames.first().copied().unwrap_or(""), dir);
        c.input = Input::Interfaces(ifnames.iter().map(|&n| CaptureConfig::new(n)).collect());
        c
    }

    /// The interface (or, for a file, the name its files carry; for several
    /// interfaces, their names joined by commas).
    pub fn ifname(&self) -> String {
        match &self.input {
            Input::Interface(c) => c.ifname.clone(),
            Input::File(f) => f.name(),
            Input::Netmap(c) => c.ifname.clone(),
            Input::Interfaces(l) => l
                .iter()
                .map(|c| c.ifname.as_str())
                .collect::<Vec<_>>()
                .join(","),
            Input::Packet(l) => l
                .iter()
                .map(|c| c.ifname.as_str())
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// What [`record`] tells its progress callback, about once a second.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// The engine is up.
    Started(&'a StartInfo),
    /// Live numbers.
    Progress {
        /// Since the start.
        elapsed: Duration,
        /// Per queue.
        snapshot: Snapshot,
        /// The writers.
        storage: StorageProgress,
    },
    /// Stopping, and why.
    Stopping(&'a str),
    /// Something the user should know (a fallback taken, a file repaired).
    Notice(String),
    /// The last word, after the files are closed: storage totals.
    Finished(StorageProgress),
}

/// Records until `stop` is set, the count or duration is reached, the
/// input ends or the output fails; then stops cleanly and returns the
/// accounting. Bad settings fail before anything is attached.
pub fn record(
    cfg: &RecordConfig,
    stop: &AtomicBool,
    on_event: impl FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    let hub = cfg.live.enabled().then(|| Hub::new(cfg.live.clone()));
    record_with(cfg, hub, stop, on_event)
}

/// [`record`] on the caller's thread with a caller-made live side: what
/// was subscribed on `live` before gets every frame of the run (and its end
/// when the run stops). One run per [`live::Live`].
pub fn record_live(
    cfg: &RecordConfig,
    live: &live::Live,
    stop: &AtomicBool,
    on_event: impl FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    record_with(cfg, Some(live.hub.clone()), stop, on_event)
}

/// [`record`] with the live side's hub made by the caller (a
/// [`crate::Recording`] subscribes to it before the run starts).
pub(crate) fn record_with(
    cfg: &RecordConfig,
    hub: Option<Arc<Hub>>,
    stop: &AtomicBool,
    on_event: impl FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    let r = record_inner(cfg, hub.clone(), stop, on_event);
    if let (Err(_), Some(h)) = (&r, &hub) {
        // Subscribers of a run that failed (before it started) get the end.
        h.finish();
    }
    r
}

fn record_inner(
    cfg: &RecordConfig,
    hub: Option<Arc<Hub>>,
    stop: &AtomicBool,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    // A bad expression fails before anything is opened or attached.
    // Files: for the file's link type, netmask 0 (as tcpdump -r); live
    // interfaces: Ethernet, the interface's netmask, no loops (XDP).
    let live = |ifname: &str| -> Result<Option<CaptureFilter>, PipelineError> {
        match &cfg.filter {
            None => Ok(None),
            Some(e) => Ok(Some(CaptureFilter::compile_live(
                e,
                ifname,
                cfg.storage.snaplen,
            )?)),
        }
    };
    if matches!(cfg.input, Input::Netmap(_)) && !wiretape_capture::netmap::BUILT {
        return Err(CaptureError::NetmapNotBuilt.into());
    }
    let mut storage = cfg.storage.clone();
    let input = match &cfg.input {
        Input::Netmap(c) => {
            let mut c = c.clone();
            if cfg.filter.is_some() {
                c.filter = live(&c.ifname)?;
            }
            Input::Netmap(c)
        }
        Input::Interface(c) => {
            let mut c = c.clone();
            if cfg.filter.is_some() {
                c.filter = live(&c.ifname)?;
            }
            Input::Interface(c)
        }
        Input::Interfaces(list) => {
            let list = list
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    if cfg.filter.is_some() {
                        c.filter = live(&c.ifname)?;
                    }
                    Ok(c)
                })
                .collect::<Result<Vec<_>, PipelineError>>()?;
            Input::Interfaces(check_interfaces(list)?)
        }
        Input::Packet(list) => {
            if list.is_empty() {
                return Err(CaptureError::Config("no interface to record".into()).into());
            }
            let list = list
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if list[..i].iter().any(|o| o.ifname == c.ifname) {
                        return Err(PipelineError::InterfaceTwice(c.ifname.clone()));
                    }
                    let mut c = c.clone();
                    if cfg.filter.is_some() {
                        c.filter = live(&c.ifname)?;
                    }
                    Ok(c)
                })
                .collect::<Result<Vec<_>, PipelineError>>()?;
            Input::Packet(list)
        }
        Input::File(f) => {
            let mut f = f.clone();
            // The files written keep the input's link type.
            storage.linktype = FileSource::open_with(&f.path, &cfg.storage.read)?.linktype();
            // A file loses nothing by waiting: its key index is complete.
            storage.key_index_wait = true;
            // Nor its session tables.
            storage.sessions_wait = true;
            if let Some(e) = &cfg.filter {
                f.filter = Some(CaptureFilter::compile(
                    e,
                    storage.linktype,
                    cfg.storage.snaplen,
                )?);
            }
            Input::File(f)
        }
    };
    let (store, notices) = Store::open(storage)?;
    for n in notices {
        on_event(Event::Notice(n));
    }
    // The live side's sockets are bound before anything is attached: a
    // port in use or a bad path fails first.
    let live = match hub {
        Some(hub) => Some(LiveSetup::bind(hub, &cfg.live)?),
        None => None,
    };
    let t0 = Instant::now();
    let mut seg = Segment {
        cfg,
        store: &store,
        stop,
        t0,
        deadline: cfg.duration.map(|d| t0 + d),
        base: Vec::new(),
        stage: cfg.stage.clone(),
    };
    let (mut report, why) = match &input {
        Input::Interface(c) => {
            let engine = AfXdp::open(c, cfg.ts)?;
            let (mut total, mut end) = seg.run(engine, realtime_ns(), live, &mut on_event)?;
            // --wait-iface: the interface went away; wait for it, record on.
            while let (End::Gone(gone), true) = (&end, cfg.wait_iface) {
                let gone = gone.clone();
                let from_ns = realtime_ns();
                on_event(Event::Notice(format!(
                    "{gone}: its files are finished; waiting for it to come back ({})",
                    cfg.wait_iface_name
                )));
                seg.base = total.queues.iter().map(|q| q.as_snapshot()).collect();
                let back = seg.wait_for_interface(c, &mut on_event);
                let to_ns = realtime_ns();
                total.gaps.push(Gap {
                    ifname: c.ifname.clone(),
                    from_ns,
                    to_ns,
                    came_back: back.is_ok(),
                    why: gone,
                });
                let engine = match back {
                    Ok(e) => e,
                    Err(why) => {
                        end = End::Stop(why);
                        break;
                    }
                };
                on_event(Event::Notice(format!(
                    "interface {} is back after {:.1} s: recording again, into new files",
                    c.ifname,
                    to_ns.saturating_sub(from_ns) as f64 / 1e9
                )));
                if let Some(n) = cfg.stage.count {
                    seg.stage.count = Some(n.saturating_sub(total.written()).max(1));
                }
                // The live side ended with the first run.
                let (later, e) = seg.run(engine, realtime_ns(), None, &mut on_event)?;
                total.absorb(later);
                end = e;
            }
            match end {
                End::Stop(why) => (total, why),
                End::Gone(gone) => {
                    total.input_error.get_or_insert(format!(
                        "{gone}: recording stopped ({} waits for it to come back)",
                        cfg.wait_iface_name
                    ));
                    (total, "interface gone")
                }
            }
        }
        Input::File(f) => {
            let source = FileSource::open_with(&f.path, &cfg.storage.read)?;
            // The first file is named by the first frame's time, as rotated
            // files are, so that names sort by time.
            let start = first_stamp(&f.path, &cfg.storage.read).unwrap_or_else(realtime_ns);
            let engine = FileEngine::open(f, source, cfg.ts)?;
            let (r, end) = seg.run(engine, start, live, &mut on_event)?;
            ended(r, end)
        }
        Input::Interfaces(list) => {
            // Checked above, all of them; now attached one after the other.
            // Should one fail, those already open are dropped: detached.
            let engines = list
                .iter()
                .map(|c| AfXdp::open(c, cfg.ts))
                .collect::<Result<Vec<_>, _>>()?;
            let (r, end) = seg.run(
                MultiEngine::new(engines),
                realtime_ns(),
                live,
                &mut on_event,
            )?;
            ended(r, end)
        }
        Input::Packet(list) if list.len() == 1 => {
            let engine = Packet::open(&list[0], cfg.ts)?;
            let (r, end) = seg.run(engine, realtime_ns(), live, &mut on_event)?;
            ended(r, end)
        }
        Input::Packet(list) => {
            // Opened one after the other, each with its own share of the
            // CPUs; should one fail, those already open are closed.
            let cpus = list[0].cpus.clone().unwrap_or_else(sys::allowed_cpus);
            let writer_cpus = list[0].writer_cpus.clone();
            let mut offset = 0;
            let mut engines = Vec::new();
            for c in list {
                let mut c = c.clone();
                c.cpus = Some(rotated(&cpus, offset));
                c.writer_cpus = writer_cpus.as_deref().map(|w| rotated(w, offset));
                let e = Packet::open(&c, cfg.ts)?;
                offset += e.info().queues.len();
                engines.push(e);
            }
            let (r, end) = seg.run(
                MultiEngine::new(engines),
                realtime_ns(),
                live,
                &mut on_event,
            )?;
            ended(r, end)
        }
        #[cfg(feature = "netmap")]
        Input::Netmap(c) => {
            let engine = wiretape_capture::netmap::Netmap::open(c, cfg.ts)?;
            let (r, end) = seg.run(engine, realtime_ns(), live, &mut on_event)?;
            ended(r, end)
        }
        #[cfg(not(feature = "netmap"))]
        Input::Netmap(_) => return Err(CaptureError::NetmapNotBuilt.into()),
    };
    report.duration = t0.elapsed();
    on_event(Event::Stopping(why));
    // The writers are closed: the last session tables are written.
    store.finish_sessions();
    // The writers are closed: their gauges hold the final numbers.
    on_event(Event::Finished(store.progress()));
    Ok(report)
}

/// A run that ends with its input, and why (no waiting for an interface).
fn ended(mut r: RecordReport, end: End) -> (RecordReport, &'static str) {
    match end {
        End::Stop(why) => (r, why),
        End::Gone(gone) => {
            r.input_error.get_or_insert(gone);
            (r, "interface gone")
        }
    }
}

/// The live side of a run: the hub and its sockets, bound early.
struct LiveSetup {
    hub: Arc<Hub>,
    serve: Option<std::net::TcpListener>,
    control: Option<(std::path::PathBuf, std::os::unix::net::UnixListener)>,
}

impl LiveSetup {
    fn bind(hub: Arc<Hub>, cfg: &LiveConfig) -> Result<LiveSetup, PipelineError> {
        let serve = match &cfg.serve {
            Some(s) => Some(live::serve::bind(s)?),
            None => None,
        };
        let control = match &cfg.control {
            Some(p) => Some((p.clone(), live::control::bind(p)?)),
            None => None,
        };
        Ok(LiveSetup {
            hub,
            serve,
            control,
        })
    }
}

/// Where a queue's frames go: its files, or nowhere but the live consumers
/// ([`LiveConfig::write_files`] false: `--ring-only`). One per queue, made
/// once: the size difference does not matter; a Box would cost a pointer
/// chase per frame.
#[allow(clippy::large_enum_variant)]
enum Output {
    Files(RotatingWriter),
    Nothing(WriterReport, usize),
}

impl FrameSink for Output {
    #[inline]
    fn write(&mut self, ts_ns: u64, frame: &[u8], wire_len: u32) -> Result<(), Arc<StorageError>> {
        match self {
            Output::Files(w) => w.write(ts_ns, frame, wire_len),
            Output::Nothing(r, snaplen) => {
                r.frames += 1;
                r.bytes += frame.len().min(*snaplen) as u64;
                r.truncated += u64::from(frame.len() > *snaplen);
                Ok(())
            }
        }
    }
    fn write_external(
        &mut self,
        ext: wiretape_storage::external::External,
        frames: u64,
        first_ns: u64,
    ) -> Result<(), Arc<StorageError>> {
        match self {
            Output::Files(w) => w.write_external(ext, frames, first_ns),
            // Counted frame by frame, as copied frames are.
            Output::Nothing(..) => crate::stage::write_each(self, &ext),
        }
    }
    fn idle(&mut self) {
        if let Output::Files(w) = self {
            w.idle()
        }
    }
    fn runs_waiting(&self) -> bool {
        matches!(self, Output::Files(w) if w.runs_waiting())
    }
    fn kick(&mut self) {
        if let Output::Files(w) = self {
            w.kick()
        }
    }
    fn close(self) -> WriterReport {
        match self {
            Output::Files(w) => w.close(),
            Output::Nothing(r, _) => r,
        }
    }
}

/// Checks every interface of a multi-interface run before any is attached
/// (it exists, has the queues, has no XDP program, is named once), and
/// spreads `--cpus`/`--writer-cpus` over all their queues in order: each
/// interface's lists start where the previous interface's queues ended.
/// `v` turned left by `by` (mod its length): the CPU list of the queues
/// that follow `by` queues of earlier interfaces in a run.
fn rotated(v: &[usize], by: usize) -> Vec<usize> {
    let mut v = v.to_vec();
    if !v.is_empty() {
        let k = by % v.len();
        v.rotate_left(k);
    }
    v
}

fn check_interfaces(list: Vec<CaptureConfig>) -> Result<Vec<CaptureConfig>, PipelineError> {
    if list.is_empty() {
        return Err(CaptureError::Config("no interface to record".into()).into());
    }
    for (i, c) in list.iter().enumerate() {
        if list[..i].iter().any(|o| o.ifname == c.ifname) {
            return Err(PipelineError::InterfaceTwice(c.ifname.clone()));
        }
    }
    let cpus = list[0].cpus.clone().unwrap_or_else(sys::allowed_cpus);
    let writer_cpus = list[0].writer_cpus.clone();
    let mut offset = 0;
    let mut out = Vec::new();
    for mut c in list {
        let (_, queues) = AfXdp::check(&c)?;
        c.cpus = Some(rotated(&cpus, offset));
        c.writer_cpus = writer_cpus.as_deref().map(|w| rotated(w, offset));
        offset += queues.len();
        out.push(c);
    }
    Ok(out)
}

/// An interface of the run that is gone (removed, or renamed, since the
/// start): a failure that stops the whole run.
fn interface_gone(info: &StartInfo, ifs: Option<&sys::IfIndexes>) -> Option<String> {
    if info.source.is_some() {
        return None;
    }
    let list = if info.interfaces.is_empty() {
        std::slice::from_ref(info)
    } else {
        &info.interfaces[..]
    };
    list.iter()
        .find(|i| {
            let now = match ifs {
                Some(q) => q.index(&i.ifname),
                None => sys::ifindex(&i.ifname),
            };
            i.ifindex != 0 && now != Some(i.ifindex)
        })
        .map(|i| {
            format!(
                "interface {} (ifindex {}) disappeared during the recording",
                i.ifname, i.ifindex
            )
        })
}

fn first_stamp(path: &std::path::Path, opts: &wiretape_files::ReadOptions) -> Option<u64> {
    FileSource::open_with(path, opts)
        .ok()?
        .next()
        .map(|h| h.ts_ns)
}

/// How one engine's run ended.
enum End {
    /// Stopped, for this reason (the run is over).
    Stop(&'static str),
    /// The interface went away (the text says how).
    Gone(String),
}

/// What the runs of one recording share (one run per engine: more than
/// one when the interface went away and came back).
struct Segment<'a> {
    cfg: &'a RecordConfig,
    store: &'a Store,
    stop: &'a AtomicBool,
    t0: Instant,
    deadline: Option<Instant>,
    /// What the earlier runs counted, per queue (added to live snapshots).
    base: Vec<crate::report::QueueSnapshot>,
    /// The stage settings of this run (the count left).
    stage: StageConfig,
}

impl Segment<'_> {
    fn run<E: Engine + InputError>(
        &self,
        engine: E,
        start_ns: u64,
        live: Option<LiveSetup>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(RecordReport, End), PipelineError> {
        let (cfg, store) = (self.cfg, self.store);
        // Each queue's file name: its interface and its own queue number.
        let names: Vec<(u32, String, u32)> = engine
            .info()
            .queues
            .iter()
            .map(|&q| {
                let (name, own) = engine.file_queue(q);
                (q, name, own)
            })
            .collect();
        let name_of = |q: u32| {
            names
                .iter()
                .find(|(g, _, _)| *g == q)
                .map(|(_, n, own)| (n.clone(), *own))
                .expect("a queue the engine listed")
        };
        let ifname = engine.info().ifname.clone();
        let files = cfg.live.write_files;
        let snaplen = cfg.storage.snaplen;
        let run = Running::start_live(
            engine,
            &self.stage,
            |q| {
                if files {
                    let (name, own) = name_of(q);
                    store.writer(&name, own, start_ns).map(Output::Files)
                } else {
                    let r = WriterReport {
                        engine: "none",
                        ..Default::default()
                    };
                    Ok(Output::Nothing(r, snaplen as usize))
                }
            },
            live.as_ref().map(|l| (&l.hub, snaplen)),
        )?;
        let mut live = match live {
            Some(l) => Some(LiveRun::start(l, cfg, &ifname, store.config().linktype)?),
            None => None,
        };
        on_event(Event::Started(run.info()));
        let t0 = self.t0;
        let el0 = t0.elapsed();
        let mut next_progress = Duration::from_secs(el0.as_secs() + 1);
        let mut next_retention = el0 + Duration::from_millis(250);
        let mut next_link = el0 + Duration::from_millis(100);
        let mut link_warning: Option<String> = None;
        let retention = store.retention().clone();
        let say_deleted = |on_event: &mut dyn FnMut(Event<'_>)| {
            for l in retention.take_log() {
                on_event(Event::Notice(l));
            }
        };
        let progress = |run: &Running<E>, link: &Option<String>| {
            let mut snapshot = run.snapshot();
            let storage = store.progress();
            // The writers' drops (this run's writers: earlier runs' are in
            // the base).
            for q in &mut snapshot.queues {
                let (name, own) = name_of(q.queue);
                if let Some(w) = storage
                    .queues
                    .iter()
                    .find(|w| w.ifname == name && w.queue == own)
                {
                    q.drops.write_error = w.lost;
                    q.drops.disk_full = w.disk_full;
                }
            }
            for b in &self.base {
                if let Some(q) = snapshot.queues.iter_mut().find(|q| q.queue == b.queue) {
                    // The store sums every writer of the queue, earlier
                    // runs' too: take those out before adding the base.
                    q.drops.write_error = q.drops.write_error.saturating_sub(b.drops.write_error);
                    q.drops.disk_full = q.drops.disk_full.saturating_sub(b.drops.disk_full);
                }
            }
            snapshot.add_base(&self.base);
            snapshot.link = link.clone();
            (t0.elapsed(), snapshot, storage)
        };
        // One socket for the lookups of the whole run (see IfIndexes).
        let ifs = sys::IfIndexes::new().ok();
        let end = loop {
            std::thread::sleep(Duration::from_millis(20));
            if self.stop.load(Ordering::Relaxed) {
                break End::Stop("signal");
            }
            match run.should_stop() {
                Some(StopReason::CountReached) => break End::Stop("count reached"),
                Some(StopReason::SinkFailed) => break End::Stop("output failed"),
                Some(StopReason::InputEnded) => break End::Stop("end of input"),
                Some(StopReason::ThreadDied) => {
                    break End::Stop("internal error: a capture thread died")
                }
                None => {}
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                break End::Stop("duration reached");
            }
            let el = t0.elapsed();
            if cfg.controls.rotate.swap(false, Ordering::AcqRel) {
                store.rotate_all();
                on_event(Event::Notice(
                    "rotating: every queue starts a new file at its next frame; the old files are finished"
                        .into(),
                ));
            }
            if el >= next_link {
                next_link = el + Duration::from_millis(100);
                // Whether each interface still has its index, its link
                // events and its sockets' error state.
                if let Some(g) = interface_gone(run.info(), ifs.as_ref()) {
                    break End::Gone(g);
                }
                match run.link_status() {
                    LinkStatus::Gone(why) => break End::Gone(why),
                    LinkStatus::Down(w) => {
                        if link_warning.as_ref() != Some(&w) {
                            on_event(Event::Notice(format!(
                                "warning: {w}: no frames can arrive until it is up"
                            )));
                            link_warning = Some(w);
                        }
                    }
                    LinkStatus::Up => {
                        if let Some(w) = link_warning.take() {
                            on_event(Event::Notice(format!("link up again (was: {w})")));
                        }
                    }
                }
            }
            if el >= next_retention {
                next_retention += Duration::from_millis(250);
                retention.enforce();
                say_deleted(on_event);
            }
            if let Some(l) = &mut live {
                l.tick(&run, el, store, on_event);
            }
            let asked = cfg.controls.status.load(Ordering::Acquire);
            if el >= next_progress || asked {
                if el >= next_progress {
                    next_progress += Duration::from_secs(1);
                }
                let (elapsed, snapshot, storage) = progress(&run, &link_warning);
                on_event(Event::Progress {
                    elapsed,
                    snapshot,
                    storage,
                });
            }
        };
        let info = run.info().clone();
        if let Some(l) = &live {
            l.hub.stopping.store(true, Ordering::Relaxed);
        }
        let (engine, mut queues, duration) = run.stop();
        // Reports carry each queue's own number on its interface.
        for r in &mut queues {
            r.queue = name_of(r.queue).1;
        }
        let live = live.map(|l| l.finish(on_event)).unwrap_or_default();
        // The files just closed count too.
        retention.enforce();
        say_deleted(on_event);
        Ok((
            RecordReport {
                info,
                queues,
                duration,
                input_error: engine.input_error(),
                gaps: Vec::new(),
                live,
            },
            end,
        ))
    }

    /// Waits until the interface is back and an engine opens on it again;
    /// Err(why the run stops) on a signal or at the end of `-d`.
    fn wait_for_interface(
        &self,
        c: &CaptureConfig,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<AfXdp, &'static str> {
        let mut said = String::new();
        let mut next_progress = Instant::now();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err("signal");
            }
            // The numbers so far, once a second (a progress line, a metrics
            // endpoint and a watchdog keep hearing from the run).
            let asked = self.cfg.controls.status.load(Ordering::Acquire);
            if Instant::now() >= next_progress || asked {
                next_progress = Instant::now() + Duration::from_secs(1);
                let mut snapshot = Snapshot::default();
                snapshot.add_base(&self.base);
                snapshot.link = Some(format!(
                    "interface {} is gone: waiting for it ({})",
                    c.ifname, self.cfg.wait_iface_name
                ));
                on_event(Event::Progress {
                    elapsed: self.t0.elapsed(),
                    snapshot,
                    storage: self.store.progress(),
                });
            }
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return Err("duration reached");
            }
            if sys::ifindex(&c.ifname).is_some() {
                match AfXdp::open(c, self.cfg.ts) {
                    Ok(e) => return Ok(e),
                    Err(e) => {
                        let e = e.to_string();
                        if e != said {
                            on_event(Event::Notice(format!(
                                "interface {} is back but cannot be recorded yet ({e}): trying again",
                                c.ifname
                            )));
                            said = e;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The live side while the run goes: the servers, triggers, status.
struct LiveRun {
    hub: Arc<Hub>,
    server: Option<live::serve::Server>,
    control: Option<live::control::ControlServer>,
    control_path: Option<std::path::PathBuf>,
    status: Option<std::sync::mpsc::Receiver<live::control::StatusRequest>>,
}

impl LiveRun {
    fn start(
        l: LiveSetup,
        cfg: &RecordConfig,
        ifname: &str,
        linktype: u32,
    ) -> Result<LiveRun, PipelineError> {
        let hub = l.hub;
        hub.set_target(live::DumpTarget {
            dirs: cfg.storage.dirs(),
            prefix: cfg.storage.prefix.clone(),
            ifname: ifname.to_owned(),
            format: cfg.storage.format,
            snaplen: cfg.storage.snaplen,
            linktype,
        });
        let thread_err = |e| PipelineError::Capture(wiretape_capture::CaptureError::Thread(e));
        let server = match (l.serve, &cfg.live.serve) {
            (Some(listener), Some(sc)) => {
                let h = hub.clone();
                Some(
                    live::serve::Server::start(&hub, listener, sc.clone(), move |m| h.notice(m))
                        .map_err(thread_err)?,
                )
            }
            _ => None,
        };
        let (mut control, mut control_path, mut status) = (None, None, None);
        if let Some((path, listener)) = l.control {
            let (tx, rx) = std::sync::mpsc::channel();
            control = Some(
                live::control::ControlServer::start(path.clone(), listener, hub.clone(), tx)
                    .map_err(thread_err)?,
            );
            control_path = Some(path);
            status = Some(rx);
        }
        Ok(LiveRun {
            hub,
            server,
            control,
            control_path,
            status,
        })
    }

    /// Every 20 ms: a trigger, status requests, notices.
    fn tick<E: Engine>(
        &mut self,
        run: &Running<E>,
        elapsed: Duration,
        store: &Store,
        on_event: &mut dyn FnMut(Event<'_>),
    ) {
        if let Some(t) = &self.hub.cfg.trigger {
            if t.swap(false, Ordering::AcqRel) {
                let req = live::DumpRequest {
                    trigger: "SIGUSR1".into(),
                    ..match self.hub.cfg.trigger_window {
                        Some(w) => live::DumpRequest::last(w),
                        None => live::DumpRequest::default(),
                    }
                };
                match self.hub.dump(req) {
                    Ok(_) => on_event(Event::Notice("SIGUSR1: dumping the ring".into())),
                    Err(e) => on_event(Event::Notice(format!("SIGUSR1: no dump: {e}"))),
                }
            }
        }
        if let Some(rx) = &self.status {
            while let Ok(reply) = rx.try_recv() {
                let serve = self.server.as_ref().map(|s| s.live());
                let _ = reply.send(live::status_json(
                    &self.hub,
                    &run.info().ifname,
                    elapsed,
                    &run.snapshot(),
                    &store.progress(),
                    serve,
                ));
            }
        }
        for n in self.hub.take_notices() {
            on_event(Event::Notice(n));
        }
    }

    /// After the writers stopped: subscribers get their end, clients what
    /// they are owed, dumps are finished.
    fn finish(self, on_event: &mut dyn FnMut(Event<'_>)) -> LiveReport {
        self.hub.finish();
        let serve = self.server.map(|s| s.finish());
        drop(self.control);
        let dumps = self.hub.wait_dumps();
        for n in self.hub.take_notices() {
            on_event(Event::Notice(n));
        }
        LiveReport {
            subscribers: self.hub.subscriber_reports(),
            ring: self.hub.ring_report(),
            serve,
            dumps,
            control: self.control_path,
        }
    }
}

/// An engine's last word on its input, and how its queues' files are named.
trait InputError: Engine {
    fn input_error(&self) -> Option<String>;
    /// The interface name and queue number that name queue `queue`'s files.
    fn file_queue(&self, queue: u32) -> (String, u32) {
        (self.info().ifname.clone(), queue)
    }
}

impl InputError for MultiEngine<AfXdp> {
    fn input_error(&self) -> Option<String> {
        None
    }
    fn file_queue(&self, queue: u32) -> (String, u32) {
        let (e, own) = self.locate(queue).expect("a queue of the run");
        (e.info().ifname.clone(), own)
    }
}

impl InputError for MultiEngine<Packet> {
    fn input_error(&self) -> Option<String> {
        None
    }
    fn file_queue(&self, queue: u32) -> (String, u32) {
        let (e, own) = self.locate(queue).expect("a queue of the run");
        (e.info().ifname.clone(), own)
    }
}

impl InputError for Packet {
    fn input_error(&self) -> Option<String> {
        None
    }
}

impl InputError for AfXdp {
    fn input_error(&self) -> Option<String> {
        None
    }
}

impl InputError for FileEngine {
    fn input_error(&self) -> Option<String> {
        self.error()
    }
}

#[cfg(feature = "netmap")]
impl<P: wiretape_capture::netmap::RxSync> InputError for wiretape_capture::netmap::Netmap<P> {
    fn input_error(&self) -> Option<String> {
        self.error()
    }
}
