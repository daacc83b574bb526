//! Start-up and retention on a crowded directory: TOTAL files of which OURS
//! are wiretape's (earlier runs: valid little pcaps named like ours over 4
//! queues, each with its .idx) and the rest foreign. Prints how long
//! `Store::open` takes (checks, torn-tail repair, the first retention pass)
//! and each later retention pass (median [min..max] of 40).
//!
//! `cargo run --release -p wiretape-storage --example manyfiles -- DIR [TOTAL] [OURS]`
//! (defaults 100000 and 50000; DIR is filled once and reused).
#![allow(unused_crate_dependencies)] // an example uses only some of them

use std::path::Path;
use std::time::Instant;
use wiretape_storage::{Policy, StorageConfig, Store};

fn populate(dir: &Path, total: usize, ours: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let have = std::fs::read_dir(dir).unwrap().count();
    if have >= total {
        return;
    }
    // A valid µs pcap with one 60-byte record.
    let mut pcap = Vec::new();
    pcap.extend(0xa1b2_3c4du32.to_le_bytes());
    pcap.extend(2u16.to_le_bytes());
    pcap.extend(4u16.to_le_bytes());
    pcap.extend([0u8; 8]);
    pcap.extend(65535u32.to_le_bytes());
    pcap.extend(1u32.to_le_bytes());
    pcap.extend([0u8; 8]);
    pcap.extend(60u32.to_le_bytes());
    pcap.extend(60u32.to_le_bytes());
    pcap.extend([0u8; 60]);
    let t0 = 1_795_000_000_000_000_000u64;
    let files = ours / 2; // each of ours has its .idx
    for i in 0..files {
        let name = wiretape_files::naming::file_name(
            "wiretape",
            "eth0",
            (i % 4) as u32,
            t0 + i as u64 * 1_000_000_000,
            wiretape_files::Format::PcapNs,
        );
        let p = dir.join(name);
        std::fs::write(&p, &pcap).unwrap();
        std::fs::write(
            wiretape_files::index::path_for(&p),
            b"WTIDX\x01\0\0 \0\0\0\0\0\0\0",
        )
        .unwrap();
    }
    for i in 0..total - files * 2 {
        std::fs::write(dir.join(format!("other-{i:06}.dat")), b"x").unwrap();
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let Some(dir) = a.get(1) else {
        eprintln!("usage: manyfiles DIR [TOTAL] [OURS]");
        std::process::exit(2);
    };
    let dir = Path::new(dir);
    let total: usize = a.get(2).and_then(|v| v.parse().ok()).unwrap_or(100_000);
    let ours: usize = a.get(3).and_then(|v| v.parse().ok()).unwrap_or(50_000);
    let t = Instant::now();
    populate(dir, total, ours);
    eprintln!("directory ready in {:.1} s", t.elapsed().as_secs_f64());
    let mut cfg = StorageConfig::new(dir);
    // Keeps them all (a pass that deletes nothing: the steady state).
    cfg.retention = Policy {
        keep_files: Some(ours),
        ..Default::default()
    };
    cfg.buffer_bytes = 64 << 20;
    let t = Instant::now();
    let (store, notices) = Store::open(cfg).unwrap();
    let open_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let w = store.writer("eth0", 0, 1_900_000_000_000_000_000).unwrap();
    let writer_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut passes = Vec::new();
    for _ in 0..40 {
        let t = Instant::now();
        store.retention().enforce();
        passes.push(t.elapsed().as_secs_f64() * 1e3);
    }
    drop(w.close());
    passes.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "{total} files ({ours} ours): Store::open {open_s:.2} s ({} notices), first writer {writer_ms:.1} ms, retention pass {:.2} ms median [{:.2}..{:.2}]",
        notices.len(),
        passes[passes.len() / 2],
        passes[0],
        passes[passes.len() - 1]
    );
    // The file just written goes, so the next run starts the same.
    for f in wiretape_files::naming::list(dir, "wiretape") {
        if f.start.starts_with("2030") {
            let _ = std::fs::remove_file(wiretape_files::index::path_for(&f.path));
            let _ = std::fs::remove_file(&f.path);
        }
    }
}
