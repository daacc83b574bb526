//! The embedded demonstration as a library run (`wiretape demo`): a veth pair
//! in a private network namespace, a known set of frames sent through it,
//! recorded by the real engine (XDP + AF_XDP), read back and checked byte
//! for byte; then everything is removed.
//!
//! [`run`] reports what happens on the way as [`DemoEvent`]s and returns a
//! [`DemoReport`] (serde): what was sent, what each file holds, the first
//! records, every [`Mismatch`] found, and the recorder's own
//! [`RunSummary`]. Printing is the caller's.
//!
//! ```no_run
//! use wiretape_testbed::demo::{self, DemoEvent, DemoOptions};
//! let mut opts = DemoOptions::default();
//! opts.count = 500;
//! let report = demo::run(&opts, |ev| {
//!     if let DemoEvent::Created { netns } = ev {
//!         println!("namespace {netns}");
//!     }
//! })?;
//! assert!(report.ok(), "{:?}", report.mismatches);
//! # Ok::<(), demo::DemoError>(())
//! ```

use crate::{frames, sys, SizeFn, Testbed, CAP_IF};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use wiretape_capture::{CaptureConfig, XdpMode};
use wiretape_files::{PcapReader, Record, StorageError};
use wiretape_pipeline::preflight::{check_basic_rights, PreflightError};
use wiretape_pipeline::{Event, Input, PipelineError, RecordConfig, RunSummary};
use wiretape_timestamp::{format_rfc3339, realtime_ns};

/// What a demonstration sends and where it keeps the files.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DemoOptions {
    /// Frames to send (sizes 60..1514, spread over 8 flows and the queues).
    pub count: u64,
    /// RX queues of the veth pair.
    pub queues: u32,
    /// Frames per second the sender offers.
    pub rate: u64,
    /// Where the XDP program runs (`None`: native, else generic).
    pub xdp_mode: Option<XdpMode>,
    /// Keep the capture files here; `None`: a temporary directory, removed
    /// at the end.
    pub dir: Option<PathBuf>,
}

impl Default for DemoOptions {
    /// 2,000 frames over 2 queues at 50,000 frames/s, files in a temporary
    /// directory.
    fn default() -> Self {
        DemoOptions {
            count: 2000,
            queues: 2,
            rate: 50_000,
            xdp_mode: None,
            dir: None,
        }
    }
}

/// What happens during [`run`], in order.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoEvent<'a> {
    /// The namespace and its veth pair exist; the recorder starts next.
    Created {
        /// The namespace's name.
        netns: &'a str,
    },
    /// The recorder's own event (started, progress, notices, stopping);
    /// the sender starts at [`Event::Started`].
    Record {
        /// The event.
        event: &'a Event<'a>,
        /// The recording's settings (for [`wiretape_pipeline::StartLine`]).
        config: &'a RecordConfig,
    },
}

/// One capture file of the run.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct DemoFile {
    /// The file.
    pub path: PathBuf,
    /// The RX queue it recorded.
    pub queue: u32,
    /// Records in it.
    pub frames: u64,
}

/// One of the first records (by time) read back.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[non_exhaustive]
pub struct DemoRecord {
    /// Its timestamp, ns since the Unix epoch (UTC).
    pub ts_ns: u64,
    /// The queue that recorded it.
    pub queue: u32,
    /// The sequence number the sender gave the frame.
    pub seq: u64,
    /// Its length in bytes.
    pub len: usize,
}

/// Something the read-back found wrong.
#[derive(Clone, Debug, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mismatch {
    /// A record stamped earlier than the one before it in the same file.
    #[error("{}: timestamps go backwards at record {record}", file.display())]
    Backwards {
        /// The file.
        file: PathBuf,
        /// The record's number in it, from 1.
        record: u64,
    },
    /// A record stamped before the run started or after it ended.
    #[error("{}: record {record} stamped {} outside the run", file.display(), format_rfc3339(*ts_ns))]
    OutsideRun {
        /// The file.
        file: PathBuf,
        /// The record's number in it, from 1.
        record: u64,
        /// Its stamp.
        ts_ns: u64,
    },
    /// A record that is not byte for byte a frame the demo sent.
    #[error("{}: record {record} is not a frame the demo sent", file.display())]
    Foreign {
        /// The file.
        file: PathBuf,
        /// The record's number in it, from 1.
        record: u64,
    },
    /// A frame recorded twice.
    #[error("frame {seq} recorded twice")]
    Twice {
        /// Its sequence number.
        seq: u64,
    },
    /// Sent frames that are in no file.
    #[error("{count} sent frames are not in the files")]
    Missing {
        /// How many.
        count: u64,
    },
    /// The recorder's accounting (`seen = written + filtered + drops`) does
    /// not hold.
    #[error("accounting identity does not hold")]
    Identity,
}

