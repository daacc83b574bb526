//! Cost per frame of the flow index's collector (`FlowCollector::add`), the
//! part of the flow index on the recording path: 64 B and 1514 B IPv4
//! frames, one flow and 2,000 flows with skewed (1/rank) weights, blocks of
//! one 1 MiB block's worth of frames (then `finish`, as the writer does).
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use wiretape::filter::flow::FlowCollector;

fn frame(flow: u32, size: usize) -> Vec<u8> {
    let mut f = vec![0u8; size];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[23] = if flow.is_multiple_of(3) { 6 } else { 17 };
    f[26..30].copy_from_slice(&[10, 1, (flow / 256) as u8, flow as u8]);
    f[30..34].copy_from_slice(&[10, 2, 0, (flow % 50) as u8]);
    f[34..36].copy_from_slice(&(1024 + (flow * 7919) % 60000).to_be_bytes()[2..]);
    f[36..38].copy_from_slice(&[0, 53]);
    f
}

/// `n` frame indices over `flows` flows, weights 1/rank (a fixed LCG).
fn picks(flows: u32, n: usize) -> Vec<u32> {
    let h: f64 = (1..=flows).map(|i| 1.0 / i as f64).sum();
    let mut cdf = Vec::new();
    let mut acc = 0.0;
    for i in 1..=flows {
        acc += 1.0 / i as f64 / h;
        cdf.push(acc);
    }
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            cdf.partition_point(|&c| c < u) as u32
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for size in [64usize, 1514] {
        let per_block = (1 << 20) / (size + 16);
        for flows in [1u32, 2000] {
            let frames: Vec<Vec<u8>> = (0..flows).map(|f| frame(f, size)).collect();
            let order = picks(flows, per_block * 4);
            let mut g = c.benchmark_group(format!("flow_collect/{size}B"));
            g.throughput(Throughput::Elements(order.len() as u64));
            g.bench_function(format!("{flows}_flows"), |b| {
                let mut col = FlowCollector::new();
                b.iter(|| {
                    for chunk in order.chunks(per_block) {
                        for &k in chunk {
                            col.add(black_box(&frames[k as usize]));
                        }
                        black_box(col.finish());
                    }
                })
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
