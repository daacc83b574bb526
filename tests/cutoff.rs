//! `record --cutoff SIZE` against a reference written from the rule's text
//! (tests/cutoff_ref.py, in Python): the file engine (`record -r`) must keep
//! exactly the records the reference keeps, in order, byte for byte, on a
//! trace of heavy-tailed connections in both directions, with VLAN and QinQ
//! tags (and three tags: not a connection), IPv4 and IPv6 fragments, SYN,
//! FIN and RST mid-connection, plus the filter crate's mixed frames; the
//! capture filter runs first; the accounting holds with packets_cutoff.
//! The XDP program's cutoff (`record -i IFACE --cutoff`) against the same
//! reference: the trace's frames a veth carries are replayed in chunks onto
//! the two RX queues of a veth pair in a private namespace (so connections
//! and both directions straddle the queues and add to the one shared
//! table); each queue's files must hold exactly the frames the reference
//! keeps of those that queue received, in order; with a capture filter the
//! reference runs over tcpdump's selection. The netmap engine refuses
//! `--cutoff` in one line.

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape_testbed::{Testbed, GEN_IF};

struct Trace {
    /// (bytes, wire length, µs).
    frames: Vec<(Vec<u8>, u32, u64)>,
    rng: u64,
}

impl Trace {
    fn rnd(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn push(&mut self, f: Vec<u8>) {
        let us = 1_700_000_000_000_000 + self.frames.len() as u64 * 10;
        let wire = f.len() as u32;
        self.frames.push((f, wire, us));
    }
}

/// Ethernet with `tags` (TPIDs), then `ethertype`.
fn eth(tags: &[u16], ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for (i, t) in tags.iter().enumerate() {
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&(100 + i as u16).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 packet: `proto`, fragment offset (8-byte units), L4 bytes.
fn ipv4(tags: &[u16], src: [u8; 4], dst: [u8; 4], proto: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(tags, 0x0800);
    let total = 20 + l4.len() as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1]);
    f.extend_from_slice(&frag.to_be_bytes());
    f.extend_from_slice(&[64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(l4);
    f
}

/// An IPv6 packet; `frag`: a fragment header with this offset first.
fn ipv6(tags: &[u16], src: u8, dst: u8, proto: u8, frag: Option<u16>, l4: &[u8]) -> Vec<u8> {
    let mut f = eth(tags, 0x86dd);
    let mut ext = Vec::new();
    let nh = match frag {
        Some(off) => {
            ext.extend_from_slice(&[proto, 0]);
            ext.extend_from_slice(&(off << 3).to_be_bytes());
            ext.extend_from_slice(&[0, 0, 0, 7]);
            44
        }
        None => proto,
    };
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&((ext.len() + l4.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[nh, 64]);
    let mut a = [0u8; 16];
    a[0] = 0x20;
    a[1] = 0x01;
    a[15] = src;
    f.extend_from_slice(&a);
    a[15] = dst;
    f.extend_from_slice(&a);
    f.extend_from_slice(&ext);
    f.extend_from_slice(l4);
    f
}

/// TCP/UDP header (flags for TCP) and `pay` bytes of payload.
fn l4(proto: u8, sp: u16, dp: u16, flags: u8, pay: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&sp.to_be_bytes());
    v.extend_from_slice(&dp.to_be_bytes());
    if proto == 6 {
        v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        v.extend_from_slice(&((8 + pay) as u16).to_be_bytes());
        v.extend_from_slice(&[0, 0]);
    }
    v.extend((0..pay).map(|i| i as u8));
    v
}

/// Heavy-tailed connections (Pareto sizes), interleaved, both directions,
/// tagged in several ways, with flags and fragments; and mixed frames.
fn trace(path: &Path) -> usize {
    let mut t = Trace {
        frames: Vec::new(),
        rng: 0x5eed_cafe,
    };
    let tag_sets: [&[u16]; 5] = [
        &[],
        &[0x8100],
        &[0x88a8, 0x8100],
        &[0x8100, 0x8100],
        &[0x88a8, 0x8100, 0x8100],
    ];
    // (proto, version, tags, ports, bytes left, packets sent)
    let mut conns: Vec<(u8, u8, usize, u16, u16, u64, u64)> = Vec::new();
    for c in 0..400u16 {
        // Pareto, alpha 1.2, from 2000 bytes: most short, a few very long.
        let u = (t.rnd() % 1_000_000) as f64 / 1_000_000.0;
        let bytes = (2000.0 / (1.0 - u).powf(1.0 / 1.2)).min(1_500_000.0) as u64;
        let proto = if c % 5 == 4 { 17 } else { 6 };
        let version = if c % 3 == 2 { 6 } else { 4 };
        conns.push((
            proto,
            version,
            (c % 5) as usize,
            1000 + c,
            80 + c % 3,
            bytes,
            0,
        ));
    }
    let mut rng = gen::Rng::new(0x00c0_ffee);
    let mut live: Vec<usize> = (0..conns.len()).collect();
    while !live.is_empty() {
        let k = (t.rnd() % live.len() as u64) as usize;
        let i = live[k];
        let (proto, version, tags, sp, dp, left, sent) = conns[i];
        let fwd = t.rnd().is_multiple_of(2);
        let (a, b, pa, pb) = if fwd {
            (1u8, 2u8 + (i % 7) as u8, sp, dp)
        } else {
            (2 + (i % 7) as u8, 1u8, dp, sp)
        };
        let pay = (t.rnd() % 1400) as usize;
        let last = left <= pay as u64 + 60;
        let flags = match (sent, last, t.rnd() % 50) {
            (0, _, _) => 0x02,    // SYN
            (_, true, _) => 0x11, // FIN
            (_, _, 0) => 0x04,    // RST mid-connection
            (_, _, 1) => 0x12,    // SYN-ACK mid-connection
            _ => 0x10,
        };
        let seg = l4(proto, pa, pb, flags, pay);
        let tg = tag_sets[tags];
        let f = if version == 4 {
            ipv4(tg, [10, 0, 0, a], [10, 0, 0, b], proto, 0, &seg)
        } else {
            ipv6(tg, a, b, proto, None, &seg)
        };
        t.push(f);
        // Now and then a fragment train: a first fragment (counted) and
        // non-first ones (never counted).
        if t.rnd().is_multiple_of(40) {
            let frag_l4 = l4(17, 5353, 5353, 0, 200);
            if version == 4 {
                t.push(ipv4(tg, [10, 0, 0, a], [10, 0, 0, b], 17, 0x2000, &frag_l4));
                t.push(ipv4(tg, [10, 0, 0, a], [10, 0, 0, b], 17, 26, &[7u8; 300]));
            } else {
                t.push(ipv6(tg, a, b, 17, Some(0), &frag_l4));
                t.push(ipv6(tg, a, b, 17, Some(26), &[7u8; 300]));
            }
        }
        if t.rnd().is_multiple_of(8) {
            let g = gen::frame(&mut rng);
            if !g.data.is_empty() {
                let us = 1_700_000_000_000_000 + t.frames.len() as u64 * 10;
                let wire = g.wire_len.max(g.data.len() as u32);
                t.frames.push((g.data, wire, us));
            }
        }
        conns[i].5 = left.saturating_sub(pay as u64 + 60);
        conns[i].6 += 1;
        if last {
            live.swap_remove(k);
        }
    }
    write_us_pcap(path, &t.frames);
    t.frames.len()
}

fn reference(trace: &Path, size: u64) -> Vec<usize> {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cutoff_ref.py");
    let o = Command::new("python3")
        .arg(py)
        .arg(trace)
        .arg(size.to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect()
}

fn only_file(dir: &Path) -> PathBuf {
    let f = pcaps(dir);
    assert_eq!(f.len(), 1, "{f:?}");
    f[0].clone()
}

#[test]
fn the_file_engine_keeps_exactly_what_the_reference_keeps() {
    let t = TempDir::new("cut");
    let tr = t.path().join("trace.pcap");
    let n = trace(&tr);
    assert!(n > 5000, "{n} frames");
    let input = read_all(&tr);
    for (size, arg) in [(15 * 1024u64, "15K"), (3000, "3000"), (1, "1")] {
        let want = reference(&tr, size);
        assert!(
            want.len() < n && want.len() > n / 20,
            "{size}: {} of {n}",
            want.len()
        );
        let dir = t.path().join(format!("s{size}"));
        let json = t.path().join(format!("s{size}.json"));
        record_file(
            &tr,
            &dir,
            &["--cutoff", arg, "--summary-json", json.to_str().unwrap()],
        );
        let got = read_all(&only_file(&dir));
        assert_eq!(got.len(), want.len(), "cutoff {size}: frames kept");
        for (g, &i) in got.iter().zip(&want) {
            let w = &input[i];
            assert!(
                g.data == w.data && g.orig_len == w.orig_len && g.ts_ns == w.ts_ns,
                "cutoff {size}: record {i} of the trace"
            );
        }
        let j = read_json(&json);
        assert_identity(&j);
        let cut = (n - want.len()) as u64;
        assert_eq!(j["packets_cutoff"].as_u64(), Some(cut));
        let cut_bytes: u64 = (0..n)
            .filter(|i| want.binary_search(i).is_err())
            .map(|i| input[i].data.len() as u64)
            .sum();
        assert_eq!(j["bytes_cutoff"].as_u64(), Some(cut_bytes));
        assert_eq!(j["per_queue"][0]["packets_cutoff"].as_u64(), Some(cut));
        assert_eq!(j["cutoff_flows_evicted"].as_u64(), Some(0));
    }
    // A pcapng input is read into the ring (not walked in place): the same.
    let ng = t.path().join("trace.pcapng");
    let o = Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&tr)
        .arg(&ng)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = t.path().join("ng");
    record_file(&ng, &dir, &["--cutoff", "3000"]);
    let want = reference(&tr, 3000);
    let got = read_all(&only_file(&dir));
    assert_eq!(got.len(), want.len(), "pcapng input");
    for (g, &i) in got.iter().zip(&want) {
        assert!(g.data == input[i].data, "pcapng input: record {i}");
    }
}

#[test]
fn the_filter_runs_first_and_evictions_are_counted() {
    let t = TempDir::new("cutf");
    let tr = t.path().join("trace.pcap");
    let n = trace(&tr);
    // The reference over what tcpdump's filter selects.
    let sel = tcpdump_select(&tr, "tcp or udp", t.path());
    let sel_path = t.path().join("sel.pcap");
    let frames: Vec<_> = sel
        .iter()
        .map(|r| (r.data.clone(), r.orig_len, r.ts_ns / 1000))
        .collect();
    write_us_pcap(&sel_path, &frames);
    let want = reference(&sel_path, 3000);
    let dir = t.path().join("f");
    let json = t.path().join("f.json");
    record_file(
        &tr,
        &dir,
        &[
            "--cutoff",
            "3000",
            "--summary-json",
            json.to_str().unwrap(),
            "tcp",
            "or",
            "udp",
        ],
    );
    let got = read_all(&only_file(&dir));
    assert_eq!(got.len(), want.len());
    for (g, &i) in got.iter().zip(&want) {
        assert!(g.data == sel[i].data, "filtered record {i}");
    }
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_filtered"].as_u64(), Some((n - sel.len()) as u64));
    assert_eq!(
        j["packets_cutoff"].as_u64(),
        Some((sel.len() - want.len()) as u64)
    );

    // A table of 8 connections: evictions, each restarting its count: at
    // least as much is kept, and the identity holds.
    let dir = t.path().join("e");
    let json = t.path().join("e.json");
    record_file(
        &tr,
        &dir,
        &[
            "--cutoff",
            "3000",
            "--cutoff-flows",
            "8",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let j = read_json(&json);
    assert_identity(&j);
    assert!(j["cutoff_flows_evicted"].as_u64().unwrap() > 0, "{j:#}");
    let kept = read_all(&only_file(&dir)).len();
    assert!(kept >= reference(&tr, 3000).len());
}

/// The trace's frames a veth carries whole (14..=1514 bytes, nothing cut
/// off), in order.
fn sendable(trace: &Path) -> Vec<Vec<u8>> {
    read_all(trace)
        .into_iter()
        .filter(|r| r.data.len() as u32 == r.orig_len && (14..=1514).contains(&r.data.len()))
        .map(|r| r.data)
        .collect()
}

fn write_frames(path: &Path, frames: &[Vec<u8>]) {
    let stamped: Vec<_> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                f.clone(),
                f.len() as u32,
                1_700_000_000_000_000 + i as u64 * 10,
            )
        })
        .collect();
    write_us_pcap(path, &stamped);
}

/// Frames per replayed chunk; chunk k goes to RX queue k % 2.
const CHUNK: usize = 300;

fn queue_of(i: usize) -> usize {
    (i / CHUNK) % 2
}

/// Sends `frames` in order from the generator end, chunk by chunk, each
/// chunk on its queue (veth hands TX queue q to the peer's RX queue q).
fn replay_in_chunks(tb: &Testbed, frames: &[Vec<u8>], scratch: &Path) {
    for (k, chunk) in frames.chunks(CHUNK).enumerate() {
        let p = scratch.join(format!("chunk{k}.pcap"));
        write_frames(&p, chunk);
        let q = (k % 2).to_string();
        let (code, o, e) = run_wiretape(
            Some(tb),
            &[
                "replay",
                p.to_str().unwrap(),
                "-i",
                GEN_IF,
                "--queue",
                &q,
                "--json",
                "-q",
            ],
        );
        assert_eq!(code, 0, "{e}");
        let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(r["sent"].as_u64(), Some(chunk.len() as u64), "{r}");
        // veth runs the XDP program in the sender's softirq; a pause makes
        // sure a chunk is through before the next one, on the other queue.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Positions in `all` of `sel`, a subsequence of it (tcpdump's selection).
fn positions(all: &[Vec<u8>], sel: &[wiretape::files::Record]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    for r in sel {
        while all[at] != r.data {
            at += 1;
        }
        out.push(at);
        at += 1;
    }
    out
}

/// Records `frames` replayed on two queues with `record -i ... ARGS`, and
/// checks each queue's files and the summary against the reference over
/// the frames `filter` selects (tcpdump), at `size`. Returns the summary.
fn xdp_against_reference(
    tb: &Testbed,
    t: &TempDir,
    name: &str,
    frames: &[Vec<u8>],
    size: u64,
    args: &[&str],
    filter: Option<&str>,
) -> serde_json::Value {
    let n = frames.len();
    let all = t.path().join(format!("{name}-all.pcap"));
    write_frames(&all, frames);
    let selected: Vec<usize> = match filter {
        Some(expr) => positions(frames, &tcpdump_select(&all, expr, t.path())),
        None => (0..n).collect(),
    };
    let sel_path = t.path().join(format!("{name}-sel.pcap"));
    let sel: Vec<Vec<u8>> = selected.iter().map(|&i| frames[i].clone()).collect();
    write_frames(&sel_path, &sel);
    let kept: Vec<usize> = reference(&sel_path, size)
        .into_iter()
        .map(|k| selected[k])
        .collect();

    let dir = t.path().join(name);
    let json = t.path().join(format!("{name}.json"));
    let mut a = vec![
        "-w",
        dir.to_str().unwrap(),
        "--summary-json",
        json.to_str().unwrap(),
        "-q",
    ];
    a.extend_from_slice(args);
    if let Some(expr) = filter {
        a.push(expr);
    }
    let mut rec = Recorder::start(tb, &a);
    replay_in_chunks(tb, frames, t.path());
    std::thread::sleep(std::time::Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    assert!(!xdp_attached(tb), "{name}: XDP program left attached");

    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["drops"]["total"].as_u64(), Some(0), "{name}: {j:#}");
    assert_eq!(j["packets_seen"].as_u64(), Some(n as u64), "{name}");
    assert_eq!(
        j["packets_filtered"].as_u64(),
        Some((n - selected.len()) as u64),
        "{name}"
    );
    let cut = (selected.len() - kept.len()) as u64;
    assert_eq!(j["packets_cutoff"].as_u64(), Some(cut), "{name}");
    let cut_bytes: u64 = selected
        .iter()
        .filter(|i| kept.binary_search(i).is_err())
        .map(|&i| frames[i].len() as u64)
        .sum();
    assert_eq!(j["bytes_cutoff"].as_u64(), Some(cut_bytes), "{name}");
    assert_eq!(j["cutoff_flows_evicted"].as_u64(), Some(0), "{name}");
    // Native mode: veth hands TX queue q to RX queue q, so each queue's
    // files hold exactly the kept frames of the chunks sent to it, in
    // order. Generic mode places frames on queues its own way: there the
    // queues' frames, merged by their stamps, are the kept frames in order.
    let native = !args.contains(&"generic");
    let mut merged = Vec::new();
    for q in j["per_queue"].as_array().unwrap() {
        let qn = q["queue"].as_u64().unwrap() as usize;
        let got: Vec<_> = q["files"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| read_all(Path::new(f.as_str().unwrap())))
            .collect();
        if native {
            let want: Vec<usize> = kept
                .iter()
                .copied()
                .filter(|&i| queue_of(i) == qn)
                .collect();
            assert_eq!(got.len(), want.len(), "{name}: queue {qn}: frames kept");
            for (g, &i) in got.iter().zip(&want) {
                assert!(
                    g.data == frames[i] && g.orig_len as usize == frames[i].len(),
                    "{name}: queue {qn}: frame {i} of the trace"
                );
            }
            let sel_q = selected.iter().filter(|&&i| queue_of(i) == qn).count();
            assert_eq!(
                q["packets_cutoff"].as_u64(),
                Some((sel_q - want.len()) as u64),
                "{name}: queue {qn}: cut"
            );
            assert!(!want.is_empty() && sel_q > want.len(), "{name}: queue {qn}");
        }
        merged.extend(got);
    }
    merged.sort_by_key(|r| r.ts_ns);
    assert_eq!(merged.len(), kept.len(), "{name}: frames kept");
    for (g, &i) in merged.iter().zip(&kept) {
        assert!(
            g.data == frames[i] && g.orig_len as usize == frames[i].len(),
            "{name}: frame {i} of the trace"
        );
    }
    eprintln!(
        "{name}: {n} frames on 2 queues, {} selected, {} kept as the reference, {cut} cut ({cut_bytes} bytes)",
        selected.len(),
        kept.len()
    );
    j
}

#[test]
fn the_xdp_program_keeps_exactly_what_the_reference_keeps() {
    require_root();
    let t = TempDir::new("xcut");
    let tr = t.path().join("trace.pcap");
    trace(&tr);
    let frames = sendable(&tr);
    assert!(frames.len() > 5000, "{} frames", frames.len());
    let tb = Testbed::create("xcut", 2).unwrap();
    // The device-bound program (veth has the timestamp kfunc), the plain
    // one, and with a capture filter (it runs first: `greater 600` leaves
    // out the short frames of every connection, which must not count).
    xdp_against_reference(
        &tb,
        &t,
        "hw15k",
        &frames,
        15 * 1024,
        &["--cutoff", "15K"],
        None,
    );
    xdp_against_reference(
        &tb,
        &t,
        "plain3000",
        &frames,
        3000,
        &["--cutoff", "3000", "--ts", "xdp"],
        None,
    );
    xdp_against_reference(
        &tb,
        &t,
        "filtered",
        &frames,
        3000,
        &["--cutoff", "3000", "--xdp-mode", "generic"],
        Some("tcp or udp"),
    );
    xdp_against_reference(
        &tb,
        &t,
        "hwfiltered",
        &frames,
        2000,
        &["--cutoff", "2000"],
        Some("greater 600"),
    );
}

#[test]
fn the_xdp_table_counts_its_evictions() {
    require_root();
    let t = TempDir::new("xev");
    let tr = t.path().join("trace.pcap");
    trace(&tr);
    let frames = sendable(&tr);
    let all = t.path().join("all.pcap");
    write_frames(&all, &frames);
    let unbounded = reference(&all, 3000).len() as u64;
    let tb = Testbed::create("xev", 2).unwrap();
    let dir = t.path().join("e");
    let json = t.path().join("e.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
            "--cutoff",
            "3000",
            "--cutoff-flows",
            "8",
        ],
    );
    replay_in_chunks(&tb, &frames, t.path());
    std::thread::sleep(std::time::Duration::from_millis(300));
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["drops"]["total"].as_u64(), Some(0), "{j:#}");
    assert_eq!(j["packets_seen"].as_u64(), Some(frames.len() as u64));
    // 400 connections (and the fragments' and mixed frames' ones) through
    // a table of 8: at least 392 were evicted; each restarts at zero, so
    // at least what the unbounded reference keeps is kept.
    let evicted = j["cutoff_flows_evicted"].as_u64().unwrap();
    assert!(evicted >= 392, "{evicted} evicted: {j:#}");
    let per_queue: u64 = j["per_queue"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["cutoff_flows_evicted"].as_u64().unwrap())
        .sum();
    assert_eq!(per_queue, evicted);
    let written = j["packets_written"].as_u64().unwrap();
    assert!(
        written >= unbounded,
        "{written} written, {unbounded} by the reference"
    );
    assert!(j["packets_cutoff"].as_u64().unwrap() > 0);
    eprintln!("table of 8: {evicted} evicted, {written} kept (unbounded reference: {unbounded})");
}

#[test]
fn cutoff_with_netmap_is_refused_in_one_line() {
    let (code, _, e) = run_wiretape(
        None,
        &[
            "record",
            "-i",
            "lo",
            "--engine",
            "netmap",
            "-w",
            "/tmp/wt-none",
            "--cutoff",
            "15K",
        ],
    );
    assert_ne!(code, 0);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("netmap"), "{e}");
    assert!(
        !Path::new("/tmp/wt-none").exists(),
        "nothing made before the refusal"
    );
}