/// The outcome of [`run`].
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct DemoReport {
    /// The namespace the run used (removed by now).
    pub netns: String,
    /// Frames the sender sent.
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Records read back from the files.
    pub recorded: u64,
    /// The files, by name.
    pub files: Vec<DemoFile>,
    /// The first five records read that were frames the demo sent, by time.
    pub first_records: Vec<DemoRecord>,
    /// What the read-back found wrong (at most 10).
    pub mismatches: Vec<Mismatch>,
    /// Where the files are (or were).
    pub dir: PathBuf,
    /// Whether they are kept ([`DemoOptions::dir`]) or were removed.
    pub kept: bool,
    /// The recorder's summary (what `record --summary-json` writes).
    pub summary: RunSummary,
}

impl DemoReport {
    /// Every frame sent was recorded once, byte-identical, in order, inside
    /// the run, and the accounting holds.
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty() && self.recorded == self.sent
    }
}

/// Why a demonstration could not run (a failed check is a [`DemoReport`]
/// whose [`DemoReport::ok`] is false, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// Not root, or capabilities missing.
    #[error("the demo creates a network namespace and attaches XDP")]
    Rights(#[source] PreflightError),
    /// The namespace, its veth pair or entering it failed.
    #[error(transparent)]
    Testbed(std::io::Error),
    /// The recorder failed.
    #[error(transparent)]
    Record(#[from] PipelineError),
    /// The sender failed.
    #[error(transparent)]
    Send(std::io::Error),
    /// The sender's thread panicked.
    #[error("sender panicked")]
    SenderPanicked,
    /// The recorder ended before it started capturing.
    #[error("the capture never started")]
    NeverStarted,
    /// A recorded file could not be read back.
    #[error(transparent)]
    Read(#[from] StorageError),
}

/// Runs the demonstration: checks the rights, creates the namespace,
/// records `opts.count` frames sent at `opts.rate` and reads them back.
/// `on_event` sees each step; the files are removed unless `opts.dir`.
pub fn run(
    opts: &DemoOptions,
    mut on_event: impl FnMut(DemoEvent<'_>),
) -> Result<DemoReport, DemoError> {
    check_basic_rights().map_err(DemoError::Rights)?;
    let (dir, temp) = match &opts.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("wiretape-demo-{}", std::process::id())),
            true,
        ),
    };
    let tb = Testbed::create("demo", opts.queues).map_err(DemoError::Testbed)?;
    on_event(DemoEvent::Created { netns: tb.netns() });
    let mut cfg = RecordConfig::interface(CAP_IF, &dir);
    cfg.stage.count = Some(opts.count);
    let mut cap = CaptureConfig::new(CAP_IF);
    cap.xdp_mode = opts.xdp_mode;
    cfg.input = Input::Interface(cap);
    // A bound, in case frames go missing: the demo must always end.
    cfg.duration = Some(Duration::from_secs_f64(
        10.0 + opts.count as f64 / opts.rate.max(1) as f64,
    ));
    let stop = AtomicBool::new(false);
    let t0 = realtime_ns();
    let mut why = String::new();
    let (rep, sent) = {
        let _inside = sys::NetnsGuard::enter(tb.netns()).map_err(DemoError::Testbed)?;
        std::thread::scope(|s| -> Result<_, DemoError> {
            let mut sender = None;
            let rep = wiretape_pipeline::record(&cfg, &stop, |event| {
                match &event {
                    Event::Started(_) => {
                        let tb = &tb;
                        let (n, rate) = (opts.count, opts.rate);
                        sender = Some(s.spawn(move || tb.send(0..n, SizeFn::Mixed, 8, Some(rate))));
                    }
                    Event::Stopping(w) => why = w.to_string(),
                    _ => {}
                }
                on_event(DemoEvent::Record {
                    event: &event,
                    config: &cfg,
                });
            })?;
            let sent = match sender {
                Some(h) => h
                    .join()
                    .map_err(|_| DemoError::SenderPanicked)?
                    .map_err(DemoError::Send)?,
                None => return Err(DemoError::NeverStarted),
            };
            Ok((rep, sent))
        })?
    };
    let t1 = realtime_ns();
    let summary = RunSummary::new(&rep, &cfg, &why, &Default::default(), None);
    let mut check = ReadBack::new(opts.count, t0..=t1);
    for q in &rep.queues {
        for f in &q.sink.files {
            check.file(f, q.queue)?;
        }
    }
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    check.finish(rep.identity_holds());
    Ok(DemoReport {
        netns: tb.netns().to_string(),
        sent: sent.sent,
        sent_bytes: sent.bytes,
        recorded: check.total,
        files: (check.files.into_iter())
            .map(|(path, (queue, frames))| DemoFile {
                path,
                queue,
                frames,
            })
            .collect(),
        first_records: check.first,
        mismatches: check.mismatches,
        dir,
        kept: !temp,
        summary,
    })
}

