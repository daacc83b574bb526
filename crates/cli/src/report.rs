//! What `record` and `demo` print: the start line, the progress line, the
//! final summary (text and JSON).

use serde_json::{json, Value};
use std::time::Duration;
use wiretape::capture::{BindMode, StartInfo};
use wiretape::storage::Format;
use wiretape::{CaptureReport, Drops, RecordConfig, Snapshot, StorageProgress};

/// 1234567 -> "1,234,567"
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn bytes_h(n: u64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u < units.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

pub(crate) fn start_line(info: &StartInfo, opts: &RecordConfig) -> String {
    if !info.interfaces.is_empty() {
        // Several interfaces: one line each.
        return info
            .interfaces
            .iter()
            .map(|i| start_line(i, opts))
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
    let why = match crate::record::ENGINE_REASON.get() {
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
    use wiretape::timestamp::TsMode;
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

fn stamps_json(s: &wiretape::timestamp::StampStats, hw_stamped: u64) -> Value {
    json!({
        "frames": s.frames,
        "hw": s.hw,
        "xdp": s.xdp,
        "poll_fallback": s.poll_fallback,
        "hw_share": if s.frames > 0 { s.hw as f64 / s.frames as f64 } else { 0.0 },
        "hw_stamped_by_xdp_program": hw_stamped,
        "hybrid_wdts_batches": s.hybrid_wdts_batches,
        "hybrid_kpt_batches": s.hybrid_kpt_batches,
    })
}

pub(crate) fn progress(elapsed: Duration, s: &Snapshot, st: &StorageProgress, tty: bool) {
    use std::sync::Mutex;
    static LAST: Mutex<(u64, u64, u64, f64)> = Mutex::new((0, 0, 0, 0.0));
    let mut last = LAST.lock().unwrap();
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
    let line = match &s.link {
        Some(w) => format!("{line} | WARNING: {w}"),
        None => line,
    };
    if tty {
        eprint!("\r{line}\x1b[K");
    } else {
        eprintln!("{line}");
    }
}

/// The summary so far, while recording goes on (SIGUSR2): live counters per
/// queue; drops are the kernel's so far (the writers' own are counted at
/// the end).
pub(crate) fn status_text(elapsed: Duration, s: &Snapshot, st: &StorageProgress) -> String {
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

fn gaps_json(r: &CaptureReport) -> Value {
    Value::Array(
        r.gaps
            .iter()
            .map(|g| {
                json!({
                    "interface": g.ifname,
                    "from": wiretape::timestamp::format_rfc3339(g.from_ns),
                    "to": wiretape::timestamp::format_rfc3339(g.to_ns),
                    "from_ns": g.from_ns,
                    "to_ns": g.to_ns,
                    "seconds": g.to_ns.saturating_sub(g.from_ns) as f64 / 1e9,
                    "came_back": g.came_back,
                    "why": g.why,
                })
            })
            .collect(),
    )
}

fn drops_json(d: &Drops) -> Value {
    json!({
        "rx_ring_full": d.rx_ring_full,
        "fill_ring_empty": d.fill_ring_empty,
        "other": d.other,
        "after_count": d.after_count,
        "write_error": d.write_error,
        "disk_full": d.disk_full,
        "total": d.total(),
    })
}

pub(crate) fn summary_json(
    r: &CaptureReport,
    why: &str,
    opts: &RecordConfig,
    st: &StorageProgress,
) -> Value {
    let mut t = wiretape::timestamp::StampStats::default();
    for q in &r.queues {
        t.frames += q.stamps.frames;
        t.hw += q.stamps.hw;
        t.xdp += q.stamps.xdp;
        t.poll_fallback += q.stamps.poll_fallback;
        t.hybrid_wdts_batches += q.stamps.hybrid_wdts_batches;
        t.hybrid_kpt_batches += q.stamps.hybrid_kpt_batches;
    }
    let stamps_total = stamps_json(&t, r.queues.iter().map(|q| q.hw_stamped).sum());
    let files: Vec<String> = r
        .queues
        .iter()
        .flat_map(|q| q.sink.files.iter().map(|f| f.display().to_string()))
        .collect();
    json!({
        "interface": r.info.ifname,
        "queues": r.info.queues,
        "engine": r.info.engine,
        "engine_reason": crate::record::ENGINE_REASON.get(),
        "in_place": r.info.in_place,
        "rx_queues": r.info.rx_queues,
        "source": r.info.source.as_ref().map(|p| p.display().to_string()),
        "xdp_mode": xdp_mode(&r.info),
        "bind_mode": match r.info.bind_mode { Some(BindMode::ZeroCopy) => "zero-copy", Some(BindMode::Copy) => "copy", None => "none" },
        "write_engine": r.queues.first().map(|q| q.sink.engine).unwrap_or(""),
        "timestamp_mode": r.info.ts_mode.name(),
        "timestamp_clock": r.info.clock,
        "hw_timestamps_refused": r.info.hw_refused,
        "timestamps": stamps_total,
        "duration_s": r.duration.as_secs_f64(),
        "stop_reason": why,
        "filter": opts.filter,
        "packets_seen": r.seen(),
        "packets_written": r.written(),
        "packets_filtered": r.filtered(),
        "packets_cutoff": r.cutoff(),
        "bytes_cutoff": r.cutoff_bytes(),
        "cutoff_flows_evicted": r.cutoff_flows_evicted(),
        "bytes_written": r.bytes_written(),
        "write_bytes_per_s": r.bytes_written() as f64 / r.duration.as_secs_f64().max(1e-9),
        "bytes_seen": r.queues.iter().map(|q| q.seen_bytes).sum::<u64>(),
        "drops": drops_json(&r.drops()),
        "identity_holds": r.identity_holds(),
        "per_queue": r.queues.iter().enumerate().map(|(i, q)| queue_json(r, i, q)).collect::<Vec<_>>(),
        "interfaces": interfaces_json(r),
        "files": files,
        "format": match opts.storage.format {
            Format::PcapNs => "pcap-ns",
            Format::PcapUs => "pcap-us",
            Format::PcapNg => "pcapng",
        },
        "compress": wiretape::pipeline::report::compress_json(st.compress.as_ref()),
        "retention": {
            "deleted_files": st.deleted_files,
            "deleted_bytes": st.deleted_bytes,
        },
        "sessions_skipped": st.sessions.map_or(0, |x| x.skipped_frames),
        "sessions": wiretape::pipeline::report::sessions_json(st.sessions.as_ref()),
        "interface_gaps": gaps_json(r),
        "notes": r.queues.iter().flat_map(|q| q.sink.notes.clone()).collect::<Vec<_>>(),
        "errors": r.errors(),
        "write_files": opts.live.write_files,
        "subscribers": serde_json::to_value(&r.live.subscribers).unwrap_or_default(),
        "ring": serde_json::to_value(&r.live.ring).unwrap_or_default(),
        "serve": serde_json::to_value(&r.live.serve).unwrap_or_default(),
        "dumps": serde_json::to_value(&r.live.dumps).unwrap_or_default(),
        "control": r.live.control.as_ref().map(|p| p.display().to_string()),
    })
}

/// The interface queue `i` of the run belongs to.
fn interface_of(r: &CaptureReport, i: usize) -> &str {
    let mut at = 0;
    for (info, qs) in r.interfaces() {
        at += qs.len();
        if i < at {
            return &info.ifname;
        }
    }
    &r.info.ifname
}

/// One queue's accounting (queue `i` of the run).
fn queue_json(r: &CaptureReport, i: usize, q: &wiretape::QueueReport) -> Value {
    let ifname = interface_of(r, i);
    json!({
        "queue": q.queue,
        "interface": ifname,
        "packets_seen": q.seen,
        "packets_written": q.written,
        "packets_filtered": q.filtered,
        "packets_cutoff": q.cutoff,
        "bytes_cutoff": q.cutoff_bytes,
        "cutoff_flows_evicted": q.cutoff_flows_evicted,
        "bytes_written": q.bytes_written,
        "bytes_seen": q.seen_bytes,
        "received": q.received,
        "truncated": q.truncated,
        "timestamps": stamps_json(&q.stamps, q.hw_stamped),
        "drops": drops_json(&q.drops),
        "identity_holds": q.identity_holds(),
        "files": q.sink.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "file_bytes": q.sink.file_bytes,
        "writer": {
            "engine": q.sink.engine,
            "block_writes": q.sink.block_writes,
            "waits_for_free_block": q.sink.block_waits,
            "latency_p50_us": q.sink.latency_p50_us,
            "latency_p99_us": q.sink.latency_p99_us,
            "peak_buffered_bytes": q.sink.peak_buffered_bytes,
            "disk_full_retries": q.sink.full_retries,
            "runs_laid_out": q.sink.runs,
            "runs_copied": q.sink.runs.saturating_sub(q.sink.runs_direct),
            "cpu": r.info.writer_cpus.get(i).copied().flatten(),
        },
        "kernel": {
            "rx_dropped": q.kernel.rx_dropped,
            "rx_ring_full": q.kernel.rx_ring_full,
            "rx_fill_ring_empty_descs": q.kernel.rx_fill_ring_empty_descs,
            "rx_invalid_descs": q.kernel.rx_invalid_descs,
        },
    })
}

/// Each interface with its identity, its totals and its queues.
fn interfaces_json(r: &CaptureReport) -> Value {
    let mut at = 0;
    let mut out = Vec::new();
    for (info, qs) in r.interfaces() {
        let mut d = Drops::default();
        for q in qs {
            d.rx_ring_full += q.drops.rx_ring_full;
            d.fill_ring_empty += q.drops.fill_ring_empty;
            d.other += q.drops.other;
            d.after_count += q.drops.after_count;
            d.write_error += q.drops.write_error;
            d.disk_full += q.drops.disk_full;
        }
        let sum = |f: fn(&wiretape::QueueReport) -> u64| qs.iter().map(f).sum::<u64>();
        out.push(json!({
            "interface": info.ifname,
            "ifindex": info.ifindex,
            "engine": info.engine,
            "queues": info.queues,
            "xdp_mode": xdp_mode(info),
            "bind_mode": match info.bind_mode { Some(BindMode::ZeroCopy) => "zero-copy", Some(BindMode::Copy) => "copy", None => "none" },
            "native_refused": info.native_refused,
            "cpus": info.cpus,
            "packets_seen": sum(|q| q.seen),
            "packets_written": sum(|q| q.written),
            "packets_filtered": sum(|q| q.filtered),
            "packets_cutoff": sum(|q| q.cutoff),
            "bytes_cutoff": sum(|q| q.cutoff_bytes),
            "bytes_written": sum(|q| q.bytes_written),
            "bytes_seen": sum(|q| q.seen_bytes),
            "drops": drops_json(&d),
            "identity_holds": qs.iter().all(|q| q.identity_holds()),
            "per_queue": qs.iter().enumerate().map(|(k, q)| queue_json(r, at + k, q)).collect::<Vec<_>>(),
            "files": qs.iter().flat_map(|q| q.sink.files.iter().map(|f| f.display().to_string())).collect::<Vec<_>>(),
        }));
        at += qs.len();
    }
    Value::Array(out)
}

pub(crate) fn summary_text(r: &CaptureReport, why: &str, st: &StorageProgress) -> String {
    let mut s = format!(
        "wiretape: stopped ({why}) after {:.2} s: {} frames seen, {} written ({}), {} filtered out, {} dropped\n",
        r.duration.as_secs_f64(),
        thousands(r.seen()),
        thousands(r.written()),
        bytes_h(r.bytes_written()),
        thousands(r.filtered()),
        thousands(r.drops().total())
    );
    s += "  queue        seen     written    filtered  ring_full fill_empty    other after_count write_err disk_full  file\n";
    let several = !r.info.interfaces.is_empty();
    for (info, qs) in r.interfaces() {
        if several {
            let (seen, written): (u64, u64) = (
                qs.iter().map(|q| q.seen).sum(),
                qs.iter().map(|q| q.written).sum(),
            );
            let dropped: u64 = qs.iter().map(|q| q.drops.total()).sum();
            s += &format!(
                "  interface {}: {} seen, {} written, {} dropped{}\n",
                info.ifname,
                thousands(seen),
                thousands(written),
                thousands(dropped),
                if qs.iter().all(|q| q.identity_holds()) {
                    " (identity holds)"
                } else {
                    ""
                }
            );
        }
        for q in qs {
            let d = &q.drops;
            s += &format!(
                "  {:>5} {:>11} {:>11} {:>11} {:>10} {:>10} {:>8} {:>11} {:>9} {:>9}  {}\n",
                q.queue,
                q.seen,
                q.written,
                q.filtered,
                d.rx_ring_full,
                d.fill_ring_empty,
                d.other,
                d.after_count,
                d.write_error,
                d.disk_full,
                q.sink
                    .files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    // "eth1 queue 0" when the run has several interfaces.
    let label = |i: usize, q: &wiretape::QueueReport| {
        if several {
            format!("{} queue {}", interface_of(r, i), q.queue)
        } else {
            format!("queue {}", q.queue)
        }
    };
    for (i, q) in r
        .queues
        .iter()
        .enumerate()
        .filter(|(_, q)| q.sink.block_writes > 0 && q.sink.engine == "direct")
    {
        s += &format!(
            "  {} writer: O_DIRECT, {} block writes, latency p50 {:.0} us p99 {:.0} us, peak RAM buffer {}, waited for a free block {} times\n",
            label(i, q), q.sink.block_writes, q.sink.latency_p50_us, q.sink.latency_p99_us, bytes_h(q.sink.peak_buffered_bytes), q.sink.block_waits
        );
        if q.sink.runs > 0 {
            s += &format!(
                "  {} laid out in place: {} ring blocks, {} written from the ring, {} copied while the disk was behind\n",
                label(i, q),
                q.sink.runs,
                q.sink.runs_direct,
                q.sink.runs.saturating_sub(q.sink.runs_direct)
            );
        }
    }
    if let Some(g) = &r.live.ring {
        s += &format!(
            "  ring: {} in RAM ({} x {} per queue, huge pages: {}), {} frames held ({} overwritten){}\n",
            bytes_h(g.bytes),
            g.chunks_per_queue,
            bytes_h(g.chunk_bytes as u64),
            g.huge_pages,
            thousands(g.held_frames),
            thousands(g.overwritten_frames),
            if r.live.dumps.is_empty() {
                String::new()
            } else {
                format!(", {} dumps", r.live.dumps.len())
            }
        );
    }
    for d in &r.live.dumps {
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
    for sub in &r.live.subscribers {
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
    if let Some(v) = &r.live.serve {
        s += &format!(
            "  serve {}: {} clients ({} cut off, {} refused), {} frames sent\n",
            v.addr,
            v.clients,
            v.cut_off,
            v.refused,
            thousands(v.frames_sent)
        );
    }
    if let Some(x) = &st.sessions {
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
    if st.deleted_files > 0 {
        s += &format!(
            "  retention: deleted {} of our files ({})\n",
            st.deleted_files,
            bytes_h(st.deleted_bytes)
        );
    }
    for g in &r.gaps {
        s += &format!(
            "  interface {} was away {:.1} s, from {} to {}{}: nothing could be recorded then ({})\n",
            g.ifname,
            g.to_ns.saturating_sub(g.from_ns) as f64 / 1e9,
            wiretape::timestamp::format_rfc3339(g.from_ns),
            wiretape::timestamp::format_rfc3339(g.to_ns),
            if g.came_back { ", then reattached" } else { " (the run ended before it came back)" },
            g.why
        );
    }
    if let Some(c) = &st.compress {
        s += &format!(
            "  compressed ({}{}): {} of blocks -> {} ({:.3}), {} blocks, {} stored uncompressed\n",
            c.compress.algorithm(),
            if c.compress.level() != 0 {
                format!(":{}", c.compress.level())
            } else {
                String::new()
            },
            bytes_h(c.bytes_in),
            bytes_h(c.bytes_out),
            c.ratio(),
            thousands(c.blocks),
            thousands(c.blocks_uncompressed)
        );
    }
    if r.cutoff() > 0 {
        s += &format!(
            "  cutoff: {} frames ({}) past their connection's first bytes left out; {} connections evicted from the table\n",
            thousands(r.cutoff()),
            bytes_h(r.cutoff_bytes()),
            thousands(r.cutoff_flows_evicted())
        );
    }
    if r.identity_holds() && r.cutoff() > 0 {
        s += "  accounting: seen = written + filtered + cutoff + drops, on every queue (identity holds)\n";
    } else if r.identity_holds() {
        s += "  accounting: seen = written + filtered + drops, on every queue (identity holds)\n";
    } else {
        for (i, q) in r
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.identity_holds())
        {
            s += &format!(
                "  WARNING: {}: seen {} != written {} + filtered {} + cutoff {} + drops {} (unaccounted {}): the identity does not hold; please report this\n",
                label(i, q),
                q.seen,
                q.written,
                q.filtered,
                q.cutoff,
                q.drops.total(),
                q.seen as i128 - (q.written + q.filtered + q.cutoff + q.drops.total()) as i128
            );
        }
    }
    if r.info.engine == "netmap" {
        s += &format!(
            "  netmap: frames the NIC dropped while a ring was full are not seen by wiretape: see `ethtool -S {}` (rx_missed_errors)\n",
            r.info.ifname
        );
    }
    // The closing lines scripts written for tcpdump already parse.
    let d = r.drops();
    s += &format!("{} packets captured\n", r.written());
    // A file has no kernel to drop frames (tcpdump -r prints no such line).
    if r.info.engine != "file" {
        s += &format!(
            "{} packets dropped by kernel\n",
            d.rx_ring_full + d.fill_ring_empty + d.other
        );
    }
    let truncated: u64 = r.queues.iter().map(|q| q.truncated).sum();
    if truncated > 0 {
        s += &format!(
            "  {} frames cut to the snap length (original lengths kept)\n",
            thousands(truncated)
        );
    }
    s
}
