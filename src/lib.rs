//! wiretape: a lossless packet recorder (XDP + AF_XDP to nanosecond pcap).
//!
//! This facade re-exports the crates that make up the house, arrows only
//! downward:
//!
//! ```text
//! cli ─▶ wiretape (this facade) ─▶ pipeline ─┬─▶ capture ─┬─▶ timestamp
//!                                             │            └─▶ filter
//!                                             ├─▶ filter
//!                                             └─▶ storage
//! testbed (netns, veth, sender): only for the demo, tests and benches
//! ```
//!
//! - [`capture`]: engines behind one seam (AF_XDP, netmap with the cargo
//!   feature `netmap`, a capture file), transmit.
//! - [`storage`]: formats, blocks, io_uring O_DIRECT and buffered engines,
//!   the rotating writer, naming, retention, repair, the `.idx` index, the
//!   query planner and k-way merge of `extract`.
//! - [`pipeline`]: the per-queue stage, [`record`], the accounting.
//! - [`timestamp`]: clocks and stamping modes.
//! - [`filter`]: tcpdump expressions (libpcap), the classic BPF evaluator,
//!   the classic-to-eBPF translation the XDP capture filter runs.
//!
//! Record one interface (needs root or CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW,
//! CAP_IPC_LOCK):
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! let mut cfg = wiretape::RecordConfig::interface("eth0", "/data");
//! cfg.stage.count = Some(1000);
//! let report = wiretape::record(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
//! assert!(report.identity_holds());
//! ```
//!
//! Feed a capture file through the same pipeline (no privileges):
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! let cfg = wiretape::RecordConfig::file("trace.pcap", "/tmp/out");
//! let report = wiretape::record(&cfg, &AtomicBool::new(false), |_| {}).unwrap();
//! println!("{} frames written", report.written());
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub use wiretape_capture as capture;
pub use wiretape_filter as filter;
pub use wiretape_pipeline as pipeline;
pub use wiretape_storage as storage;
pub use wiretape_timestamp as timestamp;

pub use pipeline::{
    record, Controls, Drops, Event, Gap, Input, PipelineError, QueueReport, RecordConfig,
    RecordReport, ReplaySource, Snapshot, StageConfig, StopReason,
};
pub use storage::{MinFree, Policy, StorageConfig, StorageProgress, DEFAULT_SNAPLEN};

/// The final accounting of a recording (the name the CLI and earlier
/// versions use).
pub type CaptureReport = RecordReport;
