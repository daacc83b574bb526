//! Operating `wiretape record` as a new user and an unattended sensor meet
//! it: least privilege (uid 65534 with exactly the four capabilities, and
//! each one missing), the interface disappearing or going down while it
//! records (and coming back with `--wait-iface`), CPU lists checked against
//! the allowed set, libbpf's log kept off stderr, what the driver said about
//! zero-copy, one cause per error line. Real veth pairs in private
//! namespaces, the real XDP program and AF_XDP sockets; frames proven by
//! count and bytes.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use wiretape::pipeline::summary::thousands;
use wiretape_testbed::{SizeFn, Testbed, CAP_IF, GEN_IF};

const CAPS: [&str; 4] = ["net_admin", "bpf", "net_raw", "ipc_lock"];

/// A directory anyone may write (the recorder runs as uid 65534).
fn open_dir(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    chmod(d.path(), 0o777);
    d
}

fn chmod(p: &Path, mode: u32) {
    let mut perm = std::fs::metadata(p).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, mode);
    std::fs::set_permissions(p, perm).unwrap();
}

/// The binary copied where uid 65534 may run it (the build directory may
/// sit under a home directory it cannot enter).
fn public_bin(dir: &TempDir) -> PathBuf {
    let p = dir.path().join("wiretape");
    std::fs::copy(bin(), &p).unwrap();
    chmod(&p, 0o755);
    p
}

/// `wiretape record -i wt-cap ARGS` in the test bed as uid/gid 65534 with
/// exactly `caps` (inheritable + ambient, so they are effective after exec).
fn record_as_nobody(tb: &Testbed, bin: &Path, caps: &[&str], args: &[&str]) -> Command {
    let list = caps
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut c = tb.command("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        &format!("--inh-caps=-all,{list}"),
        &format!("--ambient-caps=-all,{list}"),
    ])
    .arg(bin)
    .args(["record", "-i", CAP_IF])
    .args(args);
    c
}

#[test]
fn records_every_frame_as_uid_65534_with_exactly_the_four_capabilities() {
    require_root();
    let tb = Testbed::create("lpriv", 2).unwrap();
    let out = open_dir("lpriv");
    let bin = public_bin(&out);
    let dir = out.path().join("cap");
    std::fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o777);
    let json = out.path().join("s.json");
    let n = 5_000u64;
    let t0 = now_ns();
    let c = record_as_nobody(
        &tb,
        &bin,
        &CAPS,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &n.to_string(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let mut rec = Recorder::started(Recorder::spawn_command(c));
    let sent = tb.send(0..n, SizeFn::Mixed, 8, Some(50_000)).unwrap();
    let st = rec.wait(30);
    let t1 = now_ns();
    assert!(st.success(), "as uid 65534: {}", rec.stderr_text());
    assert!(!xdp_attached(&tb));
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n, "every frame recorded");
    assert_eq!(v.original_bytes, sent.bytes);
    let j = read_json(&json);
    assert_eq!(j["packets_seen"].as_u64(), Some(n));
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_identity(&j);
    // The files belong to the user that wrote them.
    for f in pcaps(&dir) {
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&f).unwrap());
        assert_eq!(uid, 65534, "{}", f.display());
    }
}

#[test]
fn each_missing_capability_is_named_before_anything_is_attached() {
    require_root();
    let tb = Testbed::create("lcap", 1).unwrap();
    let out = open_dir("lcap");
    let bin = public_bin(&out);
    for missing in CAPS {
        let caps: Vec<&str> = CAPS.iter().copied().filter(|c| *c != missing).collect();
        let mut c = record_as_nobody(
            &tb,
            &bin,
            &caps,
            &["-w", out.path().join("cap").to_str().unwrap(), "-d", "1"],
        );
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "without {missing}: {err}");
        let want = format!("missing capability CAP_{}", missing.to_uppercase());
        assert!(err.contains(&want), "without {missing}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(!xdp_attached(&tb), "nothing attached without {missing}");
    }
}

/// Sends `n` frames (seq from `first`), waits until the recorder has them.
fn send_some(tb: &Testbed, first: u64, n: u64) -> u64 {
    tb.send(first..first + n, SizeFn::Mixed, 4, Some(20_000))
        .unwrap()
        .bytes
}

