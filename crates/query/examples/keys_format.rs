//! Which format for the local key index: the paged table of
//! `wiretape_files::keys` (fixed-width fence pages over 4 KiB pages of
//! varint records) against a Parquet file of the same host records sorted
//! by address in row groups of 4,096 with their statistics (what a reader
//! prunes with: "Parquet sorted by key with row-group statistics"), both
//! uncompressed, for rare-host lookups on a cold page cache.
//!
//! ```sh
//! cargo run --release -p wiretape-query --example keys_format -- DIR [ROWS] [LOOKUPS]
//! ```
//!
//! Makes ROWS rows (default 524,288: one segment's budget; random flows of
//! 20,000 clients and 200 servers over 1,000 blocks) into DIR/k.pcap.kdx and
//! DIR/k.parquet, then per lookup (default 20 random clients): drops the
//! page cache (root; else the figures are warm), opens the index and finds
//! the host's records; reports the disk bytes read (/proc/self/io
//! read_bytes) and the time, median [min..max], and the file sizes.
#![allow(unused_crate_dependencies)] // an example uses only some of them

use arrow_array::{Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use wiretape_files::keys::{build_segment, KeyIndex, SegmentInput};
use wiretape_filter::flow::{FrameKeys, Needs, Rows, SigRow};

fn read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| {
                    l.strip_prefix("read_bytes: ")
                        .map(|v| v.trim().parse().ok())
                })
                .flatten()
        })
        .unwrap_or(0)
}

fn cold() -> bool {
    // SAFETY: sync takes no arguments and touches no memory of ours.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn advise_random(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: advice on a descriptor we keep open; no memory involved.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
}

