//! Cost of the capture filter in the kernel: ns per frame from
//! `BPF_PROG_TEST_RUN` with repeat (the kernel's own mean per run), for
//! - the steering program as loaded, without a filter (the baseline: stamp,
//!   count, redirect), and with each filter in its tail-call slot;
//! - the generated filter program alone (translated filter + epilogue);
//! - the steering program with the per-connection cutoff (`--cutoff 15K`,
//!   a table of 1 M connections) without a filter and after `simple`: the
//!   same frame over and over is one connection, so a TCP SYN is kept
//!   (flags) and the UDP frame is cut once its connection passed 15 KiB
//!   (one hot table entry: no cache misses, unlike many live connections).
//!
//! Root only. Runs in a private network namespace (the thread unshares
//! one; its `lo` holds the AF_XDP socket the redirect needs); attaches
//! nothing. `cargo bench --bench filter_cost` (`-- --repeat N`).

use std::time::Duration;
use wiretape::capture::bpf::SteerProgram;
use wiretape::capture::xsk::{self, XskConfig};
use wiretape::capture::{sys, CaptureFilter};
use wiretape::filter::LINKTYPE_ETHERNET;

const FILTERS: &[(&str, &str)] = &[
    ("accept all", "ether[0] & 1 = 0 or ether[0] & 1 = 1"),
    ("simple", "tcp port 80"),
    (
        "complex",
        "(not (port 22 or port 80) and net 192.168.0.0/16 \
         and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn) or (udp and portrange 5000-5010) \
         or (icmp[icmptype] == icmp-echo and ip[8] < 64) or (vlan and ip6 and tcp dst port 80)",
    ),
    ("reject all", "ether[12:2] = 0xffff and ip"),
];

/// Ethernet + IPv4 + TCP SYN 192.168.1.1:40000 -> 10.0.0.1:80, 64 bytes.
fn tcp_syn() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&[192, 168, 1, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 1]);
    f[34..36].copy_from_slice(&40000u16.to_be_bytes());
    f[36..38].copy_from_slice(&80u16.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x02;
    f
}

/// Ethernet + IPv4 + UDP 10.0.0.2:5353 -> 224.0.0.251:5353, 64 bytes.
fn udp() -> Vec<u8> {
    let mut f = tcp_syn();
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 2]);
    f[30..34].copy_from_slice(&[224, 0, 0, 251]);
    f[34..36].copy_from_slice(&5353u16.to_be_bytes());
    f[36..38].copy_from_slice(&5353u16.to_be_bytes());
    f
}

/// 802.1Q tag 100 + IPv6 + TCP SYN, 86 bytes.
fn vlan_ip6() -> Vec<u8> {
    let mut f = vec![0u8; 86];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x81, 0x00]);
    f[14..16].copy_from_slice(&100u16.to_be_bytes());
    f[16..18].copy_from_slice(&[0x86, 0xdd]);
    f[18] = 0x60;
    f[22..24].copy_from_slice(&20u16.to_be_bytes());
    f[24] = 6;
    f[25] = 64;
    f[26..28].copy_from_slice(&[0x20, 0x01]);
    f[42..44].copy_from_slice(&[0x20, 0x01]);
    f[58..60].copy_from_slice(&443u16.to_be_bytes());
    f[60..62].copy_from_slice(&80u16.to_be_bytes());
    f[70] = 0x50;
    f[71] = 0x02;
    f
}

fn main() {
    if !sys::is_root() {
        eprintln!("filter_cost: needs root (BPF_PROG_LOAD, BPF_PROG_TEST_RUN): skipped");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let repeat: u32 = args
        .iter()
        .position(|a| a == "--repeat")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    // SAFETY: unshare takes no pointers; CLONE_NEWNET moves only this thread.
    let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
    let lo = sys::ifindex("lo").expect("lo");
    let cfg = XskConfig {
        frames: 64,
        frame_size: 2048,
        zero_copy: Some(false),
    };
    let (sock, _) = xsk::open(lo, 0, &cfg).expect("AF_XDP socket on lo");
    let frames = [
        ("ipv4 tcp syn 64 B", tcp_syn()),
        ("ipv4 udp 64 B", udp()),
        ("vlan ipv6 tcp 86 B", vlan_ip6()),
    ];
    let ns = |d: Duration| d.as_nanos() as f64;
    println!(
        "BPF_PROG_TEST_RUN, repeat {repeat}, mean ns per frame (kernel {}):",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "{:<12} {:>8} {:>6}  {:<20} {:>9} {:>9} {:>9}",
        "filter", "classic", "eBPF", "frame", "steer+flt", "filter", "verdict"
    );
    let mut base = SteerProgram::load().expect("load");
    base.register(0, sock.fd.raw()).unwrap();
    for (fname, f) in &frames {
        let (ret, d) = base.test_run(f, lo, 0, repeat).unwrap();
        println!(
            "{:<12} {:>8} {:>6}  {:<20} {:>9.1} {:>9} {:>9}",
            "(none)",
            "-",
            "-",
            fname,
            ns(d),
            "-",
            ret
        );
    }
    for (label, expr) in FILTERS {
        let filter = CaptureFilter::compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
        let mut prog = SteerProgram::load().expect("load");
        prog.register(0, sock.fd.raw()).unwrap();
        prog.install_filter(&filter).expect("install");
        let ebpf_len = wiretape::capture::xdpfilter::tail_program(
            &filter.program,
            wiretape::capture::xdpfilter::FilterMaps {
                xsks: 0,
                qstats: 0,
                cutoff: None,
            },
        )
        .unwrap()
        .len();
        for (fname, f) in &frames {
            let (ret, d) = prog.test_run(f, lo, 0, repeat).unwrap();
            let alone = prog
                .filter_program()
                .unwrap()
                .test_run_with(f, None, repeat)
                .unwrap();
            println!(
                "{:<12} {:>8} {:>6}  {:<20} {:>9.1} {:>9} {:>9}",
                label,
                filter.program.insns().len(),
                ebpf_len,
                fname,
                ns(d),
                alone.duration_ns,
                if ret == 4 { "accept" } else { "reject" }
            );
        }
    }
    let cut = wiretape::capture::XdpCutoff {
        size: 15 * 1024,
        flows: 1 << 20,
    };
    for (label, expr) in [("cutoff", None), ("simple+cut", Some("tcp port 80"))] {
        let mut prog = SteerProgram::load_with(None, Some(cut)).expect("load with the cutoff");
        prog.register(0, sock.fd.raw()).unwrap();
        if let Some(expr) = expr {
            let filter = CaptureFilter::compile(expr, LINKTYPE_ETHERNET, 262_144).unwrap();
            prog.install_filter(&filter).expect("install");
        }
        for (fname, f) in &frames {
            let (ret, d) = prog.test_run(f, lo, 0, repeat).unwrap();
            println!(
                "{:<12} {:>8} {:>6}  {:<20} {:>9.1} {:>9} {:>9}",
                label,
                "-",
                "-",
                fname,
                ns(d),
                "-",
                match ret {
                    1 => "cut",
                    2 => "reject",
                    _ => "accept",
                }
            );
        }
    }
    println!(
        "steer+flt: the steering program as loaded (count, stamp, tail call, filter, redirect or count); \
         filter: the generated program alone (its redirect finds no socket)."
    );
}
