//! The server name of a QUIC client's first flight, read from its Initial
//! packets without guessing: QUIC v1 (RFC 9001) and v2 (RFC 9369) protect
//! Initial packets with keys derived from the client's first Destination
//! Connection ID and a published salt, so a passive reader can remove them
//! exactly as the server does and knows it did it right (the AEAD tag
//! checks).
//!
//! Per Initial packet of a client datagram (coalesced packets followed by
//! their Length): the header protection is removed (AES-128-ECB of a
//! sample of the packet, RFC 9001 §5.4), the payload opened (AES-128-GCM,
//! the nonce the IV xor the packet number, the header as associated data),
//! then the frames walked (PADDING, PING, ACK, CRYPTO; anything else ends
//! the packet). CRYPTO data is put together by offset (clients split and
//! reorder their ClientHello over several frames and packets) in a buffer
//! of at most [`crate::tls::MAX_HELLO`] bytes with at most [`MAX_RANGES`]
//! pieces; when the first handshake message is whole, it is read as a
//! ClientHello ([`crate::tls`]).
//!
//! The keys come from the first Initial's Destination Connection ID; a
//! packet they do not open is tried once with keys from its own (a client
//! answering a Retry). Packet numbers are taken as sent (a client's first
//! Initials number from 0: no truncation to undo). Crypto: `ring` (HKDF,
//! AES-128-GCM, QUIC header protection), the crate rustls uses.

use crate::tls;
use ring::aead::{self, quic::HeaderProtectionKey, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

/// Pieces of CRYPTO data kept apart at most.
pub const MAX_RANGES: usize = 32;

const V1: u32 = 0x0000_0001;
const V2: u32 = 0x6b33_43cf;
const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb,
    0xf9, 0xbd, 0x2e, 0xd9,
];

/// Whether a datagram starts like a client's Initial packet of a version
/// this module reads.
#[inline]
pub fn looks_initial(d: &[u8]) -> bool {
    let Some(&b0) = d.first() else { return false };
    if b0 & 0x80 == 0 || d.len() < 7 {
        return false;
    }
    match u32::from_be_bytes([d[1], d[2], d[3], d[4]]) {
        V1 => (b0 >> 4) & 3 == 0,
        V2 => (b0 >> 4) & 3 == 1,
        _ => false,
    }
}

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// TLS 1.3's HKDF-Expand-Label with an empty context.
fn expand_label(prk: &hkdf::Prk, label: &[u8], out: &mut [u8]) -> Option<()> {
    let len = (out.len() as u16).to_be_bytes();
    let llen = [(6 + label.len()) as u8];
    let info: [&[u8]; 5] = [&len, &llen, b"tls13 ", label, &[0]];
    prk.expand(&info, Len(out.len())).ok()?.fill(out).ok()
}

/// A client's Initial keys.
struct Keys {
    dcid: Vec<u8>,
    key: LessSafeKey,
    iv: [u8; 12],
    hp: HeaderProtectionKey,
}

impl Keys {
    fn derive(version: u32, dcid: &[u8]) -> Option<Keys> {
        let v2 = version == V2;
        let salt = hkdf::Salt::new(hkdf::HKDF_SHA256, if v2 { &SALT_V2 } else { &SALT_V1 });
        let initial = salt.extract(dcid);
        let mut client = [0u8; 32];
        expand_label(&initial, b"client in", &mut client)?;
        let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, &client);
        let (lk, li, lh): (&[u8], &[u8], &[u8]) = if v2 {
            (b"quicv2 key", b"quicv2 iv", b"quicv2 hp")
        } else {
            (b"quic key", b"quic iv", b"quic hp")
        };
        let (mut key, mut iv, mut hp) = ([0u8; 16], [0u8; 12], [0u8; 16]);
        expand_label(&prk, lk, &mut key)?;
        expand_label(&prk, li, &mut iv)?;
        expand_label(&prk, lh, &mut hp)?;
        Some(Keys {
            dcid: dcid.to_vec(),
            key: LessSafeKey::new(UnboundKey::new(&aead::AES_128_GCM, &key).ok()?),
            iv,
            hp: HeaderProtectionKey::new(&aead::quic::AES_128, &hp).ok()?,
        })
    }
}

fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let first = *b.get(*at)?;
    let n = 1usize << (first >> 6);
    let bytes = b.get(*at..*at + n)?;
    let mut v = (first & 0x3f) as u64;
    for &x in &bytes[1..] {
        v = v << 8 | x as u64;
    }
    *at += n;
    Some(v)
}

/// One QUIC connection's Initial state (client side).
#[derive(Default)]
pub struct Quic {
    keys: Option<Keys>,
    crypto: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    /// Packets opened (for tests and the table's counters).
    pub opened: u32,
    /// Set once the ClientHello was read (or cannot be).
    pub done: bool,
}

impl std::fmt::Debug for Quic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quic")
            .field("opened", &self.opened)
            .field("crypto", &self.crypto.len())
            .field("done", &self.done)
            .finish()
    }
}

/// What a datagram gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing read (not an Initial, or not opened).
    Nothing,
    /// CRYPTO data taken; the ClientHello is not whole yet.
    More,
    /// The ClientHello is whole: its message (header included) is in the
    /// scratch buffer handed in.
    Hello,
}

impl Quic {
    /// Bytes this state holds (counted against the tracker's budget).
    pub fn held(&self) -> usize {
        self.crypto.capacity() + self.keys.as_ref().map_or(0, |k| k.dcid.capacity() + 64)
    }

    /// Reads a datagram the client sent. `buf` is scratch for a packet's
    /// plaintext; on [`Step::Hello`] `out` holds the handshake message.
    pub fn datagram(&mut self, d: &[u8], buf: &mut Vec<u8>, out: &mut Vec<u8>) -> Step {
        let mut at = 0;
        let mut got = Step::Nothing;
        // Coalesced packets: at most a few per datagram.
        for _ in 0..4 {
            let Some(rest) = d.get(at..) else { break };
            if !looks_initial(rest) {
                break;
            }
            let Some((used, ok)) = self.packet(rest, buf) else {
                break;
            };
            at += used;
            if ok {
                got = Step::More;
                if self.hello_ready(out) {
                    return Step::Hello;
                }
                if self.done {
                    return Step::Nothing;
                }
            }
        }
        got
    }

    /// One Initial packet at the start of `p`: its length, and whether it
    /// opened.
    fn packet(&mut self, p: &[u8], buf: &mut Vec<u8>) -> Option<(usize, bool)> {
        let version = u32::from_be_bytes(p.get(1..5)?.try_into().ok()?);
        let mut at = 5;
        let dl = *p.get(at)? as usize;
        if dl > 20 {
            return None;
        }
        let dcid = p.get(at + 1..at + 1 + dl)?;
        at += 1 + dl;
        let sl = *p.get(at)? as usize;
        if sl > 20 {
            return None;
        }
        at += 1 + sl;
        let tl = varint(p, &mut at)? as usize;
        at = at.checked_add(tl)?;
        let len = varint(p, &mut at)? as usize;
        let pn_at = at;
        let end = pn_at.checked_add(len)?;
        if end > p.len() || len < 20 {
            return None;
        }
        let fresh = match &self.keys {
            Some(k) if k.dcid == dcid => false,
            Some(_) => true,
            None => true,
        };
        if self.keys.is_none() {
            self.keys = Keys::derive(version, dcid);
        }
        let mut opened = self.open(p, pn_at, end, buf);
        if !opened && fresh && self.keys.is_some() {
            // A client answering a Retry uses keys from the new DCID.
            if let Some(k) = Keys::derive(version, dcid) {
                self.keys = Some(k);
                opened = self.open(p, pn_at, end, buf);
            }
        }
        if opened {
            self.opened += 1;
            self.frames(buf);
        }
        Some((end, opened))
    }

