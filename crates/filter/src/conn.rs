//! A frame's connection, read properly (not with classic BPF's raw
//! offsets, as [`crate::flow`] must): the network header after the link
//! header and up to two VLAN tags, the IP version and addresses, the
//! transport protocol after IPv6's extension headers, the ports, the TCP
//! flags and sequence number, and the transport payload within the IP
//! packet's own length (never an Ethernet frame's padding).
//!
//! One parser for the two users that need a connection: the per-connection
//! cutoff (`wiretape_capture::cutoff`, whose rule issue 25 states and
//! `tests/cutoff_ref.py` re-implements) and the session table
//! (`wiretape-sessions`). The rule's details are the cutoff's:
//!
//! - VLAN tags: 0x8100 or 0x88a8, at most two; the outer tag's id is kept.
//! - IPv4: version nibble 4 and at least 20 bytes, else not IP; a fragment
//!   offset above 0 is a non-first fragment (no transport header); the
//!   transport header at the header length (at least 20).
//! - IPv6: version nibble 6 and at least 40 bytes; the protocol after the
//!   extension headers hop-by-hop (0), routing (43), fragment (44) and
//!   destination options (60), at most 8 of them; a fragment header with
//!   an offset above 0 is a non-first fragment.
//! - Ports for TCP, UDP and SCTP only; ports not in the captured bytes are
//!   0 (a frame cut short).
//!
//! Link types: Ethernet (1), raw IP (101, and DLT 12/14), IPv4 (228),
//! IPv6 (229), Linux cooked v1 (113) and v2 (276), BSD loopback (0, 108).
//! Every length is checked; nothing is allocated.

/// The VLAN TPIDs the cutoff's rule reads (libpcap's `vlan` also takes 0x9100).
pub const VLAN_TPIDS: [u16; 2] = [0x8100, 0x88a8];

/// A frame's connection and where its transport payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// 4 or 6.
    pub version: u8,
    /// The source address (IPv4 in the first 4 bytes, the rest 0).
    pub src: [u8; 16],
    /// The destination address.
    pub dst: [u8; 16],
    /// IP protocol (after IPv6's extension headers).
    pub proto: u8,
    /// Source port (TCP, UDP, SCTP; 0 otherwise or not captured).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The outer VLAN id, when tagged.
    pub vlan: Option<u16>,
    /// TCP: the flags byte (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08,
    /// ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80), when captured.
    pub tcp_flags: Option<u8>,
    /// TCP: the sequence number (0 when not captured).
    pub tcp_seq: u32,
    /// The transport payload (after the TCP or UDP header) as captured,
    /// within the IP packet's length; empty for other protocols.
    pub payload: &'a [u8],
}

/// What a frame is to a connection tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Not IPv4/IPv6 (after at most two tags), or too short to tell.
    NotIp,
    /// A non-first IP fragment: addresses, no transport header.
    Fragment,
    /// An IP packet with its connection.
    Ip(Packet<'a>),
}

#[inline(always)]
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

#[inline(always)]
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Reads a frame of link type `linktype` (a pcap `LINKTYPE_` value).
#[inline]
pub fn parse(linktype: u32, f: &[u8]) -> Frame<'_> {
    match linktype {
        1 => ethernet(f),
        101 | 12 | 14 => match f.first().map(|b| b >> 4) {
            Some(4) => ip(0x0800, f, None),
            Some(6) => ip(0x86dd, f, None),
            _ => Frame::NotIp,
        },
        228 => ip(0x0800, f, None),
        229 => ip(0x86dd, f, None),
        // Linux cooked v1: the protocol at 14, the packet at 16.
        113 => match be16(f, 14) {
            Some(et) => ip(et, f.get(16..).unwrap_or(&[]), None),
            None => Frame::NotIp,
        },
        // Linux cooked v2: the protocol at 0, the packet at 20.
        276 => match be16(f, 0) {
            Some(et) => ip(et, f.get(20..).unwrap_or(&[]), None),
            None => Frame::NotIp,
        },
        // BSD loopback: a 4-byte address family, host order (0) or
        // network order (108); 2 is IPv4, 24, 28 and 30 IPv6.
        0 | 108 => {
            let Some(w) = f.get(..4) else {
                return Frame::NotIp;
            };
            let w: [u8; 4] = w.try_into().unwrap_or_default();
            let af = if linktype == 108 {
                u32::from_be_bytes(w)
            } else if w[0] == 0 && w[1] == 0 {
                // Written on a big-endian machine.
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            };
            let et = match af {
                2 => 0x0800,
                24 | 28 | 30 => 0x86dd,
                _ => return Frame::NotIp,
            };
            ip(et, &f[4..], None)
        }
        _ => Frame::NotIp,
    }
}

/// Reads an Ethernet frame (its captured bytes).
#[inline]
pub fn ethernet(f: &[u8]) -> Frame<'_> {
    let Some(mut et) = be16(f, 12) else {
        return Frame::NotIp;
    };
    let mut at = 14;
    let mut vlan = None;
    for _ in 0..2 {
        if !VLAN_TPIDS.contains(&et) {
            break;
        }
        let Some(next) = be16(f, at + 2) else {
            return Frame::NotIp;
        };
        if vlan.is_none() {
            vlan = be16(f, at).map(|v| v & 0x0fff);
        }
        et = next;
        at += 4;
    }
    ip(et, f.get(at..).unwrap_or(&[]), vlan)
}

