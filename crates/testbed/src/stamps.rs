//! Timestamp accuracy measured on a real veth pair (`wiretape tsbench
//! --live`): a sender paces frames that carry their send time
//! (CLOCK_REALTIME), a recording stamps them in one [`TsMode`], and the
//! error of each inter-arrival gap is (stamp gap) − (send gap).
//!
//! ```no_run
//! use wiretape_testbed::stamps::{LiveBench, LiveConfig};
//! let bench = LiveBench::create(LiveConfig::default())?;
//! for mode in LiveBench::modes() {
//!     let row = bench.measure(mode)?;
//!     println!("{}: std-dev {:.1} ns over {} frames", row.label(), row.error.std, row.frames);
//! }
//! # Ok::<(), wiretape_testbed::stamps::LiveError>(())
//! ```

use crate::{frames, sys::NetnsGuard, Testbed, CAP_IF};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use wiretape_capture::{sys, CaptureConfig};
use wiretape_files::{PcapReader, Record, StorageError};
use wiretape_pipeline::{preflight, Event, Input, PipelineError, PreflightError, RecordConfig};
use wiretape_timestamp::sim::ErrorStats;
use wiretape_timestamp::TsMode;

/// What a live run offers, per mode.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LiveConfig {
    /// Frames per mode.
    pub frames: u64,
    /// Frame size (at least [`frames::MIN_TIMED_LEN`]).
    pub size: usize,
    /// Frames per second the sender offers.
    pub rate: u64,
    /// The recording's poll sleep: kpt, batch and hybrid stamps depend on
    /// how often the poller looks.
    pub poll_sleep: Duration,
}

impl Default for LiveConfig {
    /// 20,000 frames of 1,000 bytes at 100,000 frames/s, a 1 ms poll sleep.
    fn default() -> Self {
        LiveConfig {
            frames: 20_000,
            size: 1000,
            rate: 100_000,
            poll_sleep: Duration::from_millis(1),
        }
    }
}

/// One mode's outcome.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LiveRow {
    /// The mode recorded in.
    pub mode: TsMode,
    /// `hw` asked, but no frame had a hardware stamp (veth has none): the
    /// recording fell back to the XDP stamp.
    pub hw_fell_back: bool,
    /// The error of the gaps between consecutive frames.
    pub error: ErrorStats,
    /// Frames found in the recording with their send time.
    pub frames: usize,
}

impl LiveRow {
    /// The mode's name, `hw(=xdp)` when `hw` fell back.
    pub fn label(&self) -> String {
        if self.hw_fell_back {
            "hw(=xdp)".to_string()
        } else {
            self.mode.name().to_string()
        }
    }
}

/// Why a live run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// The process lacks the rights to send and record.
    #[error("{0}")]
    Rights(#[from] PreflightError),
    /// The test bed (namespace, veth pair, sender) failed.
    #[error("{0}")]
    Testbed(#[from] std::io::Error),
    /// The recording failed.
    #[error("{0}")]
    Record(#[from] PipelineError),
    /// A file of the recording could not be read.
    #[error("{0}")]
    Read(#[from] StorageError),
    /// The sender thread panicked.
    #[error("sender panicked")]
    SenderPanicked,
}

/// A veth pair in a namespace of its own, ready to measure modes one after
/// another; removed on drop.
pub struct LiveBench {
    tb: Testbed,
    cfg: LiveConfig,
}

impl LiveBench {
    /// Every mode that stamps (`off` has nothing to measure), in the order
    /// the table lists them.
    pub fn modes() -> impl Iterator<Item = TsMode> {
        TsMode::ALL.into_iter().filter(|m| *m != TsMode::Off)
    }

    /// Checks the rights (root, or CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF)
    /// and makes the test bed.
    pub fn create(cfg: LiveConfig) -> Result<LiveBench, LiveError> {
        preflight::check_basic_rights()?;
        let tb = Testbed::create("tsb", 1)?;
        Ok(LiveBench { tb, cfg })
    }

    /// Records `cfg.frames` paced frames in `mode` (capture on the last
    /// allowed CPU, the sender on the first: on a small machine a preempted
    /// sender, whose send time is taken before its syscall, would otherwise
    /// dominate the error) and returns the error of their gaps.
    pub fn measure(&self, mode: TsMode) -> Result<LiveRow, LiveError> {
        let a = &self.cfg;
        let dir = std::env::temp_dir().join(format!(
            "wiretape-tsbench-{}-{}",
            std::process::id(),
            mode.name()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut opts = RecordConfig::interface(CAP_IF, &dir);
        opts.stage.count = Some(a.frames);
        opts.ts = mode;
        opts.stage.idle_sleep = a.poll_sleep.max(Duration::from_micros(1));
        let cpus = sys::allowed_cpus();
        let (send_cpu, cap_cpu) = (cpus.first().copied(), cpus.last().copied());
        let mut cap = CaptureConfig::new(CAP_IF);
        cap.cpus = cap_cpu.map(|c| vec![c]);
        opts.input = Input::Interface(cap);
        opts.duration = Some(Duration::from_secs_f64(
            10.0 + a.frames as f64 / a.rate as f64,
        ));
        let stop = AtomicBool::new(false);
        let tb = &self.tb;
        let rep = {
            let _inside = NetnsGuard::enter(tb.netns())?;
            std::thread::scope(|s| -> Result<_, LiveError> {
                let mut h = None;
                let rep = wiretape_pipeline::record(&opts, &stop, |ev| {
                    if let Event::Started(_) = ev {
                        h = Some(
                            s.spawn(move || tb.send_timed(a.frames, a.size, a.rate, send_cpu)),
                        );
                    }
                })?;
                if let Some(h) = h {
                    h.join().map_err(|_| LiveError::SenderPanicked)??;
                }
                Ok(rep)
            })?
        };
        let mut pts: Vec<(u64, u64, u64)> = Vec::new();
        let mut rec = Record::default();
        for f in rep.queues.iter().flat_map(|q| q.sink.files.iter()) {
            let mut r = PcapReader::open(f)?;
            while r.next_into(&mut rec)? {
                if let Some((seq, sent)) = frames::parse_timed(&rec.data) {
                    pts.push((seq, sent, rec.ts_ns));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        pts.sort();
        let errs: Vec<f64> = pts
            .windows(2)
            .filter(|w| w[1].0 == w[0].0 + 1)
            .map(|w| (w[1].2 as f64 - w[0].2 as f64) - (w[1].1 as f64 - w[0].1 as f64))
            .collect();
        Ok(LiveRow {
            mode,
            hw_fell_back: mode == TsMode::Hw && rep.queues.iter().all(|q| q.stamps.hw == 0),
            error: ErrorStats::of(&errs),
            frames: pts.len(),
        })
    }
}
