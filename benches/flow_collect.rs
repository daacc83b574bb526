//! Cost per frame of the flow index's collector (`FlowCollector::add`), the
//! part of the flow index on the recording path: 64 B and 1514 B IPv4
//! frames, one flow and 2,000 flows with skewed (1/rank) weights, blocks of
//! one 1 MiB block's worth of frames (then `finish`, as the writer does);
//! and with the key index's rows (`add_at`, `with_rows`: what recording
//! with the key index adds on the writer's thread), also with every frame
//! a new flow (random addresses and ports: one row per frame, the worst
//! case), the rows taken away at each segment's budget as the writer does.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use wiretape::filter::flow::{FlowCollector, Rows};

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
        for flows in [1u32, 2000, 0] {
            // 0: every frame a flow of its own (16,384 distinct frames).
            let (frames, order): (Vec<Vec<u8>>, Vec<u32>) = if flows == 0 {
                let n = 16_384u32;
                let fr = (0..n)
                    .map(|i| {
                        let mut f = frame(i, size);
                        f[28..30].copy_from_slice(&(i as u16).to_be_bytes());
                        f[34..36].copy_from_slice(&((i * 7919) as u16).to_be_bytes());
                        f
                    })
                    .collect();
                (fr, (0..(per_block * 4) as u32).map(|i| i % n).collect())
            } else {
                (
                    (0..flows).map(|f| frame(f, size)).collect(),
                    picks(flows, per_block * 4),
                )
            };
            let name = if flows == 0 {
                "new_flow_each_frame".to_string()
            } else {
                format!("{flows}_flows")
            };
            let mut g = c.benchmark_group(format!("flow_collect/{size}B"));
            g.throughput(Throughput::Elements(order.len() as u64));
            g.bench_function(name.clone(), |b| {
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
            g.bench_function(format!("{name}+rows"), |b| {
                let mut col = FlowCollector::new().with_rows(1 << 19);
                let mut taken = Rows::default();
                b.iter(|| {
                    for chunk in order.chunks(per_block) {
                        let mut off = 0u32;
                        for &k in chunk {
                            let f = &frames[k as usize];
                            col.add_at(black_box(f), off);
                            off += 16 + f.len() as u32;
                        }
                        black_box(col.finish());
                        if col.rows().is_some_and(|r| r.len() >= 1 << 19) {
                            col.take_rows(&mut taken);
                        }
                    }
                })
            });
            g.finish();
        }
    }
}

/// The key index's builder (its own thread, off the writer's): one
/// segment of 524,288 rows of random flows (every frame a new flow, the
/// worst case) sorted into its tables: the time per row.
fn build(c: &mut Criterion) {
    use wiretape::files::keys::{build_segment, SegmentInput};
    use wiretape::filter::flow::SigRow;
    let n = 1usize << 19;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut rows = Rows::default();
    for i in 0..n {
        let (src, dst) = (
            0x0a01_0000u32 | (rnd() % 65536) as u32,
            0x0ac8_0000u32 | (rnd() % 200) as u32,
        );
        let ports = (rnd() as u32 & 0xffff_0000) | 53;
        let sig =
            1u128 << 127 | 17u128 << 96 | ((src as u128) << 32 | dst as u128) << 32 | ports as u128;
        let first = (rnd() % (1 << 20)) as u32;
        rows.sig.push(SigRow {
            sig,
            block: (i / 16_384) as u32,
            first,
            last: first,
            frames: 1,
        });
    }
    let blocks = n.div_ceil(16_384);
    let input = SegmentInput {
        blocks: vec![0u8; blocks * 32],
        entry_len: 32,
        rows,
        ..SegmentInput::default()
    };
    let mut g = c.benchmark_group("keys_segment");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("build_524288_random_rows", |b| {
        b.iter(|| black_box(build_segment(black_box(&input))).len())
    });
    g.finish();
}

criterion_group!(benches, bench, build);
criterion_main!(benches);
