//! The storage engine fed from memory (no NIC): frames of one size written as
//! pcap through each engine, with throughput and CPU time. Used by
//! `benches/disk.sh` beside dd and fio in the same run.
//!
//! `cargo run --release -p wiretape-storage --example diskbench -- DIR GIB SIZE ENGINE [NBUFS]`
//! ENGINE: direct (extend ahead), direct-keepsize, buffered.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::time::Instant;
use wiretape_storage::uring::{Growth, UringSink};
use wiretape_storage::{FileSink, PcapWriter};

fn cpu_s() -> f64 {
    // SAFETY: libc::rusage is a plain C struct of integers (and timevals of
    // integers), for which all zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage; getrusage(RUSAGE_SELF) only
    // fills it in for this process.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: diskbench DIR GIB SIZE direct|direct-keepsize|buffered [NBUFS]");
        std::process::exit(2);
    }
    let dir = std::path::PathBuf::from(&a[1]);
    let gib: f64 = a[2].parse().unwrap();
    let size: usize = a[3].parse().unwrap();
    let nbufs: usize = a.get(5).map(|s| s.parse().unwrap()).unwrap_or(8);
    let path = dir.join(format!("diskbench-{}-{}.pcap", a[4], std::process::id()));
    let frame: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let n = (gib * (1u64 << 30) as f64 / (size + 16) as f64) as u64;
    let (t0, c0) = (Instant::now(), cpu_s());
    let stats = match a[4].as_str() {
        "buffered" => {
            let mut w = PcapWriter::new(FileSink::create(&path).unwrap(), 262_144);
            for i in 0..n {
                w.write(i, &frame).unwrap();
            }
            w.close().map_err(|e| e.1).unwrap()
        }
        e => {
            let g = if e == "direct-keepsize" {
                Growth::KeepSize
            } else {
                Growth::Extend
            };
            let mut w = PcapWriter::new(
                UringSink::with_growth(&path, 1 << 20, nbufs, g).unwrap(),
                262_144,
            );
            for i in 0..n {
                w.write(i, &frame).unwrap();
            }
            let st = w.sink_stats();
            eprintln!(
                "  latency p50 {:.0} us p99 {:.0} us, waits {}",
                st.latency_p50_us, st.latency_p99_us, st.waits
            );
            w.close().map_err(|e| e.1).unwrap()
        }
    };
    let (el, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
    let bytes = std::fs::metadata(&path).unwrap().len();
    assert_eq!(stats.frames, n);
    let _ = std::fs::remove_file(&path);
    println!(
        "{:<16} {:>8.0} MB/s  {:>6.2} s  cpu {:>5.2} s ({:.2} s/GB)  {} frames of {} B",
        a[4],
        bytes as f64 / el / 1e6,
        el,
        cpu,
        cpu / (bytes as f64 / 1e9),
        n,
        size
    );
}
