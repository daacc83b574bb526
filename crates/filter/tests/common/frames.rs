//! Random but plausible frames: Ethernet with 0-2 VLAN tags, IPv4 (options,
//! fragments, odd header lengths), IPv6 (extension header chains), ARP,
//! TCP/UDP/ICMP/ICMPv6/GRE, other EtherTypes, plus short, truncated
//! (caplen < wire length) and garbage frames. Seeded: every run is the same.

/// SplitMix64: small, seedable, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability pct/100.
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    pub fn u8(&mut self) -> u8 {
        self.next() as u8
    }

    pub fn u16(&mut self) -> u16 {
        self.next() as u16
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
}

/// A frame: the captured bytes and the original (wire) length.
pub struct Frame {
    pub data: Vec<u8>,
    pub wire_len: u32,
}

const MACS: [[u8; 6]; 4] = [
    [0xff; 6],
    [0x02, 0, 0, 0, 0, 0x01],
    [0x02, 0, 0, 0, 0, 0x02],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb],
];

const V4: [[u8; 4]; 7] = [
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [192, 168, 1, 1],
    [192, 168, 200, 7],
    [172, 16, 0, 1],
    [8, 8, 8, 8],
    [224, 0, 0, 251],
];

fn v6(rng: &mut Rng) -> [u8; 16] {
    let prefixes: [[u8; 4]; 5] = [
        [0x20, 0x01, 0x0d, 0xb8], // 2001:db8::/32
        [0x20, 0x01, 0x0d, 0xb8],
        [0x20, 0x01, 0x0d, 0xc8], // just outside
        [0xfe, 0x80, 0, 0],
        [0x26, 0x00, 0x1f, 0x18],
    ];
    let mut a = [0u8; 16];
    if rng.chance(10) {
        a.copy_from_slice(&rng.bytes(16));
        return a;
    }
    a[..4].copy_from_slice(&rng.pick(&prefixes));
    if rng.chance(50) {
        a[15] = rng.pick(&[1, 2, 3]);
        a[5] = rng.pick(&[0, 1]);
    } else {
        a[8..].copy_from_slice(&rng.bytes(8));
    }
    a
}

fn mac(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(70) {
        rng.pick(&MACS).to_vec()
    } else {
        rng.bytes(6)
    }
}

fn v4(rng: &mut Rng) -> [u8; 4] {
    if rng.chance(85) {
        rng.pick(&V4)
    } else {
        let b = rng.bytes(4);
        [b[0], b[1], b[2], b[3]]
    }
}

fn port(rng: &mut Rng) -> u16 {
    if rng.chance(75) {
        rng.pick(&[
            22, 53, 67, 68, 80, 123, 443, 1023, 1024, 4999, 5000, 5005, 5010, 5011, 8080,
        ])
    } else {
        rng.u16()
    }
}

fn payload(rng: &mut Rng) -> Vec<u8> {
    let n = match rng.below(100) {
        0..=49 => rng.below(64),
        50..=84 => 64 + rng.below(536),
        _ => 600 + rng.below(800),
    };
    let mut p = rng.bytes(n as usize);
    // Sometimes an HTTP request start, for payload-matching filters.
    if p.len() >= 4 && rng.chance(10) {
        p[..4].copy_from_slice(b"GET ");
    }
    p
}

fn put16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_be_bytes());
}

/// A transport header + payload for IP protocol `proto`.
fn l4(rng: &mut Rng, proto: u8) -> Vec<u8> {
    let mut v = Vec::new();
    match proto {
        6 => {
            put16(&mut v, port(rng));
            put16(&mut v, port(rng));
            v.extend(rng.bytes(8)); // seq, ack
            let doff: u8 = if rng.chance(85) {
                5
            } else {
                rng.below(16) as u8
            };
            v.push(doff << 4 | (rng.u8() & 0x0f));
            let flags = if rng.chance(60) {
                rng.pick(&[0x02, 0x12, 0x10, 0x18, 0x11, 0x04, 0x14, 0x01])
            } else {
                rng.u8()
            };
            v.push(flags);
            v.extend(rng.bytes(6)); // window, checksum, urgent
            let opts = (usize::from(doff).saturating_sub(5)) * 4;
            v.extend(rng.bytes(opts));
        }
        17 => {
            put16(&mut v, port(rng));
            put16(&mut v, port(rng));
            let p = payload(rng);
            put16(&mut v, (8 + p.len()) as u16);
            put16(&mut v, rng.u16());
            if rng.chance(10) && p.len() >= 2 {
                v.extend_from_slice(&[0x12, 0x34]);
                v.extend_from_slice(&p[2..]);
            } else {
                v.extend(p);
            }
            return v;
        }
        1 => {
            v.push({
                let r = rng.u8();
                rng.pick(&[0, 3, 8, 11, 5, r])
            });
            v.push({
                let r = rng.u8();
                rng.pick(&[0, 1, 3, r])
            });
            v.extend(rng.bytes(6));
        }
        58 => {
            v.push({
                let r = rng.u8();
                rng.pick(&[1, 128, 129, 133, 135, 136, r])
            });
            v.push({
                let r = rng.u8();
                rng.pick(&[0, r])
            });
            v.extend(rng.bytes(6));
        }
        47 => {
            put16(&mut v, 0);
            put16(&mut v, rng.pick(&[0x0800, 0x6558, 0x86dd]));
        }
        _ => {}
    }
    v.extend(payload(rng));
    v
}

