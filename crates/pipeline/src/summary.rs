//! The summary of a finished run, typed: one [`RunSummary`] built from the
//! [`RecordReport`], serialized as the CLI's `--summary-json` (every field
//! name is an interface other tools rely on) and written as the text the
//! CLI prints at the end ([`RunSummary::text`]). Both come from the same
//! value, so they cannot disagree.

use crate::live::{DumpReport, RingReport, ServeReport, SubscriberReport};
use crate::{Drops, QueueReport, RecordConfig, RecordReport};
use serde::Serialize;
use wiretape_capture::{BindMode, StartInfo};
use wiretape_files::Format;
use wiretape_storage::{CompressReport, StorageProgress};
use wiretape_timestamp::{format_rfc3339, StampStats};

pub use wiretape_files::{bytes_h, thousands};

/// The summary of a run (see the module docs). Built by
/// [`RunSummary::new`]; the fields are what `--summary-json` holds.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct RunSummary {
    /// The interface (several: joined with `+`), or the file engine's name.
    pub interface: String,
    /// The run's queues.
    pub queues: Vec<u32>,
    /// `afxdp`, `packet`, `netmap` or `file`.
    pub engine: &'static str,
    /// Why `--engine auto` chose it ([`crate::EngineChoice::reason`]).
    pub engine_reason: Option<String>,
    /// The packet engine wrote its ring's blocks in place.
    pub in_place: bool,
    /// The interface's RX queues (the packet engine).
    pub rx_queues: Option<u32>,
    /// The capture file (the file engine).
    pub source: Option<String>,
    /// `native`, `generic` or `none`.
    pub xdp_mode: &'static str,
    /// `zero-copy`, `copy` or `none`.
    pub bind_mode: &'static str,
    /// The first queue's write engine (`direct`, `buffered`, ...).
    pub write_engine: &'static str,
    /// The timestamp mode's name.
    pub timestamp_mode: &'static str,
    /// The clock stamps are read from.
    pub timestamp_clock: &'static str,
    /// Why the NIC gave no stamps, if it did not.
    pub hw_timestamps_refused: Option<String>,
    /// Where the stamps came from, all queues.
    pub timestamps: StampSummary,
    /// From start to stop, seconds.
    pub duration_s: f64,
    /// Why the run stopped.
    pub stop_reason: String,
    /// The capture filter.
    pub filter: Option<String>,
    /// Frames seen.
    pub packets_seen: u64,
    /// Frames in the files.
    pub packets_written: u64,
    /// Frames the capture filter rejected.
    pub packets_filtered: u64,
    /// Frames the per-connection cutoff left out.
    pub packets_cutoff: u64,
    /// Their bytes.
    pub bytes_cutoff: u64,
    /// Connections evicted from the cutoff's table.
    pub cutoff_flows_evicted: u64,
    /// Captured bytes written.
    pub bytes_written: u64,
    /// `bytes_written` over the run's duration.
    pub write_bytes_per_s: f64,
    /// Bytes seen.
    pub bytes_seen: u64,
    /// Frames not written, by reason.
    pub drops: DropSummary,
    /// `seen = written + filtered + cutoff + drops` on every queue.
    pub identity_holds: bool,
    /// Per queue.
    pub per_queue: Vec<QueueSummary>,
    /// Per interface (one for a run over one interface or a file).
    pub interfaces: Vec<InterfaceSummary>,
    /// Every file written.
    pub files: Vec<String>,
    /// `pcap-ns`, `pcap-us` or `pcapng`.
    pub format: &'static str,
    /// The compression's numbers (none without compression).
    pub compress: Option<CompressSummary>,
    /// What retention deleted.
    pub retention: RetentionSummary,
    /// Volumes taken out (a write or a file's creation failed there):
    /// volume directory -> times (0 or 1), every volume named, with
    /// several `-w` (empty with one).
    pub volume_failed: std::collections::BTreeMap<String, u64>,
    /// Each volume: what went to it and whether it failed (with several).
    pub volumes: Vec<VolumeSummary>,
    /// Frames not read for the session tables (their thread was behind;
    /// those tables are marked incomplete). Never frames lost.
    pub sessions_skipped: u64,
    /// The session tables' numbers (none with `--no-sessions`).
    pub sessions: Option<SessionsSummary>,
    /// Times an interface was away.
    pub interface_gaps: Vec<GapSummary>,
    /// The writers' notes.
    pub notes: Vec<String>,
    /// Every error, one line each.
    pub errors: Vec<String>,
    /// Whether files were written (not `--ring-only`).
    pub write_files: bool,
    /// Live subscribers.
    pub subscribers: Vec<SubscriberReport>,
    /// The time-travel ring.
    pub ring: Option<RingReport>,
    /// PCAP-over-IP.
    pub serve: Option<ServeReport>,
    /// Dumps of the ring.
    pub dumps: Vec<DumpReport>,
    /// The control socket.
    pub control: Option<String>,
    /// The run recorded several interfaces (the text labels queues by them).
    #[serde(skip)]
    several: bool,
}