/// Reads the IP packet `ip` of EtherType `et`.
#[inline]
fn ip(et: u16, ip: &[u8], vlan: Option<u16>) -> Frame<'_> {
    // `l4`: from the transport header to the end of the captured bytes (the
    // ports are read there, as the cutoff's rule does); `l4_len`: its
    // length within the IP packet (the payload stops there).
    let (version, src, dst, proto, l4, l4_len) = match et {
        0x0800 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Frame::NotIp;
            }
            if be16(ip, 6).unwrap_or(0) & 0x1fff > 0 {
                return Frame::Fragment;
            }
            let ihl = ((ip[0] & 0x0f) as usize * 4).max(20);
            // The packet ends at its total length (Ethernet pads short
            // frames); a length below the header is taken as "to the end".
            let total = be16(ip, 2).unwrap_or(0) as usize;
            let end = if total >= ihl {
                total.min(ip.len())
            } else {
                ip.len()
            };
            let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
            a[..4].copy_from_slice(&ip[12..16]);
            b[..4].copy_from_slice(&ip[16..20]);
            (4u8, a, b, ip[9], ip.get(ihl..), end.saturating_sub(ihl))
        }
        0x86dd => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Frame::NotIp;
            }
            let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
            a.copy_from_slice(&ip[8..24]);
            b.copy_from_slice(&ip[24..40]);
            // Payload length 0 is a jumbogram (or a TSO frame): to the end.
            let plen = be16(ip, 4).unwrap_or(0) as usize;
            let end = if plen == 0 {
                ip.len()
            } else {
                (40 + plen).min(ip.len())
            };
            let mut nh = ip[6];
            let mut off = 40usize;
            let mut l4 = ip.get(off..);
            for _ in 0..8 {
                match nh {
                    0 | 43 | 60 => {
                        let (Some(&n), Some(&len)) = (ip.get(off), ip.get(off + 1)) else {
                            l4 = None;
                            break;
                        };
                        nh = n;
                        off += (len as usize + 1) * 8;
                        l4 = ip.get(off..);
                    }
                    44 => {
                        let (Some(&n), Some(fo)) = (ip.get(off), be16(ip, off + 2)) else {
                            l4 = None;
                            break;
                        };
                        if fo >> 3 > 0 {
                            return Frame::Fragment;
                        }
                        nh = n;
                        off += 8;
                        l4 = ip.get(off..);
                    }
                    _ => break,
                }
            }
            (6u8, a, b, nh, l4, end.saturating_sub(off))
        }
        _ => return Frame::NotIp,
    };
    let mut p = Packet {
        version,
        src,
        dst,
        proto,
        sport: 0,
        dport: 0,
        vlan,
        tcp_flags: None,
        tcp_seq: 0,
        payload: &[],
    };
    let Some(l4) = l4 else {
        return Frame::Ip(p);
    };
    let within = &l4[..l4_len.min(l4.len())];
    if matches!(proto, 6 | 17 | 132) {
        if let (Some(a), Some(b)) = (be16(l4, 0), be16(l4, 2)) {
            (p.sport, p.dport) = (a, b);
        }
    }
    match proto {
        6 => {
            p.tcp_flags = l4.get(13).copied();
            p.tcp_seq = be32(l4, 4).unwrap_or(0);
            if let Some(&off) = l4.get(12) {
                let hl = ((off >> 4) as usize * 4).max(20);
                p.payload = within.get(hl..).unwrap_or(&[]);
            }
        }
        17 => p.payload = within.get(8..).unwrap_or(&[]),
        _ => {}
    }
    Frame::Ip(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(tags: &[u16], payload: &[u8], pad_to: usize) -> Vec<u8> {
        let mut f = vec![2u8; 12];
        for &t in tags {
            f.extend_from_slice(&0x8100u16.to_be_bytes());
            f.extend_from_slice(&t.to_be_bytes());
        }
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = 28 + payload.len();
        f.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0,
            0,
            64,
            17,
            0,
            0,
        ]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 0, 0, 0]);
        f.extend_from_slice(payload);
        f.resize(f.len().max(pad_to), 0);
        f
    }

    #[test]
    fn payload_stops_at_the_ip_length_and_the_outer_tag_is_kept() {
        let f = udp4(&[0x0123, 0x0456], b"hi", 80);
        let Frame::Ip(p) = ethernet(&f) else {
            panic!("not ip")
        };
        assert_eq!((p.version, p.proto, p.sport, p.dport), (4, 17, 5000, 53));
        assert_eq!(p.vlan, Some(0x123));
        assert_eq!(p.payload, b"hi");
        assert_eq!(&p.src[..4], &[10, 0, 0, 1]);
        // Cut inside the IP header: not IP. Inside the ports: ports 0.
        assert_eq!(ethernet(&f[..14 + 8 + 10]), Frame::NotIp);
        let Frame::Ip(p) = ethernet(&f[..22 + 21]) else {
            panic!()
        };
        assert_eq!((p.sport, p.dport, p.payload.len()), (0, 0, 0));
    }

    #[test]
    fn other_link_types() {
        let f = udp4(&[], b"x", 0);
        let raw = &f[14..];
        assert!(matches!(parse(101, raw), Frame::Ip(p) if p.payload == b"x"));
        assert!(matches!(parse(228, raw), Frame::Ip(_)));
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&0x0800u16.to_be_bytes());
        sll.extend_from_slice(raw);
        assert!(matches!(parse(113, &sll), Frame::Ip(p) if p.dport == 53));
        let mut lo = 2u32.to_le_bytes().to_vec();
        lo.extend_from_slice(raw);
        assert!(matches!(parse(0, &lo), Frame::Ip(_)));
        assert_eq!(parse(105, raw), Frame::NotIp);
        let mut frag = f.clone();
        frag[20] = 0x00;
        frag[21] = 0x10;
        assert_eq!(ethernet(&frag), Frame::Fragment);
    }
}