fn ipv4(rng: &mut Rng) -> Vec<u8> {
    let ihl: u8 = match rng.below(100) {
        0..=79 => 5,
        80..=96 => 6 + rng.below(10) as u8,
        _ => rng.below(5) as u8, // bogus
    };
    let proto = match rng.below(100) {
        0..=34 => 6,
        35..=64 => 17,
        65..=79 => 1,
        80..=86 => 47,
        87..=89 => 58,
        _ => rng.u8(),
    };
    let frag: u16 = match rng.below(100) {
        0..=49 => 0,
        50..=79 => 0x4000,
        80..=89 => 0x2000,
        _ => rng.u16() & 0x3fff,
    };
    let body = l4(rng, proto);
    let hlen = usize::from(ihl.max(5)) * 4;
    let mut v = Vec::with_capacity(hlen + body.len());
    v.push(0x40 | ihl);
    v.push(rng.u8());
    let total = (hlen + body.len()) as u16;
    put16(&mut v, if rng.chance(90) { total } else { rng.u16() });
    put16(&mut v, rng.u16());
    put16(&mut v, frag);
    v.push({
        let r = rng.u8();
        rng.pick(&[1, 32, 63, 64, 65, 128, 255, r])
    });
    v.push(proto);
    put16(&mut v, rng.u16());
    v.extend_from_slice(&v4(rng));
    v.extend_from_slice(&v4(rng));
    v.extend(rng.bytes(hlen - 20));
    v.extend(body);
    v
}

fn ipv6(rng: &mut Rng) -> Vec<u8> {
    let last = match rng.below(100) {
        0..=39 => 6,
        40..=69 => 17,
        70..=84 => 58,
        85..=89 => 59,
        _ => rng.u8(),
    };
    // Extension header chain.
    let mut exts: Vec<u8> = Vec::new();
    if rng.chance(30) {
        for _ in 0..=rng.below(3) {
            exts.push(rng.pick(&[0, 43, 44, 60]));
        }
    }
    let mut chain = Vec::new();
    for (i, &h) in exts.iter().enumerate() {
        let next = exts.get(i + 1).copied().unwrap_or(last);
        if h == 44 {
            chain.push(next);
            chain.push(0);
            put16(&mut chain, {
                let r = rng.u16();
                rng.pick(&[0, 1, r])
            });
            chain.extend(rng.bytes(4));
        } else {
            let len8 = rng.below(3) as u8;
            chain.push(next);
            chain.push(len8);
            chain.extend(rng.bytes(6 + 8 * usize::from(len8)));
        }
    }
    let first = exts.first().copied().unwrap_or(last);
    let body = l4(rng, last);
    let mut v = vec![0x60 | (rng.u8() & 0x0f), rng.u8(), rng.u8(), rng.u8()];
    put16(&mut v, (chain.len() + body.len()) as u16);
    v.push(first);
    v.push({
        let r = rng.u8();
        rng.pick(&[1, 64, 255, r])
    });
    v.extend_from_slice(&v6(rng));
    v.extend_from_slice(&v6(rng));
    v.extend(chain);
    v.extend(body);
    v
}

fn arp(rng: &mut Rng) -> Vec<u8> {
    let mut v = Vec::new();
    put16(&mut v, 1);
    put16(&mut v, 0x0800);
    v.push(6);
    v.push(4);
    put16(&mut v, {
        let r = rng.u16();
        rng.pick(&[1, 2, 1, r])
    });
    v.extend(mac(rng));
    v.extend_from_slice(&v4(rng));
    v.extend(mac(rng));
    v.extend_from_slice(&v4(rng));
    v
}

/// One frame.
pub fn frame(rng: &mut Rng) -> Frame {
    // Plain garbage and very short frames.
    match rng.below(100) {
        0..=2 => {
            let n = rng.below(200) as usize;
            let data = rng.bytes(n);
            let wire_len = data.len() as u32;
            return Frame { data, wire_len };
        }
        3..=6 => {
            let n = rng.below(14) as usize;
            let data = rng.bytes(n);
            let wire_len = data.len() as u32 + rng.pick(&[0, 0, 1, 50]);
            return Frame { data, wire_len };
        }
        _ => {}
    }
    let mut f = mac(rng);
    f.extend(mac(rng));
    let tags = match rng.below(100) {
        0..=74 => 0,
        75..=94 => 1,
        _ => 2,
    };
    for t in 0..tags {
        let tpid = if tags == 2 && t == 0 {
            rng.pick(&[0x88a8, 0x8100, 0x9100])
        } else {
            0x8100
        };
        put16(&mut f, tpid);
        let vid = {
            let r = rng.u16() & 0x0fff;
            rng.pick(&[1, 5, 10, 20, 100, 4095, r])
        };
        put16(&mut f, (u16::from(rng.u8() & 0xf0) << 8) | vid);
    }
    let l3 = rng.below(100);
    let (etype, body) = match l3 {
        0..=44 => (0x0800, ipv4(rng)),
        45..=74 => (0x86dd, ipv6(rng)),
        75..=84 => (0x0806, arp(rng)),
        85..=89 => (rng.u16() & 0x05ff, payload(rng)), // 802.3 length
        _ => (
            {
                let r = rng.u16();
                rng.pick(&[0x88cc, 0x8847, 0x8035, 0x0842, r])
            },
            payload(rng),
        ),
    };
    put16(&mut f, etype);
    f.extend(body);
    // Ethernet minimum size padding, usually.
    if f.len() < 60 && rng.chance(70) {
        f.resize(60, 0);
    }
    f.truncate(1514 + 8);
    let wire_len = f.len() as u32;
    match rng.below(100) {
        // Truncated capture: anywhere, including inside headers.
        0..=9 => {
            let cut = rng.below(f.len() as u64 + 1) as usize;
            f.truncate(cut);
        }
        // Snap length style truncation.
        10..=14 => {
            let snap = rng.pick(&[34usize, 54, 64, 68, 96, 128]);
            f.truncate(snap);
        }
        _ => {}
    }
    Frame { data: f, wire_len }
}
