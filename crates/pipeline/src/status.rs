//! What a recording says while it runs, as text: the start line of each
//! input ([`StartLine`]), the progress line ([`ProgressMeter`]) and the
//! status so far ([`Status`], what `wiretape record` prints on SIGUSR2).
//! The summary at the end is [`crate::RunSummary`]. The CLI only prints
//! these; a tool embedding the pipeline prints the same lines.

use crate::summary::{bytes_h, thousands};
use crate::{RecordConfig, Snapshot};
use std::fmt;
use std::time::Duration;
use wiretape_capture::{BindMode, StartInfo};
use wiretape_storage::StorageProgress;

/// The line that says what a started input records and how (engine, queues,
/// CPUs, ring, snaplen, filter, timestamps, directory), from
/// [`crate::Event::Started`]: one line per interface in a run over several.
#[derive(Clone, Copy, Debug)]
pub struct StartLine<'a> {
    info: &'a StartInfo,
    config: &'a RecordConfig,
    reason: Option<&'a str>,
}

impl<'a> StartLine<'a> {
    /// The start line of `info`, recorded as `config` says; `engine_reason`
    /// is why `auto` chose the engine ([`crate::choose_engine`]).
    pub fn new(
        info: &'a StartInfo,
        config: &'a RecordConfig,
        engine_reason: Option<&'a str>,
    ) -> StartLine<'a> {
        StartLine {
            info,
            config,
            reason: engine_reason,
        }
    }
}

impl fmt::Display for StartLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&start_line(self.info, self.config, self.reason))
    }
}

/// The progress line: rates since the previous line (frames/s, Gbit/s,
/// disk MB/s), totals, drops, the writers' backlog and latency, and a
/// link warning. One meter per run: it keeps the counters of the last line.
#[derive(Clone, Debug, Default)]
pub struct ProgressMeter {
    /// Frames seen, bytes seen, bytes written, seconds: at the last line.
    last: (u64, u64, u64, f64),
}

impl ProgressMeter {
    /// A meter with no line yet (the first rates count from the start).
    pub fn new() -> ProgressMeter {
        ProgressMeter::default()
    }

    /// The line for [`crate::Event::Progress`] at `elapsed` (no newline).
    pub fn line(&mut self, elapsed: Duration, s: &Snapshot, st: &StorageProgress) -> String {
        let last = &mut self.last;
        let t = elapsed.as_secs_f64();
        let dt = (t - last.3).max(1e-3);
        let seen = s.seen();
        let sb = s.seen_bytes();
        let wb = s.bytes();
        let fps = (seen - last.0.min(seen)) as f64 / dt;
        let gbps = (sb - last.1.min(sb)) as f64 * 8.0 / dt / 1e9;
        let wmbs = (wb - last.2.min(wb)) as f64 / dt / 1e6;
        *last = (seen, sb, wb, t);
        let deleted = if st.deleted_files > 0 {
            format!(" | deleted {} files", st.deleted_files)
        } else {
            String::new()
        };
        let filtered = if s.filtered() > 0 {
            format!(" filtered {}", thousands(s.filtered()))
        } else {
            String::new()
        };
        let line = format!(
            "[{t:7.1}s] {:>10} frames/s {gbps:6.2} Gbit/s | seen {} written {} ({}){filtered} | drops {} | disk {wmbs:.0} MB/s, {} blocks waiting, {} in flight, p50/p99 {:.1}/{:.1} ms{deleted}",
            thousands(fps as u64),
            thousands(seen),
            thousands(s.written()),
            bytes_h(s.bytes()),
            thousands(s.kernel_drops()),
            st.pending_blocks,
            st.in_flight,
            st.p50_us as f64 / 1e3,
            st.p99_us as f64 / 1e3,
        );
        match &s.link {
            Some(w) => format!("{line} | WARNING: {w}"),
            None => line,
        }
    }
}

