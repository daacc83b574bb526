//! The pipeline end to end, no NIC: a capture file (in tmpfs) is fed by the
//! file engine through the per-queue stage (one thread per queue: take,
//! stamp, one copy into pcap blocks) into
//! - `null`: blocks that are discarded when full (the pipeline's own cost);
//! - `tmpfs`: the real rotating writer and files in /dev/shm.
//!
//! Criterion reports wall-clock frames per second; after each case the bench
//! also prints frames per CPU-second of the whole process (all threads:
//! "per core"), from getrusage.
//!
//! `subscribers/{0,1,4}`: the `null` case with 0, 1 and 4 lossless
//! in-process subscribers (each on its own thread, reading every frame's
//! stamp, length and first byte). Printed per case, median [min..max] over
//! the runs: wall M frames/s, CPU ns per frame of the whole process
//! (subscribers included), and of the queue's thread alone (its schedstat:
//! the recorder's own cost of feeding them; since the stage runs a queue on
//! one thread this includes the file engine's reading, the writer thread
//! alone did not).
//!
//! The input traces are in /dev/shm, or in the directory named by
//! `WIRETAPE_BENCH_INPUT` (e.g. one on the root file system: the page
//! cache of ext4 or xfs maps a file 2 MiB at a time, tmpfs 4 KiB).
//!
//! `cargo bench --bench pipeline` (`-- subscribers` for those alone)

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape::capture::{FileConfig, FileEngine};
use wiretape::live::{Live, LiveConfig, SubscribeOptions};
use wiretape::pipeline::{FileSource, FrameSink, Running, StageConfig, StopReason};
use wiretape::storage::{
    BlockBuilder, FileSink, PcapWriter, StorageConfig, StorageError, Store, WriterReport,
};
use wiretape::timestamp::TsMode;

/// Copies each frame into a 1 MiB pcap block; a full block is discarded.
struct NullBlocks {
    block: BlockBuilder,
    frames: u64,
    bytes: u64,
}

impl FrameSink for NullBlocks {
    #[inline]
    fn write(&mut self, ts: u64, f: &[u8], wire: u32) -> Result<(), Arc<StorageError>> {
        if self.block.push_record(ts, f, wire) == 0 {
            std::hint::black_box(self.block.as_bytes());
            self.block.clear();
            self.block.push_record(ts, f, wire);
        }
        self.frames += 1;
        self.bytes += f.len() as u64;
        Ok(())
    }
    fn idle(&mut self) {}
    fn close(self) -> WriterReport {
        WriterReport {
            frames: self.frames,
            bytes: self.bytes,
            ..Default::default()
        }
    }
}

fn cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn trace(dir: &Path, size: usize, n: u64) -> PathBuf {
    let p = dir.join(format!("in-{size}.pcap"));
    if !p.exists() {
        let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
        let frame: Vec<u8> = (0..size).map(|i| i as u8).collect();
        for i in 0..n {
            w.write(1_700_000_000_000_000_000 + i * 67, &frame).unwrap();
        }
        w.close().unwrap();
    }
    p
}

