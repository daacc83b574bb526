//! `record --metrics`: scraped over HTTP and parsed by the Prometheus
//! project's own Python client (`prometheus_client`: its OpenMetrics parser
//! and its Prometheus text parser must both take it), while frames go
//! through a real veth pair; the final scrape must equal the summary JSON.

mod common;

use common::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use wiretape_testbed::{SizeFn, Testbed, CAP_IF};

/// Fetches URL (inside the test bed's namespace) with urllib and parses it
/// with both of prometheus_client's parsers; prints the samples as JSON.
const SCRAPE: &str = r#"
import json, sys, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as prom
r = urllib.request.urlopen(sys.argv[1], timeout=5)
text = r.read().decode()
out = {"content_type": r.headers.get("Content-Type"), "samples": {}, "types": {}}
for f in om(text):
    out["types"][f.name] = f.type
    for s in f.samples:
        out["samples"].setdefault(s.name, []).append([s.labels, s.value])
names = {s.name for f in prom(text) for s in f.samples}
if names != set(out["samples"]):
    sys.exit("the Prometheus text parser read other samples: %r" % (names ^ set(out["samples"])))
print(json.dumps(out))
"#;

fn scrape(tb: &Testbed, url: &str) -> Value {
    let o = tb
        .command("python3")
        .args(["-c", SCRAPE, url])
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "scrape {url}: {} (scripts/setup.sh installs the prometheus_client package)",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The value of sample `name` with labels `want` (all of them must match).
fn sample(m: &Value, name: &str, want: &[(&str, &str)]) -> f64 {
    let list = m["samples"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no sample {name}"));
    let hits: Vec<f64> = list
        .iter()
        .filter(|s| want.iter().all(|(k, v)| s[0][*k] == *v))
        .map(|s| s[1].as_f64().unwrap())
        .collect();
    assert_eq!(hits.len(), 1, "{name} {want:?}: {list:?}");
    hits[0]
}

fn url_from(rec: &Recorder) -> String {
    rec.stderr
        .iter()
        .find_map(|l| l.strip_prefix("wiretape: metrics on "))
        .expect("the metrics address is printed")
        .to_string()
}

#[test]
fn final_scrape_equals_the_summary_and_both_parsers_read_it() {
    require_root();
    let tb = Testbed::create("metr", 2).unwrap();
    let out = TempDir::new("metr");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--rotate-size",
            "512K",
            "--keep-files",
            "4",
            "-q",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let url = url_from(&rec);
    let first = scrape(&tb, &url);
    assert!(
        first["content_type"]
            .as_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{first}"
    );
    assert_eq!(first["types"]["wiretape_frames_seen"], "counter");
    assert_eq!(
        first["types"]["wiretape_disk_write_latency_seconds"],
        "histogram"
    );
    let n = 30_000u64;
    let sent = tb.send(0..n, SizeFn::Mixed, 16, Some(60_000)).unwrap();
    // Live: the numbers catch up within a few progress ticks.
    let deadline = Instant::now() + Duration::from_secs(20);
    let last = loop {
        std::thread::sleep(Duration::from_millis(1200));
        let m = scrape(&tb, &url);
        let written: f64 = (0..2)
            .map(|q| {
                sample(
                    &m,
                    "wiretape_frames_written_total",
                    &[("queue", &q.to_string())],
                )
            })
            .sum();
        if written as u64 == n {
            break m;
        }
        assert!(Instant::now() < deadline, "live numbers stuck: {m}");
    };
    rec.signal(libc::SIGINT);
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
    let mut deleted = 0.0;
    for q in j["per_queue"].as_array().unwrap() {
        let qn = q["queue"].as_u64().unwrap().to_string();
        let l = [("interface", CAP_IF), ("queue", qn.as_str())];
        let v = |name: &str| sample(&last, name, &l) as u64;
        assert_eq!(
            Some(v("wiretape_frames_seen_total")),
            q["packets_seen"].as_u64()
        );
        assert_eq!(
            Some(v("wiretape_frames_written_total")),
            q["packets_written"].as_u64()
        );
        assert_eq!(
            Some(v("wiretape_frames_filtered_total")),
            q["packets_filtered"].as_u64()
        );
        assert_eq!(
            Some(v("wiretape_written_bytes_total")),
            q["bytes_written"].as_u64()
        );
        assert_eq!(
            Some(v("wiretape_seen_bytes_total")),
            q["bytes_seen"].as_u64()
        );
        for reason in [
            "rx_ring_full",
            "fill_ring_empty",
            "other",
            "after_count",
            "write_error",
            "disk_full",
        ] {
            let mut lr = l.to_vec();
            lr.push(("reason", reason));
            assert_eq!(
                Some(sample(&last, "wiretape_frames_dropped_total", &lr) as u64),
                q["drops"][reason].as_u64(),
                "queue {qn} {reason}"
            );
        }
        // Rotation by size: every file but the last was rotated out.
        let files = q["files"].as_array().unwrap().len() as u64;
        assert!(files >= 2, "{q}");
        assert_eq!(v("wiretape_files_rotated_total"), files - 1, "queue {qn}");
        assert_eq!(v("wiretape_files_opened_total"), files, "queue {qn}");
        // The write-latency histogram: cumulative buckets ending at the count.
        let count = v("wiretape_disk_write_latency_seconds_count");
        assert!(count > 0, "writes measured on queue {qn}");
        let buckets: Vec<(f64, f64)> = last["samples"]
            ["wiretape_disk_write_latency_seconds_bucket"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s[0]["queue"] == qn.as_str())
            .map(|s| {
                let le = s[0]["le"].as_str().unwrap();
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().unwrap()
                };
                (le, s[1].as_f64().unwrap())
            })
            .collect();
        assert!(buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(buckets.last().unwrap().1 as u64, count);
        deleted += sample(&last, "wiretape_files_deleted_total", &l);
    }
    // Retention deleted at most what the summary says (deletions at the
    // very end, of the files just closed, come after the last scrape).
    let deleted_total = j["retention"]["deleted_files"].as_u64().unwrap();
    assert!(
        deleted as u64 <= deleted_total && deleted_total > 0,
        "{j:#}"
    );
    assert!(sample(&last, "wiretape_output_free_bytes", &[]) > 0.0);
    assert_eq!(sample(&last, "wiretape_recording", &[]), 1.0);
    assert_eq!(
        sample(&last, "wiretape_link_up", &[("interface", CAP_IF)]),
        1.0
    );
}

#[test]
fn listens_on_loopback_unless_told_and_answers_404_elsewhere() {
    require_root();
    let tb = Testbed::create("metl", 1).unwrap();
    let out = TempDir::new("metl");
    let d = out.path().join("cap");
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            d.to_str().unwrap(),
            "--metrics",
            "0.0.0.0:0",
            "-d",
            "1",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--metrics-allow-remote"), "{err}");
    assert!(!xdp_attached(&tb));
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            d.to_str().unwrap(),
            "--metrics",
            "nowhere",
            "-d",
            "1",
        ],
    );
    assert_eq!(code, 2, "{err}");
    // Allowed remote; another path is a 404.
    let rec = Recorder::start(
        &tb,
        &[
            "-w",
            d.to_str().unwrap(),
            "--metrics",
            "0.0.0.0:0",
            "--metrics-allow-remote",
            "-q",
        ],
    );
    let url = url_from(&rec).replace("/metrics", "/other");
    let o = tb
        .command("python3")
        .args([
            "-c",
            "import sys, urllib.request, urllib.error\ntry:\n urllib.request.urlopen(sys.argv[1], timeout=5)\nexcept urllib.error.HTTPError as e:\n print(e.code)",
            &url,
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "404");
}

/// Two volumes; the second goes away mid-run (renamed: a disk gone): the next file
/// there cannot be made, the volume is taken out and every later file goes
/// to the first. `/metrics` and `ctl status` say which volume failed, the
/// summary agrees, and no frame is lost.
#[test]
fn a_volume_that_goes_away_is_counted_by_metrics_and_status() {
    require_root();
    let tb = Testbed::create("metv", 1).unwrap();
    let out = TempDir::new("metv");
    let (a, b) = (out.path().join("a"), out.path().join("b"));
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            a.to_str().unwrap(),
            "-w",
            b.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--rotate-size",
            "256K",
            "-q",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let url = url_from(&rec);
    let (sa, sb) = (a.display().to_string(), b.display().to_string());
    tb.send(0..2000, SizeFn::Fixed(1000), 1, Some(20_000))
        .unwrap();
    // Gone at once (a rename: the recorder may be making a file there).
    std::fs::rename(&b, out.path().join("b.gone")).unwrap();
    tb.send(2000..6000, SizeFn::Fixed(1000), 1, Some(20_000))
        .unwrap();
    let m = scrape_when_written(&tb, &url, 6000);
    let failed = |v: &str| sample(&m, "wiretape_volume_failed_total", &[("volume", v)]);
    assert_eq!((failed(&sa), failed(&sb)), (0.0, 1.0), "{m}");
    let (code, stdout, stderr) = run_wiretape(Some(&tb), &["ctl", "-w", &sa, "status"]);
    assert_eq!(code, 0, "ctl status: {stderr}");
    let st: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(st["volume_failed"][&sb].as_u64(), Some(1), "{st:#}");
    assert_eq!(st["volume_failed"][&sa].as_u64(), Some(0), "{st:#}");
    rec.signal(libc::SIGINT);
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(6000), "{j}");
    assert_eq!(j["volume_failed"][&sb].as_u64(), Some(1), "{j}");
    assert!(!xdp_attached(&tb));
}

