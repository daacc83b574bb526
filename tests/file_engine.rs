//! The file engine (`wiretape record -r FILE`): a capture file through the
//! same pipeline as an RX queue, run as an unprivileged user (uid 65534 via
//! setpriv when the tests run as root). Every frame must come out
//! byte-identical, which tshark checks independently: both the input and
//! the output are rewritten by tshark as nanosecond pcap and compared byte
//! for byte after the file header.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape::files::{Format, PcapReader, Record};
use wiretape::storage::{FileSink, PcapWriter};

const N: u64 = 100_000;

/// Frame `i` of the mixed trace: Ethernet with IPv4/UDP (the test bed's
/// known frames), IPv6, ARP and VLAN-tagged IPv4 headers, 60..1514 bytes,
/// every 9th one cut short (caplen < length on the wire).
fn frame(i: u64) -> (Vec<u8>, u32) {
    let len = wiretape_testbed::frames::mixed_size(i);
    let mut f = wiretape_testbed::frames::build(i, len, (i % 13) as u16);
    match i % 5 {
        1 => f[12..14].copy_from_slice(&[0x86, 0xdd]), // IPv6
        2 => f[12..14].copy_from_slice(&[0x08, 0x06]), // ARP
        3 => {
            // 802.1Q tag before the IPv4 ethertype
            f.splice(12..12, [0x81, 0x00, 0x00, (i % 4000) as u8]);
            f.truncate(len);
        }
        _ => {}
    }
    let wire = f.len() as u32;
    if i % 9 == 4 {
        f.truncate(f.len().max(120) / 2);
    }
    (f, wire)
}

fn stamp(i: u64) -> u64 {
    // Uneven gaps, some equal stamps, nanosecond digits.
    1_763_800_000_000_000_000 + i * 1_000 + (i * 7919) % 997 - i.is_multiple_of(3) as u64
}