#[test]
fn a_deleted_interface_stops_the_run_with_one_line_and_finished_files() {
    require_root();
    let tb = Testbed::create("ldel", 1).unwrap();
    let out = TempDir::new("ldel");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let n = 2_000;
    let bytes = send_some(&tb, 0, n);
    std::thread::sleep(Duration::from_millis(300));
    let gone = Instant::now();
    tb.ip(&["link", "del", GEN_IF]).unwrap();
    let st = rec.wait(10);
    let took = gone.elapsed();
    let t1 = now_ns();
    eprintln!("noticed the deletion and stopped in {took:?}");
    assert_eq!(st.code(), Some(1), "{}", rec.stderr_text());
    let last = rec.stderr.last().unwrap().clone();
    assert!(
        last.starts_with("wiretape: error: interface wt-cap")
            && last.contains("disappeared during the recording"),
        "one line naming the interface: {last}"
    );
    assert_eq!(
        rec.stderr
            .iter()
            .filter(|l| l.starts_with("wiretape: error"))
            .count(),
        1
    );
    // Stopped within a few seconds (it looks every 100 ms; the machine is
    // shared, so the bound is loose).
    assert!(took < Duration::from_secs(3), "took {took:?}");
    // Every frame before it is in finished, valid files.
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, n);
    assert_eq!(v.original_bytes, bytes);
    for f in pcaps(&dir) {
        let (code, _, err) = run_wiretape(None, &["info", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    let j = read_json(&json);
    assert_eq!(j["stop_reason"], "interface gone");
    assert_eq!(j["packets_written"].as_u64(), Some(n));
    assert_identity(&j);
}

#[test]
fn wait_iface_reattaches_and_the_gap_is_in_the_summary() {
    require_root();
    let tb = Testbed::create("lwait", 1).unwrap();
    let out = TempDir::new("lwait");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--wait-iface",
            "-q",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let n = 1_000;
    let b1 = send_some(&tb, 0, n);
    std::thread::sleep(Duration::from_millis(300));
    tb.ip(&["link", "del", GEN_IF]).unwrap();
    assert!(
        rec.wait_line("waiting for it to come back", 5),
        "{}",
        rec.stderr_text()
    );
    std::thread::sleep(Duration::from_millis(700));
    tb.ip(&[
        "link", "add", GEN_IF, "type", "veth", "peer", "name", CAP_IF,
    ])
    .unwrap();
    tb.ip(&["link", "set", GEN_IF, "address", "02:77:74:00:00:01", "up"])
        .unwrap();
    tb.ip(&["link", "set", CAP_IF, "address", "02:77:74:00:00:02", "up"])
        .unwrap();
    assert!(
        rec.wait_line("recording again", 10),
        "{}",
        rec.stderr_text()
    );
    assert!(rec.wait_line("wiretape: recording wt-cap", 5));
    std::thread::sleep(Duration::from_millis(300));
    let b2 = send_some(&tb, n, n);
    std::thread::sleep(Duration::from_millis(1500));
    rec.signal(libc::SIGINT);
    let st = rec.wait(20);
    let t1 = now_ns();
    assert!(st.success(), "{}", rec.stderr_text());
    let v = verify_dir(&dir, 2 * n, usize::MAX, t0, t1);
    assert_eq!(v.frames, 2 * n, "both segments recorded");
    assert_eq!(v.original_bytes, b1 + b2);
    assert_eq!(v.per_file.len(), 2, "new files after the gap");
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["packets_written"].as_u64(), Some(2 * n));
    let gaps = j["interface_gaps"].as_array().unwrap();
    assert_eq!(gaps.len(), 1, "{j:#}");
    let g = &gaps[0];
    assert_eq!(g["interface"], "wt-cap");
    assert_eq!(g["came_back"], true);
    let secs = g["seconds"].as_f64().unwrap();
    assert!((0.5..15.0).contains(&secs), "gap of {secs} s");
    let text = rec.stderr_text();
    assert!(text.contains("interface wt-cap was away"), "{text}");
}

#[test]
fn link_down_is_a_warning_in_the_progress_line_and_recording_goes_on() {
    require_root();
    let tb = Testbed::create("ldown", 1).unwrap();
    let out = TempDir::new("ldown");
    let dir = out.path().join("cap");
    let mut rec = Recorder::start(&tb, &["-w", dir.to_str().unwrap()]);
    tb.ip(&["link", "set", GEN_IF, "down"]).unwrap();
    assert!(
        rec.wait_line("| WARNING: link wt-cap has no carrier", 5),
        "{}",
        rec.stderr_text()
    );
    tb.ip(&["link", "set", GEN_IF, "up"]).unwrap();
    assert!(rec.wait_line("link up again", 5), "{}", rec.stderr_text());
    let n = 500;
    let bytes = send_some(&tb, 0, n);
    std::thread::sleep(Duration::from_millis(1200));
    rec.signal(libc::SIGINT);
    let st = rec.wait(20);
    assert!(st.success(), "{}", rec.stderr_text());
    let v = verify_dir(&dir, n, usize::MAX, 0, u64::MAX);
    assert_eq!((v.frames, v.original_bytes), (n, bytes));
}

#[test]
fn cpus_outside_the_allowed_set_are_a_usage_error_before_anything_is_attached() {
    require_root();
    let tb = Testbed::create("lcpu", 1).unwrap();
    let out = TempDir::new("lcpu");
    let d = out.path().join("cap");
    for (flag, list) in [("--cpus", "99"), ("--writer-cpus", "0,4096")] {
        let (code, _, err) = run_wiretape(
            Some(&tb),
            &[
                "record",
                "-i",
                CAP_IF,
                "-w",
                d.to_str().unwrap(),
                flag,
                list,
                "-d",
                "1",
            ],
        );
        assert_eq!(code, 2, "{flag} {list}: {err}");
        assert!(
            err.contains(flag) && err.contains("is not one this process may run on"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!xdp_attached(&tb));
    }
    // Also with -r (no interface, no privileges needed).
    let (code, _, err) = run_wiretape(
        None,
        &[
            "record",
            "-r",
            "/nonexistent.pcap",
            "-w",
            d.to_str().unwrap(),
            "--cpus",
            "99",
        ],
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn libbpf_stays_off_stderr_unless_verbose_and_the_driver_is_named() {
    require_root();
    let tb = Testbed::create("llog", 1).unwrap();
    let out = TempDir::new("llog");
    let d = out.path().join("cap");
    // lo: no XDP receive-timestamp kfunc, so the device-bound program is
    // refused (libbpf logs it) and the plain one is used.
    let args = ["record", "-i", "lo", "-w", d.to_str().unwrap(), "-d", "0.3"];
    let (code, _, err) = run_wiretape(Some(&tb), &args);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.lines().any(|l| l.starts_with("libbpf")),
        "libbpf's lines leak: {err}"
    );
    assert!(
        err.contains("timestamps xdp: no NIC stamps") && err.contains("EOPNOTSUPP"),
        "the reason is folded into the start line: {err}"
    );
    assert!(
        err.contains("zero-copy refused by the driver of lo"),
        "what the driver said, named: {err}"
    );
    assert!(!err.contains("veth"), "{err}");
    let mut verbose = args.to_vec();
    verbose.push("-v");
    let (code, _, err) = run_wiretape(Some(&tb), &verbose);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("wiretape: libbpf: ")),
        "-v shows libbpf's log: {err}"
    );
    // On veth the driver is named by ethtool.
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            d.to_str().unwrap(),
            "-d",
            "0.3",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("copy mode (zero-copy refused by driver veth: "),
        "{err}"
    );
}