/// Where stamps came from.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct StampSummary {
    /// Frames stamped.
    pub frames: u64,
    /// By the NIC.
    pub hw: u64,
    /// By the XDP program (or the kernel).
    pub xdp: u64,
    /// By the poll thread, for want of either.
    pub poll_fallback: u64,
    /// `hw / frames`.
    pub hw_share: f64,
    /// Frames the NIC stamped, by the XDP program's count.
    pub hw_stamped_by_xdp_program: u64,
    /// Batches the hybrid mode stamped as wdts.
    pub hybrid_wdts_batches: u64,
    /// Batches the hybrid mode stamped as kpt.
    pub hybrid_kpt_batches: u64,
}

impl StampSummary {
    fn new(s: &StampStats, hw_stamped: u64) -> StampSummary {
        StampSummary {
            frames: s.frames,
            hw: s.hw,
            xdp: s.xdp,
            poll_fallback: s.poll_fallback,
            hw_share: if s.frames > 0 {
                s.hw as f64 / s.frames as f64
            } else {
                0.0
            },
            hw_stamped_by_xdp_program: hw_stamped,
            hybrid_wdts_batches: s.hybrid_wdts_batches,
            hybrid_kpt_batches: s.hybrid_kpt_batches,
        }
    }
}

/// Frames not written, by reason, and their total.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct DropSummary {
    /// By reason (serialized as fields of this object).
    #[serde(flatten)]
    pub by_reason: Drops,
    /// All reasons.
    pub total: u64,
}

impl From<Drops> for DropSummary {
    fn from(d: Drops) -> DropSummary {
        DropSummary {
            by_reason: d,
            total: d.total(),
        }
    }
}

impl DropSummary {
    /// The kernel's (ring full, fill ring empty, other).
    pub fn kernel(&self) -> u64 {
        let d = &self.by_reason;
        d.rx_ring_full + d.fill_ring_empty + d.other
    }
}

/// One queue's accounting.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct QueueSummary {
    /// The queue (its interface's own number).
    pub queue: u32,
    /// Its interface.
    pub interface: String,
    /// Frames seen.
    pub packets_seen: u64,
    /// Frames written.
    pub packets_written: u64,
    /// Frames the filter rejected.
    pub packets_filtered: u64,
    /// Frames the cutoff left out.
    pub packets_cutoff: u64,
    /// Their bytes.
    pub bytes_cutoff: u64,
    /// Connections evicted from the cutoff's table.
    pub cutoff_flows_evicted: u64,
    /// Captured bytes written.
    pub bytes_written: u64,
    /// Bytes seen.
    pub bytes_seen: u64,
    /// Frames taken by the poll thread.
    pub received: u64,
    /// Frames cut to the snap length.
    pub truncated: u64,
    /// Where its stamps came from.
    pub timestamps: StampSummary,
    /// Its drops.
    pub drops: DropSummary,
    /// Its identity holds.
    pub identity_holds: bool,
    /// Its files.
    pub files: Vec<String>,
    /// Their bytes.
    pub file_bytes: u64,
    /// Its writer.
    pub writer: WriterSummary,
    /// The kernel's socket statistics (AF_XDP).
    pub kernel: KernelSummary,
}