/// Four volumes: one fills (an 8 MiB ext4 image), another is made read-only
/// mid-run (ext4's `abort`: the emergency read-only state a disk error puts
/// it in, where every write gets EROFS; `mount -o remount,ro` is refused
/// while files are open for writing). Both are taken out, named and counted
/// (`/metrics`, `ctl status`, the summary, each with its cause), the other
/// two take their share and no frame is lost (the buffered engine hands
/// back the blocks a failed write left in RAM); the files on the failed
/// volumes stay readable: `extract` over the set returns every frame,
/// byte-identical, once, in time order (tshark reads them all).
#[test]
fn a_full_and_a_read_only_volume_are_taken_out_and_nothing_is_lost() {
    full_and_read_only_volumes("metfr", &["--io", "buffered"], None);
}

/// The same with the default engine (io_uring, O_DIRECT): the blocks in
/// flight when a volume fails, and those written after the failed offset,
/// are handed back from the record that straddles it, so again nothing is
/// lost and no frame is read twice.
#[test]
fn volumes_failing_under_io_uring_lose_nothing() {
    full_and_read_only_volumes("metfu", &[], None);
}

/// The same with `--compress lz4`: the compressed sink gives back the
/// records of the units its failed file does not keep whole (those still
/// at the compression threads too), and the file is cut after its last
/// whole unit, so again nothing is lost and no frame is read twice.
#[test]
fn volumes_failing_with_compression_lose_nothing() {
    full_and_read_only_volumes("metfz", &["--compress", "lz4"], None);
}

