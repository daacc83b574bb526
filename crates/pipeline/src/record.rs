//! [`record`]: a whole recording, from an engine through the stage into a
//! store of files, with progress events and exact accounting at the end.

use crate::replay::FileSource;
use crate::report::{RecordReport, Snapshot};
use crate::stage::{Running, StageConfig, StopReason};
use crate::PipelineError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wiretape_capture::{
    AfXdp, CaptureConfig, CaptureError, CaptureFilter, Engine, FileConfig, FileEngine,
    NetmapConfig, RecordSource, StartInfo,
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
        }
    }

    /// The interface (or, for a file, the name its files carry).
    pub fn ifname(&self) -> String {
        match &self.input {
            Input::Interface(c) => c.ifname.clone(),
            Input::File(f) => f.name(),
            Input::Netmap(c) => c.ifname.clone(),
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
    match &input {
        Input::Interface(c) => {
            let engine = AfXdp::open(c, cfg.ts)?;
            run(engine, realtime_ns(), cfg, &store, stop, &mut on_event)
        }
        Input::File(f) => {
            let source = FileSource::open(&f.path)?;
            // The first file is named by the first frame's time, as rotated
            // files are, so that names sort by time.
            let start = first_stamp(&f.path).unwrap_or_else(realtime_ns);
            let engine = FileEngine::open(f, source, cfg.ts)?;
            run(engine, start, cfg, &store, stop, &mut on_event)
        }
        #[cfg(feature = "netmap")]
        Input::Netmap(c) => {
            let engine = wiretape_capture::netmap::Netmap::open(c, cfg.ts)?;
            run(engine, realtime_ns(), cfg, &store, stop, &mut on_event)
        }
        #[cfg(not(feature = "netmap"))]
        Input::Netmap(_) => Err(CaptureError::NetmapNotBuilt.into()),
    }
}

fn first_stamp(path: &std::path::Path) -> Option<u64> {
    FileSource::open(path).ok()?.next().map(|h| h.ts_ns)
}

fn run<E: Engine + InputError>(
    engine: E,
    start_ns: u64,
    cfg: &RecordConfig,
    store: &Store,
    stop: &AtomicBool,
    on_event: &mut dyn FnMut(Event<'_>),
) -> Result<RecordReport, PipelineError> {
    let ifname = engine.info().ifname.clone();
    let run = Running::start(engine, &cfg.stage, |q| store.writer(&ifname, q, start_ns))?;
    on_event(Event::Started(run.info()));
    let t0 = Instant::now();
    let mut next_progress = Duration::from_secs(1);
    let mut next_retention = Duration::from_millis(250);
    let retention = store.retention().clone();
    let say_deleted = |on_event: &mut dyn FnMut(Event<'_>)| {
        for l in retention.take_log() {
            on_event(Event::Notice(l));
        }
    };
    let why = loop {
        std::thread::sleep(Duration::from_millis(20));
        if stop.load(Ordering::Relaxed) {
            break "signal";
        }
        match run.should_stop() {
            Some(StopReason::CountReached) => break "count reached",
            Some(StopReason::SinkFailed) => break "output failed",
            Some(StopReason::InputEnded) => break "end of input",
            Some(StopReason::ThreadDied) => break "internal error: a capture thread died",
            None => {}
        }
        let el = t0.elapsed();
        if cfg.duration.is_some_and(|d| el >= d) {
            break "duration reached";
        }
        if el >= next_retention {
            next_retention += Duration::from_millis(250);
            retention.enforce();
            say_deleted(on_event);
        }
        if el >= next_progress {
            next_progress += Duration::from_secs(1);
            on_event(Event::Progress {
                elapsed: el,
                snapshot: run.snapshot(),
                storage: store.progress(),
            });
        }
    };
    on_event(Event::Stopping(why));
    let info = run.info().clone();
    let (engine, queues, duration) = run.stop();
    // The files just closed count too.
    retention.enforce();
    say_deleted(on_event);
    let (deleted_files, deleted_bytes) = retention.deleted();
    on_event(Event::Finished(StorageProgress {
        deleted_files,
        deleted_bytes,
        ..Default::default()
    }));
    Ok(RecordReport {
        info,
        queues,
        duration,
        input_error: engine.input_error(),
    })
}

/// An engine's last word on its input.
trait InputError {
    fn input_error(&self) -> Option<String>;
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
