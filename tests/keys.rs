//! The exact key index (`.kdx`) never skips a frame the filter accepts:
//! property tests (proptest) over random stores and random filters, each
//! checked against a full scan of the files (every record read, the
//! compiled filter and the window applied):
//!
//! * stores: 1 to 3 files of one series, written by the storage crate's
//!   writer with small blocks (2-16 KiB), small segments (a cut every 3 to
//!   300 rows, so files have many), a random snap length (so frames are cut
//!   inside their headers), frames of every kind the index reads
//!   differently: IPv4 TCP/UDP/ICMP (odd header lengths, fragments), one
//!   and two VLAN tags, IPv6, ARP, other EtherTypes, runts; hosts and ports
//!   from small pools so that filters hit. The last file is sometimes left
//!   open (its writer holds it, as a recording does): planned from its key
//!   index's segments and, after them, its `.idx` (freshness);
//! * filters: random trees of `host`, `src`/`dst host`, `net` (prefixes,
//!   masks, IPv6: ranges of the sorted hosts), `port`, `portrange`,
//!   `tcp`/`udp port`, `tcp`, `udp`, `icmp`, `arp`, `ip6`, `ip6 host`,
//!   `vlan` (which moves libpcap's offsets for what follows), `ip proto`,
//!   `and`, `or`, `not`, parentheses; sometimes a window.
//!
//! For every case: every record the full scan accepts lies in a run the
//! plan reads (no false negative), and the merge's frames are exactly the
//! full scan's, with the key index, with the flow sets alone, and with no
//! index narrowing at all; also when a byte of a key index was flipped
//! (its page checksums refuse it: the `.idx` plans that file). Likewise
//! Stenographer queries (hosts, nets, ports, protocols, VLANs, time
//! bounds, `and`/`or`), against the query language's reference evaluator.
//! Cases: 48 by default, `WIRETAPE_PROP_CASES=N`.

mod common;

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use wiretape::files::walk::Walker;
use wiretape::files::{naming, Format};
use wiretape::filter::flow::Needs;
use wiretape::filter::LINKTYPE_ETHERNET;
use wiretape::query::extract::{Merge, Plan, Window};
use wiretape::query::narrow::{self, Narrow};
use wiretape::storage::{FileSink, PcapWriter};

const T0: u64 = 1_790_000_000_000_000_000;
const V4: [[u8; 4]; 6] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [10, 0, 0, 3],
    [10, 0, 1, 4],
    [192, 168, 7, 5],
    [172, 16, 0, 6],
];
const V6: [u8; 3] = [1, 2, 3];
const PORTS: [u16; 6] = [53, 80, 443, 8080, 1234, 40000];
const VLANS: [u16; 3] = [10, 20, 30];

fn cases() -> u32 {
    std::env::var("WIRETAPE_PROP_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

/// A small deterministic generator (frames come from a seed: a failing
/// case is reproduced by its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn v6(i: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = i;
    a
}

fn l4(r: &mut Rng, pad: usize) -> Vec<u8> {
    let mut v = PORTS[r.below(6)].to_be_bytes().to_vec();
    v.extend_from_slice(&PORTS[r.below(6)].to_be_bytes());
    v.resize(4 + pad, 0x33);
    v
}

fn ip4(r: &mut Rng, proto: u8, pad: usize) -> Vec<u8> {
    // Mostly 20-byte headers; sometimes options (IHL 6) or a fragment.
    let ihl = if r.below(10) == 0 { 6 } else { 5 };
    let frag: u16 = if r.below(12) == 0 { 0x00b9 } else { 0x4000 };
    let mut p = vec![0x40 | ihl, 0, 0, 0, 0, 0];
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0]);
    p.extend_from_slice(&V4[r.below(6)]);
    p.extend_from_slice(&V4[r.below(6)]);
    if ihl == 6 {
        p.extend_from_slice(&[1, 1, 1, 1]);
    }
    p.extend_from_slice(&l4(r, pad));
    let len = p.len() as u16;
    p[2..4].copy_from_slice(&len.to_be_bytes());
    p
}

