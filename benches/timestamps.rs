//! ns per frame for each timestamp mode (criterion). Targets from the issue:
//! kpt with the TSC <= 10 ns/frame, udts/wdts <= 3 ns/frame amortized.
//!
//! `cargo bench --bench timestamps`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use wiretape::timestamp::{AutoClock, StampSlot, Stamper, TaiToUtc, TsMode};

#[derive(Clone, Default)]
struct Slot {
    len: u32,
    tai: u64,
    ts: u64,
}
impl StampSlot for Slot {
    fn frame_len(&self) -> u32 {
        self.len
    }
    fn xdp_tai(&self) -> u64 {
        self.tai
    }
    fn hw(&self) -> u64 {
        0
    }
    fn set_ts(&mut self, ns: u64) {
        self.ts = ns;
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stamp_per_frame");
    let batch_len = 64usize;
    let mut batch: Vec<Slot> = (0..batch_len)
        .map(|i| Slot {
            len: 60 + (i as u32 * 97) % 1455,
            tai: 1_700_000_037_000_000_000 + i as u64,
            ts: 0,
        })
        .collect();
    g.throughput(Throughput::Elements(batch_len as u64));
    // hw needs NIC stamps: on these slots it is xdp, measured as such.
    for mode in TsMode::ALL.into_iter().filter(|m| *m != TsMode::Hw) {
        let clock = AutoClock::new();
        let name = format!("{}-{}", mode.name(), clock.name());
        let mut s = Stamper::new(mode, clock, TaiToUtc::from_offset_secs(37));
        let mut sat = false;
        g.bench_function(BenchmarkId::new("batch64", name), |b| {
            b.iter(|| {
                sat = !sat;
                s.stamp(std::hint::black_box(&mut batch[..]), sat);
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
