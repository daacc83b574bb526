//! The pipeline end to end, no NIC: a capture file in tmpfs is fed by the
//! file engine through the per-queue stage (poll thread, writer thread, one
//! copy into pcap blocks) into
//! - `null`: blocks that are discarded when full (the pipeline's own cost);
//! - `tmpfs`: the real rotating writer and files in /dev/shm.
//!
//! Criterion reports wall-clock frames per second; after each case the bench
//! also prints frames per CPU-second of the whole process (both threads:
//! "per core"), from getrusage.
//!
//! `cargo bench --bench pipeline`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape::capture::{FileConfig, FileEngine};
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

fn bench(c: &mut Criterion) {
    let shm = Path::new("/dev/shm").join(format!("wt-bench-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&shm);
    std::fs::create_dir_all(&shm).unwrap();
    let mut g = c.benchmark_group("pipeline");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    for (size, n) in [(64usize, 2_000_000u64), (1514, 300_000)] {
        let input = trace(&shm, size, n);
        g.throughput(Throughput::Elements(n));
        let rate = |name: &str, frames: u64, cpu: f64| {
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
