//! The accounting: live snapshots and the final report, per queue and in
//! total, with the identity every frame must satisfy:
//! `seen = written + filtered + drops (every reason)`. Frames the capture
//! filter rejected are not drops: nobody lost them, they were not wanted.

use std::sync::Arc;
use std::time::Duration;
use wiretape_capture::{StartInfo, XskStats};
use wiretape_storage::{StorageError, WriterReport};
use wiretape_timestamp::StampStats;

/// Live counters of one queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueSnapshot {
    /// The queue.
    pub queue: u32,
    /// Frames the engine saw.
    pub seen: u64,
    /// Their bytes.
    pub seen_bytes: u64,
    /// Frames taken by the poll thread.
    pub received: u64,
    /// Seen frames the capture filter rejected.
    pub filtered: u64,
    /// Seen frames the per-connection cutoff (`--cutoff`) left out.
    pub cutoff: u64,
    /// Their bytes.
    pub cutoff_bytes: u64,
    /// Frames written.
    pub written: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// The kernel's socket statistics (AF_XDP).
    pub kernel: XskStats,
    /// Frames not written so far, by reason (the writers' own reasons as
    /// their last refresh, about once a second, says).
    pub drops: Drops,
}

/// Live counters of a run.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per queue.
    pub queues: Vec<QueueSnapshot>,
    /// A warning about the input's link (down, no carrier), while it lasts.
    pub link: Option<String>,
}

impl QueueSnapshot {
    fn add(&mut self, o: &QueueSnapshot) {
        self.seen += o.seen;
        self.seen_bytes += o.seen_bytes;
        self.received += o.received;
        self.filtered += o.filtered;
        self.cutoff += o.cutoff;
        self.cutoff_bytes += o.cutoff_bytes;
        self.written += o.written;
        self.bytes += o.bytes;
        self.kernel = add_kernel(&self.kernel, &o.kernel);
        self.drops.add(&o.drops);
    }
}

fn add_kernel(a: &XskStats, b: &XskStats) -> XskStats {
    XskStats {
        rx_dropped: a.rx_dropped + b.rx_dropped,
        rx_invalid_descs: a.rx_invalid_descs + b.rx_invalid_descs,
        rx_ring_full: a.rx_ring_full + b.rx_ring_full,
        rx_fill_ring_empty_descs: a.rx_fill_ring_empty_descs + b.rx_fill_ring_empty_descs,
    }
}

impl Snapshot {
    /// Adds what earlier segments of the run counted (after the interface
    /// came back, the engine's counters start again from zero), so that
    /// the numbers only grow over the whole run.
    pub fn add_base(&mut self, base: &[QueueSnapshot]) {
        for b in base {
            match self.queues.iter_mut().find(|q| q.queue == b.queue) {
                Some(q) => q.add(b),
                None => self.queues.push(*b),
            }
        }
    }

    /// Frames seen, all queues.
    pub fn seen(&self) -> u64 {
        self.queues.iter().map(|q| q.seen).sum()
    }
    /// Frames written, all queues.
    pub fn written(&self) -> u64 {
        self.queues.iter().map(|q| q.written).sum()
    }
    /// Bytes written, all queues.
    pub fn bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.bytes).sum()
    }
    /// Frames the capture filter rejected, all queues.
    pub fn filtered(&self) -> u64 {
        self.queues.iter().map(|q| q.filtered).sum()
    }
    /// Frames the cutoff left out, all queues.
    pub fn cutoff(&self) -> u64 {
        self.queues.iter().map(|q| q.cutoff).sum()
    }
    /// Their bytes, all queues.
    pub fn cutoff_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.cutoff_bytes).sum()
    }
    /// Bytes seen, all queues.
    pub fn seen_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.seen_bytes).sum()
    }
    /// Frames the kernel dropped so far (ring full and others): AF_XDP's
    /// socket statistics, or what an engine without them counts as its
    /// ring's drops (the packet engine's PACKET_STATISTICS), whichever is
    /// more per queue (AF_XDP counts the same drops in both).
    pub fn kernel_drops(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| {
                let engine = q.drops.rx_ring_full + q.drops.fill_ring_empty + q.drops.other;
                (q.kernel.rx_dropped + q.kernel.rx_ring_full).max(engine)
            })
            .sum()
    }
}

/// Frames not written, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Drops {
    /// The socket's RX ring was full (the poll thread fell behind).
    pub rx_ring_full: u64,
    /// No free UMEM frame in the fill ring (the writer fell behind).
    pub fill_ring_empty: u64,
    /// Other kernel drops (e.g. a frame larger than a UMEM frame).
    pub other: u64,
    /// Received after the -c COUNT limit was reached (not recorded by request).
    pub after_count: u64,
    /// Reached the writer but not the file (a write error).
    pub write_error: u64,
    /// Reached the writer but not the file: the disk was full (`--on-full stop`,
    /// or `rotate` with nothing of ours left to delete).
    pub disk_full: u64,
}

