//! Frames and payloads as clients and servers send them, for the tests,
//! the bench and the fuzz seeds: Ethernet (optionally VLAN-tagged) with
//! IPv4 or IPv6, TCP connections with their sequence numbers, UDP; DNS
//! queries and responses, TLS ClientHellos (GREASE, SNI, ALPN, signature
//! algorithms, supported versions, split over records), HTTP/1.1
//! requests, QUIC Initials ([`crate::quic::seal_initial`]); a nanosecond
//! pcap file of them.

use std::net::IpAddr;

/// An endpoint: address and port.
pub type End = (IpAddr, u16);

fn csum(data: &[u8]) -> u16 {
    let mut s = 0u32;
    for c in data.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet frame from `src` to `dst` carrying `l4` (protocol `proto`),
/// tagged with `vlan` when given.
pub fn frame(vlan: Option<u16>, src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if let Some(v) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + l4.len()) as u16;
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
            h.extend_from_slice(&s.octets());
            h.extend_from_slice(&d.octets());
            let c = csum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            f.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            f.extend_from_slice(&[proto, 64]);
            f.extend_from_slice(&s.octets());
            f.extend_from_slice(&d.octets());
        }
        _ => panic!("one address family per frame"),
    }
    f.extend_from_slice(l4);
    // Ethernet's minimum (the padding is no part of the IP packet).
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// A UDP datagram from `a` to `b`.
pub fn udp(vlan: Option<u16>, a: End, b: End, payload: &[u8]) -> Vec<u8> {
    let mut l4 = a.1.to_be_bytes().to_vec();
    l4.extend_from_slice(&b.1.to_be_bytes());
    l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    l4.extend_from_slice(&[0, 0]);
    l4.extend_from_slice(payload);
    frame(vlan, a.0, b.0, 17, &l4)
}

/// A TCP connection's two sides and their next sequence numbers.
#[derive(Clone, Debug)]
pub struct Tcp {
    /// The client.
    pub c: End,
    /// The server.
    pub s: End,
    /// VLAN id of its frames.
    pub vlan: Option<u16>,
    seq: [u32; 2],
}

impl Tcp {
    /// A connection from `c` to `s`; sequence numbers from `isn`.
    pub fn new(c: End, s: End, vlan: Option<u16>, isn: u32) -> Tcp {
        Tcp {
            c,
            s,
            vlan,
            seq: [isn, isn.wrapping_mul(7).wrapping_add(12345)],
        }
    }

    /// A segment from the client (`from_server` false) or the server with
    /// `flags` (SYN 0x02, ACK 0x10, PSH 0x08, FIN 0x01).
    pub fn seg(&mut self, from_server: bool, flags: u8, payload: &[u8]) -> Vec<u8> {
        let d = usize::from(from_server);
        let (a, b) = if from_server {
            (self.s, self.c)
        } else {
            (self.c, self.s)
        };
        let mut l4 = a.1.to_be_bytes().to_vec();
        l4.extend_from_slice(&b.1.to_be_bytes());
        l4.extend_from_slice(&self.seq[d].to_be_bytes());
        l4.extend_from_slice(&self.seq[1 - d].to_be_bytes());
        l4.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
        l4.extend_from_slice(payload);
        let grow = payload.len() as u32 + u32::from(flags & 0x03 != 0);
        self.seq[d] = self.seq[d].wrapping_add(grow);
        frame(self.vlan, a.0, b.0, 6, &l4)
    }

    /// SYN, SYN-ACK, ACK.
    pub fn open(&mut self) -> Vec<Vec<u8>> {
        vec![
            self.seg(false, 0x02, &[]),
            self.seg(true, 0x12, &[]),
            self.seg(false, 0x10, &[]),
        ]
    }

    /// FIN-ACK both ways and the last ACK.
    pub fn close(&mut self) -> Vec<Vec<u8>> {
        vec![
            self.seg(false, 0x11, &[]),
            self.seg(true, 0x11, &[]),
            self.seg(false, 0x10, &[]),
        ]
    }
}

/// A DNS query for `name` of type `qtype` with id `id`.
pub fn dns_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        m.push(l.len() as u8);
        m.extend_from_slice(l.as_bytes());
    }
    m.push(0);
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&[0, 1]);
    m
}