fn frame(r: &mut Rng) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let pad = r.below(120);
    let proto = [6u8, 17, 1, 6, 17][r.below(5)];
    match r.below(16) {
        0..=6 => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            f.extend_from_slice(&ip4(r, proto, pad));
        }
        7 | 8 => {
            // One tag, sometimes two (QinQ).
            let two = r.below(3) == 0;
            let outer: u16 = if two { 0x88a8 } else { 0x8100 };
            f.extend_from_slice(&outer.to_be_bytes());
            f.extend_from_slice(&VLANS[r.below(3)].to_be_bytes());
            if two {
                f.extend_from_slice(&0x8100u16.to_be_bytes());
                f.extend_from_slice(&VLANS[r.below(3)].to_be_bytes());
            }
            if r.below(4) == 0 {
                f.extend_from_slice(&0x86ddu16.to_be_bytes());
                f.extend_from_slice(&ip6(r, proto, pad));
            } else {
                f.extend_from_slice(&0x0800u16.to_be_bytes());
                f.extend_from_slice(&ip4(r, proto, pad));
            }
        }
        9..=11 => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            f.extend_from_slice(&ip6(r, proto, pad));
        }
        12 => {
            f.extend_from_slice(&0x0806u16.to_be_bytes());
            f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1]);
            f.extend_from_slice(&V4[r.below(6)]);
            f.extend_from_slice(&[0; 6]);
            f.extend_from_slice(&V4[r.below(6)]);
        }
        13 => {
            f.extend_from_slice(&0x88ccu16.to_be_bytes());
            f.resize(14 + 40, 0x11);
        }
        14 => {
            // A runt: cut anywhere in its headers.
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            f.extend_from_slice(&ip4(r, proto, 0));
            let n = 13 + r.below(f.len() - 13);
            f.truncate(n);
        }
        _ => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            f.extend_from_slice(&ip4(r, 1, pad));
        }
    }
    f
}

fn ip6(r: &mut Rng, proto: u8, pad: usize) -> Vec<u8> {
    let body = l4(r, pad);
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&(body.len() as u16).to_be_bytes());
    p.extend_from_slice(&[if proto == 1 { 58 } else { proto }, 64]);
    p.extend_from_slice(&v6(V6[r.below(3)]));
    p.extend_from_slice(&v6(V6[r.below(3)]));
    p.extend_from_slice(&body);
    p
}

/// A filter from `picks` (each an index into the atoms and operators).
fn filter(picks: &[u16]) -> String {
    let ip = |i: u16| {
        let a = V4[i as usize % 6];
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    };
    let atom = |p: u16| -> String {
        let k = p / 8;
        match p % 26 {
            0 => format!("host {}", ip(k)),
            1 => format!("src host {}", ip(k)),
            2 => format!("dst host {}", ip(k)),
            3 => "net 10.0.0.0/30".into(),
            4 => format!("port {}", PORTS[k as usize % 6]),
            5 => format!("tcp port {}", PORTS[k as usize % 6]),
            6 => format!("udp port {}", PORTS[k as usize % 6]),
            7 => format!("src port {}", PORTS[k as usize % 6]),
            8 => "tcp".into(),
            9 => "udp".into(),
            10 => "icmp".into(),
            11 => "arp".into(),
            12 => "ip6".into(),
            13 => format!("ip6 host 2001:db8::{}", V6[k as usize % 3]),
            14 => format!("vlan {}", VLANS[k as usize % 3]),
            15 => format!("vlan {} and host {}", VLANS[k as usize % 3], ip(k / 3)),
            16 => "ip proto 17".into(),
            17 => format!("host {} and port {}", ip(k), PORTS[(k / 6) as usize % 6]),
            18 => format!("host {} and host {}", ip(k), ip(k / 6)),
            19 => format!("ether proto 0x88cc or host {}", ip(k)),
            20 => format!("tcp and host {}", ip(k)),
            22 => [
                "net 10.0.0.0/24",
                "net 10.0.0.0/8",
                "dst net 192.168.0.0/16",
                "net 10.0.1.0 mask 255.0.255.0",
            ][k as usize % 4]
                .into(),
            23 => [
                "ip6 net 2001:db8::/126",
                "ip6 net 2001:db8::2/127",
                "ip6 net fe80::/10",
            ][k as usize % 3]
                .into(),
            24 => [
                "portrange 50-90",
                "portrange 400-8080",
                "tcp portrange 1000-50000",
                "udp src portrange 53-53",
            ][k as usize % 4]
                .into(),
            25 => format!(
                "net 10.0.0.0/24 and portrange {}-{}",
                PORTS[k as usize % 6],
                PORTS[k as usize % 6] + 10
            ),
            _ => format!("ip6 and port {}", PORTS[k as usize % 6]),
        }
    };
    let mut e = atom(picks[0]);
    for w in picks[1..].chunks(2) {
        if w.len() < 2 {
            break;
        }
        let b = atom(w[1]);
        e = match w[0] % 5 {
            0 => format!("({e}) and ({b})"),
            1 => format!("({e}) or ({b})"),
            2 => format!("({e}) and not ({b})"),
            3 => format!("not ({e}) or ({b})"),
            _ => format!("({b}) or ({e})"),
        };
    }
    e
}

