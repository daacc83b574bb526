//! Known frames: Ethernet/IPv4/UDP from 198.18.0.1 to 198.18.0.2 (the
//! benchmarking range, never routed), to a MAC that is nobody's, with a
//! payload that says its sequence number, length and flow and then a pattern
//! derived from them, so a captured frame can be checked byte for byte.

/// Smallest frame built, in bytes without the FCS: Ethernet's minimum
/// (64 on the wire); shorter requests are padded up to it.
pub const MIN_LEN: usize = 60;
/// Largest size [`mixed_size`] gives: a full 1500-byte MTU frame, without the FCS.
pub const MAX_LEN: usize = 1514;
/// The first 4 payload bytes of every test frame; [`parse`] rejects frames without it.
pub const MAGIC: &[u8; 4] = b"WTAP";
const HDR: usize = 14 + 20 + 8;

/// A size in 60..=1514 for each sequence number, covering the range.
pub fn mixed_size(seq: u64) -> usize {
    MIN_LEN + ((seq.wrapping_mul(7919) ^ (seq >> 3)) % (MAX_LEN - MIN_LEN + 1) as u64) as usize
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Builds frame `seq` of `len` bytes on flow `flow` into `out`.
pub fn build_into(out: &mut Vec<u8>, seq: u64, len: usize, flow: u16) {
    let len = len.max(MIN_LEN);
    out.clear();
    out.extend_from_slice(&[0x02, 0x77, 0x74, 0x00, 0x00, 0x99]); // dst: not the capture end
    out.extend_from_slice(&[0x02, 0x77, 0x74, 0x00, 0x00, 0x01]);
    out.extend_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    out.extend_from_slice(&ip);
    out.extend_from_slice(&(10_000 + flow).to_be_bytes());
    out.extend_from_slice(&9u16.to_be_bytes());
    out.extend_from_slice(&(ip_len - 20).to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // UDP checksum optional in IPv4
    let payload = len - HDR;
    let mut tag = [0u8; 16];
    tag[..4].copy_from_slice(MAGIC);
    tag[4..12].copy_from_slice(&seq.to_le_bytes());
    tag[12..14].copy_from_slice(&(len as u16).to_le_bytes());
    tag[14..16].copy_from_slice(&flow.to_le_bytes());
    out.extend_from_slice(&tag[..payload.min(16)]);
    for i in 16..payload {
        out.push((seq as usize).wrapping_mul(31).wrapping_add(i) as u8);
    }
}

/// Smallest frame that carries a send time.
pub const MIN_TIMED_LEN: usize = HDR + 24;

/// A frame like [`build_into`] (flow 0xffff) whose payload bytes 16..24
/// hold `send_ns`.
pub fn build_timed_into(out: &mut Vec<u8>, seq: u64, len: usize, send_ns: u64) {
    build_into(out, seq, len.max(MIN_TIMED_LEN), 0xffff);
    out[HDR + 16..HDR + 24].copy_from_slice(&send_ns.to_le_bytes());
}

/// (seq, send time) of a timed frame.
pub fn parse_timed(frame: &[u8]) -> Option<(u64, u64)> {
    let (seq, _, flow) = parse(frame)?;
    if flow != 0xffff {
        return None;
    }
    Some((
        seq,
        u64::from_le_bytes(frame.get(HDR + 16..HDR + 24)?.try_into().ok()?),
    ))
}

/// Makes a copy of a frame built by [`build_into`] (any seq, flow 0)
/// into frame `seq` of `flow` without rebuilding its payload: sequence
/// number, flow, IP id and checksum, UDP source port, and the send time
/// in payload bytes 16..24 (frames of 66 bytes or more), or its low 48
/// bits in bytes 16..22 (64 and 65 bytes; 60..63-byte frames carry none).
/// (`wiretape gen`: the payload pattern after that is seq 0's.)
pub fn patch(f: &mut [u8], seq: u64, flow: u16, send_ns: u64) {
    f[18..20].copy_from_slice(&(seq as u16).to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let c = csum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&(10_000 + flow).to_be_bytes());
    f[HDR + 4..HDR + 12].copy_from_slice(&seq.to_le_bytes());
    f[HDR + 14..HDR + 16].copy_from_slice(&flow.to_le_bytes());
    if f.len() >= HDR + 24 {
        f[HDR + 16..HDR + 24].copy_from_slice(&send_ns.to_le_bytes());
    } else if f.len() >= HDR + 22 {
        f[HDR + 16..HDR + 22].copy_from_slice(&send_ns.to_le_bytes()[..6]);
    }
}

/// The send time `wiretape gen` put in a frame; `near_ns` (e.g. the
/// capture time, within days of the send) completes a 48-bit one.
pub fn gen_send_time(frame: &[u8], near_ns: u64) -> Option<u64> {
    parse(frame)?;
    if frame.len() >= HDR + 24 {
        return Some(u64::from_le_bytes(
            frame.get(HDR + 16..HDR + 24)?.try_into().ok()?,
        ));
    }
    let b = frame.get(HDR + 16..HDR + 22)?;
    let mut v = [0u8; 8];
    v[..6].copy_from_slice(b);
    let low = u64::from_le_bytes(v);
    const M: u64 = 1 << 48;
    // The value with these low bits nearest to near_ns.
    let base = near_ns & !(M - 1);
    [base.wrapping_sub(M), base, base.wrapping_add(M)]
        .into_iter()
        .map(|b| b | low)
        .min_by_key(|t| t.abs_diff(near_ns))
}

/// Whether the IPv4 header checksum verifies.
pub fn ip_checksum_ok(frame: &[u8]) -> bool {
    frame.len() >= 34 && csum(&frame[14..34]) == 0
}

/// Frame `seq` of `len` bytes (at least [`MIN_LEN`]) on flow `flow`, in a
/// new buffer; [`build_into`] reuses one.
pub fn build(seq: u64, len: usize, flow: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    build_into(&mut v, seq, len, flow);
    v
}

/// (seq, original length, flow) of one of our frames (possibly cut by snaplen).
pub fn parse(frame: &[u8]) -> Option<(u64, usize, u16)> {
    let t = frame.get(HDR..HDR + 16)?;
    if &t[..4] != MAGIC {
        return None;
    }
    Some((
        u64::from_le_bytes(t[4..12].try_into().ok()?),
        u16::from_le_bytes(t[12..14].try_into().ok()?) as usize,
        u16::from_le_bytes(t[14..16].try_into().ok()?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn roundtrip_and_sizes() {
        for seq in [0u64, 1, 2, 99, 12345, u64::MAX / 3] {
            let len = mixed_size(seq);
            assert!((MIN_LEN..=MAX_LEN).contains(&len));
            let f = build(seq, len, 3);
            assert_eq!(f.len(), len);
            assert_eq!(parse(&f), Some((seq, len, 3)));
        }
        let sizes: std::collections::BTreeSet<_> = (0..5000).map(mixed_size).collect();
        assert!(sizes.contains(&60) || sizes.iter().next().unwrap() < &70);
        assert!(sizes.iter().last().unwrap() > &1500);
        // IPv4 header checksum verifies to zero
        let f = build(7, 100, 0);
        assert_eq!(csum(&f[14..34]), 0);
    }
}
