//! The capture filter against tcpdump itself. A mixed trace (several hosts
//! and nets, TCP with various flags, UDP, ICMP/ICMPv6, ARP, IPv6 with
//! extension headers, VLAN-tagged frames, IP fragments, short frames; the
//! filter crate's seeded frame generator) is sent from a pcap through a veth
//! pair with `wiretape replay` while `wiretape record ... EXPR` records the
//! other end; for every expression the frames written must equal, in order
//! and byte for byte, the frames `tcpdump -r trace.pcap -w - 'EXPR'`
//! selects, and `packets_filtered` must be the rest. The same comparison
//! runs through the file engine (`record -r`, no privileges needed).

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use std::path::Path;

use wiretape::files::Record;
use wiretape_testbed::{Testbed, GEN_IF};

/// At least 30 expressions: host/net/port/portrange/proto/vlan, byte
/// offsets, less/greater, ip6, arp, icmp, and/or/not, fragments, IPv6
/// extension headers.
const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "arp",
    "icmp",
    "icmp6",
    "tcp",
    "not tcp",
    "tcp or udp",
    "host 10.0.0.1",
    "src host 10.0.0.2 and dst host 10.0.0.1",
    "net 192.168.0.0/16",
    "dst net 172.16.0.0/12 or src net 8.0.0.0/8",
    "ip6 net 2001:db8::/32",
    "host 2001:db8::1",
    "port 53",
    "tcp port 80",
    "udp dst port 53",
    "portrange 5000-5010",
    "tcp src portrange 1-1023",
    "ip proto 47",
    "ip6 proto 17",
    "vlan",
    "vlan 100",
    "vlan and udp",
    "vlan and vlan",
    "ip[8] < 64",
    "tcp[13] & 2 != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp[icmptype] == icmp-echo",
    "less 100",
    "greater 500",
    "len >= 60 and len <= 64",
    "not (port 22 or port 80) and ip",
    "(tcp and port 443) or (udp and not port 53) or icmp",
    "ip[6:2] & 0x1fff != 0",
    "ip6 and ip6[6] = 44",
    "ether broadcast",
    "arp and arp[24:4] = 0x0a000001",
];

/// How many frames the trace has.
const FRAMES: usize = 700;

fn write_pcap(path: &Path, frames: &[(Vec<u8>, u32)]) {
    let stamped: Vec<_> = frames
        .iter()
        .enumerate()
        .map(|(i, (f, w))| (f.clone(), *w, 1_700_000_000_000_000u64 + i as u64 * 50))
        .collect();
    write_us_pcap(path, &stamped);
}

/// The mixed trace: generated frames; `sendable` keeps only frames a veth
/// carries whole (14..=1514 bytes, nothing cut off).
fn trace(sendable: bool) -> Vec<(Vec<u8>, u32)> {
    let mut rng = gen::Rng::new(0x77_6972_6574_6170);
    let mut out = Vec::new();
    while out.len() < FRAMES {
        let f = gen::frame(&mut rng);
        let whole = f.data.len() as u32 == f.wire_len;
        if sendable && !(whole && (14..=1514).contains(&f.data.len())) {
            continue;
        }
        out.push((f.data, f.wire_len));
    }
    out
}

/// Every record of the capture files in `dir`, in order (one queue).
fn written(dir: &Path) -> Vec<Record> {
    pcaps(dir).iter().flat_map(|f| read_all(f)).collect()
}

/// The expression as the command line gets it: one word, or (every other
/// expression) split into words as an unquoted shell line would.
fn words(i: usize, expr: &str) -> Vec<String> {
    if i.is_multiple_of(2) {
        vec![expr.to_string()]
    } else {
        expr.split_whitespace().map(str::to_string).collect()
    }
}