/// What one case writes.
#[derive(Clone, Debug)]
struct Store {
    seed: u64,
    files: usize,
    frames: usize,
    block: usize,
    budget: usize,
    snap: u32,
    live: bool,
    format: u8,
}

fn store() -> impl Strategy<Value = Store> {
    (
        any::<u64>(),
        1usize..=3,
        50usize..1200,
        prop::sample::select(vec![2048usize, 4096, 8192, 16384]),
        3usize..300,
        prop::sample::select(vec![34u32, 60, 70, 90, 65535, 65535, 65535]),
        any::<bool>(),
        0u8..3,
    )
        .prop_map(
            |(seed, files, frames, block, budget, snap, live, format)| Store {
                seed,
                files,
                frames,
                block,
                budget,
                snap,
                live,
                format,
            },
        )
}

/// Writes the store into `dir`; returns the files and the writer of the
/// last one when it is left open.
fn write_store(dir: &Path, s: &Store) -> (Vec<PathBuf>, Option<PcapWriter<FileSink>>) {
    let mut r = Rng(s.seed | 1);
    let fmt = [Format::PcapNs, Format::PcapUs, Format::PcapNg][s.format as usize];
    let mut files = Vec::new();
    let mut open = None;
    let mut t = T0;
    for k in 0..s.files {
        let name = naming::file_name("wt", "eth0", 0, t, fmt);
        let p = dir.join(name);
        let sink = FileSink::with_block_size(&p, s.block).unwrap();
        let mut w = PcapWriter::with_format(sink, s.snap, fmt, "eth0")
            .with_index(&p)
            .with_keys_budget(&p, None, true, s.budget);
        for _ in 0..s.frames {
            w.write(t, &frame(&mut r)).unwrap();
            t += 1000 + r.below(5000) as u64;
        }
        if s.live && k + 1 == s.files {
            w.flush().unwrap();
            open = Some(w);
        } else {
            w.close().unwrap();
        }
        files.push(p);
        t += 1_000_000;
    }
    (files, open)
}

/// Every record of the files the filter and window accept: (file, offset).
fn full_scan(files: &[PathBuf], prog: &wiretape::filter::Program, w: &Window) -> Vec<(usize, u64)> {
    let mut out = Vec::new();
    let mut data = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let src = wiretape::files::zread::open_buffered(f, &Default::default()).unwrap();
        let mut walk = Walker::new(src);
        while let Some(m) = walk.next_into(&mut data) {
            if w.contains(m.ts_ns) && prog.matches(&data, m.orig_len) {
                out.push((i, m.offset));
            }
        }
    }
    out
}

/// The property tests' configuration: [`cases`] cases, no persistence.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        max_shrink_iters: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The first record of `want` (file, offset) that lies in no run of
/// `plan`, said in a line (None: every one is read).
fn unread(plan: &Plan, files: &[PathBuf], want: &[(usize, u64)]) -> Option<String> {
    want.iter().find_map(|&(i, off)| {
        let fp = plan.files.iter().find(|f| f.path == files[i])?;
        let inside = fp.skip.is_none()
            && fp
                .spans
                .iter()
                .any(|sp| sp.start <= off && sp.end.is_none_or(|e| off < e));
        (!inside).then(|| {
            format!(
                "record {off} of file {i} in no run: {:?} ({:?})",
                fp.spans, fp.skip
            )
        })
    })
}