    /// Removes the protection of the packet `p[..end]` whose packet number
    /// starts at `pn_at`; the plaintext is left in `buf`.
    fn open(&self, p: &[u8], pn_at: usize, end: usize, buf: &mut Vec<u8>) -> bool {
        let Some(k) = &self.keys else { return false };
        let Some(sample) = p.get(pn_at + 4..pn_at + 20) else {
            return false;
        };
        let Ok(mask) = k.hp.new_mask(sample) else {
            return false;
        };
        let b0 = p[0] ^ (mask[0] & 0x0f);
        let pn_len = (b0 & 3) as usize + 1;
        if pn_at + pn_len + 16 > end {
            return false;
        }
        buf.clear();
        buf.extend_from_slice(&p[..pn_at + pn_len]);
        buf[0] = b0;
        let mut pn = 0u64;
        for i in 0..pn_len {
            buf[pn_at + i] ^= mask[1 + i];
            pn = pn << 8 | buf[pn_at + i] as u64;
        }
        let header_len = buf.len();
        buf.extend_from_slice(&p[pn_at + pn_len..end]);
        let mut nonce = k.iv;
        for (n, x) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= x;
        }
        let (header, body) = buf.split_at_mut(header_len);
        match k.key.open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&*header),
            body,
        ) {
            Ok(plain) => {
                let n = plain.len();
                buf.copy_within(header_len..header_len + n, 0);
                buf.truncate(n);
                true
            }
            Err(_) => false,
        }
    }

    /// Walks a packet's frames, keeping CRYPTO data.
    fn frames(&mut self, f: &[u8]) {
        let mut at = 0;
        while at < f.len() {
            let Some(t) = varint(f, &mut at) else { return };
            match t {
                0x00 | 0x01 => {}
                0x02 | 0x03 => {
                    let mut ok = || -> Option<()> {
                        varint(f, &mut at)?;
                        varint(f, &mut at)?;
                        let n = varint(f, &mut at)?.min(256);
                        varint(f, &mut at)?;
                        for _ in 0..n {
                            varint(f, &mut at)?;
                            varint(f, &mut at)?;
                        }
                        if t == 0x03 {
                            for _ in 0..3 {
                                varint(f, &mut at)?;
                            }
                        }
                        Some(())
                    };
                    if ok().is_none() {
                        return;
                    }
                }
                0x06 => {
                    let (Some(off), Some(len)) = (varint(f, &mut at), varint(f, &mut at)) else {
                        return;
                    };
                    let Some(data) = f.get(at..at.saturating_add(len as usize)) else {
                        return;
                    };
                    at += data.len();
                    self.take(off, data);
                }
                _ => return,
            }
        }
    }

    /// Keeps CRYPTO data at `off` (within the buffer's bound).
    fn take(&mut self, off: u64, data: &[u8]) {
        let cap = tls::MAX_HELLO + 4;
        let Ok(off) = usize::try_from(off) else {
            return;
        };
        if off >= cap || data.is_empty() {
            return;
        }
        let end = (off + data.len()).min(cap);
        if self.ranges.len() >= MAX_RANGES && !self.ranges.iter().any(|r| r.0 <= off && end <= r.1)
        {
            self.done = true;
            return;
        }
        if self.crypto.len() < end {
            self.crypto.resize(end, 0);
        }
        self.crypto[off..end].copy_from_slice(&data[..end - off]);
        self.ranges.push((off, end));
        self.ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.ranges.len());
        for &(s, e) in &self.ranges {
            match merged.last_mut() {
                Some(l) if s <= l.1 => l.1 = l.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.ranges = merged;
    }

    /// Whether the first handshake message is whole (then copied to `out`).
    fn hello_ready(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(&(0, have)) = self.ranges.first() else {
            return false;
        };
        if have < 4 {
            return false;
        }
        if self.crypto[0] != 1 {
            self.done = true;
            return false;
        }
        let need =
            4 + u32::from_be_bytes([0, self.crypto[1], self.crypto[2], self.crypto[3]]) as usize;
        if need > tls::MAX_HELLO + 4 {
            self.done = true;
            return false;
        }
        if have < need {
            return false;
        }
        out.clear();
        out.extend_from_slice(&self.crypto[..need]);
        self.done = true;
        self.crypto = Vec::new();
        self.ranges = Vec::new();
        true
    }
}