/// Writes the trace as classic pcap (ns or µs), little-endian, by hand.
fn write_pcap(path: &Path, nanos: bool) {
    let mut b = Vec::with_capacity(100 << 20);
    let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
    b.extend_from_slice(&magic.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&262_144u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for i in 0..N {
        let (f, wire) = frame(i);
        let ts = stamp(i);
        let frac = if nanos {
            ts % 1_000_000_000
        } else {
            ts % 1_000_000_000 / 1000
        };
        b.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(frac as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&wire.to_le_bytes());
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

/// The trace as pcapng (written by our own writer; tshark reads it back).
fn write_pcapng(path: &Path) {
    let sink = FileSink::create(path).unwrap();
    let mut w = PcapWriter::with_format(sink, 262_144, Format::PcapNg, "trace0");
    for i in 0..N {
        let (f, wire) = frame(i);
        w.write_wire(stamp(i), &f, wire).unwrap();
    }
    w.close().unwrap();
}

/// tshark rewrites `files` (merged in order) as nanosecond pcap; returns
/// the bytes after the 24-byte file header.
fn tshark_records(files: &[PathBuf], out: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let o = out.with_extension(format!("{k}.pcap"));
        let st = Command::new("tshark")
            .args(["-r", f.to_str().unwrap(), "-F", "nsecpcap", "-w"])
            .arg(&o)
            .output()
            .expect("tshark runs");
        assert!(
            st.status.success(),
            "tshark -r {}: {}",
            f.display(),
            String::from_utf8_lossy(&st.stderr)
        );
        all.extend_from_slice(&std::fs::read(&o).unwrap()[24..]);
    }
    all
}

/// Runs `wiretape ARGS` as uid/gid 65534 when we are root (no capabilities),
/// else as ourselves.
fn run_unprivileged(args: &[&str]) -> (i32, String) {
    let mut c = wiretape_unprivileged();
    let out = c.args(args).output().expect("run wiretape");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn open_dir(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    let mut p = std::fs::metadata(d.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o777);
    std::fs::set_permissions(d.path(), p).unwrap();
    d
}

fn check(input: &Path, extra: &[&str], want_format: &str, work: &TempDir) {
    static RUN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = work.path().join(format!("out-{k}-{want_format}"));
    std::fs::create_dir(&out).unwrap();
    let mut p = std::fs::metadata(&out).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut p, 0o777);
    std::fs::set_permissions(&out, p).unwrap();
    let sum = out.join("summary.json");
    let mut args = vec![
        "record",
        "-r",
        input.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "-q",
        "--summary-json",
        sum.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (rc, err) = run_unprivileged(&args);
    assert_eq!(rc, 0, "wiretape record -r {extra:?} failed:\n{err}");
    let j = read_json(&sum);
    assert_identity(&j);
    assert_eq!(j["engine"], "file");
    assert_eq!(j["packets_seen"], N, "{j}");
    assert_eq!(j["packets_written"], N, "{j}");
    assert_eq!(j["format"], want_format);
    let files = pcaps(&out);
    assert!(!files.is_empty());
    // Our reader: every frame, in order, same bytes, same wire length, same stamp.
    let mut rec = Record::default();
    let mut i = 0u64;
    for f in &files {
        let mut r = PcapReader::open(f).unwrap();
        while r.next_into(&mut rec).unwrap() {
            let (want, wire) = frame(i);
            assert_eq!(rec.data, want, "frame {i} bytes ({})", f.display());
            assert_eq!(rec.orig_len, wire, "frame {i} wire length");
            i += 1;
        }
    }
    assert_eq!(i, N, "frames read back");
    // tshark: the output's records equal the input's, byte for byte.
    let a = tshark_records(&[input.to_owned()], &work.path().join("a"));
    let b = tshark_records(&files, &work.path().join("b"));
    assert_eq!(a.len(), b.len(), "record bytes (tshark)");
    assert!(a == b, "tshark sees different records in {extra:?}");
}

#[test]
fn a_capture_file_goes_through_the_pipeline_byte_identical_without_privileges() {
    let work = open_dir("file-engine");
    let ns = work.path().join("trace-ns.pcap");
    let us = work.path().join("trace-us.pcap");
    let ng = work.path().join("trace.pcapng");
    write_pcap(&ns, true);
    write_pcap(&us, false);
    write_pcapng(&ng);
    check(&ns, &[], "pcap-ns", &work);
    check(&us, &[], "pcap-ns", &work);
    check(&ng, &["--format", "pcapng"], "pcapng", &work);
    check(&ns, &["--format", "pcapng"], "pcapng", &work);
    check(&us, &["--tsprec", "us"], "pcap-us", &work);
    // Rotation: many files, together the whole trace in order.
    check(
        &ns,
        &["--rotate-size", "4M", "--format", "pcap"],
        "pcap-ns",
        &work,
    );
}

#[test]
fn count_speed_and_bad_input() {
    let work = open_dir("file-engine-c");
    let ns = work.path().join("small.pcap");
    write_pcap(&ns, true);
    let out = work.path().join("o");
    // -c: exactly COUNT written, the rest of what was read is after_count.
    let sum = work.path().join("c.json");
    let (rc, err) = run_unprivileged(&[
        "record",
        "-r",
        ns.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "-q",
        "-c",
        "1000",
        "--summary-json",
        sum.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{err}");
    let j = read_json(&sum);
    assert_identity(&j);
    assert_eq!(j["packets_written"], 1000);
    assert_eq!(j["stop_reason"], "count reached");
    assert_eq!(
        j["packets_seen"].as_u64().unwrap() - 1000,
        j["drops"]["after_count"].as_u64().unwrap()
    );
    // --speed 20000 pps: 2000 frames take about 0.1 s, not instantly; a
    // bound wide enough for a loaded machine (this checks pacing happens,
    // it is not a speed test).
    let t = std::time::Instant::now();
    let (rc, err) = run_unprivileged(&[
        "record",
        "-r",
        ns.to_str().unwrap(),
        "-w",
        work.path().join("p").to_str().unwrap(),
        "-q",
        "-c",
        "2000",
        "--speed",
        "20000",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(90),
        "paced: {:?}",
        t.elapsed()
    );
    // Bad input: one line, exit 1, nothing written.
    let bad = work.path().join("not-a-pcap.pcap");
    let x = work.path().join("x");
    let x = x.to_str().unwrap();
    std::fs::write(&bad, b"this is not a capture file at all, not even close").unwrap();
    for (args, want) in [
        (
            vec!["record", "-r", "/nonexistent/x.pcap", "-w", x],
            "no such file",
        ),
        (
            vec!["record", "-r", bad.to_str().unwrap(), "-w", x],
            "not a pcap file",
        ),
        (
            vec!["record", "-r", ns.to_str().unwrap(), "-w", x, "--ts", "xdp"],
            "needs the XDP program",
        ),
    ] {
        let (rc, err) = run_unprivileged(&args);
        assert_eq!(rc, 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    }
    let _ = std::fs::remove_dir_all(x);
}
