//! [`record`]: a whole recording, from an engine through the stage into a
//! store of files, with progress events and exact accounting at the end.

use crate::replay::FileSource;
use crate::report::{Gap, RecordReport, Snapshot};
use crate::stage::{Running, StageConfig, StopReason};
use crate::PipelineError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape_capture::{
    sys, AfXdp, CaptureConfig, CaptureError, CaptureFilter, Engine, FileConfig, FileEngine,
    LinkStatus, MultiEngine, NetmapConfig, RecordSource, StartInfo,
};
use wiretape_storage::{StorageConfig, StorageProgress, Store};
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
    /// When the interface goes away (deleted, unplugged), wait for it to
    /// come back and record on into new files (the gap is in the report's
    /// `gaps`), instead of stopping with an error.
    pub wait_iface: bool,
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
            wait_iface: false,
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
            wait_iface: false,
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
            wait_iface: false,
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
    mut on_event: impl FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    // A bad expression fails before anything is opened or attached.
    let compile = |linktype: u32| -> Result<Option<CaptureFilter>, PipelineError> {
        match &cfg.filter {
            None => Ok(None),
            Some(e) => Ok(Some(CaptureFilter::compile(
                e,
                linktype,
                cfg.storage.snaplen,
            )?)),
        }
    };
    if matches!(cfg.input, Input::Netmap(_)) && !wiretape_capture::netmap::BUILT {
        return Err(CaptureError::NetmapNotBuilt.into());
    }
    let input = match &cfg.input {
        Input::Netmap(c) => {
            let mut c = c.clone();
            if cfg.filter.is_some() {
                c.filter = compile(wiretape_filter::LINKTYPE_ETHERNET)?;
            }
            Input::Netmap(c)
        }
        Input::Interface(c) => {
            let mut c = c.clone();
            if cfg.filter.is_some() {
                c.filter = compile(wiretape_filter::LINKTYPE_ETHERNET)?;
            }
            Input::Interface(c)
        }
        Input::Interfaces(list) => {
            let filter = match cfg.filter {
                Some(_) => compile(wiretape_filter::LINKTYPE_ETHERNET)?,
                None => None,
            };
            let list = list
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    if filter.is_some() {
                        c.filter = filter.clone();
                    }
                    c
                })
                .collect();
            Input::Interfaces(check_interfaces(list)?)
        }
        Input::File(f) => {
            let mut f = f.clone();
            if cfg.filter.is_some() {
                f.filter = compile(FileSource::open(&f.path)?.linktype())?;
            }
            Input::File(f)
        }
    };
    let (store, notices) = Store::open(cfg.storage.clone())?;
    for n in notices {
        on_event(Event::Notice(n));
    }
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
            let (mut total, mut end) = seg.run(engine, realtime_ns(), &mut on_event)?;
            // --wait-iface: the interface went away; wait for it, record on.
            while let (End::Gone(gone), true) = (&end, cfg.wait_iface) {
                let gone = gone.clone();
                let from_ns = realtime_ns();
                on_event(Event::Notice(format!(
                    "{gone}: its files are finished; waiting for it to come back (--wait-iface)"
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
                let (later, e) = seg.run(engine, realtime_ns(), &mut on_event)?;
                total.absorb(later);
                end = e;
            }
            match end {
                End::Stop(why) => (total, why),
                End::Gone(gone) => {
                    total.input_error.get_or_insert(format!(
                        "{gone}: recording stopped (--wait-iface waits for it to come back)"
                    ));
                    (total, "interface gone")
                }
            }
        }
        Input::File(f) => {
            let source = FileSource::open(&f.path)?;
            // The first file is named by the first frame's time, as rotated
            // files are, so that names sort by time.
            let start = first_stamp(&f.path).unwrap_or_else(realtime_ns);
            let engine = FileEngine::open(f, source, cfg.ts)?;
            let (r, end) = seg.run(engine, start, &mut on_event)?;
            ended(r, end)
        }
        Input::Interfaces(list) => {
            // Checked above, all of them; now attached one after the other.
            // Should one fail, those already open are dropped: detached.
            let engines = list
                .iter()
                .map(|c| AfXdp::open(c, cfg.ts))
                .collect::<Result<Vec<_>, _>>()?;
            let (r, end) = seg.run(MultiEngine::new(engines), realtime_ns(), &mut on_event)?;
            ended(r, end)
        }
        #[cfg(feature = "netmap")]
        Input::Netmap(c) => {
            let engine = wiretape_capture::netmap::Netmap::open(c, cfg.ts)?;
            let (r, end) = seg.run(engine, realtime_ns(), &mut on_event)?;
            ended(r, end)
        }
        #[cfg(not(feature = "netmap"))]
        Input::Netmap(_) => return Err(CaptureError::NetmapNotBuilt.into()),
    };
    report.duration = t0.elapsed();
    on_event(Event::Stopping(why));
    // The writers are closed: their gauges hold the final numbers.
    on_event(Event::Finished(store.progress()));
    Ok(report)
}

