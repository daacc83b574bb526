//! The metrics endpoint (`record --metrics ADDR`): a recording's numbers for Prometheus, at
//! `http://ADDR/metrics`, in the OpenMetrics text format that the
//! Prometheus project's `prometheus-client` crate encodes (Prometheus
//! scrapes it natively; its text parsers read it).
//!
//! Nothing here touches the data path: the recording's control loop hands
//! its live numbers to the progress callback once a second, which stores
//! them here ([`Metrics::update`]); a scrape encodes the latest ones (plus a
//! statvfs of the output filesystem, and the disk write latency histogram
//! the writers refresh once a second). At the end the final report
//! replaces them, so the last numbers equal the summary's. The listener is a
//! small blocking HTTP/1.0 server on its own thread: one request per
//! connection, `GET /metrics` (anything else is 404), a 2 s read timeout so
//! a stuck client cannot hold it.
//!
//! Families (labels `interface`, `queue` unless said):
//! `wiretape_frames_seen_total`, `wiretape_frames_written_total`,
//! `wiretape_frames_filtered_total`, `wiretape_frames_dropped_total`
//! (`reason`: rx_ring_full, fill_ring_empty, other, after_count,
//! write_error, disk_full), `wiretape_seen_bytes_total`,
//! `wiretape_written_bytes_total`, `wiretape_disk_write_latency_seconds`
//! (histogram), `wiretape_disk_writes_total`, `wiretape_ram_buffer_bytes`,
//! `wiretape_files_open`, `wiretape_files_opened_total`,
//! `wiretape_files_rotated_total`, `wiretape_files_deleted_total` and
//! `wiretape_deleted_bytes_total` (by retention, per the deleted files'
//! interface and queue), `wiretape_last_error_info` (`error`, the text) and
//! `wiretape_last_error_timestamp_seconds`; per recording:
//! `wiretape_sessions_skipped_frames_total` (frames not read for the
//! session tables: their thread was behind), `wiretape_sessions_tables_total`
//! and `wiretape_sessions_tables_incomplete_total` (without `--no-sessions`),
//! `wiretape_output_free_bytes` and `wiretape_output_size_bytes`
//! (`directory`), `wiretape_ram_buffer_limit_bytes`, `wiretape_link_up`
//! (`interface`), `wiretape_reattached_total` (`interface`: times it came
//! back after going away), `wiretape_start_time_seconds`,
//! `wiretape_recording` (1 while recording, 0 once stopped).

use crate::{QueueSnapshot, RecordReport, Snapshot};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiretape_storage::{QueueStorage, StorageProgress};

/// Why the metrics endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetricsError {
    /// A non-loopback address without `allow_remote`.
    #[error(
        "the metrics endpoint on {0} would serve the recording's numbers beyond this machine: \
         allow remote clients to mean it, or listen on 127.0.0.1"
    )]
    Remote(SocketAddr),
    /// The address cannot be listened on (taken, not this host's).
    #[error("cannot listen on {addr} for the metrics endpoint")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its thread could not be started.
    #[error("cannot start the metrics thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Upper bounds of the write-latency buckets, seconds.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// What the endpoint shows, replaced as the recording goes.
#[derive(Debug, Default)]
struct State {
    ifname: String,
    dir: PathBuf,
    start_s: f64,
    snapshot: Snapshot,
    storage: StorageProgress,
    /// When each queue's error was first seen (Unix s).
    error_since: Vec<(String, u32, f64)>,
    starts: u64,
    recording: bool,
    /// Run-wide queue number -> (interface, its own queue number): with
    /// several interfaces the run numbers their queues in turn.
    labels: Vec<(u32, String, u32)>,
}

impl State {
    fn labels_of(&self, q: u32) -> Vec<(&'static str, String)> {
        match self.labels.iter().find(|(g, _, _)| *g == q) {
            Some((_, i, own)) => q_labels(i, *own),
            None => q_labels(&self.ifname, q),
        }
    }
}

/// The shared state, encoded on each scrape.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

/// A running metrics endpoint.
pub struct Metrics {
    shared: Arc<Shared>,
    /// Where it listens (the port the system chose, with port 0).
    pub addr: SocketAddr,
}

