//! The netmap engine through the pipeline into real pcap files, without the
//! netmap module: a synthetic region laid out as the kernel lays it out,
//! one thread per ring playing the kernel at full speed, the real stage
//! (poll and writer threads) and the real rotating writer. The files are
//! read back frame by frame and counted by capinfos and tshark.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them
#![cfg(feature = "netmap")]

use std::process::Command;
use std::time::{Duration, Instant};
use wiretape_capture::netmap::{synthetic, Netmap, SyntheticSpec};
use wiretape_capture::NetmapConfig;
use wiretape_files::{Format, PcapReader, Record};
use wiretape_pipeline::{Running, StageConfig, StopReason};
use wiretape_storage::{StorageConfig, Store};
use wiretape_timestamp::TsMode;

mod common;
use common::Dir;

/// Frame `seq` of ring `ring`: 60 to 1514 bytes, numbered, patterned.
fn frame(ring: u32, seq: u64) -> Vec<u8> {
    let len = 60 + (seq as usize * 131 + ring as usize * 17) % 1455;
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&seq.to_le_bytes());
    f.extend_from_slice(&ring.to_le_bytes());
    f.extend((12..len).map(|j| (seq as usize * 7 + j + ring as usize) as u8));
    f
}

/// capinfos' packet count and data size of `f`.
fn capinfos(f: &std::path::Path) -> (u64, u64) {
    let out = Command::new("capinfos")
        .args(["-M", "-c", "-d"])
        .arg(f)
        .output()
        .expect("capinfos is installed (with tshark, scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("capinfos: no '{name}' in {text}"))
    };
    (field("Number of packets:"), field("Data size:"))
}

/// tshark's frame count and sum of captured lengths of `f`.
fn tshark(f: &std::path::Path) -> (u64, u64) {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(f)
        .args(["-T", "fields", "-e", "frame.cap_len"])
        .output()
        .expect("tshark is installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lens: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    (lens.len() as u64, lens.iter().sum())
}

#[test]
fn synthetic_rings_through_the_stage_into_pcap_files() {
    const RINGS: u32 = 2;
    const FRAMES: u64 = 60_000;
    let d = Dir::new("netmap-stage");
    let (ports, kernels) = synthetic(&SyntheticSpec {
        name: "nm0".into(),
        rings: RINGS,
        slots: 512,
        buf_size: 2048,
    })
    .unwrap();
    let engine = Netmap::from_ports("nm0", ports, &NetmapConfig::new("nm0"), TsMode::Wdts).unwrap();
    let mut scfg = StorageConfig::new(&d.0);
    scfg.block_size = 256 << 10;
    scfg.rotate_size = Some(8 << 20);
    scfg.format = Format::PcapNs;
    let (store, _) = Store::open(scfg).unwrap();
    let stage = StageConfig {
        batch: 256,
        idle_sleep: Duration::from_micros(50),
        count: None,
    };
    let start = wiretape_timestamp::realtime_ns();
    let run = Running::start(engine, &stage, |q| store.writer("nm0", q, start)).unwrap();
    assert_eq!(run.info().engine, "netmap");
    // The kernels, at full speed, each on its own thread.
    let threads: Vec<_> = kernels
        .into_iter()
        .enumerate()
        .map(|(r, mut k)| {
            std::thread::spawn(move || {
                let mut seq = 0;
                while seq < FRAMES {
                    let room = k.room();
                    if room == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    for _ in 0..room.min(32) {
                        assert!(k.push(&frame(r as u32, seq), false));
                        seq += 1;
                        if seq == FRAMES {
                            break;
                        }
                    }
                    k.publish();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let t0 = Instant::now();
    while run.snapshot().written() < RINGS as u64 * FRAMES {
        assert!(run.should_stop().is_none(), "{:?}", run.should_stop());
        assert!(t0.elapsed() < Duration::from_secs(60), "stalled");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_ne!(run.should_stop(), Some(StopReason::ThreadDied));
    let (_engine, reports, _) = run.stop();
    assert_eq!(reports.len(), RINGS as usize);
    let mut rec = Record::default();
    for rep in &reports {
        let r = rep.queue;
        assert!(rep.identity_holds(), "{rep:?}");
        assert_eq!(
            (rep.seen, rep.written, rep.drops.total()),
            (FRAMES, FRAMES, 0)
        );
        assert_eq!(rep.stamps.frames, FRAMES, "stamped by the engine, counted");
        let want_bytes: u64 = (0..FRAMES).map(|s| frame(r, s).len() as u64).sum();
        assert_eq!(rep.seen_bytes, want_bytes);
        assert_eq!(rep.bytes_written, want_bytes);
        assert!(rep.sink.files.len() > 1, "rotated: {:?}", rep.sink.files);
        // Every frame, in order, byte for byte, stamps never backwards.
        let (mut seq, mut last_ts) = (0u64, 0u64);
        for f in &rep.sink.files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            assert!(name.contains(&format!("-nm0-q{r}-")), "{name}");
            let mut rd = PcapReader::open(f).unwrap();
            while rd.next_into(&mut rec).unwrap() {
                assert!(rec.data == frame(r, seq), "ring {r} frame {seq}");
                assert!(rec.ts_ns >= last_ts && rec.ts_ns >= start);
                last_ts = rec.ts_ns;
                seq += 1;
            }
        }
        assert_eq!(seq, FRAMES);
        // Independent readers agree on count and bytes.
        let (mut cn, mut cb, mut tn, mut tb) = (0, 0, 0, 0);
        for f in &rep.sink.files {
            let (n, b) = capinfos(f);
            cn += n;
            cb += b;
            let (n, b) = tshark(f);
            tn += n;
            tb += b;
        }
        assert_eq!((cn, cb), (FRAMES, want_bytes), "capinfos, ring {r}");
        assert_eq!((tn, tb), (FRAMES, want_bytes), "tshark, ring {r}");
    }
}

#[test]
fn a_count_budget_stops_a_netmap_run_exactly() {
    let d = Dir::new("netmap-count");
    let (ports, mut kernels) = synthetic(&SyntheticSpec {
        name: "nm1".into(),
        rings: 1,
        slots: 256,
        buf_size: 2048,
    })
    .unwrap();
    let k = &mut kernels[0];
    for s in 0..200 {
        assert!(k.push(&frame(0, s), false));
    }
    k.publish();
    let engine = Netmap::from_ports("nm1", ports, &NetmapConfig::new("nm1"), TsMode::Kpt).unwrap();
    let (store, _) = Store::open(StorageConfig::new(&d.0)).unwrap();
    let stage = StageConfig {
        batch: 64,
        idle_sleep: Duration::from_micros(50),
        count: Some(150),
    };
    let run = Running::start(engine, &stage, |q| store.writer("nm1", q, 1)).unwrap();
    let t0 = Instant::now();
    while run.should_stop() != Some(StopReason::CountReached) {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(5));
    }
    let (_e, reports, _) = run.stop();
    let rep = &reports[0];
    assert_eq!(rep.written, 150);
    assert!(rep.identity_holds(), "{rep:?}");
    assert_eq!(rep.seen, rep.written + rep.drops.after_count);
    let (n, _) = capinfos(&rep.sink.files[0]);
    assert_eq!(n, 150);
}