/// A client's Initial packet of `version` (1 or 0x6b3343cf) to `dcid`
/// from `scid`, packet number `pn` (4 bytes on the wire), carrying
/// `frames` padded to 1200 bytes of datagram, protected as RFC 9001 §5
/// says: the inverse of what this module reads, for tests, benches and
/// fuzz seeds (a dissector such as tshark's opens it independently).
pub fn seal_initial(
    version: u32,
    dcid: &[u8],
    scid: &[u8],
    pn: u32,
    frames: &[u8],
) -> Option<Vec<u8>> {
    let k = Keys::derive(version, dcid)?;
    let kind = if version == V2 { 1u8 } else { 0 };
    let mut p = vec![0xc0 | kind << 4 | 3];
    p.extend_from_slice(&version.to_be_bytes());
    p.push(u8::try_from(dcid.len()).ok()?);
    p.extend_from_slice(dcid);
    p.push(u8::try_from(scid.len()).ok()?);
    p.extend_from_slice(scid);
    p.push(0); // no token
    let head = p.len() + 2 + 4;
    let body = frames.len().max(1200usize.saturating_sub(head + 16));
    let len = u16::try_from(4 + body + 16).ok()?;
    if len >= 0x4000 {
        return None;
    }
    p.extend_from_slice(&(0x4000 | len).to_be_bytes());
    let pn_at = p.len();
    p.extend_from_slice(&pn.to_be_bytes());
    let mut plain = frames.to_vec();
    plain.resize(body, 0);
    let mut nonce = k.iv;
    for (n, x) in nonce[4..].iter_mut().zip(u64::from(pn).to_be_bytes()) {
        *n ^= x;
    }
    let tag = k
        .key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&p[..]),
            &mut plain,
        )
        .ok()?;
    p.extend_from_slice(&plain);
    p.extend_from_slice(tag.as_ref());
    let mask = k.hp.new_mask(p.get(pn_at + 4..pn_at + 20)?).ok()?;
    p[0] ^= mask[0] & 0x0f;
    for i in 0..4 {
        p[pn_at + i] ^= mask[1 + i];
    }
    Some(p)
}

/// A CRYPTO frame carrying `data` at `offset` (for [`seal_initial`]).
pub fn crypto_frame(offset: u32, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x06];
    f.extend_from_slice(&(0x8000_0000 | offset).to_be_bytes());
    f.extend_from_slice(&(0x8000_0000 | data.len() as u32).to_be_bytes());
    f.extend_from_slice(data);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 9001 Appendix A.1: the keys of DCID 0x8394c8f03e515708.
    #[test]
    fn rfc9001_initial_keys() {
        let k = Keys::derive(V1, &hex("8394c8f03e515708")).unwrap();
        assert_eq!(k.iv.to_vec(), hex("fa044b2f42a3fd3b46fb255c"));
        // The header protection mask of the sample in A.2.
        let mask =
            k.hp.new_mask(&hex("d1b1c98dd7689fb8ec11d242b123dc9b"))
                .unwrap();
        assert_eq!(mask.to_vec(), hex("437b9aec36"));
    }

    /// RFC 9369 Appendix A.1: QUIC v2's keys of the same DCID.
    #[test]
    fn rfc9369_initial_keys() {
        let k = Keys::derive(V2, &hex("8394c8f03e515708")).unwrap();
        assert_eq!(k.iv.to_vec(), hex("91f73e2351d8fa91660e909f"));
    }

    /// A sealed Initial opens, and its CRYPTO data in two packets (the
    /// second first) makes the handshake message whole.
    #[test]
    fn sealed_initials_open_in_any_order() {
        let msg: Vec<u8> = [1u8, 0, 0, 6].iter().copied().chain(*b"abcdef").collect();
        let dcid = hex("0001020304050607");
        let a = seal_initial(V1, &dcid, b"", 0, &crypto_frame(0, &msg[..5])).unwrap();
        let b = seal_initial(V1, &dcid, b"", 1, &crypto_frame(5, &msg[5..])).unwrap();
        assert_eq!(a.len(), 1200);
        let mut q = Quic::default();
        let (mut buf, mut out) = (Vec::new(), Vec::new());
        assert_eq!(q.datagram(&b, &mut buf, &mut out), Step::More);
        assert_eq!(q.datagram(&a, &mut buf, &mut out), Step::Hello);
        assert_eq!(out, msg);
        assert_eq!(q.opened, 2);
        // A bit flipped anywhere in the payload: the tag does not check.
        let mut bad = a.clone();
        bad[100] ^= 1;
        let mut q = Quic::default();
        assert_eq!(q.datagram(&bad, &mut buf, &mut out), Step::Nothing);
        let v2 = seal_initial(V2, &dcid, b"x", 0, &crypto_frame(0, &msg)).unwrap();
        let mut q = Quic::default();
        assert_eq!(q.datagram(&v2, &mut buf, &mut out), Step::Hello);
    }
}