impl Metrics {
    /// Listens on `addr` (a usage error if it is not a loopback address and
    /// `allow_remote` is false) and serves `/metrics` from a thread of its
    /// own. Fails (before anything is attached) if the port is taken.
    pub fn serve(
        addr: SocketAddr,
        allow_remote: bool,
        ifname: &str,
        dir: PathBuf,
    ) -> Result<Self, MetricsError> {
        if !crate::live::may_listen(addr, allow_remote) {
            return Err(MetricsError::Remote(addr));
        }
        let listen = |source| MetricsError::Listen { addr, source };
        let listener = TcpListener::bind(addr).map_err(listen)?;
        let addr = listener.local_addr().map_err(listen)?;
        let shared = Arc::new(Shared::default());
        {
            let mut st = shared.state.lock().unwrap();
            st.ifname = ifname.to_string();
            st.dir = dir;
            st.start_s = now_s();
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(shared.clone()));
        let registry = Arc::new(registry);
        let spawned = std::thread::Builder::new()
            .name("wt-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(c) => {
                            let _ = answer(c, &registry);
                        }
                        // Out of descriptors, say: not a reason to spin.
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            });
        if let Err(e) = spawned {
            return Err(MetricsError::Thread(e));
        }
        Ok(Metrics { shared, addr })
    }

    /// Follows a recording's events ([`crate::record()`]'s callback): its
    /// start ([`Metrics::started`]) and each progress tick
    /// ([`Metrics::update`]); the end is [`Metrics::finish`]'s, with the
    /// report.
    pub fn observe(&self, event: &crate::Event) {
        match event {
            crate::Event::Started(info) => self.started(info),
            crate::Event::Progress {
                snapshot, storage, ..
            } => self.update(snapshot, storage),
            _ => {}
        }
    }

    /// The engine is up (again, after the interface came back).
    pub fn started(&self, info: &wiretape_capture::StartInfo) {
        let mut st = self.shared.state.lock().unwrap();
        st.ifname = info.ifname.clone();
        st.labels = if info.interfaces.is_empty() {
            info.queues
                .iter()
                .map(|&q| (q, info.ifname.clone(), q))
                .collect()
        } else {
            info.interfaces
                .iter()
                .flat_map(|i| i.queues.iter().map(|&q| (i.ifname.clone(), q)))
                .enumerate()
                .map(|(g, (i, q))| (g as u32, i, q))
                .collect()
        };
        st.starts += 1;
        st.recording = true;
    }

    /// The latest live numbers (once a second, from the progress callback).
    pub fn update(&self, snapshot: &Snapshot, storage: &StorageProgress) {
        let mut st = self.shared.state.lock().unwrap();
        st.snapshot = snapshot.clone();
        st.storage = storage.clone();
        note_errors(&mut st);
    }

    /// The final numbers: exactly the summary's.
    pub fn finish(&self, r: &RecordReport, storage: &StorageProgress) {
        let mut st = self.shared.state.lock().unwrap();
        // The report numbers queues on their own interface, in the run's
        // order: back to the run-wide numbers the labels are kept by.
        let globals: Vec<u32> = st.labels.iter().map(|(g, _, _)| *g).collect();
        st.snapshot = Snapshot {
            queues: r
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let mut s = q.as_snapshot();
                    if let Some(&g) = globals.get(i) {
                        s.queue = g;
                    }
                    s
                })
                .collect(),
            link: None,
        };
        st.storage = storage.clone();
        st.recording = false;
        note_errors(&mut st);
    }
}

fn now_s() -> f64 {
    wiretape_timestamp::realtime_ns() as f64 / 1e9
}

fn note_errors(st: &mut State) {
    let now = now_s();
    let new: Vec<(String, u32)> = st
        .storage
        .queues
        .iter()
        .filter(|q| q.error.is_some())
        .filter(|q| {
            !st.error_since
                .iter()
                .any(|(i, n, _)| *i == q.ifname && *n == q.queue)
        })
        .map(|q| (q.ifname.clone(), q.queue))
        .collect();
    for (i, q) in new {
        st.error_since.push((i, q, now));
    }
}