impl QueueSummary {
    /// Frames neither written, filtered, cut off nor counted as dropped
    /// (zero when the identity holds).
    pub fn unaccounted(&self) -> i128 {
        self.packets_seen as i128
            - (self.packets_written
                + self.packets_filtered
                + self.packets_cutoff
                + self.drops.total) as i128
    }
}

/// A queue's writer.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct WriterSummary {
    /// `direct`, `buffered`, ...
    pub engine: &'static str,
    /// Blocks written.
    pub block_writes: u64,
    /// Times it waited for a free block.
    pub waits_for_free_block: u64,
    /// Write latency, median, µs.
    pub latency_p50_us: f64,
    /// Write latency, 99th percentile, µs.
    pub latency_p99_us: f64,
    /// The most it buffered.
    pub peak_buffered_bytes: u64,
    /// Retries while the disk was full.
    pub disk_full_retries: u64,
    /// Ring blocks laid out in place (the packet engine).
    pub runs_laid_out: u64,
    /// Of those, copied while the disk was behind.
    pub runs_copied: u64,
    /// Its CPU.
    pub cpu: Option<usize>,
    /// Of `runs_laid_out`, written from the ring.
    #[serde(skip)]
    runs_direct: u64,
}

/// The kernel's AF_XDP socket statistics.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct KernelSummary {
    /// Dropped for other reasons.
    pub rx_dropped: u64,
    /// The RX ring was full.
    pub rx_ring_full: u64,
    /// The fill ring was empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Invalid descriptors.
    pub rx_invalid_descs: u64,
}

/// One interface of the run, with its totals and queues.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct InterfaceSummary {
    /// Its name.
    pub interface: String,
    /// Its index.
    pub ifindex: u32,
    /// Its engine.
    pub engine: &'static str,
    /// Its queues.
    pub queues: Vec<u32>,
    /// `native`, `generic` or `none`.
    pub xdp_mode: &'static str,
    /// `zero-copy`, `copy` or `none`.
    pub bind_mode: &'static str,
    /// Why native XDP was refused, if it was.
    pub native_refused: Option<String>,
    /// The poll CPUs per queue.
    pub cpus: Vec<Option<usize>>,
    /// Frames seen.
    pub packets_seen: u64,
    /// Frames written.
    pub packets_written: u64,
    /// Frames the filter rejected.
    pub packets_filtered: u64,
    /// Frames the cutoff left out.
    pub packets_cutoff: u64,
    /// Their bytes.
    pub bytes_cutoff: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Bytes seen.
    pub bytes_seen: u64,
    /// Its drops.
    pub drops: DropSummary,
    /// The identity holds on each of its queues.
    pub identity_holds: bool,
    /// Its queues.
    pub per_queue: Vec<QueueSummary>,
    /// Its files.
    pub files: Vec<String>,
}

/// The compression's numbers.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct CompressSummary {
    /// `lz4` or `zstd`.
    pub algorithm: &'static str,
    /// Its level (0: the default).
    pub level: i32,
    /// Bytes of blocks in.
    pub bytes_in: u64,
    /// Bytes out.
    pub bytes_out: u64,
    /// `bytes_out / bytes_in`.
    pub ratio: f64,
    /// Blocks.
    pub blocks: u64,
    /// Blocks stored uncompressed (they did not shrink).
    pub blocks_uncompressed: u64,
}

impl From<&CompressReport> for CompressSummary {
    fn from(c: &CompressReport) -> CompressSummary {
        CompressSummary {
            algorithm: c.compress.algorithm(),
            level: c.compress.level(),
            bytes_in: c.bytes_in,
            bytes_out: c.bytes_out,
            ratio: c.ratio(),
            blocks: c.blocks,
            blocks_uncompressed: c.blocks_uncompressed,
        }
    }
}

/// The session tables written beside the capture files (issue 38).
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct SessionsSummary {
    /// Tables written.
    pub tables: u64,
    /// Of them, written incomplete (frames skipped).
    pub incomplete: u64,
    /// Frames read into the tables.
    pub frames: u64,
    /// Frames skipped: the session thread was behind.
    pub skipped_frames: u64,
    /// Tables that could not be written.
    pub errors: u64,
    /// The session thread's CPU time, seconds.
    pub cpu_s: f64,
}

