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
    /// Frames written.
    pub written: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// The kernel's socket statistics (AF_XDP).
    pub kernel: XskStats,
}

/// Live counters of a run.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per queue.
    pub queues: Vec<QueueSnapshot>,
}

impl Snapshot {
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
    /// Bytes seen, all queues.
    pub fn seen_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.seen_bytes).sum()
    }
    /// Frames the kernel dropped so far (ring full and others).
    pub fn kernel_drops(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.kernel.rx_dropped + q.kernel.rx_ring_full)
            .sum()
    }
}

/// Frames not written, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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

    fn add(&mut self, o: &Drops) {
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
    /// seen = written + filtered + every drop reason.
    pub fn identity_holds(&self) -> bool {
        self.seen == self.written + self.filtered + self.drops.total()
    }

    /// The writer's first error.
    pub fn error(&self) -> Option<&Arc<StorageError>> {
        self.sink.error.as_ref()
    }
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
    /// Why the input ended early (a file's read error), if it did.
    pub input_error: Option<String>,
    /// Live consumers: subscribers, the ring, PCAP-over-IP, dumps.
    pub live: crate::live::LiveReport,
}

impl RecordReport {
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
