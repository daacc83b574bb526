//! Test-only parts shared by the integration tests: libpcap's own filter
//! interpreter and disassembler (a small FFI; libpcap is linked by the
//! library's build.rs), and a generator of plausible frames.
#![allow(unreachable_pub)] // shared by several test crates
#![allow(dead_code)]

pub mod frames;

use std::ffi::{c_char, c_int, c_long, c_uint, CStr};
use wiretape_filter::Insn;

/// The filter expressions both tests use: every primitive family
/// (host/net/port/portrange/proto/vlan/ether/len), byte and bit tests,
/// scratch memory, indirect loads, division and modulo (also by X), shifts
/// by X (also >= 32), negation, and/or/not.
pub const EXPRESSIONS: &[&str] = &[
    "",
    "ip",
    "ip6",
    "arp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "not tcp",
    "tcp or udp",
    "host 10.0.0.1",
    "src host 10.0.0.2 and dst host 10.0.0.1",
    "net 192.168.0.0/16",
    "dst net 172.16.0.0/12 or src net 8.0.0.0/8",
    "ip6 net 2001:db8::/32",
    "host 2001:db8::1",
    "ip6 dst net 2001:db8:1::/48",
    "port 53",
    "tcp port 80",
    "udp dst port 53",
    "tcp src port 443 or tcp dst port 22",
    "portrange 5000-5010",
    "tcp src portrange 1-1023",
    "ip proto 47",
    "ip6 proto 17",
    "vlan",
    "vlan 100",
    "vlan and udp",
    "vlan 5 and vlan 10",
    "vlan and ip6 and tcp",
    "ip[8] < 64",
    "tcp[13] & 2 != 0",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp[icmptype] == icmp-echo",
    "less 100",
    "greater 500",
    "len >= 60 and len <= 64",
    "len * 3 > 1000",
    "not (port 22 or port 80) and ip",
    "(tcp and port 443) or (udp and not port 53) or icmp",
    "ip6 and (tcp port 80 or udp port 123)",
    "ip[2:2] - ((ip[0]&0xf)<<2) > 40",
    "tcp[((tcp[12] & 0xf0) >> 2):4] = 0x47455420",
    "ip[2:2] / 4 > 100",
    "ip[2:2] % 7 = 3",
    "ip[2:2] / (ip[1] & 3) > 10",
    "ip[2:2] % (ip[1] & 3) = 1",
    "ip[8] / (ip[1] & 3) = 0",
    "ip[8] % (ip[1] & 3) = ip[8]",
    "ip[1] << (ip[0] & 0x3f) > 1000",
    "ip[1] >> (ip[1] & 0x27) = 1",
    "-ip[1] > 0x7fffffff and ip[0] ^ 0x45 = 0",
    "ip[ip[0] & 0xf] > 3",
    "ip[6:2] & 0x1fff != 0",
    "ip[6] & 0x20 != 0",
    "ether broadcast",
    "ether host 02:00:00:00:00:01",
    "ether multicast and not ether broadcast",
    "ether[12:2] <= 0x5dc",
    "arp[7] = 2",
    "arp and arp[24:4] = 0x0a000001",
    "ip6 and ip6[6] = 44",
    "udp[8:2] = 0x1234",
    "icmp or icmp6 or ip proto 47",
    "ip and ip[0] & 0xf > 5 and tcp",
];

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *const Insn,
}

#[repr(C)]
struct PcapPkthdr {
    ts_sec: c_long,
    ts_usec: c_long,
    caplen: u32,
    len: u32,
}

extern "C" {
    fn pcap_offline_filter(fp: *const BpfProgram, h: *const PcapPkthdr, pkt: *const u8) -> c_int;
    fn bpf_image(insn: *const Insn, n: c_int) -> *const c_char;
}

/// libpcap's verdict (`pcap_offline_filter`, i.e. its `bpf_filter`) for
/// `pkt` captured from a frame of `wire_len` bytes: the program's return value.
pub fn libpcap_run(insns: &[Insn], pkt: &[u8], wire_len: u32) -> u32 {
    let prog = BpfProgram {
        bf_len: insns.len() as c_uint,
        bf_insns: insns.as_ptr(),
    };
    let hdr = PcapPkthdr {
        ts_sec: 0,
        ts_usec: 0,
        caplen: pkt.len() as u32,
        len: wire_len,
    };
    // SAFETY: prog describes insns.len() instructions laid out as struct
    // bpf_insn (Insn is #[repr(C)] with the same fields); hdr.caplen is the
    // number of readable bytes at pkt; all three outlive the call, and
    // pcap_offline_filter only reads them.
    unsafe { pcap_offline_filter(&prog, &hdr, pkt.as_ptr()) as u32 }
}

/// libpcap's `bpf_image`: one instruction as `tcpdump -d` prints it.
pub fn libpcap_image(insn: &Insn, pc: usize) -> String {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: bpf_image reads one struct bpf_insn and returns a pointer to a
    // static NUL-terminated buffer; LOCK keeps other threads from calling it
    // until we have copied the text.
    unsafe { CStr::from_ptr(bpf_image(insn, pc as c_int)) }
        .to_string_lossy()
        .into_owned()
}
