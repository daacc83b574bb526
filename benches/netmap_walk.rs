//! The netmap poller over a synthetic ring laid out as the kernel lays it
//! out: frames per second per core through take -> (copy) -> give back ->
//! sync, on one thread. The sync is a synthetic kernel that hands every
//! returned slot back at once with its own buffer, as a NIC that keeps up
//! would (its few ns per slot are counted in).
//!
//! - `walk`: the ring walk without copies (tokens made, given back, head
//!   moved), with the stage stamping nothing (`--ts off`/`kpt` leave it to
//!   the stage).
//! - `walk_wdts`: the same with the engine's per-sync WDTS stamps.
//! - `walk_copy`: each frame also copied once into a 1 MiB block, as the
//!   writer does (the copy is what costs at 1514 B).
//!
//! `cargo bench --features netmap --bench netmap_walk`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::io;
use std::time::Duration;
use wiretape::capture::netmap::{synthetic, KernelRing, Netmap, RxSync, SyntheticSpec};
use wiretape::capture::{Desc, Engine, FrameStore, NetmapConfig, RxQueue};
use wiretape::timestamp::TsMode;

/// A kernel that refills every slot given back, with `len`-byte frames.
struct Refill {
    k: KernelRing,
    len: u16,
}

impl RxSync for Refill {
    fn rxsync(&mut self) -> io::Result<()> {
        self.k.refill(self.len);
        Ok(())
    }
    fn wait(&mut self, _timeout: Duration) {}
}

const SLOTS: u32 = 4096;
const BATCH: usize = 1024;
/// Frames per measured iteration.
const PER_ITER: u64 = 16 * 1024;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("netmap");
    g.throughput(Throughput::Elements(PER_ITER));
    for (name, ts, copy) in [
        ("walk", TsMode::Off, false),
        ("walk_wdts", TsMode::Wdts, false),
        ("walk_copy", TsMode::Off, true),
    ] {
        for size in [64u16, 1514] {
            let (ports, kernels) = synthetic(&SyntheticSpec {
                name: "bench0".into(),
                rings: 1,
                slots: SLOTS,
                buf_size: 2048,
            })
            .unwrap();
            let mut k = kernels.into_iter().next().unwrap();
            // Real bytes in every buffer once (the copy reads them).
            let frame: Vec<u8> = (0..size as usize).map(|i| i as u8).collect();
            while k.push(&frame, false) {}
            k.publish();
            let port = ports
                .into_iter()
                .next()
                .unwrap()
                .with_sync(Refill { k, len: size });
            let mut e =
                Netmap::from_ports("bench0", vec![port], &NetmapConfig::new("bench0"), ts).unwrap();
            let q = e.take_queues().pop().unwrap();
            let (mut rx, mut store) = (q.rx, q.frames);
            let mut v: Vec<Desc> = Vec::with_capacity(BATCH);
            let mut block = vec![0u8; 1 << 20];
            let mut at = 0usize;
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    let mut n = 0u64;
                    while n < PER_ITER {
                        let got = rx.take(BATCH, &mut v);
                        if copy {
                            for d in &v {
                                let (f, _) = store.frame(d);
                                if at + f.len() > block.len() {
                                    at = 0;
                                }
                                block[at..at + f.len()].copy_from_slice(f);
                                at += f.len();
                            }
                        } else {
                            for d in &v {
                                black_box(d.ts);
                            }
                        }
                        store.give_back(v.drain(..));
                        n += got as u64;
                    }
                    black_box(&block);
                    n
                })
            });
            e.stop();
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
