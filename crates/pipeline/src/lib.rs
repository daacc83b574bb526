//! wiretape's pipeline: the stage between capture and storage.
//!
//! A frame's path, top to bottom:
//! 1. an engine of `wiretape-capture` ([`wiretape_capture::AfXdp`],
//!    [`wiretape_capture::Packet`] (TPACKET_V3), [`wiretape_capture::FileEngine`],
//!    netmap with the cargo feature `netmap`) hands out its RX queues;
//! 2. per queue, the [`stage`]'s poll thread takes batches and stamps them
//!    (`wiretape-timestamp`), its writer thread copies each frame once into
//!    the blocks of a [`wiretape_storage::RotatingWriter`] and gives the
//!    frames back to the engine, within the `-c COUNT` budget;
//! 3. [`record()`] runs it all (nested [`RecordConfig`]: input, timestamps,
//!    stage, storage), applies retention, reports progress, and at the end
//!    accounts for every frame ([`RecordReport`]: `seen = written +
//!    filtered + cutoff + drops`).
//!
//! A capture filter ([`RecordConfig::filter`], a tcpdump expression) is
//! compiled here with libpcap for the input's link type and handed to the
//! engine: the AF_XDP engine decides it in the XDP program, the file,
//! packet and netmap engines with the classic evaluator; rejected frames are counted in `filtered`.
//! Then the per-connection cutoff (`--cutoff`), counted in `cutoff`: the
//! AF_XDP engine's XDP program applies it in the kernel (`wiretape_cutoff`
//! in bpf/steer.bpf.c), the file engine in user space
//! (`wiretape_capture::cutoff`).
//!
//! [`replay`] holds the capture-file sources (for `replay` and for the file
//! engine). [`live`] holds the live consumers: subscribers (lossless or
//! lossy) reading the writers' chunks in place, the time-travel ring and
//! its dumps, PCAP-over-IP and the control socket; [`Recording`] is the
//! handle other tools embed (start, subscribe, dump, stop). [`service`]
//! tells systemd how a recording goes (READY, WATCHDOG, STOPPING).
#![deny(unsafe_code)]

pub mod engine;
pub mod live;
pub mod metrics;
pub mod options;
pub mod preflight;
pub mod record;
mod recording;
pub mod replay;
pub mod report;
pub mod send;
pub mod service;
pub mod stage;
pub mod status;
pub mod summary;

pub use engine::{choose_engine, AutoHints, Engine, EngineChoice};
pub use live::{
    Batch, DumpReport, DumpRequest, Frame, LiveConfig, LiveError, LiveReport, Merger, Policy,
    ServeConfig, SubscribeOptions, Subscriber, SubscriberReport,
};
pub use options::{OptionsError, RecordOptions};
pub use preflight::{preflight, Preflight, PreflightError};
pub use record::{record, record_live, Controls, Event, Input, RecordConfig};
pub use recording::Recording;
pub use replay::{FileSource, ReplaySource};
pub use report::{Drops, Gap, QueueReport, QueueSnapshot, RecordReport, Snapshot};
pub use stage::{FrameSink, Running, StageConfig, StopReason};
pub use status::{ProgressMeter, StartLine, Status};
pub use summary::RunSummary;

/// Errors of a recording: the capture side's or the storage side's, typed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The engine could not start.
    #[error(transparent)]
    Capture(#[from] wiretape_capture::CaptureError),
    /// The output could not be prepared or opened.
    #[error(transparent)]
    Storage(#[from] wiretape_storage::StorageError),
    /// The capture filter expression is not valid (libpcap's message).
    #[error(transparent)]
    Filter(#[from] wiretape_filter::FilterError),
    /// The live side (ring memory, `--serve`, the control socket).
    #[error(transparent)]
    Live(#[from] live::LiveError),
    /// One interface is in the input's list twice (nothing attached).
    #[error("interface {0} is given twice: give each interface once")]
    InterfaceTwice(String),
}