impl From<&wiretape_storage::sessions::SessionStats> for SessionsSummary {
    fn from(x: &wiretape_storage::sessions::SessionStats) -> Self {
        SessionsSummary {
            tables: x.tables,
            incomplete: x.incomplete,
            frames: x.frames,
            skipped_frames: x.skipped_frames,
            errors: x.errors,
            cpu_s: x.cpu_ns as f64 / 1e9,
        }
    }
}

/// What retention deleted.
#[derive(Clone, Copy, Debug, Serialize)]
#[non_exhaustive]
pub struct RetentionSummary {
    /// Files.
    pub deleted_files: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
}

/// One volume of a store (`-w` given more than once).
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct VolumeSummary {
    /// The directory.
    pub dir: String,
    /// Files put on it this run.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// Why it was taken out (null: in use to the end).
    pub failed: Option<String>,
    /// Its own cap on our bytes (`--keep-bytes DIR=SIZE`; absent: the
    /// store's only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_bytes: Option<u64>,
    /// Its own free-space floor (`--min-free DIR=...`; absent: the
    /// store's): `{"bytes": N}` or `{"percent": P}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_free: Option<MinFreeSummary>,
}

/// A free-space floor in the summary and `ctl status`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MinFreeSummary {
    /// At least this many bytes free.
    Bytes(u64),
    /// At least this percentage of the filesystem free.
    Percent(f64),
}

impl From<wiretape_storage::MinFree> for MinFreeSummary {
    fn from(m: wiretape_storage::MinFree) -> Self {
        match m {
            wiretape_storage::MinFree::Bytes(b) => MinFreeSummary::Bytes(b),
            wiretape_storage::MinFree::Percent(p) => MinFreeSummary::Percent(p),
        }
    }
}

/// A time an interface was away.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct GapSummary {
    /// The interface.
    pub interface: String,
    /// From (RFC 3339).
    pub from: String,
    /// To (RFC 3339).
    pub to: String,
    /// From (UTC ns).
    pub from_ns: u64,
    /// To (UTC ns).
    pub to_ns: u64,
    /// How long, seconds.
    pub seconds: f64,
    /// It came back before the run ended.
    pub came_back: bool,
    /// Why it was taken for gone.
    pub why: String,
}

fn xdp_mode(info: &StartInfo) -> &'static str {
    info.xdp_mode.map(|m| m.name()).unwrap_or("none")
}

fn bind_mode(info: &StartInfo) -> &'static str {
    match info.bind_mode {
        Some(BindMode::ZeroCopy) => "zero-copy",
        Some(BindMode::Copy) => "copy",
        None => "none",
    }
}

fn paths(files: &[std::path::PathBuf]) -> Vec<String> {
    files.iter().map(|f| f.display().to_string()).collect()
}

impl QueueSummary {
    /// Queue `i` of the run `r`, of the interface `ifname`.
    fn new(r: &RecordReport, i: usize, q: &QueueReport, ifname: &str) -> QueueSummary {
        let k = &q.kernel;
        QueueSummary {
            queue: q.queue,
            interface: ifname.to_string(),
            packets_seen: q.seen,
            packets_written: q.written,
            packets_filtered: q.filtered,
            packets_cutoff: q.cutoff,
            bytes_cutoff: q.cutoff_bytes,
            cutoff_flows_evicted: q.cutoff_flows_evicted,
            bytes_written: q.bytes_written,
            bytes_seen: q.seen_bytes,
            received: q.received,
            truncated: q.truncated,
            timestamps: StampSummary::new(&q.stamps, q.hw_stamped),
            drops: q.drops.into(),
            identity_holds: q.identity_holds(),
            files: paths(&q.sink.files),
            file_bytes: q.sink.file_bytes,
            writer: WriterSummary {
                engine: q.sink.engine,
                block_writes: q.sink.block_writes,
                waits_for_free_block: q.sink.block_waits,
                latency_p50_us: q.sink.latency_p50_us,
                latency_p99_us: q.sink.latency_p99_us,
                peak_buffered_bytes: q.sink.peak_buffered_bytes,
                disk_full_retries: q.sink.full_retries,
                runs_laid_out: q.sink.runs,
                runs_copied: q.sink.runs.saturating_sub(q.sink.runs_direct),
                cpu: r.info.writer_cpus.get(i).copied().flatten(),
                runs_direct: q.sink.runs_direct,
            },
            kernel: KernelSummary {
                rx_dropped: k.rx_dropped,
                rx_ring_full: k.rx_ring_full,
                rx_fill_ring_empty_descs: k.rx_fill_ring_empty_descs,
                rx_invalid_descs: k.rx_invalid_descs,
            },
        }
    }
}