impl Drops {
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.rx_ring_full
            + self.fill_ring_empty
            + self.other
            + self.after_count
            + self.write_error
            + self.disk_full
    }

    pub(crate) fn add(&mut self, o: &Drops) {
        self.rx_ring_full += o.rx_ring_full;
        self.fill_ring_empty += o.fill_ring_empty;
        self.other += o.other;
        self.after_count += o.after_count;
        self.write_error += o.write_error;
        self.disk_full += o.disk_full;
    }
}

/// Final accounting of one queue.
#[derive(Clone, Debug, Default)]
pub struct QueueReport {
    /// The queue.
    pub queue: u32,
    /// Frames the engine saw (the XDP program's count; a file's records read).
    pub seen: u64,
    /// Their bytes.
    pub seen_bytes: u64,
    /// Frames taken by the poll thread.
    pub received: u64,
    /// Frames in the files.
    pub written: u64,
    /// Seen frames the capture filter rejected (left to the kernel's stack;
    /// a file's records skipped). Not a drop.
    pub filtered: u64,
    /// Seen frames the filter kept and the per-connection cutoff
    /// (`--cutoff`) left out. Not a drop.
    pub cutoff: u64,
    /// Their bytes.
    pub cutoff_bytes: u64,
    /// Connections evicted from the cutoff's full table.
    pub cutoff_flows_evicted: u64,
    /// Their captured bytes.
    pub bytes_written: u64,
    /// Frames cut to the snap length.
    pub truncated: u64,
    /// Frames not written, by reason.
    pub drops: Drops,
    /// Where the stamps came from.
    pub stamps: StampStats,
    /// Frames the NIC stamped, by the XDP program's count.
    pub hw_stamped: u64,
    /// The kernel's socket statistics (AF_XDP).
    pub kernel: XskStats,
    /// The writer's files, engine and backpressure numbers.
    pub sink: WriterReport,
}

impl QueueReport {
    /// seen = written + filtered + cutoff + every drop reason.
    pub fn identity_holds(&self) -> bool {
        self.seen == self.written + self.filtered + self.cutoff + self.drops.total()
    }

    /// The writer's first error.
    pub fn error(&self) -> Option<&Arc<StorageError>> {
        self.sink.error.as_ref()
    }
}

impl QueueReport {
    /// Adds a later segment of the same queue (`--wait-iface`: the run went
    /// on on a new engine after the interface came back).
    pub fn absorb(&mut self, o: QueueReport) {
        self.seen += o.seen;
        self.seen_bytes += o.seen_bytes;
        self.received += o.received;
        self.written += o.written;
        self.filtered += o.filtered;
        self.cutoff += o.cutoff;
        self.cutoff_bytes += o.cutoff_bytes;
        self.cutoff_flows_evicted += o.cutoff_flows_evicted;
        self.bytes_written += o.bytes_written;
        self.truncated += o.truncated;
        self.drops.add(&o.drops);
        let (a, b) = (&mut self.stamps, &o.stamps);
        a.frames += b.frames;
        a.hw += b.hw;
        a.xdp += b.xdp;
        a.poll_fallback += b.poll_fallback;
        a.hybrid_wdts_batches += b.hybrid_wdts_batches;
        a.hybrid_kpt_batches += b.hybrid_kpt_batches;
        self.hw_stamped += o.hw_stamped;
        self.kernel = add_kernel(&self.kernel, &o.kernel);
        self.sink.absorb(o.sink);
    }

    /// The live view of the final numbers.
    pub fn as_snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            queue: self.queue,
            seen: self.seen,
            seen_bytes: self.seen_bytes,
            received: self.received,
            filtered: self.filtered,
            cutoff: self.cutoff,
            cutoff_bytes: self.cutoff_bytes,
            written: self.written,
            bytes: self.bytes_written,
            kernel: self.kernel,
            drops: self.drops,
        }
    }
}

/// A time the recorded interface was away (`--wait-iface`): nothing could
/// arrive; the files before it are finished, new ones start after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gap {
    /// The interface.
    pub ifname: String,
    /// When it was found gone (UTC ns).
    pub from_ns: u64,
    /// When recording resumed, or the run ended without it (UTC ns).
    pub to_ns: u64,
    /// Whether it came back (false: the run ended while waiting).
    pub came_back: bool,
    /// Why it was taken for gone.
    pub why: String,
}

/// Final accounting of a run.
#[derive(Clone, Debug)]
pub struct RecordReport {
    /// How the engine came up.
    pub info: StartInfo,
    /// Per queue.
    pub queues: Vec<QueueReport>,
    /// From start to stop.
    pub duration: Duration,
    /// Why the input ended early (a file's read error, the interface
    /// gone), if it did.
    pub input_error: Option<String>,
    /// Times the interface was away (`--wait-iface`), in order.
    pub gaps: Vec<Gap>,
    /// Live consumers: subscribers, the ring, PCAP-over-IP, dumps.
    pub live: crate::live::LiveReport,
}