/// Checks every interface of a multi-interface run before any is attached
/// (it exists, has the queues, has no XDP program, is named once), and
/// spreads `--cpus`/`--writer-cpus` over all their queues in order: each
/// interface's lists start where the previous interface's queues ended.
fn check_interfaces(list: Vec<CaptureConfig>) -> Result<Vec<CaptureConfig>, PipelineError> {
    if list.is_empty() {
        return Err(CaptureError::Config("no interface to record".into()).into());
    }
    for (i, c) in list.iter().enumerate() {
        if list[..i].iter().any(|o| o.ifname == c.ifname) {
            return Err(CaptureError::Config(format!(
                "interface {} is given twice: give each -i once",
                c.ifname
            ))
            .into());
        }
    }
    let cpus = list[0].cpus.clone().unwrap_or_else(sys::allowed_cpus);
    let writer_cpus = list[0].writer_cpus.clone();
    let rotate = |v: &[usize], by: usize| -> Vec<usize> {
        let mut v = v.to_vec();
        if !v.is_empty() {
            let k = by % v.len();
            v.rotate_left(k);
        }
        v
    };
    let mut offset = 0;
    let mut out = Vec::new();
    for mut c in list {
        let (_, queues) = AfXdp::check(&c)?;
        c.cpus = Some(rotate(&cpus, offset));
        c.writer_cpus = writer_cpus.as_deref().map(|w| rotate(w, offset));
        offset += queues.len();
        out.push(c);
    }
    Ok(out)
}

/// An interface of the run that is gone (removed, or renamed, since the
/// start): a failure that stops the whole run.
fn interface_gone(info: &StartInfo) -> Option<String> {
    if info.source.is_some() {
        return None;
    }
    let list = if info.interfaces.is_empty() {
        std::slice::from_ref(info)
    } else {
        &info.interfaces[..]
    };
    list.iter()
        .find(|i| i.ifindex != 0 && sys::ifindex(&i.ifname) != Some(i.ifindex))
        .map(|i| {
            format!(
                "interface {} (ifindex {}) disappeared during the recording",
                i.ifname, i.ifindex
            )
        })
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

fn first_stamp(path: &std::path::Path) -> Option<u64> {
    FileSource::open(path).ok()?.next().map(|h| h.ts_ns)
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
    stage: crate::stage::StageConfig,
}

impl Segment<'_> {
    fn run<E: Engine + InputError>(
        &self,
        engine: E,
        start_ns: u64,
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
        let run = Running::start(engine, &self.stage, |q| {
            let (name, own) = name_of(q);
            store.writer(&name, own, start_ns)
        })?;
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
                // The interfaces' link events and sockets, and (for
                // several) whether each still has its index.
                if let Some(g) = interface_gone(run.info()) {
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
        let (engine, mut queues, duration) = run.stop();
        // Reports carry each queue's own number on its interface.
        for r in &mut queues {
            r.queue = name_of(r.queue).1;
        }
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
                    "interface {} is gone: waiting for it (--wait-iface)",
                    c.ifname
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