fn stats(v: &mut [f64]) -> String {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    format!("{:.1} [{:.1}..{:.1}]", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(
        args.get(1)
            .map(String::as_str)
            .unwrap_or("/tmp/wt-keys-format"),
    );
    let rows_n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1 << 19);
    let lookups: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20);
    std::fs::create_dir_all(dir).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let client = |i: u64| 0x0a01_0000u32 | (i % 20_000) as u32;
    let mut rows = Rows::default();
    let blocks = 1000u32;
    for i in 0..rows_n {
        let b = (i as u64 * blocks as u64 / rows_n as u64) as u32;
        let (src, dst) = (client(rnd()), 0x0ac8_0000u32 | (rnd() % 200) as u32);
        let (sp, dp) = (
            (1024 + rnd() % 60000) as u16,
            [80u16, 443, 8080][(rnd() % 3) as usize],
        );
        let sig = 1u128 << 127
            | 6u128 << 96
            | ((src as u128) << 32 | dst as u128) << 32
            | ((sp as u32) << 16 | dp as u32) as u128;
        rows.sig.push(SigRow {
            sig,
            block: b,
            first: (rnd() % (1 << 20)) as u32,
            last: 0,
            frames: 1,
        });
        let r = rows.sig.last_mut().unwrap();
        r.last = r.first;
    }
    // The paged table.
    let cap = dir.join("k.pcap");
    std::fs::write(&cap, b"").unwrap();
    let mut blocks_bytes = Vec::new();
    for b in 0..blocks as u64 {
        let e = wiretape_files::index::Entry {
            offset: 24 + (b << 20),
            first_ns: b,
            last_ns: b,
            count: 1,
            ..Default::default()
        };
        blocks_bytes.extend_from_slice(&e.fixed_bytes());
    }
    let input = SegmentInput {
        path: wiretape_files::keys::path_for(&cap),
        first: true,
        block0: 0,
        blocks: blocks_bytes,
        entry_len: 32,
        rows,
        idx_next: 0,
        last_of: None,
        linktype: 1,
    };
    let seg = build_segment(&input);
    std::fs::write(&input.path, &seg).unwrap();
    // The Parquet file: one row per (address, row), sorted by address.
    let mut recs: Vec<[i64; 9]> = Vec::with_capacity(rows_n * 2);
    for r in &input.rows.sig {
        let k = FrameKeys::from_sig(r.sig);
        let a = k.ip4();
        let p = k.ports();
        for (me, peer) in [(a[0], a[1]), (a[1], a[0])] {
            recs.push([
                me as i64,
                r.block as i64,
                r.first as i64,
                (r.last - r.first) as i64,
                r.frames as i64,
                peer as i64,
                6,
                p[0] as i64,
                p[1] as i64,
            ]);
        }
    }
    recs.sort_unstable();
    let names = [
        "addr", "block", "first", "span", "frames", "peer", "proto", "sport", "dport",
    ];
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let t = if i == 0 || i == 5 {
                    DataType::Int64
                } else {
                    DataType::Int32
                };
                Field::new(*n, t, false)
            })
            .collect::<Vec<_>>(),
    ));
    let cols: Vec<arrow_array::ArrayRef> = (0..9)
        .map(|c| -> arrow_array::ArrayRef {
            if c == 0 || c == 5 {
                Arc::new(Int64Array::from_iter_values(recs.iter().map(|r| r[c])))
            } else {
                Arc::new(Int32Array::from_iter_values(
                    recs.iter().map(|r| r[c] as i32),
                ))
            }
        })
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let pq = dir.join("k.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(4096))
        .build();
    let f = std::fs::File::create(&pq).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    println!(
        "{} rows, {} host records; sizes: paged table {} B, Parquet {} B",
        rows_n,
        recs.len(),
        size(&input.path),
        size(&pq)
    );
    let mut kb = Vec::new();
    let mut kt = Vec::new();
    let mut pb = Vec::new();
    let mut pt = Vec::new();
    let mut warm = false;
    for l in 0..lookups {
        let host = client(l as u64 * 997 + 13);
        let prog = wiretape_filter::compile(
            &format!("host {}", std::net::Ipv4Addr::from(host)),
            1,
            65535,
        )
        .unwrap();
        let needs = Needs::of(prog.insns()).unwrap();
        // The paged table.
        warm |= !cold();
        let (r0, t0) = (read_bytes(), Instant::now());
        let k = KeyIndex::open(&cap, &Default::default()).unwrap().unwrap();
        let hits = k.select(&k.segments()[0], &needs).unwrap();
        kt.push(t0.elapsed().as_secs_f64() * 1e3);
        kb.push((read_bytes() - r0) as f64 / 1024.0);
        // Parquet: the footer, the row groups whose statistics may hold
        // the host, their columns.
        warm |= !cold();
        let (r0, t0) = (read_bytes(), Instant::now());
        let f = std::fs::File::open(&pq).unwrap();
        advise_random(&f);
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
        let groups: Vec<usize> = b
            .metadata()
            .row_groups()
            .iter()
            .enumerate()
            .filter(|(_, g)| match g.column(0).statistics() {
                Some(parquet::file::statistics::Statistics::Int64(s)) => {
                    s.min_opt().is_none_or(|m| *m <= host as i64)
                        && s.max_opt().is_none_or(|m| *m >= host as i64)
                }
                _ => true,
            })
            .map(|(i, _)| i)
            .collect();
        let reader = b.with_row_groups(groups).build().unwrap();
        let mut n = 0usize;
        for batch in reader {
            let batch = batch.unwrap();
            let a = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            n += a.iter().filter(|v| *v == Some(host as i64)).count();
        }
        pt.push(t0.elapsed().as_secs_f64() * 1e3);
        pb.push((read_bytes() - r0) as f64 / 1024.0);
        assert_eq!(n, hits.len(), "both find the host's records");
    }
    println!(
        "per lookup{}: paged table {} KiB read, {} ms; Parquet {} KiB read, {} ms",
        if warm {
            " (warm: not root)"
        } else {
            ", cold page cache"
        },
        stats(&mut kb),
        stats(&mut kt),
        stats(&mut pb),
        stats(&mut pt)
    );
}