fn merged(plan: Plan, prog: &wiretape::filter::Program, files: &[PathBuf]) -> Vec<(usize, u64)> {
    let paths: Vec<PathBuf> = plan.files.iter().map(|f| f.path.clone()).collect();
    let p = prog.clone();
    let mut m = Merge::new(plan, LINKTYPE_ETHERNET, move |d: &[u8], wire, _| {
        p.matches(d, wire)
    });
    let mut out = Vec::new();
    while let Some(f) = m.next() {
        let i = files.iter().position(|x| *x == paths[f.file]).unwrap();
        out.push((i, f.offset));
    }
    out.sort_unstable();
    out
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_key_index_never_skips_a_frame_the_filter_accepts(
        s in store(),
        picks in prop::collection::vec(0u16..400, 1..6),
        window in prop::option::of((0u64..100, 1u64..100)),
        corrupt in prop::option::of((any::<usize>(), any::<u64>(), 1u8..=255)),
    ) {
        let t = common::TempDir::new("keys-prop");
        let (files, live) = write_store(t.path(), &s);
        // A damaged key index (a byte flipped anywhere): its checksums
        // catch it, and the file is planned from its `.idx`.
        let mut damaged = false;
        if let Some((f, at, x)) = corrupt {
            let kdx = wiretape::files::keys::path_for(&files[f % files.len()]);
            if let Ok(mut b) = std::fs::read(&kdx) {
                if !b.is_empty() {
                    let i = (at % b.len() as u64) as usize;
                    b[i] ^= x;
                    std::fs::write(&kdx, &b).unwrap();
                    damaged = true;
                }
            }
        }
        let expr = filter(&picks);
        // libpcap refuses a filter that rejects everything: nothing to plan.
        let Ok(prog) = wiretape::filter::compile(&expr, LINKTYPE_ETHERNET, 262144) else {
            return Ok(());
        };
        let needs = Needs::of(prog.insns());
        let span = s.files as u64 * (s.frames as u64 * 3000 + 1_000_000);
        let w = match window {
            Some((a, b)) => Window {
                from_ns: Some(T0 + span * a / 100),
                to_ns: Some(T0 + span * a / 100 + span * b / 100),
            },
            None => Window::default(),
        };
        let want = full_scan(&files, &prog, &w);
        let inputs = vec![t.path().to_owned()];
        let (plan, st) = narrow::plan(&inputs, w, None, &Default::default(), Narrow { needs: needs.as_ref(), key_index: true }).unwrap();
        // No false negative: every accepted record is in a run of the plan.
        let miss = unread(&plan, &files, &want);
        prop_assert!(miss.is_none(), "'{}' {:?} {:?}: {}", expr, s, w, miss.unwrap_or_default());
        if !s.live && s.snap == 65535 && !damaged {
            // Finished files with their whole keys: planned by the key index.
            prop_assert_eq!(st.files_key_index as usize + plan.files.iter().filter(|f| f.skip.is_some() && f.key_index).count(), s.files);
        }
        let got = merged(plan, &prog, &files);
        let mut want_sorted = want.clone();
        want_sorted.sort_unstable();
        prop_assert_eq!(&got, &want_sorted, "'{}' {:?}: key index", expr, s);
        // The flow sets alone, and no narrowing: the same frames.
        let (plan2, _) = narrow::plan(&inputs, w, None, &Default::default(), Narrow { needs: needs.as_ref(), key_index: false }).unwrap();
        prop_assert_eq!(&merged(plan2, &prog, &files), &want_sorted, "'{}': flow sets", expr);
        let (plan3, _) = narrow::plan(&inputs, w, None, &Default::default(), Narrow { needs: None, key_index: true }).unwrap();
        prop_assert_eq!(&merged(plan3, &prog, &files), &want_sorted, "'{}': time only", expr);
        drop(live);
    }
}

/// A Stenographer query from `picks` over the stores' pools (hosts,
/// nets as prefixes and as masks, ports, protocols, VLANs, time bounds at
/// `span`-relative instants), joined by `and`/`or` with parentheses.
fn steno_query(picks: &[u16], span: u64) -> String {
    let ip = |i: u16| {
        let a = V4[i as usize % 6];
        format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
    };
    let atom = |p: u16| -> String {
        let k = p / 16;
        match p % 16 {
            0 | 1 => format!("host {}", ip(k)),
            2 => format!("host 2001:db8::{}", V6[k as usize % 3]),
            3 => [
                "net 10.0.0.0/30",
                "net 10.0.0.0/24",
                "net 10.0.0.0/8",
                "net 192.168.0.0/16",
                "net 10.0.0.2 mask 255.255.255.254",
                "net 10.0.1.0 mask 255.0.255.0",
            ][k as usize % 6]
                .into(),
            4 => ["net 2001:db8::/126", "net 2001:db8::2/127", "net ::/0"][k as usize % 3].into(),
            5 | 6 => format!("port {}", PORTS[k as usize % 6]),
            7 => ["tcp", "udp", "icmp"][k as usize % 3].into(),
            8 => "ip proto 17".into(),
            9 => format!("vlan {}", VLANS[k as usize % 3]),
            10 => format!("host {} and port {}", ip(k), PORTS[(k / 6) as usize % 6]),
            11 => format!("net 10.0.0.0/24 and port {}", PORTS[k as usize % 6]),
            12 | 13 => {
                let t = T0 + span * u64::from(k % 100) / 100;
                let w = if p % 16 == 12 { "after" } else { "before" };
                format!("{w} {}", wiretape::timestamp::format_rfc3339(t))
            }
            _ => format!("(host {} or host {}) and tcp", ip(k), ip(k / 6)),
        }
    };
    let mut e = atom(picks[0]);
    for w in picks[1..].chunks(2) {
        if w.len() < 2 {
            break;
        }
        let b = atom(w[1]);
        e = match w[0] % 3 {
            0 => format!("({e}) and ({b})"),
            1 => format!("({e}) or ({b})"),
            _ => format!("{b} and ({e})"),
        };
    }
    e
}