/// The same with `--encrypt-to`: the age sink gives back the records from
/// the one straddling the end of the failed file's last whole chunk; the
/// file is read (with `--identity`) up to that chunk.
#[test]
fn volumes_failing_with_encryption_lose_nothing() {
    let keys = TempDir::new("metfakeys");
    let (key, to) = keygen(keys.path(), "k");
    full_and_read_only_volumes("metfa", &["--encrypt-to", &to], Some(&key));
}

/// Records 32,000 frames of 1,500 B over four volumes with `extra`
/// options; one volume fills and another goes read-only mid-run (see
/// above). `identity`: read back with it (an encrypted store).
fn full_and_read_only_volumes(tag: &str, extra: &[&str], identity: Option<&std::path::Path>) {
    require_root();
    let tb = Testbed::create(tag, 1).unwrap();
    let vols = FourVolumes::new(tag);
    let (full, ro, out) = (&vols.full, &vols.ro, &vols.out);
    let (names, json) = (&vols.names, &vols.json);
    // The first volume holds the control socket (`ctl -w` names it).
    if extra.contains(&"--compress") {
        // These frames shrink some 40 times: the small volume is filled
        // ahead to 128 KiB below full, less than its compressed share.
        let avail = String::from_utf8(
            std::process::Command::new("df")
                .args(["-B1", "--output=avail"])
                .arg(full.path())
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let avail: u64 = avail.lines().nth(1).unwrap().trim().parse().unwrap();
        let st = std::process::Command::new("fallocate")
            .args(["-l", &(avail - (128 << 10)).to_string()])
            .arg(full.path().join(".filler"))
            .status()
            .unwrap();
        assert!(st.success(), "fallocate");
    }
    let mut args: Vec<&str> = vols.w_args();
    args.extend(extra);
    args.extend([
        "--rotate-size",
        "1M",
        "--metrics",
        "127.0.0.1:0",
        "-q",
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let t0 = now_ns();
    let mut rec = Recorder::start(&tb, &args);
    let url = url_from(&rec);
    // 48 MB in all: the 8 MiB volume's share (a quarter, then a third)
    // is more than it holds.
    let n = 32_000u64;
    vols.send_aborting_third(&tb, n);
    let m = scrape_when_written(&tb, &url, n);
    let failed = |v: &str| sample(&m, "wiretape_volume_failed_total", &[("volume", v)]);
    let want = [0.0, 1.0, 1.0, 0.0];
    let got: Vec<f64> = names.iter().map(|v| failed(v)).collect();
    assert_eq!(got, want, "{m}");
    let (code, stdout, stderr) = run_wiretape(Some(&tb), &["ctl", "-w", &names[0], "status"]);
    assert_eq!(code, 0, "ctl status: {stderr}");
    let st: Value = serde_json::from_str(&stdout).unwrap();
    for (v, w) in names.iter().zip(want) {
        assert_eq!(st["volume_failed"][v].as_u64(), Some(w as u64), "{st:#}");
    }
    rec.signal(libc::SIGINT);
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let err = rec.stderr_text();
    let j = read_json(json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(n), "{j}");
    assert_eq!(j["drops"]["total"].as_u64(), Some(0), "{j}");
    for (i, v) in names.iter().enumerate() {
        assert_eq!(j["volume_failed"][v].as_u64(), Some(want[i] as u64), "{j}");
        assert_eq!(j["volumes"][i]["dir"].as_str(), Some(v.as_str()), "{j}");
    }
    let cause = |i: usize| {
        j["volumes"][i]["failed"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        cause(1).contains("full") || cause(1).contains("space"),
        "{j}"
    );
    // EROFS ("Read-only file system"), or EIO for a write in flight when
    // the filesystem was aborted (then the cause says it is read-only now).
    assert!(cause(2).to_lowercase().contains("read-only"), "{j}");
    assert!(
        err.contains(&format!("volume {}", names[1]))
            && err.contains(&format!("volume {}", names[2])),
        "the text summary names both: {err}"
    );
    // The failed volumes' files stay readable and hold their frames.
    assert!(!captures(full.path()).is_empty() && !captures(ro.path()).is_empty());
    let outp = out.path().join("all.pcap");
    let mut ex = vec!["extract", &names[3], "-w", outp.to_str().unwrap()];
    let key = identity.map(|k| k.display().to_string());
    if let Some(k) = &key {
        ex.extend(["--identity", k.as_str()]);
    }
    let (code, _, e) = run_wiretape(None, &ex);
    assert_eq!(code, 0, "{e}");
    let v = verify_files(
        std::slice::from_ref(&outp),
        n,
        usize::MAX,
        t0,
        now_ns(),
        true,
    );
    assert_eq!((v.frames, v.captured_bytes), (n, n * 1500));
    let o = tb
        .command("tshark")
        .args([
            "-r",
            outp.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count() as u64, n);
    assert!(!xdp_attached(&tb));
}

/// `/metrics` once queue 0 has written `n` frames (scraped every 1.2 s, for
/// at most 20 s).
fn scrape_when_written(tb: &Testbed, url: &str, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(1200));
        let m = scrape(tb, url);
        let w = sample(&m, "wiretape_frames_written_total", &[("queue", "0")]);
        if w as u64 == n {
            return m;
        }
        assert!(Instant::now() < deadline, "live numbers stuck: {m}");
    }
}
