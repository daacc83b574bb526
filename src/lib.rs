//! wiretape: a lossless packet recorder (XDP + AF_XDP to nanosecond pcap).
//!
//! This facade re-exports the crates that make up the house, arrows only
//! downward:
//!
//! ```text
//! cli ─▶ wiretape (this facade) ─┬─▶ query ─┬─▶ storage ─┬─▶ timestamp   (the give-back side)
//!                                │          └─▶ filter   └─▶ filter
//!                                └─▶ pipeline ─┬─▶ capture ─┬─▶ timestamp
//!                                              │            └─▶ filter
//!                                              ├─▶ filter
//!                                              └─▶ storage
//! testbed (netns, veth, sender): only for the demo, tests and benches
//! ```
//!
//! - [`capture`]: engines behind one seam (AF_XDP, TPACKET_V3, netmap with the cargo
//!   feature `netmap`, a capture file), transmit.
//! - [`storage`]: formats, blocks, io_uring O_DIRECT and buffered engines,
//!   the rotating writer, naming, retention, repair, the `.idx` index, the
//!   readers.
//! - [`query`]: the give-back side (no capture engine, no privileges): the
//!   extraction planner and k-way merge, the index rebuild and the fleet's
//!   Parquet table, the HTTPS sensor API and its client.
//! - [`pipeline`]: the per-queue stage, [`record()`], the accounting.
//! - [`sessions`]: the session table (one row per connection, with the
//!   names its first frames carried) that `record` writes beside each file.
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
//!
//! # Live consumers
//!
//! A [`Recording`] is a recording other tools hold: started with the same
//! [`RecordConfig`], with or without files, it hands out [`Subscriber`]s
//! that get every frame as [`Batch`]es (per queue, in order) read in place
//! from the chunks the writers fill (see [`pipeline::live`]). This one runs
//! for real on a small capture file (the file engine: no privileges):
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::env::temp_dir().join(format!("wt-doc-live-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let trace = dir.join("trace.pcap");
//! # let mut w = wiretape::storage::PcapWriter::new(wiretape::storage::FileSink::create(&trace)?, 65535);
//! # for i in 0..1000u64 { w.write(1_700_000_000_000_000_000 + i * 1000, &[i as u8; 100])?; }
//! # w.close().map_err(|(_, e)| e)?;
//! use wiretape::{RecordConfig, Recording, SubscribeOptions};
//! let mut cfg = RecordConfig::file(&trace, dir.join("out"));
//! cfg.live.write_files = false; // the subscribers only: nothing on disk
//! let mut rec = Recording::new(cfg);
//! // Lossless: the recorder waits for it (within its buffer).
//! let all = rec.subscribe(SubscribeOptions::lossless());
//! // Lossy: never slows anything; skips whole chunks when behind.
//! let sampler = rec.subscribe(SubscribeOptions::lossy().name("sampler"));
//! rec.start()?;
//! let bytes: u64 = all
//!     .flat_map(|batch| batch.frames().map(|f| f.data.len() as u64).collect::<Vec<_>>())
//!     .sum();
//! let report = rec.wait()?; // the file ended: the run ends on its own
//! assert_eq!(bytes, 100 * 1000);
//! assert_eq!(report.written(), 1000);
//! let s = sampler.report();
//! assert_eq!(s.delivered + s.skipped, 1000); // every frame accounted for
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(()) }
//! ```
//!
//! [`Merger`] puts batches of several queues in time order; `examples/top_talkers.rs`
//! is a live top-talkers table in well under 100 lines. With
//! `cfg.live.ring_bytes` the run keeps a time-travel ring, and
//! [`Recording::dump`] writes a window of it (merged, exact at the edges,
//! filtered) into a capture file: the same as `wiretape ctl dump`.

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub use wiretape_capture as capture;
pub use wiretape_files as files;
pub use wiretape_filter as filter;
pub use wiretape_pipeline as pipeline;
/// Live consumers: subscribers, [`live::Policy`], the ring, PCAP-over-IP
/// (the pipeline's `live` module).
pub use wiretape_pipeline::live;
pub use wiretape_query as query;
pub use wiretape_sessions as sessions;
pub use wiretape_storage as storage;
pub use wiretape_timestamp as timestamp;

pub use pipeline::{
    choose_engine, record, record_live, AutoHints, Batch, Controls, Drops, DumpReport, DumpRequest,
    EngineChoice, Event, Frame, Gap, Input, LiveConfig, LiveError, LiveReport, Merger,
    PipelineError, QueueReport, RecordConfig, RecordOptions, RecordReport, Recording, ReplaySource,
    RunSummary, ServeConfig, Snapshot, StageConfig, StopReason, SubscribeOptions, Subscriber,
    SubscriberReport,
};
pub use storage::{MinFree, Policy, StorageConfig, StorageProgress, DEFAULT_SNAPLEN};

/// The final accounting of a recording (the name the CLI and earlier
/// versions use).
pub type CaptureReport = RecordReport;