/// The frames a Stenographer query's job reads and selects: (file, offset).
fn steno_frames(
    dir: &Path,
    files: &[PathBuf],
    sel: &std::sync::Arc<wiretape::query::steno::Selection>,
    key_index: bool,
    flow_index: bool,
) -> (Vec<(usize, u64)>, Plan, wiretape::query::job::PlanStats) {
    let mut req = wiretape::query::job::Request::new(vec![dir.to_owned()]);
    req.steno = Some(sel.clone());
    req.key_index = key_index;
    req.flow_index = flow_index;
    let job = wiretape::query::job::Job::plan(&req).unwrap();
    let stats = job.plan_stats;
    let plan = job.plan.clone();
    let paths: Vec<PathBuf> = plan.files.iter().map(|f| f.path.clone()).collect();
    let (mut m, _) = job.into_merge();
    let mut out = Vec::new();
    while let Some(f) = m.next() {
        let i = files.iter().position(|x| *x == paths[f.file]).unwrap();
        out.push((i, f.offset));
    }
    out.sort_unstable();
    (out, plan, stats)
}

proptest! {
    #![proptest_config(config())]

    /// Stenographer queries planned by the key index (each piece of time
    /// by its own needs): the frames are exactly those the query language's
    /// reference ([`wiretape::query::steno::eval`] of each frame's keys)
    /// selects in a full scan, every one of them in a run of the plan; the
    /// same with the flow sets alone and with no narrowing.
    #[test]
    fn steno_queries_planned_by_the_key_index_select_what_a_full_scan_does(
        s in store(),
        picks in prop::collection::vec(0u16..1600, 1..6),
    ) {
        use wiretape::query::steno;
        let t = common::TempDir::new("keys-steno");
        let (files, live) = write_store(t.path(), &s);
        let span = s.files as u64 * (s.frames as u64 * 3000 + 1_000_000);
        let text = steno_query(&picks, span);
        let sel = std::sync::Arc::new(steno::compile(&text, T0).unwrap());
        // The reference: every record, its keys as stenotype reads them.
        let mut want = Vec::new();
        let mut data = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let src = wiretape::files::zread::open_buffered(f, &Default::default()).unwrap();
            let mut walk = Walker::new(src);
            while let Some(m) = walk.next_into(&mut data) {
                if steno::eval(&sel.query, &steno::Decoded::of(&data), m.ts_ns) {
                    want.push((i, m.offset));
                }
            }
        }
        want.sort_unstable();
        let (got, plan, st) = steno_frames(t.path(), &files, &sel, true, true);
        let miss = unread(&plan, &files, &want);
        prop_assert!(miss.is_none(), "'{}' {:?}: {}", text, s, miss.unwrap_or_default());
        prop_assert_eq!(&got, &want, "'{}' {:?}: key index", text, s);
        if !s.live && s.snap == 65535 && sel.parts.iter().any(|p| p.needs.is_some()) {
            // Finished files with their whole keys: planned by the key index.
            let skipped = plan.files.iter().filter(|f| f.skip.is_some() && f.key_index).count();
            prop_assert_eq!(st.files_key_index as usize + skipped, s.files, "'{}'", text);
        }
        let (flow, _, _) = steno_frames(t.path(), &files, &sel, false, true);
        prop_assert_eq!(&flow, &want, "'{}': flow sets", text);
        let (none, _, _) = steno_frames(t.path(), &files, &sel, false, false);
        prop_assert_eq!(&none, &want, "'{}': time only", text);
        drop(live);
    }
}

