//! Operator mistakes (issue 39), each met as a tired person makes it, in a
//! scratch directory holding a known trace, a store recorded from it, a
//! file named `tcp` and an empty directory:
//!
//! * a word that is both a file here and a filter word is refused naming
//!   both readings (`extract STORE --count-only tcp` used to count every
//!   frame of the store), for every command that takes inputs or a filter;
//! * a window that misses the store reads nothing (`blocks_read`,
//!   `bytes_read` 0) and says the store's span: stderr, `--json`, and the
//!   API's JSON (`/v1/count`, `/v1/timeline`, `/v1/extract`'s trailer);
//! * times say what to add; `YYYY-MM-DD HH:MM:SS` with a zone or `--utc`;
//! * usage errors of every subcommand: exit 2, one line, nothing created
//!   (the directory tree listed before and after);
//! * `record -w` with a missing parent refused unless `--mkdir` (or the
//!   config's `create = true`); `record -r` says nothing of a kernel;
//! * `info DIR` and `repair DIR`; a filter typo's word and fix;
//! * docs/errors.md: every case it shows, run against the binary (those of
//!   sensors against two sensors of the scratch store, TLS and plain).
//!
//! Counts are checked against tcpdump reading the trace.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// 2025-11-22T00:00:00Z.
const T0_NS: u64 = 1_763_769_600_000_000_000;
const FRAMES: u64 = 6000;

/// An Ethernet/IPv4 frame of 64 bytes from 10.0.0.1:40000 to
/// 10.0.0.2:80, TCP (6) or UDP (17).
fn frame(proto: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    if proto == 6 {
        f[46] = 0x50;
    } else {
        f[38..40].copy_from_slice(&30u16.to_be_bytes());
    }
    f
}

/// The trace: 6,000 frames 1 ms apart from T0, every third TCP.
fn write_trace(p: &Path) {
    let frames: Vec<(u64, Vec<u8>)> = (0..FRAMES)
        .map(|i| {
            (
                T0_NS + i * 1_000_000,
                frame(if i % 3 == 0 { 6 } else { 17 }),
            )
        })
        .collect();
    write_ns_pcap(p, &frames);
}

/// The scratch directory of the docs: trace.pcap, store/ (recorded from
/// it by the file engine), a file `tcp`, an empty `out/`.
fn scratch(tag: &str) -> TempDir {
    let t = TempDir::new(tag);
    let d = t.path();
    write_trace(&d.join("trace.pcap"));
    let (code, _, e) = at(d, &["record", "-r", "trace.pcap", "-w", "store", "-q"]);
    assert_eq!(code, 0, "{e}");
    std::fs::write(d.join("tcp"), b"x\n").unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    t
}

/// `wiretape ARGS` run in `dir`: (exit code, stdout, stderr).
fn at(dir: &Path, args: &[&str]) -> (i32, String, String) {
    run_wiretape_in(dir, args)
}

/// Every path under `dir` with its length (directories: None).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<u64>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if m.is_dir() {
                out.insert(rel, None);
                todo.push(p);
            } else {
                out.insert(rel, Some(m.len()));
            }
        }
    }
    out
}

/// `record -r trace.pcap -w OUT EXTRA...`.
fn record_r<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["record", "-r", "trace.pcap", "-w", out];
    a.extend_from_slice(extra);
    a
}

