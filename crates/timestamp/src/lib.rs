//! Clocks and timestamp conversions for wiretape.
//!
//! This crate knows nothing of sockets or files: it reads clocks and turns raw
//! stamps into UTC nanoseconds since the Unix epoch, which is what pcap stores.
//!
//! * [`realtime_ns`] / [`tai_ns`]: `clock_gettime` through the vDSO.
//! * [`TaiToUtc`]: the XDP program stamps frames with `bpf_ktime_get_tai_ns()`
//!   (CLOCK_TAI). UTC = TAI - (TAI-UTC offset). The kernel's offset is whatever
//!   NTP/PTP set with `adjtimex` (37 s in 2026 where a time daemon sets it, 0
//!   on a machine where nobody did). We measure it rather than assume it: the
//!   two clocks are read back to back and the difference rounded to whole
//!   seconds, since the kernel only ever applies whole-second TAI offsets.
//!
//! * [`TsMode`] and [`Stamper`]: the stamping modes. A stamper takes a batch
//!   of frames (length, XDP stamp, NIC stamp) and gives each its stamp:
//!   hw, xdp, kpt (per frame from a [`Clock`]), batch, udts, wdts, hybrid, off.
//! * [`TscClock`]: TSC ticks calibrated against CLOCK_REALTIME, with drift
//!   correction, for per-frame stamps at a few ns each.
//! * [`sim`]: the accuracy evaluator: a link and poller model with ground
//!   truth, running the real [`Stamper`].
#![deny(unsafe_code)]

pub mod clock;
pub mod hist;
pub mod mode;
mod parse;
pub mod sim;
pub mod stamper;
#[allow(unsafe_code)]
mod tsc;

pub use clock::{AutoClock, Clock, RealtimeClock, TscClock};
pub use mode::TsMode;
pub use parse::{days_from_civil, days_in_month, parse_time, parse_time_in, NoZone};
pub use stamper::{StampSlot, StampStats, Stamper};
pub use tsc::invariant as tsc_invariant;

use std::time::Duration;

const NS_PER_SEC: i64 = 1_000_000_000;

#[allow(unsafe_code)] // one clock_gettime call
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes one `timespec` through its pointer, and
    // `&mut ts` is an aligned, exclusive pointer to a local that outlives the
    // call. With the clock ids passed here (all in Linux since 3.10) it cannot fail.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * NS_PER_SEC as u64 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME (UTC) in ns since the epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_TAI in ns since the epoch: the clock of `bpf_ktime_get_tai_ns()`.
pub fn tai_ns() -> u64 {
    clock_ns(libc::CLOCK_TAI)
}

/// CLOCK_MONOTONIC in ns (for intervals only).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Converts CLOCK_TAI stamps to UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaiToUtc {
    offset_ns: u64,
}

impl TaiToUtc {
    /// A converter for a known TAI-UTC offset in whole seconds.
    pub fn from_offset_secs(secs: u32) -> Self {
        TaiToUtc {
            offset_ns: secs as u64 * NS_PER_SEC as u64,
        }
    }

    /// Measures the kernel's current TAI-UTC offset.
    pub fn measure() -> Self {
        // Read REALTIME, TAI, REALTIME and use the midpoint, so a preemption
        // between the reads cannot push the rounded value off by a second.
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..5 {
            let a = realtime_ns();
            let t = tai_ns();
            let b = realtime_ns();
            let width = b - a;
            let diff = t as i64 - ((a + b) / 2) as i64;
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((width, diff));
            }
        }
        let diff = best.map(|(_, d)| d).unwrap_or(0);
        Self::from_offset_secs(round_to_secs(diff).max(0) as u32)
    }

    /// The offset this converter subtracts.
    pub fn offset(&self) -> Duration {
        Duration::from_nanos(self.offset_ns)
    }

    /// UTC ns for a TAI ns stamp.
    #[inline(always)]
    pub fn to_utc(&self, tai_ns: u64) -> u64 {
        tai_ns.saturating_sub(self.offset_ns)
    }
}

fn round_to_secs(ns: i64) -> i64 {
    (ns + ns.signum() * NS_PER_SEC / 2) / NS_PER_SEC
}

/// Splits UTC ns since the epoch into (seconds, nanoseconds).
#[inline(always)]
pub fn split_ns(ns: u64) -> (u32, u32) {
    ((ns / 1_000_000_000) as u32, (ns % 1_000_000_000) as u32)
}

/// Formats UTC ns as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (RFC 3339).
pub fn format_rfc3339(ns: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(ns / 1_000_000_000);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:09}Z",
        ns % 1_000_000_000
    )
}

/// Formats UTC ns as `YYYYMMDDTHHMMSS.nnnnnnnnnZ`, for file names that sort by time.
pub fn format_compact(ns: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(ns / 1_000_000_000);
    format!(
        "{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}.{:09}Z",
        ns % 1_000_000_000
    )
}

/// Seconds since the epoch to (year, month, day, hour, minute, second), UTC.
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days_from_civil inverse.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        (rem % 3600 / 60) as u32,
        (rem % 60) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tai_to_utc_subtracts_whole_seconds() {
        let c = TaiToUtc::from_offset_secs(37);
        assert_eq!(
            c.to_utc(1_700_000_037_123_456_789),
            1_700_000_000_123_456_789
        );
        assert_eq!(c.offset(), Duration::from_secs(37));
        // A stamp of 0 (no metadata) never underflows.
        assert_eq!(c.to_utc(5), 0);
    }

    #[test]
    fn measured_offset_makes_tai_agree_with_realtime() {
        let c = TaiToUtc::measure();
        let tai = tai_ns();
        let rt = realtime_ns();
        let utc = c.to_utc(tai);
        let diff = utc.abs_diff(rt);
        assert!(diff < 50_000_000, "converted TAI is {diff} ns from UTC");
        assert_eq!(c.offset().subsec_nanos(), 0);
    }

    #[test]
    fn rounding_to_seconds() {
        assert_eq!(round_to_secs(36_999_999_000), 37);
        assert_eq!(round_to_secs(37_000_001_000), 37);
        assert_eq!(round_to_secs(400), 0);
        assert_eq!(round_to_secs(-400), 0);
    }

    #[test]
    fn formats_utc() {
        // 2026-11-22T03:29:36.000000001Z
        let ns = 1_795_318_176_000_000_001;
        assert_eq!(format_rfc3339(ns), "2026-11-22T03:29:36.000000001Z");
        assert_eq!(format_compact(ns), "20261122T032936.000000001Z");
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        // leap day
        assert_eq!(
            format_rfc3339(951_782_400 * 1_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(split_ns(1_500_000_000), (1, 500_000_000));
    }
}