/// Runs the whole file through the stage into `make`'s sinks; returns wall time.
fn run_once<S: FrameSink>(
    input: &Path,
    n: u64,
    make: impl FnMut(u32) -> Result<S, StorageError>,
) -> Duration {
    let engine = FileEngine::open(
        &FileConfig::new(input),
        FileSource::open(input).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    let t = Instant::now();
    let run = Running::start(engine, &StageConfig::default(), make).unwrap();
    loop {
        match run.should_stop() {
            Some(StopReason::InputEnded) => break,
            Some(other) => panic!("stopped: {other:?}"),
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    let (_, q, _) = run.stop();
    let el = t.elapsed();
    assert_eq!(q[0].written, n, "every frame written");
    el
}

/// Where the input traces are written: `WIRETAPE_BENCH_INPUT` (a directory),
/// else /dev/shm. tmpfs keeps a file in 4 KiB pages, each mapped on its own
/// when the file engine maps the file; a disk file system's page cache
/// (ext4, xfs) holds large folios, mapped 2 MiB at a time.
fn input_dir(tag: &str) -> PathBuf {
    let base = std::env::var_os("WIRETAPE_BENCH_INPUT").unwrap_or_else(|| "/dev/shm".into());
    let d = Path::new(&base).join(format!("wt-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bench(c: &mut Criterion) {
    let input_dir = input_dir("pipeline-in");
    let shm = Path::new("/dev/shm").join(format!("wt-bench-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&shm);
    std::fs::create_dir_all(&shm).unwrap();
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    for (size, n) in [(64usize, 2_000_000u64), (1514, 300_000)] {
        let input = trace(&input_dir, size, n);
        g.throughput(Throughput::Elements(n));
        let rate = |name: &str, frames: u64, cpu: f64| {
            if frames == 0 {
                return; // filtered out
            }
            eprintln!(
                "pipeline/{name}/{size}: {:.2} M frames per CPU-second ({:.2} Gbit/s of frames per core)",
                frames as f64 / cpu / 1e6,
                frames as f64 * size as f64 * 8.0 / cpu / 1e9
            );
        };
        let (mut frames, c0) = (0u64, cpu_s());
        g.bench_with_input(
            BenchmarkId::new("file_to_null_blocks", size),
            &size,
            |b, _| {
                b.iter_custom(|iters| {
                    let mut t = Duration::ZERO;
                    for _ in 0..iters {
                        t += run_once(&input, n, |_| {
                            Ok(NullBlocks {
                                block: BlockBuilder::new(1 << 20, true),
                                frames: 0,
                                bytes: 0,
                            })
                        });
                        frames += n;
                    }
                    t
                })
            },
        );
        rate("file_to_null_blocks", frames, cpu_s() - c0);
        let out = shm.join("out");
        let (mut frames, c0) = (0u64, cpu_s());
        g.bench_with_input(BenchmarkId::new("file_to_tmpfs", size), &size, |b, _| {
            b.iter_custom(|iters| {
                let mut t = Duration::ZERO;
                for _ in 0..iters {
                    let _ = std::fs::remove_dir_all(&out);
                    let (store, _) = Store::open(StorageConfig::new(&out)).unwrap();
                    t += run_once(&input, n, |q| store.writer("bench", q, 1));
                    frames += n;
                }
                t
            })
        });
        rate("file_to_tmpfs", frames, cpu_s() - c0);
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&shm);
    let _ = std::fs::remove_dir_all(&input_dir);
}

/// The schedstat file of this process's thread named `name`.
fn thread_schedstat(name: &str) -> Option<PathBuf> {
    // Threads come and go while we look: skip what cannot be read.
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let p = e.path();
        if std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == name) {
            return Some(p.join("schedstat"));
        }
    }
    None
}

/// CPU time (ns) in a schedstat file; None once the thread is gone.
fn cpu_ns(schedstat: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(schedstat).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// One run with `subs` lossless subscribers: (wall, process CPU s, writer CPU ns).
fn run_subscribed(input: &Path, n: u64, subs: usize) -> (Duration, f64, u64) {
    let engine = FileEngine::open(
        &FileConfig::new(input),
        FileSource::open(input).unwrap(),
        TsMode::Off,
    )
    .unwrap();
    let live = Live::new(LiveConfig::default());
    let readers: Vec<_> = (0..subs)
        .map(|_| {
            let sub = live.subscribe(SubscribeOptions::lossless());
            std::thread::spawn(move || {
                let (mut k, mut acc) = (0u64, 0u64);
                for b in sub {
                    for f in b.frames() {
                        acc = acc.wrapping_add(f.ts_ns ^ f.orig_len as u64 ^ f.data[0] as u64);
                        k += 1;
                    }
                }
                std::hint::black_box(acc);
                k
            })
        })
        .collect();
    let (c0, t) = (cpu_s(), Instant::now());
    let run = Running::start_with_live(
        engine,
        &StageConfig::default(),
        |_| {
            Ok(NullBlocks {
                block: BlockBuilder::new(1 << 20, true),
                frames: 0,
                bytes: 0,
            })
        },
        &live,
        65535,
    )
    .unwrap();
    // The writer's CPU, read every ms while it runs (it may exit before
    // stop(): the last reading misses at most its last ms).
    let (mut stat, mut writer, mut k) = (None, 0u64, 0u32);
    loop {
        k += 1;
        if k % 5 == 0 {
            if stat.is_none() {
                // The queue's one thread (take, stamp and copy), or its
                // writer thread where the stage runs two.
                stat = thread_schedstat("wt-queue-q0").or_else(|| thread_schedstat("wt-write-q0"));
            }
            if let Some(ns) = stat.as_deref().and_then(cpu_ns) {
                writer = ns;
            }
        }
        match run.should_stop() {
            Some(StopReason::InputEnded) => break,
            Some(other) => panic!("stopped: {other:?}"),
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    if let Some(ns) = stat.as_deref().and_then(cpu_ns) {
        writer = ns;
    }
    let (_, q, _) = run.stop();
    live.finish();
    for r in readers {
        assert_eq!(r.join().unwrap(), n, "each subscriber saw every frame");
    }
    let el = t.elapsed();
    assert_eq!(q[0].written, n);
    (el, cpu_s() - c0, writer)
}

fn med(v: &mut [f64]) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("{:.2} [{:.2}..{:.2}]", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn bench_subscribers(c: &mut Criterion) {
    let shm = input_dir("subs");
    let mut g = c.benchmark_group("subscribers");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    for (size, n) in [(1514usize, 300_000u64), (64, 2_000_000)] {
        let input = trace(&shm, size, n);
        g.throughput(Throughput::Elements(n));
        for subs in [0usize, 1, 4] {
            let (mut wall, mut cpu, mut wr) = (Vec::new(), Vec::new(), Vec::new());
            g.bench_with_input(
                BenchmarkId::new(format!("{subs}"), size),
                &subs,
                |b, &subs| {
                    b.iter_custom(|iters| {
                        let mut t = Duration::ZERO;
                        for _ in 0..iters {
                            let (el, c, w) = run_subscribed(&input, n, subs);
                            wall.push(n as f64 / el.as_secs_f64() / 1e6);
                            cpu.push(c * 1e9 / n as f64);
                            wr.push(w as f64 / n as f64);
                            t += el;
                        }
                        t
                    })
                },
            );
            if wall.is_empty() {
                continue; // filtered out
            }
            eprintln!(
                "subscribers/{subs}/{size}: {} M frames/s, CPU {} ns/frame (process), writer thread {} ns/frame, {} runs",
                med(&mut wall),
                med(&mut cpu),
                med(&mut wr),
                wall.len()
            );
        }
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&shm);
}

criterion_group!(benches, bench, bench_subscribers);
criterion_main!(benches);