#[test]
fn an_error_cause_is_printed_once() {
    let (code, _, err) = run_wiretape(
        None,
        &[
            "record",
            "-r",
            "/nonexistent.pcap",
            "-w",
            "/proc/wt-no/such",
            // Its parent is missing too: without --mkdir a usage error.
            "--mkdir",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "cause printed twice: {err}"
    );
}

#[test]
fn sighup_rotates_every_file_and_sigusr2_prints_the_summary_so_far() {
    require_root();
    let tb = Testbed::create("lsig", 2).unwrap();
    let out = TempDir::new("lsig");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-q",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let n = 1_000u64;
    let mut bytes = 0;
    for round in 0..3u64 {
        // 8 flows: both queues carry frames in every round.
        let sent = tb
            .send(round * n..(round + 1) * n, SizeFn::Mixed, 8, Some(20_000))
            .unwrap();
        sent.require_queues(0..2).unwrap();
        bytes += sent.bytes;
        std::thread::sleep(Duration::from_millis(400));
        if round < 2 {
            rec.signal(libc::SIGHUP);
            assert!(rec.wait_line("rotating", 5), "{}", rec.stderr_text());
            // Writers look about every 100 ms.
            std::thread::sleep(Duration::from_millis(400));
        }
    }
    // A SIGHUP with no frame since the last one makes no empty file.
    rec.signal(libc::SIGHUP);
    assert!(rec.wait_line("rotating", 5));
    std::thread::sleep(Duration::from_millis(300));
    // SIGUSR2: the numbers so far, and it goes on.
    rec.signal(libc::SIGUSR2);
    assert!(
        rec.wait_line("wiretape: status after", 5),
        "{}",
        rec.stderr_text()
    );
    assert!(rec.wait_line("writers:", 2));
    let status = rec.stderr_text();
    assert!(
        status.contains(&format!(
            "{} frames seen, {} written",
            thousands(3 * n),
            thousands(3 * n)
        )),
        "{status}"
    );
    assert!(rec.child.try_wait().unwrap().is_none(), "still recording");
    rec.signal(libc::SIGINT);
    let st = rec.wait(20);
    let t1 = now_ns();
    assert!(st.success(), "{}", rec.stderr_text());
    let v = verify_dir(&dir, 3 * n, usize::MAX, t0, t1);
    assert_eq!((v.frames, v.original_bytes), (3 * n, bytes));
    // Three files per queue (two SIGHUPs with frames after each), none empty.
    assert_eq!(v.per_file.len(), 6, "{:?}", v.per_file);
    assert!(v.per_file.values().all(|&k| k > 0), "{:?}", v.per_file);
    for f in v.per_file.keys() {
        let (code, _, err) = run_wiretape(None, &["info", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["files"].as_array().unwrap().len(), 6);
}
