//! The per-frame hot path of the writer: one copy of each frame into a 1 MiB
//! aligned pcap block, with a sink that discards blocks (the disk is measured
//! by the storage benches and the side-by-side rig, not here).
//! `block_ring_bytes`: the builder cycling through 16 blocks of 1 MiB, as
//! it does through an io_uring sink's registered buffers (each block cold
//! in the cache when it comes round again).
//!
//! Measured with this bench and not kept (2026-11-22): non-temporal stores
//! (`movntdq`) for the whole cache lines of each frame made `block_ring_bytes`
//! 10% slower at 1514 B and 18% slower at 512 B on this machine (480 MiB L3:
//! the 16 MiB of blocks in flight stay in it, and streaming stores force
//! every line out to DRAM). A prefetch of the frame after next in the
//! writer was tried on the rig and showed nothing outside the noise.
//!
//! `cargo bench --bench record_copy`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use wiretape::storage::{Block, BlockBuilder, BlockSink, PcapWriter, StorageError};

/// Discards blocks (hands the same block back).
struct NullSink {
    bytes: u64,
    path: PathBuf,
}

impl BlockSink for NullSink {
    fn submit(&mut self, mut block: Block) -> Result<Block, StorageError> {
        self.bytes += black_box(block.data()).len() as u64;
        block.clear();
        Ok(block)
    }
    fn flush(&mut self, block: Block) -> Result<Block, StorageError> {
        self.submit(block)
    }
    fn finish(&mut self, _block: Block) -> Result<(), StorageError> {
        Ok(())
    }
    fn bytes(&self) -> u64 {
        self.bytes
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn block_size(&self) -> usize {
        1 << 20
    }
    fn first_block(&mut self) -> Block {
        Block::new(1 << 20)
    }
}

const BATCH: u64 = 4096;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("record_copy");
    for size in [64usize, 512, 1514] {
        // Frames spread over 64 MiB, like a UMEM: the copy reads cold-ish memory.
        let umem: Vec<u8> = (0..64usize << 20).map(|i| i as u8).collect();
        let stride = 4096;
        let nframes = umem.len() / stride;
        g.throughput(Throughput::Elements(BATCH));
        g.bench_with_input(
            BenchmarkId::new("pcap_writer_frames", size),
            &size,
            |b, &size| {
                let sink = NullSink {
                    bytes: 0,
                    path: "null".into(),
                };
                let mut w = PcapWriter::new(sink, 262_144);
                let mut k = 0usize;
                let mut ts = 1_700_000_000_000_000_000u64;
                b.iter(|| {
                    for _ in 0..BATCH {
                        let off = (k % nframes) * stride + 256;
                        w.write(ts, &umem[off..off + size]).unwrap();
                        k += 1;
                        ts += 67;
                    }
                });
            },
        );
        g.throughput(Throughput::Bytes(BATCH * size as u64));
        g.bench_with_input(
            BenchmarkId::new("block_builder_bytes", size),
            &size,
            |b, &size| {
                let mut blk = BlockBuilder::new(1 << 20, true);
                let mut k = 0usize;
                b.iter(|| {
                    for _ in 0..BATCH {
                        let off = (k % nframes) * stride + 256;
                        if blk.push_record(k as u64, &umem[off..off + size], size as u32) == 0 {
                            black_box(blk.as_bytes());
                            blk.clear();
                            blk.push_record(k as u64, &umem[off..off + size], size as u32);
                        }
                        k += 1;
                    }
                });
            },
        );
        g.bench_with_input(
            BenchmarkId::new("block_ring_bytes", size),
            &size,
            |b, &size| {
                let mut ring: Vec<Block> = (0..16).map(|_| Block::new(1 << 20)).collect();
                let mut blk = BlockBuilder::from_block(ring.pop().unwrap(), true);
                let mut k = 0usize;
                b.iter(|| {
                    for _ in 0..BATCH {
                        let off = (k % nframes) * stride + 256;
                        if blk.push_record(k as u64, &umem[off..off + size], size as u32) == 0 {
                            let mut full = blk.take();
                            black_box(full.data());
                            full.clear();
                            ring.insert(0, full);
                            blk.set_block(ring.pop().unwrap());
                            blk.push_record(k as u64, &umem[off..off + size], size as u32);
                        }
                        k += 1;
                    }
                });
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