/// Runs `args` (a recording) in `d`, which must succeed, and counts with
/// tcpdump the frames of the one capture file it wrote into `out`.
fn recorded(d: &Path, args: &[&str], out: &str) -> u64 {
    let (code, _, err) = at(d, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    let files = pcaps(&d.join(out));
    assert_eq!(files.len(), 1, "{args:?}");
    tcpdump_count(&files[0], "")
}

/// What tcpdump counts of `file` for `expr` (the independent reader).
fn tcpdump_count(file: &Path, expr: &str) -> u64 {
    let o = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(file)
        .arg(expr)
        .output()
        .expect("tcpdump is installed (scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().count() as u64
}

/// `extract store --count-only --json ARGS` in `d`, which must succeed:
/// its JSON and its stderr.
fn count_json(d: &Path, args: &[&str]) -> (Value, String) {
    let mut a = vec!["extract", "store", "--count-only", "--json"];
    a.extend_from_slice(args);
    let (code, out, err) = at(d, &a);
    assert_eq!(code, 0, "{a:?}: {err}");
    (json(&out), err)
}

/// `wiretape api` serving `d/store` on loopback, plain HTTP.
fn api_on_store(d: &Path) -> Api {
    let store = d.join("store");
    Api::start(&[
        "-w",
        store.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "-q",
    ])
}

fn json(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A usage error: exit 2, exactly one line (the error), nothing created
/// or changed under `dir`.
fn refused(dir: &Path, args: &[&str], want: &str) -> String {
    let before = tree(dir);
    let (code, out, err) = at(dir, args);
    assert_eq!(code, 2, "{args:?}: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line: {err}");
    assert!(lines[0].starts_with("wiretape: error: "), "{args:?}: {err}");
    assert!(lines[0].contains(want), "{args:?}: want '{want}': {err}");
    assert!(out.is_empty(), "{args:?}: nothing on stdout: {out}");
    assert_eq!(tree(dir), before, "{args:?} created or changed something");
    lines[0].to_string()
}

#[test]
fn a_word_that_is_both_a_file_and_a_filter_is_refused_not_guessed() {
    let t = scratch("mwrd");
    let d = t.path();
    let tcp = tcpdump_count(&d.join("trace.pcap"), "tcp");
    assert_eq!(tcp, 2000);
    // The issue's case: it used to count all 6,000 frames.
    let line = refused(d, &["extract", "store", "--count-only", "tcp"], "");
    assert_eq!(
        line,
        "wiretape: error: 'tcp' is both a file here and a filter word: write ./tcp for the \
         file, or put the filter after -- (-- tcp ...)"
    );
    // Either reading, said so: the filter after --, the file as ./tcp.
    let (code, out, err) = at(d, &["extract", "store", "--count-only", "--", "tcp"]);
    assert_eq!(
        (code, out.trim()),
        (0, "2000 frames, 128000 bytes"),
        "{err}"
    );
    let (code, out, err) = at(d, &["extract", "store", "./tcp", "--count-only"]);
    assert_eq!(code, 1, "the file ./tcp is read (and is no capture): {err}");
    assert!(
        err.contains("./tcp") && out.starts_with("6000 frames"),
        "{err}"
    );
    // A filter word that names nothing here is the filter, as before.
    let (code, out, err) = at(d, &["extract", "store", "--count-only", "udp"]);
    assert_eq!(
        (code, out.trim().to_string()),
        (
            0,
            format!(
                "{} frames, 256000 bytes",
                tcpdump_count(&d.join("trace.pcap"), "udp")
            )
        ),
        "{err}"
    );
    // -w - writes the filter's frames, not the store's.
    let o = d.join("out").join("tcp.pcap");
    let (code, _, err) = at(
        d,
        &[
            "extract",
            "store",
            "-w",
            o.to_str().unwrap(),
            "-q",
            "--",
            "tcp",
            "port",
            "80",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(tcpdump_count(&o, ""), tcp);
    std::fs::remove_file(&o).unwrap();
    // The same rule everywhere.
    refused(
        d,
        &["timeline", "store", "tcp"],
        "write ./tcp for the file; timeline takes no filter words",
    );
    refused(
        d,
        &["timeline", "store", "udp"],
        "'udp' is a filter word, not a file or directory here",
    );
    refused(
        d,
        &["index", "store", "tcp"],
        "write ./tcp for the file; index takes no filter words",
    );
    refused(
        d,
        &record_r("out/new", &["tcp", "port", "80"]),
        "-F tcp reads the filter from the file, or put the filter after -- (-- tcp ...)",
    );
    refused(
        d,
        &["filter", "tcp"],
        "'tcp' is both a file here and a filter word",
    );
    refused(
        d,
        &["ctl", "-w", "out", "dump", "tcp"],
        "'tcp' is both a file here and a filter word",
    );
    // api takes its stores with -w only: a stray word is refused by name.
    refused(
        d,
        &["api", "-w", "store", "--listen", "127.0.0.1:0", "tcp"],
        "unexpected argument 'tcp'",
    );
    // After --: the filter, and the recording has it.
    assert_eq!(
        recorded(d, &record_r("out/tcp", &["-q", "--", "tcp"]), "out/tcp"),
        tcp
    );
    let (code, out, err) = at(d, &["filter", "--", "tcp"]);
    assert!(code == 0 && out.starts_with("ok: 'tcp'"), "{err}");
    // --config's filter comes after --: never a file.
    let conf = d.join("out/r.toml");
    std::fs::write(&conf, "filter = \"tcp\"\nquiet = true\n").unwrap();
    assert_eq!(
        recorded(
            d,
            &[
                "record",
                "--config",
                "out/r.toml",
                "-r",
                "trace.pcap",
                "-w",
                "out/conf"
            ],
            "out/conf"
        ),
        tcp
    );
}

#[test]
fn a_window_that_misses_the_store_reads_nothing_and_says_its_span() {
    let t = scratch("mspan");
    let d = t.path();
    let want_span = |j: &Value| {
        let s = &j["store_span"];
        assert_eq!(s["first_ns"].as_u64(), Some(T0_NS), "{j}");
        assert_eq!(
            s["last_ns"].as_u64(),
            Some(T0_NS + (FRAMES - 1) * 1_000_000),
            "{j}"
        );
        assert_eq!(s["first_time"], "2025-11-22T00:00:00.000000000Z");
        assert_eq!(s["last_time"], "2025-11-22T00:00:05.999000000Z");
        assert_eq!(j["window_misses_store"], true, "{j}");
    };
    let said = "misses the store, which holds 2025-11-22T00:00:00.000000000Z to \
                2025-11-22T00:00:05.999000000Z: nothing was read";
    // extract --from -5m on a store that ended long ago: nothing read.
    for mode in ["--count-only", "-w"] {
        let mut args = vec!["extract", "store", "--from", "-5m", "--json"];
        if mode == "-w" {
            args.extend(["-w", "out/none.pcap"]);
        } else {
            args.push(mode);
        }
        let (code, out, err) = at(d, &args);
        assert_eq!(code, 0, "{err}");
        let j = json(&out);
        assert_eq!(j["frames"], 0);
        for k in ["blocks_read", "bytes_read", "files_read", "records_read"] {
            assert_eq!(j[k].as_u64(), Some(0), "{k}: {j}");
        }
        want_span(&j);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(
            lines[0].starts_with("wiretape: no frames: the window ") && lines[0].contains(said),
            "{err}"
        );
    }
    // Before the store: the same.
    let (j, _) = count_json(d, &["--to", "2025-11-21T00:00:00Z"]);
    assert_eq!(
        (j["frames"].as_u64(), j["bytes_read"].as_u64()),
        (Some(0), Some(0))
    );
    want_span(&j);
    // A window inside: the frames, the span, no such line.
    let (j, err) = count_json(d, &["--from", "2025-11-22T00:00:05Z"]);
    assert_eq!(j["frames"].as_u64(), Some(1000));
    assert_eq!(j["window_misses_store"], false);
    assert!(!err.contains("no frames"), "{err}");
    // timeline: the line instead of "0 frames in 0 bins", and the JSON.
    let (code, out, err) = at(d, &["timeline", "store", "--from", "-5m", "--json"]);
    assert_eq!(code, 0, "{err}");
    let j = json(&out);
    want_span(&j);
    assert_eq!(j["blocks_read"].as_u64(), Some(0));
    assert!(err.contains(said) && err.lines().count() == 1, "{err}");
    let (_, out, err) = at(d, &["timeline", "store", "--from", "-5m"]);
    assert!(err.contains(said) && !err.contains("0 bins"), "{err}");
    assert!(out.lines().count() <= 1, "no bins: {out}");
    // The API: /v1/count and /v1/timeline's JSON, /v1/extract's trailer.
    let api = api_on_store(d);
    for path in ["/v1/count?from=-5m", "/v1/timeline?from=-5m"] {
        let o = Command::new("curl")
            .args(["-s", "-f", &format!("{}{path}", api.url)])
            .output()
            .expect("curl is installed");
        assert!(o.status.success(), "{path}");
        let j = json(&String::from_utf8_lossy(&o.stdout));
        want_span(&j);
        if path.starts_with("/v1/count") {
            assert_eq!(
                (j["frames"].as_u64(), j["bytes_read"].as_u64()),
                (Some(0), Some(0)),
                "{j}"
            );
        }
    }
    let hdr = d.join("out/headers.txt");
    let o = Command::new("curl")
        .args(["-s", "-f", "-H", "TE: trailers", "-D"])
        .arg(&hdr)
        .arg(format!("{}/v1/extract?from=-5m", api.url))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(o.stdout.len(), 24, "a pcap header, no frame");
    let h = std::fs::read_to_string(&hdr).unwrap();
    let summary = h
        .lines()
        .find_map(|l| l.strip_prefix("wiretape-summary: "))
        .unwrap_or_else(|| panic!("no summary trailer: {h}"));
    want_span(&json(summary));
    // A client of the sensor says it too.
    let (code, _, err) = at(d, &["extract", &api.url, "--from", "-5m", "--count-only"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains(said), "{err}");
}

#[test]
fn times_say_what_to_add_and_a_space_with_a_zone_is_a_time() {
    let t = scratch("mtime");
    let d = t.path();
    let count = |args: &[&str]| -> String {
        let mut a = vec!["extract", "store", "--count-only"];
        a.extend_from_slice(args);
        let (code, out, err) = at(d, &a);
        assert_eq!(code, 0, "{a:?}: {err}");
        out.trim().to_string()
    };
    let want = count(&["--from", "2025-11-22T00:00:05Z"]);
    assert_eq!(want, "1000 frames, 64000 bytes");
    assert_eq!(count(&["--from", "2025-11-22 00:00:05Z"]), want);
    assert_eq!(count(&["--from", "2025-11-22 01:00:05+01:00"]), want);
    assert_eq!(count(&["--from", "2025-11-22 00:00:05", "--utc"]), want);
    assert_eq!(
        count(&[
            "--from",
            "2025-11-22 00:00:04.5",
            "--utc",
            "--to",
            "2025-11-22T00:00:05Z"
        ]),
        "500 frames, 32000 bytes"
    );
    refused(
        d,
        &[
            "extract",
            "store",
            "--count-only",
            "--from",
            "2025-11-22T00:00:05",
        ],
        "'2025-11-22T00:00:05' is RFC 3339 without a time zone: add Z for UTC or an offset like \
         +01:00 (2025-11-22T00:00:05Z), or give --utc to read it as UTC",
    );
    refused(
        d,
        &[
            "extract",
            "store",
            "--count-only",
            "--from",
            "2025-11-22 00:00:05",
        ],
        "add Z for UTC or an offset like +01:00",
    );
    refused(
        d,
        &["extract", "store", "--count-only", "--from", "5m"],
        "'5m' is not a time: did you mean -5m (5 minutes before now)?",
    );
    refused(
        d,
        &["timeline", "store", "--from", "5m"],
        "did you mean -5m",
    );
    refused(
        d,
        &["ctl", "-w", "out", "dump", "--from", "2025-11-22T00:00:05"],
        "or give --utc",
    );
    // The API says the same (no --utc there: a zone).
    let api = api_on_store(d);
    let o = Command::new("curl")
        .args(["-s", &format!("{}/v1/count?from=5m", api.url)])
        .output()
        .unwrap();
    let j = json(&String::from_utf8_lossy(&o.stdout));
    assert!(
        j["error"].as_str().unwrap().contains("did you mean -5m"),
        "{j}"
    );
}

#[test]
fn record_refuses_mistakes_before_creating_anything() {
    let t = scratch("mrec");
    let d = t.path();
    let rec = |extra| record_r("out/new", extra);
    refused(
        d,
        &rec(&["--compress", "gzip"]),
        "--compress gzip: unknown compression",
    );
    refused(
        d,
        &rec(&["--compress", "zstd:99"]),
        "zstd level must be an integer",
    );
    refused(
        d,
        &rec(&["--speed", "fast"]),
        "--speed 'fast' is not a speed",
    );
    // The issue's case: a filter typo left NEWDIR behind.
    let e = refused(
        d,
        &rec(&["--", "tcp", "prot", "80"]),
        "syntax error at 'prot' (word 2 of 3)",
    );
    assert!(e.contains("did you mean 'port' or 'proto'?"), "{e}");
    refused(d, &rec(&["udp", "prot", "80"]), "syntax error at 'prot'");
    // A -w path whose parent is missing: named, refused.
    refused(
        d,
        &["record", "-r", "trace.pcap", "-w", "typo/data/run1"],
        "-w typo/data/run1: its parent typo/data does not exist (a typo?): give an existing \
         path, or --mkdir to create the whole path (in a --config file: create = true)",
    );
    // A volume's own limit for a directory that is not a volume.
    refused(
        d,
        &[
            "record",
            "-r",
            "trace.pcap",
            "-w",
            "out/a",
            "-w",
            "out/b",
            "--min-free",
            "out/c=5%",
        ],
        "--min-free out/c=...: out/c is not one of the volumes (-w out/a, -w out/b)",
    );
    // Another path to a volume is that volume: the same run records.
    assert_eq!(
        recorded(
            d,
            &record_r(
                "out/v",
                &[
                    "-q",
                    "--keep-bytes",
                    "out/../out/v/=100M",
                    "--min-free",
                    "./out/v=1%"
                ]
            ),
            "out/v"
        ),
        FRAMES
    );
    // --mkdir and create = true make it, and record every frame.
    assert_eq!(
        recorded(d, &record_r("made/a/b", &["--mkdir", "-q"]), "made/a/b"),
        FRAMES
    );
    std::fs::write(
        d.join("out/c.toml"),
        "create = true\nwrite = \"conf/x/y\"\n",
    )
    .unwrap();
    assert_eq!(
        recorded(
            d,
            &["record", "--config", "out/c.toml", "-r", "trace.pcap", "-q"],
            "conf/x/y"
        ),
        FRAMES
    );
    // A file has no kernel: `record -r` prints no kernel drops.
    let (code, _, err) = at(d, &["record", "-r", "trace.pcap", "-w", "out/k"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("6000 packets captured"), "{err}");
    assert!(!err.contains("dropped by kernel"), "{err}");
}

#[test]
fn info_and_repair_take_a_directory_and_its_compressed_files() {
    let t = scratch("mdir");
    let d = t.path();
    let (code, _, err) = at(
        d,
        &record_r("store", &["--prefix", "z", "--compress", "lz4", "-q"]),
    );
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = at(d, &["info", "--json", "store"]);
    assert_eq!(code, 0, "{err}");
    let infos: Vec<Value> = out.lines().map(json).collect();
    assert_eq!(infos.len(), 2, "{out}");
    assert!(infos
        .iter()
        .any(|j| j["file"].as_str().unwrap().ends_with(".pcap.lz4")));
    assert!(
        infos.iter().all(|j| j["packets"].as_u64() == Some(FRAMES)),
        "{out}"
    );
    let (code, out, err) = at(d, &["repair", "store"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.matches(": intact, 6000 records").count(), 2, "{out}");
    // The help's example takes them too.
    let (_, help, _) = at(d, &["info", "--help"]);
    assert!(help.contains("wiretape info /data/*.pcap*"), "{help}");
    let (_, help, _) = at(d, &["--help"]);
    assert!(!help.contains("info /data/*.pcap "), "{help}");
}

#[test]
fn a_filter_typo_names_its_word_and_the_keyword() {
    let t = scratch("mtypo");
    let d = t.path();
    let e = refused(d, &["filter", "tpc", "port", "80"], "");
    assert_eq!(
        e,
        "wiretape: error: filter expression 'tpc port 80': can't parse filter expression: \
         syntax error at 'tpc' (word 1 of 3): did you mean 'tcp'? (see man pcap-filter)"
    );
    refused(
        d,
        &["extract", "store", "--count-only", "tpc", "port", "80"],
        "did you mean 'tcp'?",
    );
    refused(
        d,
        &["timeline", "store", "--filter-index", "tpc port 80"],
        "did you mean 'tcp'?",
    );
}

/// Each subcommand's usage errors: exit 2, one line, nothing created.
#[test]
fn every_subcommand_refuses_bad_usage_in_one_line_and_creates_nothing() {
    let t = scratch("musage");
    let d = t.path();
    let cases: &[(&[&str], &str)] = &[
        (&record_r("out/n", &["--compress", "gzip"]), "--compress"),
        (
            &["record", "-r", "trace.pcap", "-w", "out/n", "-c", "0"],
            "--count",
        ),
        (&record_r("out/n", &["--busy-poll", "50"]), "--busy-poll"),
        (
            &["record", "-i", "lo", "-w", "out/n", "--queues", "x"],
            "invalid --queues 'x'",
        ),
        (
            &["record", "-i", "lo", "-w", "out/n", "--netmap-slots", "64"],
            "--netmap-slots",
        ),
        (
            &["record", "-r", "trace.pcap", "-w", "x/y/z"],
            "does not exist",
        ),
        (
            &[
                "record",
                "-i",
                "lo",
                "-w",
                "out/n",
                "--engine",
                "packet",
                "--packet-block-kib",
                "100",
            ],
            "power of two",
        ),
        (
            &["record", "-r", "trace.pcap", "-w", "out/n", "--bogus"],
            "unexpected argument '--bogus'",
        ),
        (
            &[
                "record",
                "--config",
                "nofile.toml",
                "-r",
                "trace.pcap",
                "-w",
                "out/n",
            ],
            "config file",
        ),
        (
            &["ctl", "-w", "out", "dump", "--from", "5m"],
            "did you mean -5m",
        ),
        (&["ctl", "-w", "out", "dump", "--last", "x"], "--last"),
        (&["ctl", "dump"], "which recorder?"),
        (&["ctl", "-w", "out", "bogus"], "unrecognized subcommand"),
        (&["info"], "required"),
        (&["info", "--jsn", "x"], "'--json'"),
        (&["demo", "--count", "0"], "--count"),
        (&["demo", "--xdp-mode", "x"], "--xdp-mode"),
        (
            &[
                "extract",
                "store",
                "--count-only",
                "--from",
                "2025-11-22T00:00:00",
            ],
            "time zone",
        ),
        (&["extract", "store", "--count-only", "tcp"], "ambiguous"),
        (
            &["extract", "store", "--count-only", "tpc", "port", "80"],
            "syntax error",
        ),
        (
            &["extract", "store", "--count-only", "-w", "out/x.pcap"],
            "cannot be used with",
        ),
        (&["extract", "store"], "required"),
        (
            &["extract", "store", "-w", "out/x.pcap", "--format", "x"],
            "--format",
        ),
        (&["index", "store", "tcp"], "ambiguous"),
        (&["index", "https://127.0.0.1:1"], "--parquet"),
        (&["index"], "required"),
        (&["timeline", "store", "-o", "out/x.jpg"], ".svg or .png"),
        (&["timeline", "store", "--width", "5"], "--width"),
        (&["timeline", "store", "--from", "yesterday"], "not a time"),
        (&["api", "-w", "store"], "--listen"),
        (&["api", "-w", "store", "--listen", "nope"], "--listen"),
        (
            &[
                "api",
                "-w",
                "store",
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                "x",
            ],
            "",
        ),
        (&["certs", "init", "out/ca"], "--server-name"),
        (&["certs", "client", "out/ca"], "required"),
        (&["certs", "bogus"], "unrecognized subcommand"),
        (&["repair"], "required"),
        (&["repair", "--bogus", "x"], "--bogus"),
        (
            &["replay", "trace.pcap", "-i", "lo", "--speed", "fast"],
            "not a speed",
        ),
        (&["replay"], "required"),
        (&["gen", "-i", "lo", "--count", "1", "--rate=-5"], "--rate"),
        (&["gen", "-i", "lo", "--count", "0"], "--count"),
        (&["filter", "tpc", "port", "80"], "did you mean 'tcp'?"),
        (&["filter", "tcp"], "ambiguous"),
        (&["filter", "-s", "x", "tcp"], "-s"),
        (&["tsbench", "--frames", "x"], "--frames"),
        (&["bogus"], "unrecognized subcommand"),
    ];
    // "ambiguous" stands for the both-readings line.
    for (args, want) in cases {
        let want = if *want == "ambiguous" {
            "is both a file here and a filter word"
        } else {
            want
        };
        refused(d, args, want);
    }
}

/// The chapter's sensors in `d`: `tls/` (CA site-a, clients alice, expired
/// a day ago, future from two days on), `other/` (CA site-b, client
/// mallory, a server certificate that ended an hour ago), and two sensors
/// of `store/`, TLS with `tls/` and plain: their ports.
fn sensors(d: &Path) -> (Api, Api) {
    use wiretape::query::tls::{issue_client, issue_server, Validity};
    for (dir, name) in [("tls", "site-a"), ("other", "site-b")] {
        let (code, _, e) = at(
            d,
            &[
                "certs",
                "init",
                dir,
                "--server-name",
                "127.0.0.1",
                "--name",
                name,
            ],
        );
        assert_eq!(code, 0, "{e}");
    }
    for (dir, client) in [("tls", "alice"), ("other", "mallory")] {
        let (code, _, e) = at(d, &["certs", "client", dir, client]);
        assert_eq!(code, 0, "{e}");
    }
    let now = (now_ns() / 1_000_000_000) as i64;
    let tls = d.join("tls");
    issue_client(
        &tls,
        "expired",
        Validity::between(now - 10 * 86_400, now - 86_400),
        false,
    )
    .unwrap();
    issue_client(
        &tls,
        "future",
        Validity::between(now + 2 * 86_400, now + 9 * 86_400),
        false,
    )
    .unwrap();
    issue_server(
        &d.join("other"),
        &["127.0.0.1".to_string()],
        Validity::between(now - 5 * 86_400, now - 3_600),
        true,
    )
    .unwrap();
    let f = |n: &str| tls.join(n).to_str().unwrap().to_string();
    let store = d.join("store");
    let secure = Api::start(&[
        "-w",
        store.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "-q",
        "--tls-cert",
        &f("server.pem"),
        "--tls-key",
        &f("server.key"),
        "--client-ca",
        &f("ca.pem"),
    ]);
    (secure, api_on_store(d))
}

/// docs/errors.md: each case it shows (a `console` block: the command, the
/// lines on stderr, the exit code) is what the binary says, in the
/// scratch directory the chapter describes, and creates nothing. The
/// sensors' ports 8443 (TLS) and 8080 (plain) are read as the ports the
/// two sensors of [`sensors`] were given.
#[test]
fn the_errors_chapter_is_what_the_binary_says() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/errors.md"))
        .unwrap();
    let t = scratch("mdoc");
    let d = t.path();
    let (secure, plain) = sensors(d);
    let port = |a: &Api| a.url.rsplit_once(':').unwrap().1.to_string();
    let ports = [
        (":8443", format!(":{}", port(&secure))),
        (":8080", format!(":{}", port(&plain))),
    ];
    let here = |s: &str| {
        ports
            .iter()
            .fold(s.to_string(), |acc, (doc, real)| acc.replace(doc, real))
    };
    let mut cases = 0;
    let mut blocks = doc.split("```console\n").skip(1);
    for block in blocks.by_ref() {
        let body = block.split("```").next().unwrap();
        let mut lines = body.lines();
        let cmd = lines
            .next()
            .unwrap()
            .strip_prefix("$ wiretape ")
            .expect("a case starts with `$ wiretape `");
        let rest: Vec<&str> = lines.collect();
        let (exit, want) = rest.split_last().expect("lines and an exit code");
        let exit: i32 = exit
            .strip_prefix("exit ")
            .expect("ends with `exit N`")
            .parse()
            .unwrap();
        let args = shell_words(&here(cmd));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let before = tree(d);
        let (code, _, err) = at(d, &args);
        assert_eq!(code, exit, "`{cmd}`: exit code: {err}");
        // The lines that say something is wrong or empty (progress and
        // notes aside).
        let got: Vec<&str> = err
            .lines()
            .filter(|l| l.starts_with("wiretape: error:") || l.starts_with("wiretape: no frames:"))
            .collect();
        assert_eq!(got.len(), want.len(), "`{cmd}`: {err}");
        for (g, w) in got.iter().zip(want) {
            assert!(matches(g, &here(w)), "`{cmd}`:\n   got: {g}\n  docs: {w}");
        }
        assert_eq!(tree(d), before, "`{cmd}` created or changed something");
        cases += 1;
    }
    assert!(cases >= 40, "{cases} cases");
}

/// `line` equals `pattern`, where `…` in the pattern stands for any text.
fn matches(line: &str, pattern: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    let mut rest = line;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(p) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            match rest.find(p) {
                Some(k) => rest = &rest[k + p.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// Words as a shell splits them: blanks separate, '...' and "..." quote.
fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}
