//! What Stenographer's index holds of a frame: stenotype's
//! `Index::Process` (stenotype/index.cc of 1.0.1), rule for rule. It is the
//! reference the compiled programs are proved against ([`super::bpf`]) and
//! what [`super::eval`] evaluates a query on.
//!
//! From the Ethernet header on, a chain of layers is taken off while the
//! bytes are there (each step needs its bytes captured; a step that lacks
//! them ends the walk and keeps what was found so far):
//!
//! * EtherType 0: another Ethernet header (14 bytes) follows;
//! * a VLAN tag (0x8100, 0x88a8, 0x9100, 0x9200, 0x9300; 4 bytes): its id
//!   (12 bits) is kept, any number of tags;
//! * MPLS (0x8847, 0x8848): labels (20 bits) up to the bottom of the stack
//!   (each needs 5 bytes: the next nibble is read), then by that nibble an
//!   Ethernet pseudowire (0: a 4-byte control word, then Ethernet), IPv4
//!   (4) or IPv6 (6), else the walk ends;
//! * IPv4 (20 bytes): both addresses; a header length under 20 ends the
//!   walk there; else the protocol, and the next layer at the header's
//!   length (fragments alike);
//! * IPv6 (40 bytes): both addresses, then hop-by-hop (0), routing (43),
//!   destination options (60), mobility (135) headers (2 bytes each) and a
//!   first fragment (44, 8 bytes) are skipped to the protocol; a later
//!   fragment keeps 44 as the protocol;
//! * the protocol is kept; TCP (20 bytes) and UDP (8 bytes) give both
//!   ports.

/// The keys of one frame (as stenotype indexes it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// VLAN ids, outermost first.
    pub vlans: Vec<u16>,
    /// MPLS labels, outermost first.
    pub mpls: Vec<u32>,
    /// IPv4 source and destination.
    pub ip4: Vec<u32>,
    /// IPv6 source and destination.
    pub ip6: Vec<u128>,
    /// The IP protocol.
    pub proto: Option<u8>,
    /// TCP or UDP source and destination port.
    pub ports: Vec<u16>,
}

fn be16(f: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([f[o], f[o + 1]])
}

fn be32(f: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]])
}

/// The VLAN tag types stenotype takes off.
pub(crate) const VLAN_TYPES: [u16; 5] = [0x8100, 0x88a8, 0x9100, 0x9200, 0x9300];
/// The MPLS types.
pub(crate) const MPLS_TYPES: [u16; 2] = [0x8847, 0x8848];
/// The IPv6 extension headers skipped to the protocol (the fragment header
/// when first).
pub(crate) const IP6_EXT: [u8; 4] = [0, 43, 60, 135];

impl Decoded {
    /// The keys of `f` (its captured bytes).
    pub fn of(f: &[u8]) -> Decoded {
        let mut d = Decoded::default();
        d.walk(f);
        d
    }