/// Reads one request and answers it.
fn answer(mut c: TcpStream, registry: &Registry) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let first = line.lines().next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = if method == "GET" && path == "/metrics" {
        let mut body = String::new();
        match prometheus_client::encoding::text::encode(&mut body, registry) {
            Ok(()) => (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                body,
            ),
            Err(_) => (
                "500 Internal Server Error",
                "text/plain",
                "encoding failed\n".into(),
            ),
        }
    } else if method == "GET" && path == "/" {
        (
            "200 OK",
            "text/plain",
            "wiretape: the metrics are at /metrics\n".into(),
        )
    } else {
        (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".into(),
        )
    };
    write!(
        c,
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    c.write_all(body.as_bytes())?;
    c.flush()
}

/// One family: a descriptor, then one sample per label set.
fn family<'a, M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: impl IntoIterator<Item = (Vec<(&'a str, String)>, M)>,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in samples {
        v.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn q_labels(ifname: &str, queue: u32) -> Vec<(&'static str, String)> {
    vec![
        ("interface", ifname.to_string()),
        ("queue", queue.to_string()),
    ]
}

impl Collector for Shared {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let st = self.state.lock().unwrap();
        encode_queues(&st, &mut enc)?;
        encode_writers(&st, &mut enc)?;
        encode_run(&st, &mut enc)
    }
}

/// The per-queue families of the live counters.
fn encode_queues(st: &State, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let qs = &st.snapshot.queues;
    let counter = |f: &dyn Fn(&QueueSnapshot) -> u64| {
        qs.iter()
            .map(|q| (st.labels_of(q.queue), ConstCounter::new(f(q))))
            .collect::<Vec<_>>()
    };
    family(
        enc,
        "wiretape_frames_seen",
        "Frames that reached a recorded queue (the XDP program's count, before the capture filter)",
        MetricType::Counter,
        counter(&|q| q.seen),
    )?;
    family(
        enc,
        "wiretape_frames_written",
        "Frames written into the capture files",
        MetricType::Counter,
        counter(&|q| q.written),
    )?;
    family(
        enc,
        "wiretape_frames_filtered",
        "Frames the capture filter rejected (left to the kernel's stack; not a drop)",
        MetricType::Counter,
        counter(&|q| q.filtered),
    )?;
    family(
        enc,
        "wiretape_frames_cutoff",
        "Frames the per-connection cutoff (--cutoff) left out (not a drop)",
        MetricType::Counter,
        counter(&|q| q.cutoff),
    )?;
    family(
        enc,
        "wiretape_bytes_cutoff",
        "Bytes of the frames the per-connection cutoff left out",
        MetricType::Counter,
        counter(&|q| q.cutoff_bytes),
    )?;
    {
        let mut m = enc.encode_descriptor(
            "wiretape_frames_dropped",
            "Frames not written, by reason (seen = written + filtered + cutoff + dropped)",
            None,
            MetricType::Counter,
        )?;
        for q in qs {
            let d = &q.drops;
            for (reason, v) in [
                ("rx_ring_full", d.rx_ring_full),
                ("fill_ring_empty", d.fill_ring_empty),
                ("other", d.other),
                ("after_count", d.after_count),
                ("write_error", d.write_error),
                ("disk_full", d.disk_full),
            ] {
                let mut labels = st.labels_of(q.queue);
                labels.push(("reason", reason.to_string()));
                ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
            }
        }
    }
    family(
        enc,
        "wiretape_seen_bytes",
        "Bytes of the frames seen",
        MetricType::Counter,
        counter(&|q| q.seen_bytes),
    )?;
    family(
        enc,
        "wiretape_written_bytes",
        "Captured bytes of the frames written",
        MetricType::Counter,
        counter(&|q| q.bytes),
    )?;

    Ok(())
}

