//! `wiretape timeline` against a generated trace of bursts and gaps whose
//! every stamp is known, recorded by the file engine into a rotated store:
//!
//! * `--json` bin by bin against the frames themselves, for several windows
//!   (the whole store, windows whose edges cut blocks, one inside a burst)
//!   and widths: the bins are round, epoch-aligned, contiguous and cover
//!   the window; a bin that no apportioned block crosses holds exactly the
//!   frames and bytes stamped in it (gaps: 0), any other is off by at most
//!   the frames of the blocks crossing it; the totals are the window's
//!   frames and bytes exactly; a wider picture gives finer bins;
//! * `--filter-index`: bin by bin at least the matching frames (tcpdump's
//!   selection of the trace), within the same apportioning, and in total
//!   at least the matches and below the window's frames;
//! * `--by iface`: two recorders' series add up to the total;
//! * `-o x.svg` parses as XML (Python's ElementTree) and holds the total;
//!   `-o x.png` decodes (zlib and the PNG filters, in Python) at the asked
//!   size and is not one flat colour;
//! * bad input: a bad -o name, --width out of range, a filter libpcap
//!   refuses, --to before --from: exit 2 with one line, nothing written.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::index;

const T0_NS: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// An Ethernet/IPv4 frame of `len` bytes from `src` to `dst`, UDP (17) or
/// TCP (6) to port 443.
fn frame(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&443u16.to_be_bytes());
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    if proto == 6 {
        f[46] = 0x50;
    } else {
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    }
    f
}

/// One burst: its start, frames, spacing, and whether it is the TCP talker's.
struct Burst {
    at_ns: u64,
    n: u64,
    every_ns: u64,
    tcp: bool,
}

const BURSTS: &[Burst] = &[
    Burst {
        at_ns: 0,
        n: 1500,
        every_ns: 200_000,
        tcp: false,
    },
    Burst {
        at_ns: 2 * S,
        n: 400,
        every_ns: MS,
        tcp: true,
    },
    Burst {
        at_ns: 10 * S,
        n: 1200,
        every_ns: 10_000,
        tcp: false,
    },
    Burst {
        at_ns: 10 * S + 500 * MS,
        n: 600,
        every_ns: 300_000,
        tcp: true,
    },
    Burst {
        at_ns: 61 * S,
        n: 900,
        every_ns: 2 * MS,
        tcp: false,
    },
];

/// The frames of the trace: (stamp ns, frame), in time order.
fn trace() -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut seq = 0u32;
    for b in BURSTS {
        for i in 0..b.n {
            let len = 600 + (seq as usize * 37) % 800;
            let f = if b.tcp {
                frame([10, 0, 0, 3], [10, 0, 0, 4], 6, len, seq)
            } else {
                frame([10, 0, 0, 1], [10, 0, 0, 2], 17, len, seq)
            };
            out.push((T0_NS + b.at_ns + i * b.every_ns, f));
            seq += 1;
        }
    }
    out
}

