//! Bad input: each gets one clear line, the right exit code, and nothing is
//! left attached.

mod common;

use common::*;
use wiretape_testbed::{Testbed, CAP_IF};

fn one_line_error(code: i32, err: &str, want: &str) {
    one_line(code, 1, err, want);
}

/// A usage error (a flag's value, flags that do not go together): exit 2.
fn one_line_usage(code: i32, err: &str, want: &str) {
    one_line(code, 2, err, want);
}

fn one_line(code: i32, want_code: i32, err: &str, want: &str) {
    assert_eq!(code, want_code, "exit code, stderr: {err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("wiretape: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(
        lines[0].contains(want),
        "error should mention '{want}': {err}"
    );
}

#[test]
fn missing_interface() {
    require_root();
    let tb = Testbed::create("eif", 1).unwrap();
    let out = TempDir::new("eif");
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            "nosuch0",
            "-w",
            out.path().to_str().unwrap(),
        ],
    );
    one_line_error(code, &err, "no such interface 'nosuch0'");
}

#[test]
fn output_path_that_is_a_file() {
    require_root();
    let tb = Testbed::create("efile", 1).unwrap();
    let out = TempDir::new("efile");
    let f = out.path().join("plain-file");
    std::fs::write(&f, b"x").unwrap();
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &["record", "-i", CAP_IF, "-w", f.to_str().unwrap()],
    );
    one_line_error(code, &err, "is not a directory");
    assert!(!xdp_attached(&tb));
}

/// A read-only tmpfs, unmounted on drop.
struct RoMount(std::path::PathBuf);
impl Drop for RoMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn unwritable_output_on_a_read_only_mount() {
    require_root();
    let tb = Testbed::create("ero", 1).unwrap();
    let out = TempDir::new("ero");
    let st = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "ro,size=1m",
            "tmpfs",
            out.path().to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(st.success(), "mount a read-only tmpfs");
    let _m = RoMount(out.path().to_owned());
    for dir in [out.path().to_owned(), out.path().join("sub")] {
        let (code, _, err) = run_wiretape(
            Some(&tb),
            &["record", "-i", CAP_IF, "-w", dir.to_str().unwrap()],
        );
        one_line_error(code, &err, "not writable");
        assert!(err.contains("Read-only file system"), "{err}");
    }
    assert!(!xdp_attached(&tb));
}

#[test]
fn xdp_program_already_attached() {
    require_root();
    let tb = Testbed::create("eatt", 1).unwrap();
    let out = TempDir::new("eatt");
    let first = Recorder::start(&tb, &["-w", out.path().join("a").to_str().unwrap()]);
    assert!(xdp_attached(&tb));
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            out.path().join("b").to_str().unwrap(),
        ],
    );
    one_line_error(code, &err, "already has an XDP program attached");
    assert!(err.contains("wiretape_steer"), "names the program: {err}");
    assert!(err.contains("xdp off"), "says how to fix: {err}");
    // The first recorder is untouched by the failed second one; after it
    // stops, nothing is attached.
    assert!(xdp_attached(&tb));
    let mut first = first;
    first.signal(2);
    assert!(first.wait(20).success(), "{}", first.stderr_text());
    assert!(!xdp_attached(&tb));
}

#[test]
fn count_zero_is_a_usage_error() {
    let out = TempDir::new("ec0");
    let (code, _, err) = run_wiretape(
        None,
        &[
            "record",
            "-i",
            "lo",
            "-w",
            out.path().to_str().unwrap(),
            "-c",
            "0",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("'0'") && err.contains("--count"), "{err}");
}

#[test]
fn queue_the_interface_lacks() {
    require_root();
    let tb = Testbed::create("eq", 2).unwrap();
    let out = TempDir::new("eq");
    // A flag mistake (exit 2), refused before the output directory is made
    // (--mkdir would make it) or anything attached, whatever the engine.
    let dir = out.path().join("new");
    for engine in ["auto", "afxdp"] {
        let (code, _, err) = run_wiretape(
            Some(&tb),
            &[
                "record",
                "--engine",
                engine,
                "-i",
                CAP_IF,
                "-w",
                dir.to_str().unwrap(),
                "--mkdir",
                "--queues",
                "0,7",
            ],
        );
        one_line_usage(code, &err, "--queues 0,7: interface wt-cap has no RX queue 7: it has 2 (0-1): name queues below 2, or leave --queues out");
        assert!(!dir.exists(), "{engine}: nothing created");
        assert!(!xdp_attached(&tb));
    }
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &[
            "record",
            "-i",
            CAP_IF,
            "-w",
            out.path().to_str().unwrap(),
            "--queues",
            "x",
        ],
    );
    one_line_usage(code, &err, "invalid --queues 'x'");
}

