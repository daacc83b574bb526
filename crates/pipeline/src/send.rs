//! Sending: what `wiretape replay` and `wiretape gen` put around capture's
//! transmit loop ([`wiretape_capture::tx::transmit`]): the checks before a
//! socket is opened ([`tx_config`], [`open_replay`]), a progress meter
//! ([`SendMeter`]) and the report as one typed value ([`SendSummary`]: its
//! JSON and its lines).
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use wiretape_capture::tx::{transmit, GenSize, GenSource};
//! use wiretape_pipeline::send::{tx_config, SendMeter, SendSummary};
//! let cfg = tx_config("eth1")?;
//! let mut src = GenSource::new(GenSize::Fixed(64), 1000, 1);
//! let mut meter = SendMeter::new();
//! let r = transmit(&cfg, &mut src, &AtomicBool::new(false), |n, b, t| {
//!     eprintln!("{}", meter.line(n, b, t))
//! })?;
//! println!("{}", SendSummary::gen(&r, 1000).to_json());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::preflight::{check_basic_rights, PreflightError};
use crate::summary::{bytes_h, thousands};
use crate::ReplaySource;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wiretape_capture::tx::{TxConfig, TxReport};
use wiretape_capture::{sys, CaptureError};
use wiretape_files::LINKTYPE_ETHERNET;
use wiretape_storage::StorageError;

/// Why a transmission cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The interface does not exist (in this network namespace).
    #[error(transparent)]
    Interface(CaptureError),
    /// Not root, or capabilities missing.
    #[error(transparent)]
    Rights(#[from] PreflightError),
    /// The capture file cannot be opened or is not a capture.
    #[error(transparent)]
    Open(#[from] StorageError),
    /// The capture's frames are not Ethernet frames.
    #[error("{}: link type {linktype} is not Ethernet (1): only Ethernet captures can be replayed on an interface", path.display())]
    NotEthernet {
        /// The capture file.
        path: PathBuf,
        /// Its link type.
        linktype: u32,
    },
}

/// The defaults of [`TxConfig::new`] for `ifname`, once the interface is
/// found and the rights are there (in that order).
pub fn tx_config(ifname: &str) -> Result<TxConfig, SendError> {
    if sys::ifindex(ifname).is_none() {
        return Err(SendError::Interface(CaptureError::NoSuchInterface(
            ifname.to_string(),
        )));
    }
    check_basic_rights()?;
    Ok(TxConfig::new(ifname))
}

/// Opens `path` to be replayed `loops` times on an interface: it must hold
/// Ethernet frames.
pub fn open_replay(path: &Path, loops: u64) -> Result<ReplaySource, SendError> {
    let src = ReplaySource::open(path, loops)?;
    if src.linktype() != LINKTYPE_ETHERNET {
        return Err(SendError::NotEthernet {
            path: path.to_path_buf(),
            linktype: src.linktype(),
        });
    }
    Ok(src)
}

/// The progress line of a transmission: the rate since the previous line
/// and the totals. One meter per run.
#[derive(Clone, Debug, Default)]
pub struct SendMeter {
    last: (u64, Duration),
}

impl SendMeter {
    /// A meter with no line yet.
    pub fn new() -> SendMeter {
        SendMeter::default()
    }

    /// The line for a progress call of `transmit` (sent, bytes, elapsed).
    pub fn line(&mut self, sent: u64, bytes: u64, elapsed: Duration) -> String {
        let dt = (elapsed - self.last.1).as_secs_f64().max(1e-3);
        let line = format!(
            "[{:7.1}s] {:>10} frames/s | sent {} ({})",
            elapsed.as_secs_f64(),
            thousands(((sent - self.last.0) as f64 / dt) as u64),
            thousands(sent),
            bytes_h(bytes)
        );
        self.last = (sent, elapsed);
        line
    }
}

/// What a transmission did, as `replay --json` and `gen --json` print it
/// (the [`TxReport`] and what the source adds).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct SendSummary {
    /// Frames sent.
    pub sent: u64,
    /// Frames that could not be sent.
    pub failed: u64,
    /// Of `failed`: longer than the largest frame the socket sends.
    pub too_long: u64,
    /// The device dropped these after sending (the peer's queue was full).
    pub device_dropped: u64,
    /// Bytes of the sent frames.
    pub bytes: u64,
    /// Seconds from the first frame to the last completion.
    pub duration_s: f64,
    /// Frames per second.
    pub pps: f64,
    /// Gbit/s of frame bytes.
    pub gbps: f64,
    /// Largest lateness of a paced frame (µs).
    pub max_late_us: f64,
    /// `copy` or `zero-copy`.
    pub mode: &'static str,
    /// What the source adds.
    #[serde(flatten)]
    pub source: SendSource,
}