/// The summary so far, while recording goes on (what `wiretape record`
/// prints on SIGUSR2): live counters per queue; drops are the kernel's so
/// far (the writers' own are counted at the end). Several lines, each
/// ending in a newline.
#[derive(Clone, Copy, Debug)]
pub struct Status<'a> {
    elapsed: Duration,
    snapshot: &'a Snapshot,
    storage: &'a StorageProgress,
}

impl<'a> Status<'a> {
    /// The status at `elapsed`, from a [`crate::Event::Progress`].
    pub fn new(
        elapsed: Duration,
        snapshot: &'a Snapshot,
        storage: &'a StorageProgress,
    ) -> Status<'a> {
        Status {
            elapsed,
            snapshot,
            storage,
        }
    }
}

impl fmt::Display for Status<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&status_text(self.elapsed, self.snapshot, self.storage))
    }
}

fn start_line(info: &StartInfo, opts: &RecordConfig, reason: Option<&str>) -> String {
    if !info.interfaces.is_empty() {
        // Several interfaces: one line each.
        return info
            .interfaces
            .iter()
            .map(|i| start_line(i, opts, reason))
            .collect::<Vec<_>>()
            .join("\n");
    }
    let cpus: Vec<String> = info
        .queues
        .iter()
        .zip(&info.cpus)
        .map(|(q, c)| {
            format!(
                "q{q}@{}",
                c.map(|c| c.to_string()).unwrap_or_else(|| "any".into())
            )
        })
        .collect();
    let dir = opts.storage.dir.display();
    let snaplen = opts.storage.snaplen;
    let filter = |where_: &str| match &opts.filter {
        Some(f) => format!(", filter '{f}' ({where_})"),
        None => String::new(),
    };
    if let Some(src) = &info.source {
        let memory = match info.mapped_file {
            Some(bytes) => format!("read in place ({:.1} MB mapped)", bytes as f64 / 1e6),
            None => format!("ring of {} x {} B", info.frames, info.frame_size),
        };
        return format!(
            "wiretape: recording {} (file engine, as {}) [{}]: {memory}, snaplen {snaplen}{}, {} -> {dir}",
            src.display(),
            info.ifname,
            cpus.join(" "),
            filter("user space"),
            ts_text(info),
        );
    }
    let why = match reason {
        Some(r) => format!(" ({r})"),
        None => String::new(),
    };
    if info.engine == "packet" {
        let n = info.queues.len() as u32;
        let (what, how) = match info.rx_queues {
            Some(rx) if rx > n && n == 1 => (
                format!("{rx} RX queues on 1 socket"),
                "one socket, no fanout",
            ),
            Some(rx) if rx > n => (
                format!("{rx} RX queues on {n} sockets {:?}", info.queues),
                "fanout by queue mod sockets",
            ),
            _ => (format!("queues {:?}", info.queues), "fanout by queue"),
        };
        return format!(
            "wiretape: recording {} {what} [{}]: packet (TPACKET_V3, {how}){why}, {} blocks x {} KiB per socket{}, snaplen {snaplen}{}, {} -> {dir}",
            info.ifname,
            cpus.join(" "),
            info.frames,
            info.frame_size / 1024,
            if info.in_place {
                ", pcapng laid out in place (frames not copied while the disk keeps up)"
            } else {
                ""
            },
            filter("user space"),
            ts_text(info),
        );
    }
    if info.engine == "netmap" {
        return format!(
            "wiretape: recording {} queues {:?} [{}]: netmap, {} slots x {} B per ring, snaplen {snaplen}{}, {} -> {dir}",
            info.ifname,
            info.queues,
            cpus.join(" "),
            info.frames,
            info.frame_size,
            filter("user space"),
            ts_text(info),
        );
    }
    let mode = match info.bind_mode {
        Some(BindMode::ZeroCopy) => "zero-copy".to_string(),
        Some(BindMode::Copy) => match &info.zero_copy_refused {
            Some(r) => format!("copy mode ({r})"),
            None => "copy mode".into(),
        },
        _ => "copy mode".into(),
    };
    let native = match &info.native_refused {
        Some(r) => format!(" (native refused: {r})"),
        None => String::new(),
    };
    let busy = match info.busy_poll {
        Some(bp) => format!(", busy poll {} us, budget {}", bp.usecs, bp.budget),
        None => String::new(),
    };
    format!(
        "wiretape: recording {} queues {:?} [{}]: {} XDP{native}, AF_XDP {mode}{busy}{why}, UMEM {} x {} B per queue, snaplen {snaplen}{}, {} -> {dir}",
        info.ifname,
        info.queues,
        cpus.join(" "),
        xdp_mode(info),
        info.frames,
        info.frame_size,
        filter("in XDP"),
        ts_text(info),
    )
}