/// The read-back of the recorded files against what was sent.
struct ReadBack {
    seen: Vec<bool>,
    run: std::ops::RangeInclusive<u64>,
    total: u64,
    files: BTreeMap<PathBuf, (u32, u64)>,
    first: Vec<DemoRecord>,
    mismatches: Vec<Mismatch>,
}

impl ReadBack {
    fn new(count: u64, run: std::ops::RangeInclusive<u64>) -> Self {
        ReadBack {
            seen: vec![false; count as usize],
            run,
            total: 0,
            files: BTreeMap::new(),
            first: Vec::new(),
            mismatches: Vec::new(),
        }
    }

    /// Reads `path` (queue `queue`'s file) and checks each record.
    fn file(&mut self, path: &Path, queue: u32) -> Result<(), StorageError> {
        let mut r = PcapReader::open(path)?;
        let mut rec = Record::default();
        let mut last_ts = 0;
        let mut n = 0u64;
        let file = || path.to_path_buf();
        while r.next_into(&mut rec)? {
            n += 1;
            if rec.ts_ns < last_ts {
                self.mismatches.push(Mismatch::Backwards {
                    file: file(),
                    record: n,
                });
            }
            if !self.run.contains(&rec.ts_ns) {
                self.mismatches.push(Mismatch::OutsideRun {
                    file: file(),
                    record: n,
                    ts_ns: rec.ts_ns,
                });
            }
            last_ts = rec.ts_ns;
            match frames::parse(&rec.data) {
                Some((seq, len, flow))
                    if seq < self.seen.len() as u64
                        && rec.data == frames::build(seq, len, flow) =>
                {
                    if std::mem::replace(&mut self.seen[seq as usize], true) {
                        self.mismatches.push(Mismatch::Twice { seq });
                    }
                    if self.first.len() < 5 {
                        self.first.push(DemoRecord {
                            ts_ns: rec.ts_ns,
                            queue,
                            seq,
                            len,
                        });
                    }
                }
                _ => self.mismatches.push(Mismatch::Foreign {
                    file: file(),
                    record: n,
                }),
            }
        }
        self.total += n;
        self.files.insert(path.to_path_buf(), (queue, n));
        Ok(())
    }

    /// Ends the checks: frames never seen, the recorder's accounting
    /// (`identity_holds`); keeps the first 10 mismatches.
    fn finish(&mut self, identity_holds: bool) {
        let missing = self.seen.iter().filter(|s| !**s).count() as u64;
        if missing > 0 {
            self.mismatches.push(Mismatch::Missing { count: missing });
        }
        if !identity_holds {
            self.mismatches.push(Mismatch::Identity);
        }
        self.mismatches.truncate(10);
        self.first.sort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nanosecond pcap of `recs` (stamp, frame).
    fn pcap(path: &Path, recs: &[(u64, Vec<u8>)]) {
        let mut b = Vec::new();
        for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 262_144, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for (ts, f) in recs {
            let hdr = [
                (ts / 1_000_000_000) as u32,
                (ts % 1_000_000_000) as u32,
                f.len() as u32,
                f.len() as u32,
            ];
            for v in hdr {
                b.extend_from_slice(&v.to_le_bytes());
            }
            b.extend_from_slice(f);
        }
        std::fs::write(path, b).unwrap();
    }

    #[test]
    fn the_read_back_names_each_kind_of_mismatch() {
        let dir = std::env::temp_dir().join(format!("wt-demo-rb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("q0.pcap");
        let s = 1_000_000_000u64;
        let mut foreign = frames::build(1, 100, 0);
        foreign[60] ^= 0xff;
        pcap(
            &f,
            &[
                (10 * s, frames::build(0, 60, 0)),
                (12 * s, frames::build(2, 200, 2)),
                (11 * s, frames::build(2, 200, 2)),
                (13 * s, foreign),
                (99 * s, frames::build(3, 80, 3)),
            ],
        );
        let mut rb = ReadBack::new(4, 10 * s..=20 * s);
        rb.file(&f, 0).unwrap();
        rb.finish(false);
        let texts: Vec<String> = rb.mismatches.iter().map(|m| m.to_string()).collect();
        let p = f.display();
        assert_eq!(
            texts,
            [
                format!("{p}: timestamps go backwards at record 3"),
                "frame 2 recorded twice".to_string(),
                format!("{p}: record 4 is not a frame the demo sent"),
                format!("{p}: record 5 stamped 1970-01-01T00:01:39.000000000Z outside the run"),
                "1 sent frames are not in the files".to_string(),
                "accounting identity does not hold".to_string(),
            ]
        );
        assert_eq!(rb.total, 5);
        assert_eq!(
            rb.files.into_iter().collect::<Vec<_>>(),
            [(f.clone(), (0, 5))]
        );
        assert_eq!(rb.first.len(), 4, "the frames the demo sent");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