#[test]
fn info_reports_and_rejects_corrupt_files() {
    require_root();
    let tb = Testbed::create("einfo", 1).unwrap();
    let out = TempDir::new("einfo");
    let mut rec = Recorder::start(&tb, &["-w", out.path().to_str().unwrap(), "-c", "100"]);
    let sent = tb
        .send(
            0..100,
            wiretape_testbed::SizeFn::Fixed(500),
            1,
            Some(50_000),
        )
        .unwrap();
    assert!(rec.wait(20).success());
    let f = pcaps(out.path()).remove(0);
    let (code, o, err) = run_wiretape(None, &["info", "--json", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
    assert_eq!(j["packets"].as_u64(), Some(100));
    assert_eq!(j["original_bytes"].as_u64(), Some(sent.bytes));
    assert_eq!(j["resolution"], "ns");
    assert_eq!(j["linktype"].as_u64(), Some(1));
    let (code, o, _) = run_wiretape(None, &["info", f.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        o.contains("packets      100") && o.contains("Ethernet"),
        "{o}"
    );

    // A torn tail: exit 1, one line, says where and how to fix.
    let data = std::fs::read(&f).unwrap();
    let torn = out.path().join("torn.pcap");
    std::fs::write(&torn, &data[..data.len() - 7]).unwrap();
    let (code, _, err) = run_wiretape(None, &["info", torn.to_str().unwrap()]);
    one_line_error(code, &err, "truncated record data");
    let junk = out.path().join("junk.pcap");
    std::fs::write(&junk, b"definitely not a capture file").unwrap();
    let (code, _, err) = run_wiretape(None, &["info", junk.to_str().unwrap()]);
    one_line_error(code, &err, "not a pcap file");
}

/// `--engine netmap`: a build without the feature says how to build it; a
/// build with it, on this machine without the module, says the module is
/// not loaded; both before anything is attached or written, and an
/// interface that does not exist is named first. No root needed.
#[test]
fn netmap_engine_errors_name_the_fix() {
    let out = TempDir::new("enm");
    let dir = out.path().join("out");
    let d = dir.to_str().unwrap();
    let (code, _, err) = run_wiretape(None, &["record", "--engine", "netmap", "-i", "lo", "-w", d]);
    if wiretape::capture::netmap::BUILT {
        if std::path::Path::new("/dev/netmap").exists() {
            return; // a machine with the module: nothing to check here
        }
        one_line_error(code, &err, "the netmap kernel module is not loaded");
        let (code, _, err) = run_wiretape(
            None,
            &["record", "--engine", "netmap", "-i", "nosuch0", "-w", d],
        );
        one_line_error(code, &err, "no such interface 'nosuch0'");
        let (code, _, err) = run_wiretape(
            None,
            &[
                "record", "--engine", "netmap", "-i", "lo", "-w", d, "--ts", "hw",
            ],
        );
        one_line_error(code, &err, "--ts hw needs the XDP program");
    } else {
        one_line_error(
            code,
            &err,
            "rebuild it with `cargo build --release --features netmap`",
        );
        assert!(!dir.exists(), "nothing written before the error");
    }
    // AF_XDP-only flags are refused with netmap, and the reverse.
    let (code, _, err) = run_wiretape(
        None,
        &[
            "record", "--engine", "netmap", "-i", "lo", "-w", d, "--frames", "4096",
        ],
    );
    if wiretape::capture::netmap::BUILT {
        one_line_usage(code, &err, "--frames applies to --engine afxdp only");
    } else {
        one_line_error(code, &err, "built without netmap support");
    }
    let (code, _, err) = run_wiretape(
        None,
        &["record", "-i", "lo", "-w", d, "--netmap-slots", "1024"],
    );
    one_line_usage(code, &err, "--netmap-slots applies to --engine netmap only");
}