/// Frames, written, filtered of the summary, after checking the identity.
fn summary_counts(json: &Path) -> (u64, u64, u64) {
    let j = read_json(json);
    assert_identity(&j);
    let d = j["drops"]["total"].as_u64().unwrap();
    assert_eq!(d, 0, "no drops: {j:#}");
    (
        j["packets_seen"].as_u64().unwrap(),
        j["packets_written"].as_u64().unwrap(),
        j["packets_filtered"].as_u64().unwrap(),
    )
}

fn compare(expr: &str, got: &[Record], want: &[Record]) {
    assert_eq!(
        got.len(),
        want.len(),
        "'{expr}': wiretape wrote {} frames, tcpdump selects {}",
        got.len(),
        want.len()
    );
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g.data == w.data && g.orig_len == w.orig_len,
            "'{expr}': frame {k} of the selection differs from tcpdump's"
        );
    }
}

#[test]
fn xdp_filter_selects_what_tcpdump_selects() {
    require_root();
    let t = TempDir::new("xfilter");
    let frames = trace(true);
    let trace_path = t.path().join("trace.pcap");
    write_pcap(&trace_path, &frames);
    let n = frames.len() as u64;
    let tb = Testbed::create("xfilter", 1).unwrap();
    let (mut total_written, mut total_filtered) = (0u64, 0u64);
    for (i, &expr) in EXPRESSIONS.iter().enumerate() {
        let want = tcpdump_select(&trace_path, expr, t.path());
        let dir = t.path().join(format!("x{i}"));
        let json = t.path().join(format!("x{i}.json"));
        let mut args: Vec<String> = vec![
            "-w".into(),
            dir.to_str().unwrap().into(),
            "--summary-json".into(),
            json.to_str().unwrap().into(),
            "-q".into(),
        ];
        // The plain program (xdp stamps) and generic mode for a few; the
        // device-bound hw program (veth has the timestamp kfunc) for the rest.
        match i % 8 {
            3 => args.extend(["--ts".into(), "xdp".into()]),
            5 => args.extend(["--xdp-mode".into(), "generic".into()]),
            _ => {}
        }
        args.extend(words(i, expr));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut rec = Recorder::start(&tb, &args);
        let start = rec.stderr_text();
        assert!(
            start.contains(&format!("filter '{expr}' (in XDP)")),
            "{start}"
        );
        if i % 8 != 3 && i % 8 != 5 {
            assert!(
                start.contains("timestamps hw (NIC"),
                "the device-bound program should be in use: {start}"
            );
        }
        let (code, o, e) = run_wiretape(
            Some(&tb),
            &[
                "replay",
                trace_path.to_str().unwrap(),
                "-i",
                GEN_IF,
                "--json",
                "-q",
            ],
        );
        assert_eq!(code, 0, "{e}");
        let r: serde_json::Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(r["sent"].as_u64(), Some(n), "{r}");
        // veth delivers in the sender's softirq: everything has been
        // through the XDP program long before this.
        std::thread::sleep(std::time::Duration::from_millis(300));
        rec.signal(libc::SIGINT);
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        assert!(!xdp_attached(&tb), "'{expr}': XDP program left attached");
        let (seen, w, filtered) = summary_counts(&json);
        assert_eq!(seen, n, "'{expr}': every frame seen");
        assert_eq!(w, want.len() as u64, "'{expr}': written");
        assert_eq!(filtered, n - want.len() as u64, "'{expr}': filtered");
        compare(expr, &written(&dir), &want);
        let _ = std::fs::remove_dir_all(&dir);
        eprintln!(
            "{:4} of {n} frames selected, as tcpdump: '{expr}'",
            want.len()
        );
        total_written += w;
        total_filtered += filtered;
    }
    eprintln!(
        "{} expressions x {n} frames: {total_written} written and {total_filtered} filtered, \
         each equal to tcpdump's selection",
        EXPRESSIONS.len()
    );
    // The expressions select something and reject something overall.
    assert!(total_written > 0 && total_filtered > 0);
}