fn xdp_mode(info: &StartInfo) -> &'static str {
    info.xdp_mode.map(|m| m.name()).unwrap_or("none")
}

fn ts_text(info: &StartInfo) -> String {
    use wiretape_timestamp::TsMode;
    match info.ts_mode {
        TsMode::Hw if info.engine == "packet" => {
            "timestamps hw (the kernel's per frame: the NIC's where it gives one, else software)"
                .into()
        }
        TsMode::Xdp if info.engine == "packet" => {
            "timestamps xdp (the kernel's software stamp per frame)".into()
        }
        TsMode::Hw => match &info.hw_refused {
            None => format!(
                "timestamps hw (NIC, else xdp; TAI-UTC {} s)",
                info.tai_offset_s
            ),
            Some(r) => format!(
                "timestamps xdp: no NIC stamps ({r}); TAI-UTC {} s",
                info.tai_offset_s
            ),
        },
        TsMode::Xdp => format!("timestamps xdp (TAI-UTC {} s)", info.tai_offset_s),
        TsMode::Off if info.source.is_some() => "timestamps from the file".into(),
        TsMode::Off => "timestamps off".into(),
        m => format!("timestamps {m} (clock {})", info.clock),
    }
}

fn status_text(elapsed: Duration, s: &Snapshot, st: &StorageProgress) -> String {
    let mut out = format!(
        "wiretape: status after {:.1} s (recording goes on): {} frames seen, {} written ({}), {} filtered out, {} dropped by the kernel\n",
        elapsed.as_secs_f64(),
        thousands(s.seen()),
        thousands(s.written()),
        bytes_h(s.bytes()),
        thousands(s.filtered()),
        thousands(s.kernel_drops()),
    );
    out += "  queue        seen     written    filtered  ring_full fill_empty    other\n";
    for q in &s.queues {
        let fill_empty = q.kernel.rx_fill_ring_empty_descs.min(q.kernel.rx_dropped);
        out += &format!(
            "  {:>5} {:>11} {:>11} {:>11} {:>10} {:>10} {:>8}\n",
            q.queue,
            q.seen,
            q.written,
            q.filtered,
            q.kernel.rx_ring_full,
            fill_empty,
            q.kernel.rx_dropped - fill_empty,
        );
    }
    out += &format!(
        "  writers: {} blocks waiting, {} in flight, latency p50/p99 {:.1}/{:.1} ms; retention deleted {} files ({})\n",
        st.pending_blocks,
        st.in_flight,
        st.p50_us as f64 / 1e3,
        st.p99_us as f64 / 1e3,
        st.deleted_files,
        bytes_h(st.deleted_bytes),
    );
    if let Some(x) = &st.sessions {
        out += &format!(
            "  sessions: {} tables written ({} incomplete), sessions_skipped {} frames\n",
            x.tables,
            x.incomplete,
            thousands(x.skipped_frames)
        );
    }
    if let Some(w) = &s.link {
        out += &format!("  WARNING: {w}\n");
    }
    out
}