/// The writers' families (latency, writes, files, errors).
fn encode_writers(st: &State, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let ws = &st.storage.queues;
    {
        let mut m = enc.encode_descriptor(
            "wiretape_disk_write_latency_seconds",
            "Time from submitting a block write to its completion (O_DIRECT engine)",
            None,
            MetricType::Histogram,
        )?;
        for w in ws.iter().filter(|w| w.latency_us.is_some()) {
            let h = w.latency_us.as_ref().expect("filtered");
            let mut per = vec![0u64; LATENCY_BUCKETS.len() + 1];
            let mut sum = 0.0;
            for v in h.iter_recorded() {
                let us = v.value_iterated_to();
                let n = v.count_at_value();
                sum += us as f64 * n as f64 / 1e6;
                let i = LATENCY_BUCKETS
                    .iter()
                    .position(|&le| us as f64 <= le * 1e6)
                    .unwrap_or(LATENCY_BUCKETS.len());
                per[i] += n;
            }
            let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
                .iter()
                .copied()
                .chain([f64::INFINITY])
                .zip(per)
                .collect();
            let labels = q_labels(&w.ifname, w.queue);
            m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
                sum,
                h.len(),
                &buckets,
                None,
            )?;
        }
    }
    let wcounter = |f: &dyn Fn(&QueueStorage) -> u64| {
        ws.iter()
            .map(|w| (q_labels(&w.ifname, w.queue), ConstCounter::new(f(w))))
            .collect::<Vec<_>>()
    };
    let wgauge = |f: &dyn Fn(&QueueStorage) -> u64| {
        ws.iter()
            .map(|w| (q_labels(&w.ifname, w.queue), ConstGauge::new(f(w) as i64)))
            .collect::<Vec<_>>()
    };
    family(
        enc,
        "wiretape_disk_writes",
        "Block writes issued",
        MetricType::Counter,
        wcounter(&|w| w.block_writes),
    )?;
    family(
        enc,
        "wiretape_ram_buffer_bytes",
        "Filled blocks in RAM not yet on disk (waiting for a write slot or being written)",
        MetricType::Gauge,
        wgauge(&|w| w.buffered_bytes),
    )?;
    family(
        enc,
        "wiretape_files_open",
        "Capture files being written or finished now",
        MetricType::Gauge,
        wgauge(&|w| w.files_open),
    )?;
    family(
        enc,
        "wiretape_files_opened",
        "Capture files started",
        MetricType::Counter,
        wcounter(&|w| w.files_opened),
    )?;
    family(
        enc,
        "wiretape_files_rotated",
        "Rotations: a new file started, the old one finished",
        MetricType::Counter,
        wcounter(&|w| w.rotations),
    )?;
    family(
        enc,
        "wiretape_files_deleted",
        "Our files deleted by retention (or on a full disk with --on-full rotate)",
        MetricType::Counter,
        wcounter(&|w| w.deleted_files),
    )?;
    family(
        enc,
        "wiretape_deleted_bytes",
        "Bytes of the files deleted by retention",
        MetricType::Counter,
        wcounter(&|w| w.deleted_bytes),
    )?;
    {
        let errs: Vec<_> = ws
            .iter()
            .filter_map(|w| w.error.as_ref().map(|e| (w, e)))
            .collect();
        let mut m = enc.encode_descriptor(
            "wiretape_last_error",
            "The writer's error (the text in the label), while it stands",
            None,
            MetricType::Info,
        )?;
        for (w, e) in &errs {
            let mut labels = q_labels(&w.ifname, w.queue);
            labels.push(("error", e.to_string()));
            m.encode_info(&labels)?;
        }
        let mut m = enc.encode_descriptor(
            "wiretape_last_error_timestamp_seconds",
            "When the writer's error was first seen (Unix time)",
            None,
            MetricType::Gauge,
        )?;
        for (w, _) in &errs {
            let since = st
                .error_since
                .iter()
                .find(|(i, q, _)| *i == w.ifname && *q == w.queue)
                .map(|(_, _, t)| *t)
                .unwrap_or(0.0);
            ConstGauge::new(since).encode(m.encode_family(&q_labels(&w.ifname, w.queue))?)?;
        }
    }
    Ok(())
}