impl RecordReport {
    /// Adds a later segment of the run (see [`QueueReport::absorb`]); the
    /// later one's start info wins (it is how the engine runs now).
    pub fn absorb(&mut self, later: RecordReport) {
        for q in later.queues {
            match self.queues.iter_mut().find(|m| m.queue == q.queue) {
                Some(m) => m.absorb(q),
                None => self.queues.push(q),
            }
        }
        self.queues.sort_by_key(|q| q.queue);
        self.info = later.info;
        self.duration += later.duration;
        if self.input_error.is_none() {
            self.input_error = later.input_error;
        }
        self.gaps.extend(later.gaps);
    }

    /// Frames seen, all queues.
    pub fn seen(&self) -> u64 {
        self.queues.iter().map(|q| q.seen).sum()
    }
    /// Frames written, all queues.
    pub fn written(&self) -> u64 {
        self.queues.iter().map(|q| q.written).sum()
    }
    /// Bytes written, all queues.
    pub fn bytes_written(&self) -> u64 {
        self.queues.iter().map(|q| q.bytes_written).sum()
    }
    /// Frames the capture filter rejected, all queues.
    pub fn filtered(&self) -> u64 {
        self.queues.iter().map(|q| q.filtered).sum()
    }
    /// Frames the cutoff left out, all queues.
    pub fn cutoff(&self) -> u64 {
        self.queues.iter().map(|q| q.cutoff).sum()
    }
    /// Their bytes, all queues.
    pub fn cutoff_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.cutoff_bytes).sum()
    }
    /// Connections evicted from the cutoff's table, all queues.
    pub fn cutoff_flows_evicted(&self) -> u64 {
        self.queues.iter().map(|q| q.cutoff_flows_evicted).sum()
    }
    /// Drops by reason, all queues.
    pub fn drops(&self) -> Drops {
        let mut d = Drops::default();
        for q in &self.queues {
            d.add(&q.drops);
        }
        d
    }
    /// Whether every queue's identity holds.
    pub fn identity_holds(&self) -> bool {
        self.queues.iter().all(|q| q.identity_holds())
    }

    /// Each interface of the run with its queues (one entry for a run over
    /// one interface or a file): the queues of a multi-interface run follow
    /// each other in [`RecordReport::queues`], interface after interface.
    pub fn interfaces(&self) -> Vec<(&StartInfo, &[QueueReport])> {
        if self.info.interfaces.is_empty() {
            return vec![(&self.info, &self.queues[..])];
        }
        let mut at = 0;
        self.info
            .interfaces
            .iter()
            .map(|i| {
                let end = (at + i.queues.len()).min(self.queues.len());
                let part = &self.queues[at..end];
                at = end;
                (i, part)
            })
            .collect()
    }
    /// Every error, one line each.
    pub fn errors(&self) -> Vec<String> {
        self.input_error
            .iter()
            .cloned()
            .chain(
                self.queues
                    .iter()
                    .filter_map(|q| q.error().map(|e| e.to_string())),
            )
            .collect()
    }
}

/// The `compress` object of the summary, `ctl status` and the API: the
/// algorithm, level, bytes in and out, their ratio, blocks, and blocks
/// stored uncompressed (`null` without `--compress`).
pub fn compress_json(c: Option<&wiretape_storage::CompressReport>) -> serde_json::Value {
    serde_json::to_value(c.map(crate::summary::CompressSummary::from)).unwrap_or_default()
}

/// The `sessions` object of the summary and `ctl status`: the session
/// tables written so far (incomplete ones among them), the frames read and
/// those skipped (`sessions_skipped`: the session thread was behind), the
/// thread's CPU time (`null` with `--no-sessions`).
pub fn sessions_json(s: Option<&wiretape_storage::sessions::SessionStats>) -> serde_json::Value {
    match s {
        None => serde_json::Value::Null,
        Some(x) => serde_json::json!({
            "tables": x.tables,
            "incomplete": x.incomplete,
            "frames": x.frames,
            "skipped_frames": x.skipped_frames,
            "errors": x.errors,
            "cpu_s": x.cpu_ns as f64 / 1e9,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packet engine has no AF_XDP statistics: its ring's drops still
    /// count (the progress line, `ctl status` and /metrics said 0 while a
    /// 30-minute soak lost frames with the ring full).
    #[test]
    fn kernel_drops_count_an_engine_without_xdp_statistics() {
        let packet = QueueSnapshot {
            drops: Drops {
                rx_ring_full: 7,
                after_count: 100,
                ..Drops::default()
            },
            ..QueueSnapshot::default()
        };
        let mut xdp = QueueSnapshot::default();
        xdp.kernel.rx_ring_full = 3;
        xdp.kernel.rx_dropped = 2;
        xdp.drops.rx_ring_full = 3;
        xdp.drops.fill_ring_empty = 2;
        let s = Snapshot {
            queues: vec![packet, xdp],
            link: None,
        };
        assert_eq!(s.kernel_drops(), 7 + 5);
    }
}