impl InterfaceSummary {
    fn new(info: &StartInfo, per_queue: Vec<QueueSummary>) -> InterfaceSummary {
        let sum = |f: fn(&QueueSummary) -> u64| per_queue.iter().map(f).sum::<u64>();
        let mut d = Drops::default();
        for q in &per_queue {
            d.add(&q.drops.by_reason);
        }
        InterfaceSummary {
            interface: info.ifname.clone(),
            ifindex: info.ifindex,
            engine: info.engine,
            queues: info.queues.clone(),
            xdp_mode: xdp_mode(info),
            bind_mode: bind_mode(info),
            native_refused: info.native_refused.clone(),
            cpus: info.cpus.clone(),
            packets_seen: sum(|q| q.packets_seen),
            packets_written: sum(|q| q.packets_written),
            packets_filtered: sum(|q| q.packets_filtered),
            packets_cutoff: sum(|q| q.packets_cutoff),
            bytes_cutoff: sum(|q| q.bytes_cutoff),
            bytes_written: sum(|q| q.bytes_written),
            bytes_seen: sum(|q| q.bytes_seen),
            drops: d.into(),
            identity_holds: per_queue.iter().all(|q| q.identity_holds),
            files: per_queue.iter().flat_map(|q| q.files.clone()).collect(),
            per_queue,
        }
    }
}

