//! The storage engine fed from memory, end to end: N writer threads (the
//! pool: one per queue, each with its own io_uring, registered buffers and
//! fixed file, 1 MiB blocks) each write 1514-byte frames as pcap into their
//! own file, closed and made durable (fsync) inside the timing. Into tmpfs
//! (/dev/shm: the engine's own cost, memory speed) and into the disk under
//! `target/` (the disk's speed; compare with fio in `benches/disk.sh`).
//! Also pcap vs pcapng block building.
//!
//! `cargo bench --bench writer_pool`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wiretape::files::Format;
use wiretape::storage::{AnySink, Block, BlockBuilder, IoMode, PcapWriter};

const FRAME: usize = 1514;

fn write_one(path: &Path, bytes: u64, direct_ok: bool) {
    let sink = AnySink::create(path, IoMode::Auto, direct_ok, 1 << 20, 16, None).unwrap();
    let mut w = PcapWriter::with_format(sink, 262_144, Format::PcapNs, "bench");
    let frame: Vec<u8> = (0..FRAME).map(|i| i as u8).collect();
    let n = bytes / (FRAME as u64 + 16);
    let mut ts = 1_700_000_000_000_000_000u64;
    for _ in 0..n {
        w.write(ts, &frame).unwrap();
        ts += 1200;
    }
    w.close().map_err(|(_, e)| e).unwrap();
}

/// `writers` threads each write `bytes` into their own file in `dir`.
fn pool(dir: &Path, writers: usize, bytes: u64, round: u64) -> Duration {
    let direct_ok = wiretape::storage::uring::direct_supported(dir);
    let t = Instant::now();
    std::thread::scope(|s| {
        for k in 0..writers {
            let p = dir.join(format!("pool-{round}-{k}.pcap"));
            s.spawn(move || {
                write_one(&p, bytes, direct_ok);
            });
        }
    });
    let el = t.elapsed();
    for k in 0..writers {
        let _ = std::fs::remove_file(dir.join(format!("pool-{round}-{k}.pcap")));
    }
    el
}

fn bench(c: &mut Criterion) {
    let targets: Vec<(&str, PathBuf, u64)> = vec![
        ("tmpfs", PathBuf::from("/dev/shm/wiretape-bench"), 512 << 20),
        (
            "disk",
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/writer-pool-bench"),
            512 << 20,
        ),
    ];
    let mut g = c.benchmark_group("writer_pool");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.warm_up_time(Duration::from_secs(1));
    for (name, dir, bytes) in &targets {
        std::fs::create_dir_all(dir).unwrap();
        for writers in [1usize, 2] {
            g.throughput(Throughput::Bytes(bytes * writers as u64));
            g.bench_with_input(
                BenchmarkId::new(*name, format!("{writers}w")),
                &writers,
                |b, &writers| {
                    let mut round = 0;
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            round += 1;
                            total += pool(dir, writers, *bytes, round);
                        }
                        total
                    })
                },
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
    g.finish();

    // Block building per format (the one copy of each frame).
    let mut g = c.benchmark_group("block_format");
    let frame: Vec<u8> = (0..FRAME).map(|i| i as u8).collect();
    const N: u64 = 4096;
    g.throughput(Throughput::Elements(N));
    for (name, f) in [
        ("pcap_ns", Format::PcapNs),
        ("pcap_us", Format::PcapUs),
        ("pcapng", Format::PcapNg),
    ] {
        g.bench_function(name, |b| {
            let mut blk = BlockBuilder::with_format(Block::new(1 << 20), f);
            let mut k = 0u64;
            b.iter(|| {
                for _ in 0..N {
                    if blk.push_record(k, &frame, FRAME as u32) == 0 {
                        std::hint::black_box(blk.as_bytes());
                        blk.clear();
                        blk.push_record(k, &frame, FRAME as u32);
                    }
                    k += 1;
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
