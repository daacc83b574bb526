//! [`Recording`]: a recording as a handle another tool holds: start it
//! with the same [`RecordConfig`] as [`crate::record()`] (with or without
//! files), subscribe to its frames, dump its ring, stop it.

use crate::live::{DumpReport, DumpRequest, Hub, LiveError, SubscribeOptions, Subscriber};
use crate::record::{record_with, Event, RecordConfig};
use crate::report::RecordReport;
use crate::PipelineError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use wiretape_capture::StartInfo;

type EventFn = Box<dyn FnMut(Event<'_>) + Send>;

/// A recording run on its own thread, with live subscribers.
///
/// ```no_run
/// use wiretape_pipeline::{Policy, RecordConfig, Recording};
/// let mut cfg = RecordConfig::interface("eth0", "/data");
/// cfg.live.write_files = false; // only the subscriber gets the frames
/// let mut rec = Recording::new(cfg);
/// let sub = rec.subscribe(Policy::Lossless); // before start: every frame
/// rec.start()?;
/// let counter = std::thread::spawn(move || {
///     let mut frames = 0u64;
///     for batch in sub {
///         frames += batch.len() as u64;
///     }
///     frames
/// });
/// std::thread::sleep(std::time::Duration::from_secs(10));
/// let report = rec.stop()?;
/// assert_eq!(counter.join().unwrap(), report.written());
/// # Ok::<(), wiretape_pipeline::PipelineError>(())
/// ```
pub struct Recording {
    cfg: RecordConfig,
    hub: Arc<Hub>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<RecordReport, PipelineError>>>,
    info: Option<StartInfo>,
    events: Option<EventFn>,
}

impl Recording {
    /// A recording of `cfg`, not started yet (nothing is opened).
    pub fn new(cfg: RecordConfig) -> Recording {
        let hub = Hub::new(cfg.live.clone());
        Recording {
            cfg,
            hub,
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            info: None,
            events: None,
        }
    }

    /// Progress events ([`Event`]), called on the recording's thread.
    pub fn on_event(&mut self, f: impl FnMut(Event<'_>) + Send + 'static) {
        self.events = Some(Box::new(f));
    }

    /// A new subscriber: it gets every frame from now on (before
    /// [`Recording::start`]: every frame of the run).
    pub fn subscribe(&self, opts: impl Into<SubscribeOptions>) -> Subscriber {
        self.hub.subscribe(opts.into())
    }

    /// Opens the input and starts recording; returns once frames flow (or
    /// with the error that stopped it, before anything was attached).
    pub fn start(&mut self) -> Result<&StartInfo, PipelineError> {
        if self.thread.is_some() {
            return Err(LiveError::NotRunning.into());
        }
        let (tx, rx) = mpsc::channel::<StartInfo>();
        let (cfg, hub, stop) = (self.cfg.clone(), self.hub.clone(), self.stop.clone());
        let mut events = self.events.take();
        let h = std::thread::Builder::new()
            .name("wt-record".into())
            .spawn(move || {
                record_with(&cfg, Some(hub), &stop, |ev| {
                    if let Event::Started(i) = &ev {
                        let _ = tx.send((*i).clone());
                    }
                    if let Some(f) = &mut events {
                        f(ev);
                    }
                })
            })
            .map_err(|e| PipelineError::Capture(wiretape_capture::CaptureError::Thread(e)))?;
        match rx.recv() {
            Ok(info) => {
                self.thread = Some(h);
                Ok(self.info.insert(info))
            }
            // It ended before it started: its error.
            Err(_) => match h.join() {
                Ok(Err(e)) => Err(e),
                Ok(Ok(_)) => Err(LiveError::NotRunning.into()),
                Err(_) => Err(wiretape_storage::StorageError::Internal(
                    "the recording thread panicked",
                )
                .into()),
            },
        }
    }

    /// How the engine came up (after [`Recording::start`]).
    pub fn info(&self) -> Option<&StartInfo> {
        self.info.as_ref()
    }

    /// Whether the run ended on its own (`-c COUNT`, end of a file, an
    /// error): [`Recording::stop`] then returns at once.
    pub fn ended(&self) -> bool {
        self.thread.as_ref().is_some_and(|h| h.is_finished())
    }

    /// Writes the frames of a window of the time-travel ring into a capture
    /// file in the output directory (see [`crate::live`]); returns when it
    /// is written.
    pub fn dump(&self, mut req: DumpRequest) -> Result<DumpReport, LiveError> {
        if self.thread.is_none() {
            return Err(LiveError::NotRunning);
        }
        if req.trigger.is_empty() {
            req.trigger = "api".into();
        }
        let rx = self.hub.dump(req)?;
        rx.recv()
            .map_err(|_| LiveError::Dump("the dump thread ended without a report".into()))
    }

    /// Stops (cleanly: every frame taken is written and published) and
    /// returns the accounting.
    pub fn stop(mut self) -> Result<RecordReport, PipelineError> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits until the run ends on its own, then returns the accounting.
    pub fn wait(mut self) -> Result<RecordReport, PipelineError> {
        self.join()
    }

    fn join(&mut self) -> Result<RecordReport, PipelineError> {
        let h = self.thread.take().ok_or(LiveError::NotRunning)?;
        h.join().unwrap_or_else(|_| {
            Err(wiretape_storage::StorageError::Internal("the recording thread panicked").into())
        })
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}