/// The run's families (output filesystem, compression, link, start, state).
fn encode_run(st: &State, enc: &mut DescriptorEncoder) -> std::fmt::Result {
    let ifname = st.ifname.as_str();
    let dir = st.dir.display().to_string();
    if let Some((free, total)) = wiretape_storage::fs_space(&st.dir) {
        family(
            enc,
            "wiretape_output_free_bytes",
            "Free space on the output filesystem (for unprivileged users)",
            MetricType::Gauge,
            [(
                vec![("directory", dir.clone())],
                ConstGauge::new(free as i64),
            )],
        )?;
        family(
            enc,
            "wiretape_output_size_bytes",
            "Size of the output filesystem",
            MetricType::Gauge,
            [(vec![("directory", dir)], ConstGauge::new(total as i64))],
        )?;
    }
    if !st.storage.volumes.is_empty() {
        let vols = &st.storage.volumes;
        let label =
            |v: &wiretape_storage::VolumeState| vec![("volume", v.dir.display().to_string())];
        family(
            enc,
            "wiretape_volume_failed",
            "Times a volume (-w given more than once) was taken out: a write or a file's creation failed there",
            MetricType::Counter,
            vols.iter().map(|v| (label(v), ConstCounter::new(v.failures))),
        )?;
        family(
            enc,
            "wiretape_volume_files",
            "Files put on a volume this run",
            MetricType::Counter,
            vols.iter().map(|v| (label(v), ConstCounter::new(v.files))),
        )?;
        family(
            enc,
            "wiretape_volume_written_bytes",
            "Bytes of the files closed on a volume this run",
            MetricType::Counter,
            vols.iter().map(|v| (label(v), ConstCounter::new(v.bytes))),
        )?;
    }
    if let Some(c) = &st.storage.compress {
        let alg = || vec![("algorithm", c.compress.algorithm().to_string())];
        for (name, help, v) in [
            (
                "wiretape_compress_bytes_in",
                "Bytes of blocks before compression (--compress)",
                c.bytes_in,
            ),
            (
                "wiretape_compress_bytes_out",
                "Bytes written for them after compression",
                c.bytes_out,
            ),
            ("wiretape_compress_blocks", "Blocks compressed and written", c.blocks),
            (
                "wiretape_compress_blocks_uncompressed",
                "Blocks written uncompressed (the compressors were behind, or the block did not shrink)",
                c.blocks_uncompressed,
            ),
        ] {
            family(enc, name, help, MetricType::Counter, [(alg(), ConstCounter::new(v))])?;
        }
    }
    if let Some(x) = &st.storage.sessions {
        for (name, help, v) in [
            (
                "wiretape_sessions_skipped_frames",
                "Frames not read for the session tables (their thread was behind; the tables are marked incomplete)",
                x.skipped_frames,
            ),
            (
                "wiretape_sessions_tables",
                "Session tables (.sessions.parquet) written",
                x.tables,
            ),
            (
                "wiretape_sessions_tables_incomplete",
                "Session tables written incomplete (frames skipped)",
                x.incomplete,
            ),
        ] {
            family(
                enc,
                name,
                help,
                MetricType::Counter,
                [(Vec::<(&str, String)>::new(), ConstCounter::new(v))],
            )?;
        }
    }
    family(
        enc,
        "wiretape_ram_buffer_limit_bytes",
        "RAM allowed for blocks waiting for the disk, all queues (--buffer-mib)",
        MetricType::Gauge,
        [(
            Vec::<(&str, String)>::new(),
            ConstGauge::new(st.storage.buffer_limit_bytes as i64),
        )],
    )?;
    let iface = vec![("interface", ifname.to_string())];
    family(
        enc,
        "wiretape_link_up",
        "1 while the recorded interface is up with carrier, 0 while it is down",
        MetricType::Gauge,
        [(
            iface.clone(),
            ConstGauge::new(i64::from(st.snapshot.link.is_none())),
        )],
    )?;
    family(
        enc,
        "wiretape_reattached",
        "Times the interface came back after going away (--wait-iface)",
        MetricType::Counter,
        [(iface, ConstCounter::new(st.starts.saturating_sub(1)))],
    )?;
    family(
        enc,
        "wiretape_start_time_seconds",
        "When the recording started (Unix time)",
        MetricType::Gauge,
        [(Vec::<(&str, String)>::new(), ConstGauge::new(st.start_s))],
    )?;
    family(
        enc,
        "wiretape_recording",
        "1 while recording, 0 once stopped",
        MetricType::Gauge,
        [(
            Vec::<(&str, String)>::new(),
            ConstGauge::new(i64::from(st.recording)),
        )],
    )?;
    Ok(())
}