/// An answer of [`dns_response`].
#[derive(Clone, Debug)]
pub enum Answer {
    /// An address (A or AAAA).
    Addr(IpAddr),
    /// A CNAME to a name.
    Cname(String),
}

fn put_name(m: &mut Vec<u8>, name: &str) {
    for l in name.split('.').filter(|l| !l.is_empty()) {
        m.push(l.len() as u8);
        m.extend_from_slice(l.as_bytes());
    }
    m.push(0);
}

/// The response to [`dns_query`]: each answer's owner is the question's
/// name (a compression pointer to it).
pub fn dns_response(id: u16, name: &str, qtype: u16, answers: &[Answer]) -> Vec<u8> {
    let mut m = dns_query(id, name, qtype);
    m[2] = 0x81;
    m[3] = 0x80;
    m[7] = answers.len() as u8;
    for a in answers {
        m.extend_from_slice(&[0xc0, 12]);
        let (t, rdata) = match a {
            Answer::Addr(IpAddr::V4(v)) => (1u16, v.octets().to_vec()),
            Answer::Addr(IpAddr::V6(v)) => (28, v.octets().to_vec()),
            Answer::Cname(n) => {
                let mut r = Vec::new();
                put_name(&mut r, n);
                (5, r)
            }
        };
        m.extend_from_slice(&t.to_be_bytes());
        m.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(&rdata);
    }
    m
}

/// What a ClientHello holds (extensions in the order given; GREASE
/// values where the caller puts them).
#[derive(Clone, Debug, Default)]
pub struct Hello {
    /// The ClientHello's own version (0x0303 for TLS 1.2 and 1.3).
    pub version: u16,
    /// Cipher suites.
    pub ciphers: Vec<u16>,
    /// Extensions: type and body.
    pub extensions: Vec<(u16, Vec<u8>)>,
}

/// The server_name extension's body for `name`.
pub fn ext_sni(name: &[u8]) -> (u16, Vec<u8>) {
    let mut b = ((name.len() + 3) as u16).to_be_bytes().to_vec();
    b.push(0);
    b.extend_from_slice(&(name.len() as u16).to_be_bytes());
    b.extend_from_slice(name);
    (0, b)
}

/// The ALPN extension for `protos`.
pub fn ext_alpn(protos: &[&[u8]]) -> (u16, Vec<u8>) {
    let mut l = Vec::new();
    for p in protos {
        l.push(p.len() as u8);
        l.extend_from_slice(p);
    }
    let mut b = (l.len() as u16).to_be_bytes().to_vec();
    b.extend_from_slice(&l);
    (16, b)
}

/// A 2-byte-length list of u16 (signature_algorithms, supported_groups).
pub fn ext_u16s(t: u16, v: &[u16]) -> (u16, Vec<u8>) {
    let mut b = ((v.len() * 2) as u16).to_be_bytes().to_vec();
    for x in v {
        b.extend_from_slice(&x.to_be_bytes());
    }
    (t, b)
}

/// supported_versions (a 1-byte-length list).
pub fn ext_versions(v: &[u16]) -> (u16, Vec<u8>) {
    let mut b = vec![(v.len() * 2) as u8];
    for x in v {
        b.extend_from_slice(&x.to_be_bytes());
    }
    (43, b)
}