impl RunSummary {
    /// The summary of run `r` of `config`: `stop_reason` is why it stopped
    /// ([`crate::Event::Stopping`]), `storage` the writers' last progress
    /// ([`crate::Event::Finished`]), `engine_reason` why `auto` chose the
    /// engine ([`crate::choose_engine`]).
    pub fn new(
        r: &RecordReport,
        config: &RecordConfig,
        stop_reason: &str,
        storage: &StorageProgress,
        engine_reason: Option<&str>,
    ) -> RunSummary {
        let mut t = StampStats::default();
        for q in &r.queues {
            t.frames += q.stamps.frames;
            t.hw += q.stamps.hw;
            t.xdp += q.stamps.xdp;
            t.poll_fallback += q.stamps.poll_fallback;
            t.hybrid_wdts_batches += q.stamps.hybrid_wdts_batches;
            t.hybrid_kpt_batches += q.stamps.hybrid_kpt_batches;
        }
        let mut per_queue = Vec::new();
        let mut interfaces = Vec::new();
        for (info, qs) in r.interfaces() {
            let at = per_queue.len();
            let mine: Vec<QueueSummary> = qs
                .iter()
                .enumerate()
                .map(|(k, q)| QueueSummary::new(r, at + k, q, &info.ifname))
                .collect();
            per_queue.extend(mine.iter().cloned());
            interfaces.push(InterfaceSummary::new(info, mine));
        }
        // Queues the interfaces do not cover (none, unless the report is
        // short of start infos): the run's interface.
        for (i, q) in r.queues.iter().enumerate().skip(per_queue.len()) {
            per_queue.push(QueueSummary::new(r, i, q, &r.info.ifname));
        }
        let info = &r.info;
        RunSummary {
            interface: info.ifname.clone(),
            queues: info.queues.clone(),
            engine: info.engine,
            engine_reason: engine_reason.map(str::to_string),
            in_place: info.in_place,
            rx_queues: info.rx_queues,
            source: info.source.as_ref().map(|p| p.display().to_string()),
            xdp_mode: xdp_mode(info),
            bind_mode: bind_mode(info),
            write_engine: r.queues.first().map(|q| q.sink.engine).unwrap_or(""),
            timestamp_mode: info.ts_mode.name(),
            timestamp_clock: info.clock,
            hw_timestamps_refused: info.hw_refused.clone(),
            timestamps: StampSummary::new(&t, r.queues.iter().map(|q| q.hw_stamped).sum()),
            duration_s: r.duration.as_secs_f64(),
            stop_reason: stop_reason.to_string(),
            filter: config.filter.clone(),
            packets_seen: r.seen(),
            packets_written: r.written(),
            packets_filtered: r.filtered(),
            packets_cutoff: r.cutoff(),
            bytes_cutoff: r.cutoff_bytes(),
            cutoff_flows_evicted: r.cutoff_flows_evicted(),
            bytes_written: r.bytes_written(),
            write_bytes_per_s: r.bytes_written() as f64 / r.duration.as_secs_f64().max(1e-9),
            bytes_seen: r.queues.iter().map(|q| q.seen_bytes).sum(),
            drops: r.drops().into(),
            identity_holds: r.identity_holds(),
            files: per_queue.iter().flat_map(|q| q.files.clone()).collect(),
            per_queue,
            interfaces,
            format: match config.storage.format {
                Format::PcapNs => "pcap-ns",
                Format::PcapUs => "pcap-us",
                Format::PcapNg => "pcapng",
                Format::Steno => "steno",
            },
            compress: storage.compress.as_ref().map(CompressSummary::from),
            retention: RetentionSummary {
                deleted_files: storage.deleted_files,
                deleted_bytes: storage.deleted_bytes,
            },
            volume_failed: storage
                .volumes
                .iter()
                .map(|v| (v.dir.display().to_string(), v.failures))
                .collect(),
            volumes: storage
                .volumes
                .iter()
                .map(|v| VolumeSummary {
                    dir: v.dir.display().to_string(),
                    files: v.files,
                    bytes: v.bytes,
                    failed: v.failed.clone(),
                    keep_bytes: v.keep_bytes,
                    min_free: v.min_free.map(Into::into),
                })
                .collect(),
            sessions_skipped: storage.sessions.as_ref().map_or(0, |x| x.skipped_frames),
            sessions: storage.sessions.as_ref().map(SessionsSummary::from),
            interface_gaps: r
                .gaps
                .iter()
                .map(|g| GapSummary {
                    interface: g.ifname.clone(),
                    from: format_rfc3339(g.from_ns),
                    to: format_rfc3339(g.to_ns),
                    from_ns: g.from_ns,
                    to_ns: g.to_ns,
                    seconds: g.to_ns.saturating_sub(g.from_ns) as f64 / 1e9,
                    came_back: g.came_back,
                    why: g.why.clone(),
                })
                .collect(),
            notes: r.queues.iter().flat_map(|q| q.sink.notes.clone()).collect(),
            errors: r.errors(),
            write_files: config.live.write_files,
            subscribers: r.live.subscribers.clone(),
            ring: r.live.ring.clone(),
            serve: r.live.serve.clone(),
            dumps: r.live.dumps.clone(),
            control: r.live.control.as_ref().map(|p| p.display().to_string()),
            several: !info.interfaces.is_empty(),
        }
    }

    /// The summary as pretty JSON, keys sorted, with a final newline: what
    /// `wiretape record --summary-json FILE` writes.
    pub fn to_json(&self) -> String {
        let v = serde_json::to_value(self).unwrap_or_default();
        serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
    }

    /// `queue 3`, or `eth1 queue 3` in a run over several interfaces.
    fn label(&self, q: &QueueSummary) -> String {
        if self.several {
            format!("{} queue {}", q.interface, q.queue)
        } else {
            format!("queue {}", q.queue)
        }
    }

    /// The summary as text, a line per fact: what the CLI prints when a
    /// recording ends (its closing lines are the ones tcpdump prints).
    pub fn text(&self) -> String {
        let mut s = format!(
            "wiretape: stopped ({}) after {:.2} s: {} frames seen, {} written ({}), {} filtered out, {} dropped\n",
            self.stop_reason,
            self.duration_s,
            thousands(self.packets_seen),
            thousands(self.packets_written),
            bytes_h(self.bytes_written),
            thousands(self.packets_filtered),
            thousands(self.drops.total)
        );
        s += &self.queue_table();
        s += &self.writer_lines();
        s += &self.live_lines();
        s += &self.closing_lines();
        s
    }