fn timeline_json(args: &[&str]) -> Value {
    let mut a = vec!["timeline"];
    a.extend_from_slice(args);
    a.push("--json");
    let (code, out, err) = run_wiretape(None, &a);
    assert_eq!(code, 0, "timeline {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// Every index block of the store: (first_ns, last_ns, frames).
fn blocks(dir: &Path) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for f in wiretape::files::naming::list_any(dir, None).unwrap() {
        for e in index::read(&index::path_for(&f)).unwrap() {
            out.push((e.first_ns, e.last_ns, e.count));
        }
    }
    out
}

/// Checks one timeline against the frames: `pick` says which frames
/// count (all, or the filter's matches), `bound` whether the bins are an
/// upper bound (the filter) rather than the count.
fn check_bins(
    j: &Value,
    frames: &[(u64, Vec<u8>)],
    store_blocks: &[(u64, u64, u64)],
    key: &str,
    pick: &dyn Fn(&[u8]) -> bool,
    bound: bool,
) -> (usize, usize) {
    let (from, to, w) = (u(j, "from_ns"), u(j, "to_ns"), u(j, "bin_ns"));
    let bins = j["bins"].as_array().unwrap();
    assert!(!bins.is_empty());
    let start = u(&bins[0], "start_ns");
    assert_eq!(start % w, 0, "bins are aligned on the epoch");
    assert!(start <= from && from < start + w);
    for (i, b) in bins.iter().enumerate() {
        assert_eq!(u(b, "start_ns"), start + i as u64 * w, "contiguous");
        assert_eq!(u(b, "end_ns"), u(b, "start_ns") + w);
    }
    let last_end = u(bins.last().unwrap(), "end_ns");
    assert!(
        last_end >= to && last_end - w < to,
        "the bins cover the window"
    );
    // The truth, frame by frame.
    let mut exact = vec![(0u64, 0u64); bins.len()];
    for (ts, f) in frames {
        if *ts >= from && *ts < to && pick(f) {
            let k = ((ts - start) / w) as usize;
            exact[k].0 += 1;
            exact[k].1 += 16 + f.len() as u64;
        }
    }
    // The slack of each bin: frames of the blocks inside the window that
    // cross a bin edge there (the window's edge blocks are read, exact).
    let mut slack = vec![0u64; bins.len()];
    for &(first, last, n) in store_blocks {
        if first < from || last >= to {
            continue;
        }
        let (b0, b1) = (
            ((first - start) / w) as usize,
            ((last - start) / w) as usize,
        );
        if b0 != b1 {
            for s in &mut slack[b0..=b1] {
                *s += n;
            }
        }
    }
    let (mut exact_bins, mut gap_bins) = (0, 0);
    for (i, b) in bins.iter().enumerate() {
        let got = u(b, key);
        let (want, want_bytes) = exact[i];
        if slack[i] == 0 {
            if bound {
                assert!(got >= want, "bin {i}: bound {got} < {want} matching frames");
            } else {
                assert_eq!(got, want, "bin {i} ({}) frames", u(b, "start_ns"));
                assert_eq!(u(b, "bytes"), want_bytes, "bin {i} bytes");
            }
            if want > 0 {
                exact_bins += 1;
            } else {
                gap_bins += 1;
            }
        } else if bound {
            assert!(
                got + slack[i] >= want,
                "bin {i}: {got} + slack {} < {want}",
                slack[i]
            );
        } else {
            assert!(
                got.abs_diff(want) <= slack[i],
                "bin {i}: {got} frames, {want} stamped there, slack {}",
                slack[i]
            );
        }
    }
    let total: u64 = exact.iter().map(|e| e.0).sum();
    let got_total = u(&j["totals"], key);
    if bound {
        assert!(
            got_total >= total,
            "the bound {got_total} is below {total} matches"
        );
    } else {
        assert_eq!(got_total, total, "the window's frames");
        assert_eq!(
            u(&j["totals"], "bytes"),
            exact.iter().map(|e| e.1).sum::<u64>(),
            "the window's bytes"
        );
        let sum: u64 = bins.iter().map(|b| u(b, "frames")).sum();
        assert_eq!(sum, total, "the bins add up to the total");
    }
    (exact_bins, gap_bins)
}

fn store(t: &TempDir, frames: &[(u64, Vec<u8>)]) -> PathBuf {
    let trace = t.path().join("trace.pcap");
    write_ns_pcap(&trace, frames);
    let dir = t.path().join("store");
    record_file(&trace, &dir, &["--rotate-size", "2M", "--block-kib", "64"]);
    assert!(pcaps(&dir).len() >= 3, "rotation made several files");
    dir
}

#[test]
fn bins_match_the_frames_for_several_windows_and_widths() {
    let t = TempDir::new("timeline");
    let frames = trace();
    let dir = store(&t, &frames);
    let d = dir.to_str().unwrap();
    let blocks = blocks(&dir);
    assert!(blocks.len() > 60, "{} blocks", blocks.len());
    let all = |_: &[u8]| true;
    let secs = |ns: u64| format!("{}.{:09}", ns / S, ns % S);
    let windows: Vec<(Option<u64>, Option<u64>)> = vec![
        (None, None),
        (Some(T0_NS + 100 * MS), Some(T0_NS + 2 * S + 250 * MS)),
        (
            Some(T0_NS + 9 * S + 900 * MS),
            Some(T0_NS + 10 * S + 600 * MS),
        ),
        (
            Some(T0_NS + 10 * S + 500_000),
            Some(T0_NS + 10 * S + 10 * MS + 500_000),
        ),
        (Some(T0_NS + 30 * S), None),
    ];
    let (mut exact_bins, mut gap_bins) = (0, 0);
    for (from, to) in &windows {
        let mut prev_bin = 0;
        for width in [3000u32, 1000, 400] {
            let mut args = vec![d.to_string(), "--width".into(), width.to_string()];
            if let Some(f) = from {
                args.extend(["--from".into(), secs(*f)]);
            }
            if let Some(t) = to {
                args.extend(["--to".into(), secs(*t)]);
            }
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let j = timeline_json(&a);
            let w = u(&j, "bin_ns");
            assert!(
                j["bins"].as_array().unwrap().len() as u64 <= u64::from(width / 4),
                "about one bin per 4 px"
            );
            assert!(w >= prev_bin, "a narrower picture never gives finer bins");
            prev_bin = w;
            if from.is_none() {
                assert_eq!(u(&j, "from_ns"), frames[0].0);
                assert_eq!(u(&j, "to_ns"), frames.last().unwrap().0 + 1);
            }
            let (e, g) = check_bins(&j, &frames, &blocks, "frames", &all, false);
            exact_bins += e;
            gap_bins += g;
        }
    }
    // The checks bit: many bins were exact, frame by frame, and gaps 0.
    assert!(exact_bins > 50, "{exact_bins} bins checked exactly");
    assert!(gap_bins > 100, "{gap_bins} empty bins checked");
    // The whole store at 3000 px: finer than at 400 px.
    let wide = timeline_json(&[d, "--width", "3000"]);
    let narrow = timeline_json(&[d, "--width", "400"]);
    assert!(u(&wide, "bin_ns") < u(&narrow, "bin_ns"));
    assert_eq!(u(&wide["totals"], "frames"), frames.len() as u64);

    // A compressed store of the same trace: the same frames and bytes (of
    // the stream before compression), bin by bin as its own blocks allow.
    for z in ["lz4", "zstd"] {
        let zdir = t.path().join(format!("store-{z}"));
        record_file(
            &t.path().join("trace.pcap"),
            &zdir,
            &["--rotate-size", "2M", "--block-kib", "64", "--compress", z],
        );
        let zd = zdir.to_str().unwrap();
        for extra in [
            vec![],
            vec!["--from", "1700000010.0005", "--to", "1700000010.6"],
        ] {
            let mut a = vec![zd];
            a.extend(&extra);
            let j = timeline_json(&a);
            assert!(u(&j, "blocks") > 20);
            check_bins(&j, &frames, &self::blocks(&zdir), "frames", &all, false);
        }
    }

    // --filter-index: the flow index's bound, bin by bin.
    let is_tcp = |f: &[u8]| f[23] == 6;
    let matches = frames.iter().filter(|(_, f)| is_tcp(f)).count() as u64;
    // tcpdump agrees with the trace's own labels.
    let sel = tcpdump_select(&t.path().join("trace.pcap"), "host 10.0.0.3", t.path());
    assert_eq!(sel.len() as u64, matches);
    for width in [2000u32, 500] {
        let j = timeline_json(&[
            d,
            "--width",
            &width.to_string(),
            "--filter-index",
            "host 10.0.0.3",
        ]);
        assert_eq!(j["filter"], "host 10.0.0.3");
        check_bins(&j, &frames, &blocks, "filter_frames_max", &is_tcp, true);
        let bound = u(&j["totals"], "filter_frames_max");
        assert!(
            bound >= matches && bound < frames.len() as u64,
            "bound {bound}, {matches} matches"
        );
        // Still the whole count beside the bound.
        check_bins(&j, &frames, &blocks, "frames", &all, false);
    }

    // Bad input: one line, exit 2, nothing written.
    let out = t.path().join("x.svg");
    let o = out.to_str().unwrap();
    for (args, what) in [
        (vec![d, "-o", "x.gif"], ".svg or .png"),
        (vec![d, "--width", "10", "-o", o], "--width"),
        (
            vec![d, "--filter-index", "port 99999", "-o", o],
            "illegal port number",
        ),
        (
            vec![d, "--from", "1700000010", "--to", "1700000005", "-o", o],
            "not after",
        ),
    ] {
        let mut a = vec!["timeline"];
        a.extend(args);
        let (code, _, err) = run_wiretape(None, &a);
        assert_eq!(code, 2, "{a:?}: {err}");
        assert!(err.contains(what), "{a:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn svg_and_png_pictures() {
    let t = TempDir::new("timeline-pic");
    let frames = trace();
    let dir = store(&t, &frames);
    let d = dir.to_str().unwrap();
    // A second recorder's files (another interface name) in the same store.
    let second: Vec<(u64, Vec<u8>)> = frames.iter().take(700).cloned().collect();
    let trace2 = t.path().join("second.pcap");
    write_ns_pcap(&trace2, &second);
    record_file(&trace2, &dir, &["--prefix", "other", "--block-kib", "64"]);
    let total = (frames.len() + second.len()) as u64;

    let svg = t.path().join("t.svg");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "timeline",
            d,
            "-o",
            svg.to_str().unwrap(),
            "--by",
            "iface",
            "--filter-index",
            "tcp",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let o = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as ET\n\
             r = ET.parse(sys.argv[1]).getroot()\n\
             ns = '{http://www.w3.org/2000/svg}'\n\
             assert r.tag == ns + 'svg', r.tag\n\
             t = [e for e in r.iter(ns + 'text') if e.get('id') == 'total'][0]\n\
             print(t.text)\n\
             print(len(list(r.iter(ns + 'rect'))))\n\
             print(sum(1 for e in r.iter() if any('http' in v and k.endswith('href') for k, v in e.attrib.items())))",
        ])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the SVG parses: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with(&format!("{total} frames")), "{out}");
    assert!(lines[1].parse::<u64>().unwrap() > 20, "bars drawn: {out}");
    assert_eq!(lines[2], "0", "nothing loaded from elsewhere");

    // --by iface: the series add up to the total.
    let j = timeline_json(&[d, "--by", "iface"]);
    let series = j["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{}", j["series"]);
    let per = &j["totals"]["series"];
    let sum: u64 = series
        .iter()
        .map(|s| u(&per[s.as_str().unwrap()], "frames"))
        .sum();
    assert_eq!(sum, total);
    assert_eq!(u(&j["totals"], "frames"), total);
    assert!(series
        .iter()
        .any(|s| u(&per[s.as_str().unwrap()], "frames") == 700));

    for (w, h) in [(900u32, 300u32), (1600, 420)] {
        let png = t.path().join(format!("t{w}.png"));
        let (code, _, err) = run_wiretape(
            None,
            &[
                "timeline",
                d,
                "-o",
                png.to_str().unwrap(),
                "--width",
                &w.to_string(),
                "--height",
                &h.to_string(),
            ],
        );
        assert_eq!(code, 0, "{err}");
        let (pw, ph, colours) = png_info(&png);
        assert_eq!((pw, ph), (u64::from(w), u64::from(h)));
        assert!(colours > 5, "{colours} colours: not a flat picture");
    }
}