/// The same through the file engine (user space, the classic evaluator):
/// every frame of the trace, also cut-short and sub-Ethernet ones, where
/// `len` is the length on the wire as in tcpdump. No privileges needed.
#[test]
fn file_engine_filter_selects_what_tcpdump_selects() {
    let t = TempDir::new("ffilter");
    let frames = trace(false);
    let trace_path = t.path().join("trace.pcap");
    write_pcap(&trace_path, &frames);
    let n = frames.len() as u64;
    for (i, &expr) in EXPRESSIONS.iter().enumerate() {
        let want = tcpdump_select(&trace_path, expr, t.path());
        let dir = t.path().join(format!("f{i}"));
        let json = t.path().join(format!("f{i}.json"));
        let mut args: Vec<String> = [
            "record",
            "-r",
            trace_path.to_str().unwrap(),
            "-w",
            dir.to_str().unwrap(),
            "--summary-json",
            json.to_str().unwrap(),
            "-q",
        ]
        .map(String::from)
        .to_vec();
        let filter_file;
        if i % 3 == 2 {
            // -F FILE, with a comment.
            filter_file = t.path().join(format!("f{i}.txt"));
            std::fs::write(&filter_file, format!("# test {i}\n{expr}  # the filter\n")).unwrap();
            args.extend(["-F".into(), filter_file.to_str().unwrap().into()]);
        } else {
            args.extend(words(i, expr));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, e) = run_wiretape(None, &args);
        assert_eq!(code, 0, "'{expr}': {e}");
        assert!(e.contains(&format!("filter '{expr}' (user space)")), "{e}");
        let (seen, w, filtered) = summary_counts(&json);
        assert_eq!(seen, n);
        assert_eq!(w, want.len() as u64, "'{expr}': written");
        assert_eq!(filtered, n - w, "'{expr}': filtered");
        compare(expr, &written(&dir), &want);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Errors come before anything is attached or written: a syntax error
/// (libpcap's message with the expression, exit 2), an expression the
/// translation cannot run (the instruction named, exit 1), `-F` together
/// with words (usage error).
#[test]
fn filter_errors_leave_nothing_behind() {
    require_root();
    let t = TempDir::new("xfiltererr");
    let tb = Testbed::create("xfiltererr", 1).unwrap();
    let dir = t.path().join("cap");
    let d = dir.to_str().unwrap();
    let bin = bin();
    let run = |args: &[&str]| {
        let out = tb
            .command(bin.to_str().unwrap())
            .args(["record", "-i", wiretape_testbed::CAP_IF, "-w", d])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, e) = run(&["tcp", "prt", "80"]);
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("filter expression 'tcp prt 80'") && e.contains("syntax error"),
        "{e}"
    );
    assert!(!xdp_attached(&tb));
    // protochain loops: XDP cannot run it; record -r and extract can.
    let (code, e) = run(&["ip", "protochain", "6"]);
    assert_eq!(code, 2, "{e}");
    assert!(
        e.contains("'ip protochain 6'")
            && e.contains("cannot run in XDP")
            && e.contains("record -r and extract take it")
            && e.trim().lines().count() == 1,
        "{e}"
    );
    assert!(!xdp_attached(&tb));
    let f = t.path().join("f.txt");
    std::fs::write(&f, "tcp").unwrap();
    let (code, e) = run(&["-F", f.to_str().unwrap(), "udp"]);
    assert_eq!(code, 2, "{e}");
    assert!(!xdp_attached(&tb));
    assert!(
        !dir.exists() || pcaps(&dir).is_empty(),
        "no capture file after an error"
    );
    // wiretape filter: exit codes and the listing.
    let (code, o, _) = run_wiretape(None, &["filter", "--explain", "tcp port 80"]);
    assert_eq!(code, 0);
    assert!(o.contains("(000) ldh      [12]") && o.contains("call bpf_redirect_map#51"));
    let (code, _, e) = run_wiretape(None, &["filter", "--explain", "tcp prt 80"]);
    assert_eq!(code, 2);
    assert!(e.contains("syntax error"), "{e}");
}