    /// The table of queues (by interface, in a run over several).
    fn queue_table(&self) -> String {
        let mut s = "  queue        seen     written    filtered  ring_full fill_empty    other after_count write_err disk_full  file\n".to_string();
        for i in &self.interfaces {
            if self.several {
                s += &format!(
                    "  interface {}: {} seen, {} written, {} dropped{}\n",
                    i.interface,
                    thousands(i.packets_seen),
                    thousands(i.packets_written),
                    thousands(i.drops.total),
                    if i.identity_holds {
                        " (identity holds)"
                    } else {
                        ""
                    }
                );
            }
            for q in &i.per_queue {
                let d = &q.drops.by_reason;
                s += &format!(
                    "  {:>5} {:>11} {:>11} {:>11} {:>10} {:>10} {:>8} {:>11} {:>9} {:>9}  {}\n",
                    q.queue,
                    q.packets_seen,
                    q.packets_written,
                    q.packets_filtered,
                    d.rx_ring_full,
                    d.fill_ring_empty,
                    d.other,
                    d.after_count,
                    d.write_error,
                    d.disk_full,
                    q.files.join(" ")
                );
            }
        }
        s
    }

    /// The O_DIRECT writers' numbers.
    fn writer_lines(&self) -> String {
        let mut s = String::new();
        for q in self
            .per_queue
            .iter()
            .filter(|q| q.writer.block_writes > 0 && q.writer.engine == "direct")
        {
            let w = &q.writer;
            s += &format!(
                "  {} writer: O_DIRECT, {} block writes, latency p50 {:.0} us p99 {:.0} us, peak RAM buffer {}, waited for a free block {} times\n",
                self.label(q), w.block_writes, w.latency_p50_us, w.latency_p99_us, bytes_h(w.peak_buffered_bytes), w.waits_for_free_block
            );
            if w.runs_laid_out > 0 {
                s += &format!(
                    "  {} laid out in place: {} ring blocks, {} written from the ring, {} copied while the disk was behind\n",
                    self.label(q),
                    w.runs_laid_out,
                    w.runs_direct,
                    w.runs_copied
                );
            }
        }
        s
    }

    /// The ring, its dumps, the subscribers, PCAP-over-IP.
    fn live_lines(&self) -> String {
        let mut s = String::new();
        if let Some(g) = &self.ring {
            s += &format!(
                "  ring: {} in RAM ({} x {} per queue, huge pages: {}), {} frames held ({} overwritten){}\n",
                bytes_h(g.bytes),
                g.chunks_per_queue,
                bytes_h(g.chunk_bytes as u64),
                g.huge_pages,
                thousands(g.held_frames),
                thousands(g.overwritten_frames),
                if self.dumps.is_empty() {
                    String::new()
                } else {
                    format!(", {} dumps", self.dumps.len())
                }
            );
        }
        for d in &self.dumps {
            s += &match (&d.error, &d.file) {
                (Some(e), _) => format!("  dump ({}): failed: {e}\n", d.trigger),
                (None, Some(f)) => format!(
                    "  dump ({}): {} frames -> {}\n",
                    d.trigger,
                    thousands(d.frames),
                    f.display()
                ),
                (None, None) => format!("  dump ({}): no frame in the window\n", d.trigger),
            };
        }
        for sub in &self.subscribers {
            s += &format!(
                "  subscriber {} ({}): {} frames delivered, {} skipped{}\n",
                sub.name,
                sub.policy,
                thousands(sub.delivered),
                thousands(sub.skipped),
                if sub.waits > 0 {
                    format!(
                        ", the writers waited {} times ({:.1} ms)",
                        sub.waits, sub.wait_ms
                    )
                } else {
                    String::new()
                }
            );
        }
        if let Some(v) = &self.serve {
            s += &format!(
                "  serve {}: {} clients ({} cut off, {} refused), {} frames sent\n",
                v.addr,
                v.clients,
                v.cut_off,
                v.refused,
                thousands(v.frames_sent)
            );
        }
        s
    }

