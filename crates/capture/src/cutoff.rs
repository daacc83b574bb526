//! The per-connection cutoff (`record --cutoff SIZE [--cutoff-flows N]`),
//! as the file engine applies it in user space. The rule (issue 25; the
//! tests check it against a reference written from the same text,
//! tests/cutoff_ref.py):
//!
//! - A connection is (IP version, unordered address pair, IP protocol,
//!   unordered port pair for TCP, UDP and SCTP, else 0), read after up to
//!   two VLAN tags (0x8100 or 0x88a8).
//! - Each frame adds its wire length to its connection's count. A frame is
//!   kept when its connection's count before it is below SIZE.
//! - TCP segments with SYN, FIN or RST are always kept (and counted).
//! - Frames that are not IPv4/IPv6 after at most two tags, and non-first IP
//!   fragments (IPv4 fragment offset > 0; an IPv6 fragment header with
//!   offset > 0) are always kept and never counted.
//!
//! Details the rule leaves open, decided here (and in the reference): the
//! IPv6 protocol is the one after the extension headers hop-by-hop (0),
//! routing (43), fragment (44) and destination options (60), at most 8 of
//! them; ports not in the captured bytes (a frame cut short, a first
//! fragment too short) count as 0; a frame too short for its IP header is
//! kept and not counted. The table holds at most `--cutoff-flows`
//! connections: a new one arriving at a full table evicts the least
//! recently seen eighth of them (counted in `evicted`), which start again
//! from zero, as the XDP program's LRU map does (the kernel's LRU is
//! approximate too).

use std::collections::HashMap;
use wiretape_filter::conn;

/// A connection's key: version, the two addresses (lower first), the
/// protocol and the two ports (lower first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// 4 or 6.
    pub version: u8,
    /// The lower address (IPv4 in the first 4 bytes).
    pub lo: [u8; 16],
    /// The higher address.
    pub hi: [u8; 16],
    /// IP protocol.
    pub proto: u8,
    /// The lower port (0 without ports).
    pub port_lo: u16,
    /// The higher port.
    pub port_hi: u16,
}

/// How the rule sees a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Not IPv4/IPv6 after at most two tags, a non-first fragment, or too
    /// short to tell: kept, never counted.
    Exempt,
    /// A connection's frame; `flags`: a TCP segment with SYN, FIN or RST.
    Conn(Key, bool),
}

/// Reads the connection of an Ethernet frame (its captured bytes), with
/// the parser the session table shares ([`wiretape_filter::conn`], which
/// states the rule's details).
pub fn classify(f: &[u8]) -> Class {
    let p = match conn::ethernet(f) {
        conn::Frame::Ip(p) => p,
        conn::Frame::NotIp | conn::Frame::Fragment => return Class::Exempt,
    };
    let (mut lo, mut hi) = (p.src, p.dst);
    if lo > hi {
        std::mem::swap(&mut lo, &mut hi);
    }
    let flags = p.tcp_flags.is_some_and(|f| f & 0x07 != 0);
    Class::Conn(
        Key {
            version: p.version,
            lo,
            hi,
            proto: p.proto,
            port_lo: p.sport.min(p.dport),
            port_hi: p.sport.max(p.dport),
        },
        flags,
    )
}

/// The cutoff's state: each connection's count so far.
pub struct Cutoff {
    size: u64,
    max_flows: usize,
    table: HashMap<Key, (u64, u64)>,
    /// A use stamp per frame (least recently seen: the lowest).
    clock: u64,
    /// Connections evicted from a full table (they start again at zero).
    pub evicted: u64,
    scratch: Vec<u64>,
}

/// `--cutoff-flows` when not given.
pub const DEFAULT_FLOWS: usize = 1 << 20;

impl Cutoff {
    /// Keeps the first `size` bytes of each connection, tracking at most
    /// `max_flows` connections.
    pub fn new(size: u64, max_flows: usize) -> Self {
        let max_flows = max_flows.max(1);
        Cutoff {
            size,
            max_flows,
            table: HashMap::with_capacity(max_flows.min(1 << 16)),
            clock: 0,
            evicted: 0,
            scratch: Vec::new(),
        }
    }

    /// Whether the frame (its captured bytes, `wire_len` on the wire) is
    /// kept; counts it to its connection.
    #[inline]
    pub fn keep(&mut self, frame: &[u8], wire_len: u32) -> bool {
        let (key, flags) = match classify(frame) {
            Class::Exempt => return true,
            Class::Conn(k, f) => (k, f),
        };
        self.clock += 1;
        // A full table is rare: only then is the key looked up twice.
        if self.table.len() >= self.max_flows && !self.table.contains_key(&key) {
            self.evict();
        }
        let e = self.table.entry(key).or_insert((0, 0));
        let before = e.0;
        e.0 = before.saturating_add(u64::from(wire_len));
        e.1 = self.clock;
        flags || before < self.size
    }

    /// Drops the least recently seen eighth of the table (at least one).
    fn evict(&mut self) {
        self.scratch.clear();
        self.scratch.extend(self.table.values().map(|v| v.1));
        let k = (self.table.len() / 8).max(1);
        let (_, &mut cut, _) = self.scratch.select_nth_unstable(k - 1);
        let before = self.table.len();
        self.table.retain(|_, v| v.1 > cut);
        self.evicted += (before - self.table.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16, flags: u8, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(54)];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f[47] = flags;
        f
    }

    #[test]
    fn both_directions_count_to_one_connection_and_flags_pass() {
        let mut c = Cutoff::new(3000, 100);
        let a = [10, 0, 0, 1];
        let b = [10, 0, 0, 2];
        assert!(c.keep(&tcp(a, b, 1000, 80, 0x02, 60), 60)); // SYN
        assert!(c.keep(&tcp(b, a, 80, 1000, 0x10, 1500), 1500)); // 60 before
        assert!(c.keep(&tcp(a, b, 1000, 80, 0x10, 1500), 1500)); // 1560 before
        assert!(!c.keep(&tcp(b, a, 80, 1000, 0x10, 1500), 1500)); // 3060 before
        assert!(c.keep(&tcp(b, a, 80, 1000, 0x11, 60), 60)); // FIN: kept
        assert!(!c.keep(&tcp(a, b, 1000, 80, 0x10, 60), 60));
        // Another connection starts at zero.
        assert!(c.keep(&tcp(a, b, 1001, 80, 0x10, 1500), 1500));
        // ARP: kept, never counted.
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(c.keep(&arp, 60));
    }

    #[test]
    fn a_full_table_evicts_and_the_evicted_start_again() {
        let mut c = Cutoff::new(100, 8);
        let a = [10, 0, 0, 1];
        for p in 0..8u16 {
            assert!(c.keep(&tcp(a, a, p, 1, 0x10, 200), 200));
            assert!(!c.keep(&tcp(a, a, p, 1, 0x10, 200), 200));
        }
        // A ninth evicts the least recently seen one (port 0).
        assert!(c.keep(&tcp(a, a, 100, 1, 0x10, 200), 200));
        assert_eq!(c.evicted, 1);
        assert!(c.keep(&tcp(a, a, 0, 1, 0x10, 200), 200), "starts again");
    }
}
