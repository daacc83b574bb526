#![allow(unused_crate_dependencies)] // the library's own dependencies, seen from a bench
//! The tracker and its parsers per frame (criterion), on three mixes:
//! - `steady`: data frames of 64 known TCP connections (opened and named
//!   before the measurement): the cost every frame pays;
//! - `named`: whole short connections, each named (DNS query+response,
//!   TLS 1.3 ClientHello with GREASE, HTTP/1.1 GET, QUIC Initial), new
//!   connections every time: the worst case per frame;
//! - `cut`: a file's table of 4096 connections ended and built as an
//!   Arrow batch (per file, not per frame).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use wiretape_sessions::synth::{self, Hello, Tcp};
use wiretape_sessions::{table, Config, Tracker};

fn ip(a: u8, b: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, a, b))
}

/// (the connections' openings and ClientHellos, their data frames).
fn steady() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut conns: Vec<Tcp> = (0..64)
        .map(|i| {
            Tcp::new(
                (ip(0, i), 40000 + i as u16),
                (ip(1, 1), 443),
                None,
                i as u32,
            )
        })
        .collect();
    let mut v = Vec::new();
    for c in conns.iter_mut() {
        v.extend(c.open());
        v.push(c.seg(
            false,
            0x18,
            &Hello::browser(Some(b"a.example"), &[b"h2"], 0x0a0a).records(1 << 14),
        ));
    }
    let data = vec![0x17u8; 1400];
    let mut d = Vec::new();
    for round in 0..8 {
        for c in conns.iter_mut() {
            d.push(c.seg(round % 2 == 1, 0x10, &data));
        }
    }
    (v, d)
}

fn named(n: u16) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let hello = Hello::browser(Some(b"www.example.com"), &[b"h2", b"http/1.1"], 0x2a2a);
    let quic = synth::quic_initial(&[1, 2, 3, 4, 5, 6, 7, 8], &hello);
    for i in 0..n {
        let c = ip((i >> 8) as u8, i as u8);
        let dns = synth::dns_query(i, "www.example.com", 1);
        v.push(synth::udp(None, (c, 30000 + i), (ip(9, 9), 53), &dns));
        v.push(synth::udp(
            None,
            (ip(9, 9), 53),
            (c, 30000 + i),
            &synth::dns_response(i, "www.example.com", 1, &[synth::Answer::Addr(ip(7, 7))]),
        ));
        let mut t = Tcp::new((c, 40000 + i), (ip(8, 8), 443), None, i as u32);
        v.extend(t.open());
        v.push(t.seg(false, 0x18, &hello.records(1 << 14)));
        let mut h = Tcp::new((c, 50000 + i), (ip(8, 8), 80), None, i as u32);
        v.extend(h.open());
        v.push(h.seg(
            false,
            0x18,
            &synth::http_get("www.example.com", "/index.html", "curl/8.0"),
        ));
        v.push(synth::udp(
            None,
            (c, 60000 + i % 5000),
            (ip(8, 8), 443),
            &quic,
        ));
    }
    v
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sessions");
    let (open, data) = steady();
    for (name, before, frames) in [("steady", open, data), ("named", Vec::new(), named(256))] {
        g.throughput(Throughput::Elements(frames.len() as u64));
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    let mut t = Tracker::new(Config::default());
                    for f in &before {
                        t.add(1, 0, f, f.len() as u32);
                    }
                    t
                },
                |t| {
                    for (i, f) in frames.iter().enumerate() {
                        t.add(1, i as u64, black_box(f), f.len() as u32);
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    let frames = named(1024);
    g.throughput(Throughput::Elements(4096));
    g.bench_function("cut", |b| {
        b.iter_batched(
            || {
                let mut t = Tracker::new(Config::default());
                for (i, f) in frames.iter().enumerate() {
                    t.add(1, i as u64, f, f.len() as u32);
                }
                t
            },
            |mut t| black_box(table::to_batch(&t.cut("x.pcap")).map(|b| b.num_rows())),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