    /// Retention, gaps, compression, cutoff, the accounting, and the
    /// closing lines scripts written for tcpdump already parse.
    fn closing_lines(&self) -> String {
        let mut s = String::new();
        if let Some(x) = &self.sessions {
            s += &format!(
                "  sessions: {} tables written ({} incomplete), sessions_skipped {} frames{}\n",
                x.tables,
                x.incomplete,
                thousands(x.skipped_frames),
                if x.errors > 0 {
                    format!(", {} tables could not be written", x.errors)
                } else {
                    String::new()
                }
            );
        }
        for v in &self.volumes {
            s += &format!(
                "  volume {}: {} files ({}){}{}\n",
                v.dir,
                v.files,
                bytes_h(v.bytes),
                match v.keep_bytes {
                    Some(b) => format!(", kept under --keep-bytes {}", crate::options::size_text(b)),
                    None => String::new(),
                },
                match &v.failed {
                    Some(why) => format!(
                        "; FAILED, taken out (volume_failed 1): {why}; the other volumes took its share"
                    ),
                    None => String::new(),
                }
            );
        }
        let ret = &self.retention;
        if ret.deleted_files > 0 {
            s += &format!(
                "  retention: deleted {} of our files ({})\n",
                ret.deleted_files,
                bytes_h(ret.deleted_bytes)
            );
        }
        for g in &self.interface_gaps {
            s += &format!(
                "  interface {} was away {:.1} s, from {} to {}{}: nothing could be recorded then ({})\n",
                g.interface,
                g.seconds,
                g.from,
                g.to,
                if g.came_back { ", then reattached" } else { " (the run ended before it came back)" },
                g.why
            );
        }
        if let Some(c) = &self.compress {
            s += &format!(
                "  compressed ({}{}): {} of blocks -> {} ({:.3}), {} blocks, {} stored uncompressed\n",
                c.algorithm,
                if c.level != 0 {
                    format!(":{}", c.level)
                } else {
                    String::new()
                },
                bytes_h(c.bytes_in),
                bytes_h(c.bytes_out),
                c.ratio,
                thousands(c.blocks),
                thousands(c.blocks_uncompressed)
            );
        }
        if self.packets_cutoff > 0 {
            s += &format!(
                "  cutoff: {} frames ({}) past their connection's first bytes left out; {} connections evicted from the table\n",
                thousands(self.packets_cutoff),
                bytes_h(self.bytes_cutoff),
                thousands(self.cutoff_flows_evicted)
            );
        }
        if self.identity_holds && self.packets_cutoff > 0 {
            s += "  accounting: seen = written + filtered + cutoff + drops, on every queue (identity holds)\n";
        } else if self.identity_holds {
            s += "  accounting: seen = written + filtered + drops, on every queue (identity holds)\n";
        } else {
            for q in self.per_queue.iter().filter(|q| !q.identity_holds) {
                s += &format!(
                    "  WARNING: {}: seen {} != written {} + filtered {} + cutoff {} + drops {} (unaccounted {}): the identity does not hold; please report this\n",
                    self.label(q),
                    q.packets_seen,
                    q.packets_written,
                    q.packets_filtered,
                    q.packets_cutoff,
                    q.drops.total,
                    q.unaccounted()
                );
            }
        }
        if self.engine == "netmap" {
            s += &format!(
                "  netmap: frames the NIC dropped while a ring was full are not seen by wiretape: see `ethtool -S {}` (rx_missed_errors)\n",
                self.interface
            );
        }
        s += &format!("{} packets captured\n", self.packets_written);
        // A file has no kernel to drop frames (tcpdump -r prints no such line).
        if self.engine != "file" {
            s += &format!("{} packets dropped by kernel\n", self.drops.kernel());
        }
        let truncated: u64 = self.per_queue.iter().map(|q| q.truncated).sum();
        if truncated > 0 {
            s += &format!(
                "  {} frames cut to the snap length (original lengths kept)\n",
                thousands(truncated)
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(bytes_h(999), "999 B");
        assert_eq!(bytes_h(1_500), "1.50 KB");
        assert_eq!(bytes_h(3_270_000_000), "3.27 GB");
    }
}