impl Hello {
    /// The handshake message (type 1, its 3-byte length, the body).
    pub fn message(&self) -> Vec<u8> {
        let mut b = self.version.to_be_bytes().to_vec();
        b.extend((0..32u8).map(|i| i.wrapping_mul(37)));
        b.push(32);
        b.extend((0..32u8).map(|i| i ^ 0x5a));
        b.extend_from_slice(&((self.ciphers.len() * 2) as u16).to_be_bytes());
        for c in &self.ciphers {
            b.extend_from_slice(&c.to_be_bytes());
        }
        b.extend_from_slice(&[1, 0]);
        let mut e = Vec::new();
        for (t, body) in &self.extensions {
            e.extend_from_slice(&t.to_be_bytes());
            e.extend_from_slice(&(body.len() as u16).to_be_bytes());
            e.extend_from_slice(body);
        }
        b.extend_from_slice(&(e.len() as u16).to_be_bytes());
        b.extend_from_slice(&e);
        let mut m = vec![1, 0, 0, 0];
        m[1..4].copy_from_slice(&(b.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(&b);
        m
    }

    /// The message in TLS handshake records of at most `max` bytes each.
    pub fn records(&self, max: usize) -> Vec<u8> {
        let m = self.message();
        let mut out = Vec::new();
        for c in m.chunks(max.max(1)) {
            out.extend_from_slice(&[22, 3, 1]);
            out.extend_from_slice(&(c.len() as u16).to_be_bytes());
            out.extend_from_slice(c);
        }
        out
    }

    /// A browser-like TLS 1.3 ClientHello: GREASE first among ciphers and
    /// extensions (and a GREASE extension at the end), SNI `sni` when
    /// given, ALPN `alpn` when not empty.
    pub fn browser(sni: Option<&[u8]>, alpn: &[&[u8]], grease: u16) -> Hello {
        let mut ext = vec![(grease, Vec::new())];
        if let Some(s) = sni {
            ext.push(ext_sni(s));
        }
        ext.push((23, Vec::new()));
        ext.push((0xff01, vec![0]));
        ext.push(ext_u16s(10, &[grease, 0x001d, 0x0017, 0x0018]));
        ext.push((11, vec![1, 0]));
        ext.push((35, Vec::new()));
        if !alpn.is_empty() {
            ext.push(ext_alpn(alpn));
        }
        ext.push((5, vec![1, 0, 0, 0, 0]));
        ext.push(ext_u16s(
            13,
            &[
                0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
            ],
        ));
        ext.push((18, Vec::new()));
        let mut ks = 0x0024u16.to_be_bytes().to_vec();
        ks.extend_from_slice(&[0x00, 0x1d, 0x00, 0x20]);
        ks.extend((0..32u8).map(|i| i.wrapping_mul(11)));
        ext.push((51, ks));
        ext.push((45, vec![1, 1]));
        ext.push(ext_versions(&[grease, 0x0304, 0x0303]));
        ext.push((27, vec![2, 0, 2]));
        ext.push((grease ^ 0x1010, vec![0]));
        Hello {
            version: 0x0303,
            ciphers: vec![
                grease, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8,
                0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
            ],
            extensions: ext,
        }
    }

    /// A TLS 1.2 ClientHello without supported_versions, ALPN or GREASE.
    pub fn tls12(sni: Option<&[u8]>) -> Hello {
        let mut ext = Vec::new();
        if let Some(s) = sni {
            ext.push(ext_sni(s));
        }
        ext.push(ext_u16s(10, &[0x0017, 0x0018]));
        ext.push((11, vec![1, 0]));
        ext.push(ext_u16s(13, &[0x0401, 0x0501, 0x0201]));
        ext.push((0xff01, vec![0]));
        Hello {
            version: 0x0303,
            ciphers: vec![0xc02f, 0xc030, 0x009e, 0xc013, 0x0035, 0x00ff],
            extensions: ext,
        }
    }
}

/// An HTTP/1.1 GET of `path` at `host` by `agent`.
pub fn http_get(host: &str, path: &str, agent: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\nAccept: */*\r\n\r\n")
        .into_bytes()
}

/// An SSDP `M-SEARCH` (HTTP over UDP, to port 1900) by `agent`.
pub fn ssdp_search(agent: &str) -> Vec<u8> {
    format!(
        "M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\n\
         MX: 1\r\nST: ssdp:all\r\nUSER-AGENT: {agent}\r\n\r\n"
    )
    .into_bytes()
}

/// A QUIC v1 client Initial carrying the whole ClientHello `hello` in one
/// CRYPTO frame, to `dcid`.
pub fn quic_initial(dcid: &[u8], hello: &Hello) -> Vec<u8> {
    let m = hello.message();
    crate::quic::seal_initial(
        1,
        dcid,
        &[0xc1, 0xc2, 0xc3, 0xc4],
        0,
        &crate::quic::crypto_frame(0, &m),
    )
    .unwrap_or_default()
}

/// A nanosecond pcap file (Ethernet) of `frames` (stamp in ns, bytes).
pub fn pcap(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&262_144u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (ts, f) in frames {
        b.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}