    fn walk(&mut self, f: &[u8]) {
        let lim = f.len();
        // Whether `n` bytes from `s` are captured.
        let has = |s: usize, n: usize| s.checked_add(n).is_some_and(|e| e <= lim);
        let mut s = 0usize;
        let mut ty: u32 = 0; // 0: an Ethernet header
        let mut proto;
        loop {
            match ty {
                0 => {
                    if !has(s, 14) {
                        return;
                    }
                    ty = u32::from(be16(f, s + 12));
                    s += 14;
                }
                t if VLAN_TYPES.contains(&(t as u16)) => {
                    if !has(s, 4) {
                        return;
                    }
                    self.vlans.push(be16(f, s) & 0x0fff);
                    ty = u32::from(be16(f, s + 2));
                    s += 4;
                }
                t if MPLS_TYPES.contains(&(t as u16)) => {
                    loop {
                        if !has(s, 5) {
                            return;
                        }
                        let h = be32(f, s);
                        self.mpls.push(h >> 12);
                        s += 4;
                        if h & 0x100 != 0 {
                            break;
                        }
                    }
                    match f[s] >> 4 {
                        0 => {
                            ty = 0;
                            s += 4;
                        }
                        4 => ty = 0x0800,
                        6 => ty = 0x86dd,
                        _ => return,
                    }
                }
                0x0800 => {
                    if !has(s, 20) {
                        return;
                    }
                    self.ip4.push(be32(f, s + 12));
                    self.ip4.push(be32(f, s + 16));
                    let len = usize::from(f[s] & 0x0f) * 4;
                    if len < 20 {
                        return;
                    }
                    proto = f[s + 9];
                    s += len;
                    break;
                }
                0x86dd => {
                    if !has(s, 40) {
                        return;
                    }
                    proto = f[s + 6];
                    self.ip6
                        .push(u128::from_be_bytes(f[s + 8..s + 24].try_into().unwrap()));
                    self.ip6
                        .push(u128::from_be_bytes(f[s + 24..s + 40].try_into().unwrap()));
                    s += 40;
                    loop {
                        if proto == 44 {
                            if !has(s, 8) {
                                return;
                            }
                            if be16(f, s + 2) & 0xfff8 != 0 {
                                break;
                            }
                        } else if !IP6_EXT.contains(&proto) {
                            break;
                        } else if !has(s, 2) {
                            return;
                        }
                        proto = f[s];
                        s += (usize::from(f[s + 1]) + 1) * 8;
                    }
                    break;
                }
                _ => return,
            }
        }
        self.proto = Some(proto);
        let l4 = match proto {
            6 => 20,
            17 => 8,
            _ => return,
        };
        if has(s, l4) {
            self.ports.push(be16(f, s));
            self.ports.push(be16(f, s + 2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ty: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ty.to_be_bytes());
        f
    }

    fn ip4(proto: u8, ihl: u8) -> Vec<u8> {
        let mut h = vec![
            0x40 | ihl,
            0,
            0,
            20,
            0,
            0,
            0,
            0,
            64,
            proto,
            0,
            0,
            10,
            0,
            0,
            1,
            10,
            0,
            0,
            2,
        ];
        h.resize(usize::from(ihl.max(5)) * 4, 0);
        h
    }

    #[test]
    fn a_tagged_udp_frame() {
        let mut f = eth(0x8100);
        f.extend_from_slice(&[0x20, 0x07, 0x88, 0xa8, 0x00, 0x09, 0x08, 0x00]);
        f.extend(ip4(17, 5));
        f.extend_from_slice(&[0x12, 0x34, 0x00, 0x35, 0, 8, 0, 0]);
        let d = Decoded::of(&f);
        assert_eq!(d.vlans, vec![7, 9]);
        assert_eq!(d.ip4, vec![0x0a00_0001, 0x0a00_0002]);
        assert_eq!(d.proto, Some(17));
        assert_eq!(d.ports, vec![0x1234, 53]);
        // One byte short of the UDP header: no ports, the rest kept.
        let d = Decoded::of(&f[..f.len() - 1]);
        assert_eq!((d.proto, d.ports.len(), d.ip4.len()), (Some(17), 0, 2));
        // A TCP header needs 20 bytes.
        let mut t = eth(0x0800);
        t.extend(ip4(6, 5));
        t.extend_from_slice(&[0, 80, 0, 81]);
        assert_eq!(Decoded::of(&t).ports, Vec::<u16>::new());
        t.resize(14 + 20 + 20, 0);
        assert_eq!(Decoded::of(&t).ports, vec![80, 81]);
    }

    #[test]
    fn stenotypes_corners() {
        // An IPv4 header length under 20: addresses, no protocol.
        let mut f = eth(0x0800);
        f.extend(ip4(6, 4));
        let d = Decoded::of(&f);
        assert_eq!((d.ip4.len(), d.proto), (2, None));
        // EtherType 0: another Ethernet header.
        let mut f = eth(0);
        f.extend(eth(0x0800));
        f.extend(ip4(1, 5));
        assert_eq!(Decoded::of(&f).proto, Some(1));
        // MPLS, two labels, then an Ethernet pseudowire with a control word.
        let mut f = eth(0x8847);
        f.extend_from_slice(&[0x00, 0x01, 0x00, 0x40, 0x00, 0x02, 0x01, 0x40]);
        f.extend_from_slice(&[0, 0, 0, 0]);
        f.extend(eth(0x86dd));
        let mut v6 = vec![0x60, 0, 0, 0, 0, 8, 44, 64];
        v6.extend([0u8; 32]);
        v6[39] = 1;
        f.extend(v6);
        // A first fragment of UDP, then UDP.
        f.extend_from_slice(&[17, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0, 7, 0, 9, 0, 8, 0, 0]);
        let d = Decoded::of(&f);
        assert_eq!(d.mpls, vec![16, 32]);
        assert_eq!(d.ip6, vec![0, 1]);
        assert_eq!((d.proto, d.ports.clone()), (Some(17), vec![7, 9]));
        // A later fragment: protocol 44, no ports.
        let n = f.len();
        f[n - 14] = 0x01;
        let d = Decoded::of(&f);
        assert_eq!((d.proto, d.ports.len()), (Some(44), 0));
    }
}