/// Frame `i` of the busy trace: one of 20,000 clients (10.1.0.0/16 and
/// 10.2.0.0/16 hosts) to one of 200 servers, 80-400 bytes.
fn busy_frame(r: &mut Rng, client: u32, server: u32, sport: u16, dport: u16) -> Vec<u8> {
    let len = 80 + r.below(320);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0];
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    let (c, s) = (client.to_be_bytes(), server.to_be_bytes());
    let up = r.below(2) == 0;
    ip.extend_from_slice(if up { &c } else { &s });
    ip.extend_from_slice(if up { &s } else { &c });
    let (a, b) = if up { (sport, dport) } else { (dport, sport) };
    ip.extend_from_slice(&a.to_be_bytes());
    ip.extend_from_slice(&b.to_be_bytes());
    f.extend_from_slice(&ip);
    f.resize(len, 0x44);
    let total = (len - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f
}

/// The check: a store of 20,000 distinct addresses (every 1 MiB
/// block holds thousands, so every block's flow set lists its hosts as
/// "any"), recorded by `wiretape record -r`; a rare host (10 frames) and a
/// rare pair of a busy host and a port (10 frames of its ~400): `extract
/// --json` reads at most 2x the blocks that hold a match and at most 1 %
/// of the store's bytes (capture and index bytes read), and extracts
/// exactly the frames tcpdump selects from the trace. Then the fleet's
/// Parquet tables of two sensors (`wiretape index --parquet`): DuckDB
/// finds exactly the sensors and blocks that hold the rare host (read from
/// the captures themselves), and lists every block's hosts.
#[test]
fn a_rare_host_in_a_busy_store_reads_only_its_blocks() {
    let t = common::TempDir::new("keys-busy");
    let n = 300_000usize;
    let mut r = Rng(0x5eed);
    let rare_at: Vec<usize> = (0..10).map(|k| 7_000 + k * 29_000).collect();
    let pair_at: Vec<usize> = (0..10).map(|k| 11_001 + k * 28_500).collect();
    let busy_host = u32::from_be_bytes([10, 3, 0, 1]);
    let mut frames = Vec::with_capacity(n);
    for i in 0..n {
        let server = u32::from_be_bytes([10, 200, 0, r.below(200) as u8]);
        let f = if rare_at.contains(&i) {
            busy_frame(
                &mut r,
                u32::from_be_bytes([172, 31, 9, 9]),
                server,
                40_000,
                443,
            )
        } else if pair_at.contains(&i) {
            busy_frame(&mut r, busy_host, server, 41_000 + i as u16 % 100, 443)
        } else if i % 750 == 3 {
            // The busy host's other traffic: ~400 frames, never port 443.
            let p = [80, 8080][r.below(2)];
            busy_frame(&mut r, busy_host, server, 42_000, p)
        } else {
            let c = r.below(20_000) as u32;
            let client = u32::from_be_bytes([10, 1 + (c >> 16) as u8, (c >> 8) as u8, c as u8]);
            let sport = 1024 + r.below(60_000) as u16;
            let p = [80, 443, 8080][r.below(3)];
            busy_frame(&mut r, client, server, sport, p)
        };
        let w = f.len() as u32;
        frames.push((f, w, 1_780_000_000_000_000 + i as u64 * 10));
    }
    let trace = t.path().join("busy.pcap");
    common::write_us_pcap(&trace, &frames);
    drop(frames);
    let dir = t.path().join("store");
    common::record_file(&trace, &dir, &["--rotate-size", "32M"]);
    let files = common::pcaps(&dir);
    let store: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    // Every block of the store (but each file's last, partly filled) holds
    // more hosts than a flow set lists.
    let per_file: Vec<Vec<_>> = files
        .iter()
        .map(|f| wiretape::files::index::read(&wiretape::files::index::path_for(f)).unwrap())
        .collect();
    let entries: Vec<_> = per_file.iter().flatten().cloned().collect();
    assert!(entries.len() >= 60, "{} blocks", entries.len());
    for es in &per_file {
        assert!(
            es[..es.len() - 1]
                .iter()
                .all(|e| e.flows.as_ref().is_some_and(|f| f.any[3])),
            "a block listing its hosts: not a busy store"
        );
    }
    let scratch = t.path().join("s");
    std::fs::create_dir_all(&scratch).unwrap();
    for (expr, want) in [("host 172.31.9.9", 10), ("host 10.3.0.1 and port 443", 10)] {
        let out = scratch.join("x.pcap");
        let j = extract_json(&dir, &out, expr);
        let u = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k} in {j}"));
        assert_eq!(u("frames"), want, "'{expr}': {j}");
        same_frames(&out, &common::tcpdump_select(&trace, expr, &scratch), expr);
        assert!(
            u("blocks_read") <= 2 * u("blocks_matched"),
            "'{expr}': {} blocks read, {} held a match: {j}",
            u("blocks_read"),
            u("blocks_matched")
        );
        let read = u("bytes_read") + u("index_bytes_read");
        assert!(
            read * 100 <= store,
            "'{expr}': {read} bytes read of a {store}-byte store: {j}"
        );
        assert_eq!(u("files_key_index") as usize, files.len(), "{j}");
        assert_eq!(
            u("blocks_false_positive"),
            u("blocks_read") - u("blocks_matched")
        );
        // Without the key index the flow sets cannot narrow: every block
        // (but the files' last ones, partly filled) is read.
        let (code, o, e) = common::run_wiretape(
            None,
            &[
                "extract",
                dir.to_str().unwrap(),
                "--count-only",
                "--json",
                "--no-key-index",
                expr,
            ],
        );
        assert_eq!(code, 0, "{e}");
        let j2: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(j2["frames"].as_u64(), Some(want));
        let all = (entries.len() - files.len()) as u64;
        assert!(j2["blocks_read"].as_u64().unwrap() >= all, "{j2}");
        eprintln!("'{expr}': key index {j}\n  flow sets alone {j2}");
    }
    // Stenographer's language (`--steno-query`: a rare host, its /24, a
    // busy host with a port, a rare port) and the BPF forms of a net and a
    // port range: planned by the key index, which skips most blocks; the
    // frames tcpdump selects with the same conditions.
    for (steno, expr) in [
        (true, "host 172.31.9.9"),
        (true, "net 172.31.9.0/24"),
        (true, "host 10.3.0.1 and port 443"),
        (true, "port 40000"),
        (false, "net 172.31.9.0/24"),
        (false, "portrange 40000-40001"),
    ] {
        let out = scratch.join("q.pcap");
        let args: &[&str] = if steno {
            &["--steno-query", expr]
        } else {
            &[expr]
        };
        let j = extract_json_args(&dir, &out, args);
        let u = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k} in {j}"));
        let reference = common::tcpdump_select(&trace, expr, &scratch);
        assert!(!reference.is_empty(), "'{expr}' selects nothing");
        same_frames(&out, &reference, expr);
        assert_eq!(u("files_key_index") as usize, files.len(), "'{expr}': {j}");
        assert!(
            u("blocks_skipped_by_key_index") * 2 >= entries.len() as u64,
            "'{expr}': the key index skipped {} of {} blocks: {j}",
            u("blocks_skipped_by_key_index"),
            entries.len()
        );
        assert!(
            u("bytes_read") * 20 <= store,
            "'{expr}' (steno {steno}): {} bytes read of {store}: {j}",
            u("bytes_read")
        );
        eprintln!("'{expr}' (steno {steno}): {j}");
    }
    // The fleet's Parquet table, two sensors (the second recorded the
    // trace's first 50,000 frames): DuckDB finds exactly the sensors and
    // blocks that hold the rare host, and no block's host list is NULL.
    let part = t.path().join("part.pcap");
    let head: Vec<(Vec<u8>, u32, u64)> = common::read_all(&trace)
        .into_iter()
        .take(50_000)
        .map(|r| {
            let w = r.data.len() as u32;
            (r.data, w, r.ts_ns / 1000)
        })
        .collect();
    common::write_us_pcap(&part, &head);
    let dir_b = t.path().join("store-b");
    common::record_file(&part, &dir_b, &[]);
    let pq = t.path().join("pq");
    std::fs::create_dir_all(&pq).unwrap();
    for (node, d) in [("sensor-a", &dir), ("sensor-b", &dir_b)] {
        let out = pq.join(format!("{node}.parquet"));
        let (code, _, e) = common::run_wiretape(
            None,
            &[
                "index",
                d.to_str().unwrap(),
                "--parquet",
                out.to_str().unwrap(),
                "--node",
                node,
                "-q",
            ],
        );
        assert_eq!(code, 0, "{e}");
    }
    // The truth: the blocks whose records (read whole) hold the host.
    let rare = [172u8, 31, 9, 9];
    let mut want: Vec<(String, String, u64)> = Vec::new();
    for (node, d) in [("sensor-a", &dir), ("sensor-b", &dir_b)] {
        for f in common::pcaps(d) {
            let es = wiretape::files::index::read(&wiretape::files::index::path_for(&f)).unwrap();
            let src = wiretape::files::zread::open_buffered(&f, &Default::default()).unwrap();
            let mut walk = Walker::new(src);
            let mut data = Vec::new();
            let abs = std::fs::canonicalize(&f).unwrap().display().to_string();
            while let Some(m) = walk.next_into(&mut data) {
                if data[26..30] == rare || data[30..34] == rare {
                    let b = es.partition_point(|e| e.offset <= m.offset) - 1;
                    want.push((node.into(), abs.clone(), b as u64));
                }
            }
        }
    }
    want.sort();
    want.dedup();
    assert!(
        want.len() >= 10 && want.iter().any(|w| w.0 == "sensor-b"),
        "{want:?}"
    );
    let script = format!(
        "import duckdb, json\n\
         t = \"'{}/*.parquet'\"\n\
         rows = duckdb.sql(f\"SELECT node, file, block FROM {{t}} WHERE list_contains(ip4, '172.31.9.9') ORDER BY 1, 2, 3\").fetchall()\n\
         nulls = duckdb.sql(f\"SELECT count(*) FROM {{t}} WHERE ip4 IS NULL OR ports IS NULL\").fetchall()[0][0]\n\
         print(json.dumps({{'rows': rows, 'nulls': nulls}}))\n",
        pq.display()
    );
    let o = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "DuckDB: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: Vec<(String, String, u64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().into(),
                r[1].as_str().unwrap().into(),
                r[2].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, want, "DuckDB's blocks of 172.31.9.9");
    assert_eq!(v["nulls"], 0, "a block whose hosts are not listed");
    // The timeline's bound: the frames of exactly the blocks holding it.
    let (code, o, e) = common::run_wiretape(
        None,
        &[
            "timeline",
            dir.to_str().unwrap(),
            "--json",
            "--filter-index",
            "host 172.31.9.9",
        ],
    );
    assert_eq!(code, 0, "{e}");
    let tl: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    let may: u64 = tl["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["filter_frames_max"].as_u64().unwrap())
        .sum();
    let held: u64 = want
        .iter()
        .filter(|w| w.0 == "sensor-a")
        .map(|w| {
            let f = files
                .iter()
                .position(|f| std::fs::canonicalize(f).unwrap().display().to_string() == w.1)
                .unwrap();
            per_file[f][w.2 as usize].count
        })
        .sum();
    assert_eq!(may, held, "timeline --filter-index: {tl}");
    // Stores written before the key index: without `.kdx` files (the
    // `.idx` plans, every block read), then without any index (files read
    // whole): the same frames as tcpdump's.
    let expr = "host 172.31.9.9";
    let reference = common::tcpdump_select(&trace, expr, &scratch);
    for (strip, key_files, whole_files) in [(true, 0, 0), (false, 0, files.len() as u64)] {
        for f in &files {
            let side = if strip {
                wiretape::files::keys::path_for(f)
            } else {
                wiretape::files::index::path_for(f)
            };
            std::fs::remove_file(&side).unwrap();
        }
        let out = scratch.join("old.pcap");
        let j = extract_json(&dir, &out, expr);
        assert_eq!(j["files_key_index"].as_u64(), Some(key_files), "{j}");
        assert_eq!(
            j["files_without_index"].as_array().unwrap().len() as u64,
            whole_files,
            "{j}"
        );
        same_frames(&out, &reference, "an old store");
    }
}

/// `extract DIR -w OUT --json EXPR`: its JSON (exit 0 asserted).
fn extract_json(dir: &Path, out: &Path, expr: &str) -> serde_json::Value {
    extract_json_args(dir, out, &[expr])
}

/// `extract DIR -w OUT --json ARGS...`: its JSON (exit 0 asserted).
fn extract_json_args(dir: &Path, out: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec![
        "extract",
        dir.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "--json",
    ];
    all.extend_from_slice(args);
    let (code, o, e) = common::run_wiretape(None, &all);
    assert_eq!(code, 0, "{e}");
    serde_json::from_str(o.trim()).unwrap()
}

/// The frames of `out` are `reference`'s (bytes and stamps, in order).
fn same_frames(out: &Path, reference: &[wiretape::files::Record], what: &str) {
    let got = common::read_all(out);
    assert_eq!(got.len(), reference.len(), "'{what}'");
    assert!(
        got.iter()
            .zip(reference)
            .all(|(a, b)| a.data == b.data && a.ts_ns == b.ts_ns),
        "'{what}': frames differ from tcpdump's"
    );
}