#[test]
fn sensors_answer_the_same_bins_as_their_stores() {
    let t = TempDir::new("timeline-remote");
    let frames = trace();
    let a = store(&t, &frames);
    // A second store: the same bursts 3 s later, every other frame.
    let later: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .step_by(2)
        .map(|(ts, f)| (ts + 3 * S, f.clone()))
        .collect();
    let trace2 = t.path().join("later.pcap");
    write_ns_pcap(&trace2, &later);
    let b = t.path().join("store2");
    record_file(&trace2, &b, &["--block-kib", "64"]);
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let api_a = Api::start(&["-w", sa, "--listen", "127.0.0.1:0", "-q"]);
    let api_b = Api::start(&["-w", sb, "--listen", "127.0.0.1:0", "-q"]);
    let strip = |mut j: Value| {
        for k in ["files", "files_without_index", "blocks", "blocks_read"] {
            j.as_object_mut().unwrap().remove(k);
        }
        j
    };
    for extra in [
        vec![],
        vec![
            "--from",
            "1700000001.5",
            "--to",
            "1700000013.25",
            "--width",
            "2400",
        ],
        vec!["--filter-index", "tcp", "--by", "iface"],
    ] {
        let mut local = vec![sa, sb];
        local.extend(&extra);
        let want = strip(timeline_json(&local));
        let mut remote = vec![api_a.url.as_str(), api_b.url.as_str()];
        remote.extend(&extra);
        assert!(strip(timeline_json(&remote)) == want, "sensors: {extra:?}");
        let mut mixed = vec![sa, api_b.url.as_str()];
        mixed.extend(&extra);
        assert!(strip(timeline_json(&mixed)) == want, "mixed: {extra:?}");
        assert_eq!(
            u(&want["totals"], "frames") as usize,
            if extra.is_empty() || extra[0] == "--filter-index" {
                frames.len() + later.len()
            } else {
                frames
                    .iter()
                    .chain(&later)
                    .filter(|(ts, _)| (T0_NS + 1_500 * MS..T0_NS + 13_250 * MS).contains(ts))
                    .count()
            }
        );
    }
    // /v1/timeline's own refusals: JSON naming the parameter.
    for (q, what) in [
        ("by=host", "'by'"),
        ("width=5", "'width'"),
        ("filter_index=port%2099999", "illegal port number"),
        ("bin_ns=1", "bins"),
        ("frm=1", "unknown parameter 'frm'"),
    ] {
        let o = Command::new("curl")
            .args(["-sS", "-w", "\n%{http_code}"])
            .arg(format!("{}/v1/timeline?{q}", api_a.url))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let (body, code) = text.rsplit_once('\n').unwrap();
        assert_eq!(code, "400", "{q}: {text}");
        let v: Value = serde_json::from_str(body).unwrap();
        assert!(v["error"].as_str().unwrap().contains(what), "{q}: {body}");
    }
}