/// The source's part of a [`SendSummary`].
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum SendSource {
    /// A capture file replayed.
    Replay {
        /// Frames read from the file (all passes).
        frames_read: u64,
        /// Of those, frames the file had cut (sent as recorded).
        cut_in_file: u64,
        /// Passes over the file asked for.
        loops: u64,
    },
    /// Generated frames.
    Gen {
        /// Frames asked for.
        count: u64,
    },
}

impl SendSummary {
    fn new(r: &TxReport, source: SendSource) -> SendSummary {
        SendSummary {
            sent: r.sent,
            failed: r.failed,
            too_long: r.too_long,
            device_dropped: r.device_dropped,
            bytes: r.bytes,
            duration_s: r.duration.as_secs_f64(),
            pps: r.pps(),
            gbps: r.gbps(),
            max_late_us: r.max_late_us,
            mode: r.mode,
            source,
        }
    }

    /// The summary of replaying `src` (`loops` passes asked for).
    pub fn replay(r: &TxReport, src: &ReplaySource, loops: u64) -> SendSummary {
        let source = SendSource::Replay {
            frames_read: src.frames,
            cut_in_file: src.cut,
            loops,
        };
        SendSummary::new(r, source)
    }

    /// The summary of generating `count` frames.
    pub fn gen(r: &TxReport, count: u64) -> SendSummary {
        SendSummary::new(r, SendSource::Gen { count })
    }

    /// One line of JSON, keys in alphabetical order.
    pub fn to_json(&self) -> String {
        // Through a `Value`: its map orders the keys.
        serde_json::to_value(self)
            .map(|v| v.to_string())
            .unwrap_or_default()
    }

    /// The report in words: totals and rates; the pacing's worst lateness
    /// if frames were paced; frames the capture file had cut.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "sent {} frames ({}) in {:.3} s: {} frames/s, {:.3} Gbit/s; failed {}{}{}; AF_XDP {} mode",
            thousands(self.sent),
            bytes_h(self.bytes),
            self.duration_s,
            thousands(self.pps as u64),
            self.gbps,
            thousands(self.failed),
            if self.too_long > 0 {
                format!(" ({} longer than the largest frame the socket sends)", self.too_long)
            } else {
                String::new()
            },
            if self.device_dropped > 0 {
                format!(
                    "; the device dropped {} after sending (peer queue full)",
                    thousands(self.device_dropped)
                )
            } else {
                String::new()
            },
            self.mode
        )];
        if self.max_late_us > 0.0 {
            out.push(format!(
                "pacing: the latest frame left {:.1} us after its due time",
                self.max_late_us
            ));
        }
        if let SendSource::Replay { cut_in_file, .. } = self.source {
            if cut_in_file > 0 {
                out.push(format!(
                    "note: {} frames were cut by the capture's snap length and were sent as recorded",
                    thousands(cut_in_file)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> TxReport {
        TxReport {
            sent: 1500,
            bytes: 96_000,
            failed: 2,
            too_long: 2,
            duration: Duration::from_millis(500),
            mode: "copy",
            ..TxReport::default()
        }
    }

    #[test]
    fn gen_json_has_the_report_and_the_count_in_key_order() {
        let j = SendSummary::gen(&report(), 1502).to_json();
        assert_eq!(
            j,
            r#"{"bytes":96000,"count":1502,"device_dropped":0,"duration_s":0.5,"failed":2,"gbps":0.001536,"max_late_us":0.0,"mode":"copy","pps":3000.0,"sent":1500,"too_long":2}"#
        );
    }

    #[test]
    fn lines_name_what_was_cut_and_too_long_only_when_there_is_some() {
        let s = SendSummary::gen(&report(), 1502);
        assert_eq!(
            s.lines(),
            ["sent 1,500 frames (96.00 KB) in 0.500 s: 3,000 frames/s, 0.002 Gbit/s; failed 2 (2 longer than the largest frame the socket sends); AF_XDP copy mode"]
        );
        let mut s = s;
        s.max_late_us = 12.34;
        s.source = SendSource::Replay {
            frames_read: 1502,
            cut_in_file: 7,
            loops: 1,
        };
        let l = s.lines();
        assert_eq!(l.len(), 3, "{l:?}");
        assert_eq!(
            l[1],
            "pacing: the latest frame left 12.3 us after its due time"
        );
        assert!(l[2].starts_with("note: 7 frames were cut"), "{l:?}");
    }

    #[test]
    fn a_meter_gives_the_rate_since_its_last_line() {
        let mut m = SendMeter::new();
        let a = m.line(1000, 64_000, Duration::from_secs(1));
        let b = m.line(4000, 256_000, Duration::from_secs(2));
        assert_eq!(a, "[    1.0s]      1,000 frames/s | sent 1,000 (64.00 KB)");
        assert_eq!(b, "[    2.0s]      3,000 frames/s | sent 4,000 (256.00 KB)");
    }
}
