//! pcapng (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-03.html>):
//! what wiretape writes with `--format pcapng` and what its readers take.
//!
//! A wiretape pcapng file is one section: a Section Header Block, one
//! Interface Description Block (`if_name`, `if_tsresol` = 9, nanoseconds)
//! and Enhanced Packet Blocks, little-endian; `extract` over inputs of
//! several link types writes one IDB per link type
//! ([`file_header_links`]), each EPB naming its frame's. Readers also take big-endian
//! files, several interfaces with their own resolutions, and Simple Packet
//! Blocks; other block types are skipped.

pub use wiretape_format::pcapng::{
    pad4, BYTE_ORDER_MAGIC, EPB, EPB_HEAD, EPB_OVERHEAD, IDB, SHB, SPB,
};

/// Options are (code, value) pairs, padded to 4 bytes, ended by code 0.
fn push_opt(out: &mut Vec<u8>, code: u16, val: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(val.len() as u16).to_le_bytes());
    out.extend_from_slice(val);
    out.resize(pad4(out.len()), 0);
}

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let total = (12 + body.len()) as u32;
    let mut b = Vec::with_capacity(total as usize);
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&total.to_le_bytes());
    b
}

/// The file's first bytes: SHB (with shb_userappl) and one IDB for
/// `ifname` (link type `linktype`, `snaplen`, nanosecond stamps).
pub fn file_header(snaplen: u32, ifname: &str, linktype: u32) -> Vec<u8> {
    file_header_links(snaplen, ifname, &[linktype])
}

/// [`file_header`] with one IDB per link type of `linktypes`, in that
/// order (interface `k` is `linktypes[k]`; EPBs name it, [`write_epb_on`]):
/// what `extract --format pcapng` writes over inputs of several link types.
pub fn file_header_links(snaplen: u32, ifname: &str, linktypes: &[u32]) -> Vec<u8> {
    let mut shb = Vec::new();
    shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
    let app = format!("wiretape {}", env!("CARGO_PKG_VERSION"));
    push_opt(&mut shb, 4, app.as_bytes()); // shb_userappl
    push_opt(&mut shb, 0, &[]);
    let mut out = block(SHB, &shb);
    for &linktype in linktypes {
        let mut idb = Vec::new();
        idb.extend_from_slice(&(linktype as u16).to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&snaplen.to_le_bytes());
        if !ifname.is_empty() {
            push_opt(&mut idb, 2, ifname.as_bytes()); // if_name
        }
        push_opt(&mut idb, 9, &[9]); // if_tsresol: 10^-9 s
        push_opt(&mut idb, 0, &[]);
        out.extend_from_slice(&block(IDB, &idb));
    }
    out
}

/// Writes an EPB for interface 0 into `dst` (exactly
/// `EPB_OVERHEAD + pad4(data.len())` bytes).
#[inline(always)]
pub fn write_epb(dst: &mut [u8], ts_ns: u64, data: &[u8], orig_len: u32) {
    write_epb_on(dst, 0, ts_ns, data, orig_len)
}

/// [`write_epb`] for interface `interface` (of [`file_header_links`]).
#[inline(always)]
pub fn write_epb_on(dst: &mut [u8], interface: u32, ts_ns: u64, data: &[u8], orig_len: u32) {
    let total = EPB_OVERHEAD + pad4(data.len());
    debug_assert_eq!(dst.len(), total);
    let w = |d: &mut [u8], o: usize, v: u32| d[o..o + 4].copy_from_slice(&v.to_le_bytes());
    w(dst, 0, EPB);
    w(dst, 4, total as u32);
    w(dst, 8, interface);
    w(dst, 12, (ts_ns >> 32) as u32);
    w(dst, 16, ts_ns as u32);
    w(dst, 20, data.len() as u32);
    w(dst, 24, orig_len);
    dst[EPB_HEAD..EPB_HEAD + data.len()].copy_from_slice(data);
    dst[EPB_HEAD + data.len()..total - 4].fill(0);
    w(dst, total - 4, total as u32);
}

/// Units per second of an `if_tsresol` value (default 10^6).
pub fn tsresol_units(v: u8) -> u64 {
    let e = (v & 0x7f) as u32;
    if v & 0x80 != 0 {
        1u64.checked_shl(e).unwrap_or(0)
    } else {
        10u64.checked_pow(e).unwrap_or(0)
    }
}

/// Converts a stamp in `units` per second to ns.
pub fn to_ns(t: u64, units: u64) -> u64 {
    match units {
        1_000_000_000 => t,
        0 => 0,
        u => ((t as u128 * 1_000_000_000) / u as u128) as u64,
    }
}

/// An interface as described by an IDB: link type, snap length, stamp units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Link-layer type (1: Ethernet).
    pub linktype: u16,
    /// Snap length in bytes; 0: no limit.
    pub snaplen: u32,
    /// Stamp units per second, from `if_tsresol` (10^6 without it; 0 when
    /// its value overflows a u64).
    pub units: u64,
}

/// Parses an IDB body (after type and length, before the trailing length).
pub fn parse_idb(body: &[u8], big_endian: bool) -> Option<Interface> {
    if body.len() < 8 {
        return None;
    }
    let r16 = |o: usize| {
        let v = u16::from_le_bytes(body[o..o + 2].try_into().unwrap());
        if big_endian {
            v.swap_bytes()
        } else {
            v
        }
    };
    let r32 = |o: usize| {
        let v = u32::from_le_bytes(body[o..o + 4].try_into().unwrap());
        if big_endian {
            v.swap_bytes()
        } else {
            v
        }
    };
    let mut itf = Interface {
        linktype: r16(0),
        snaplen: r32(4),
        units: 1_000_000,
    };
    let mut o = 8;
    while o + 4 <= body.len() {
        let (code, len) = (r16(o), r16(o + 2) as usize);
        if code == 0 || o + 4 + len > body.len() {
            break;
        }
        if code == 9 && len >= 1 {
            itf.units = tsresol_units(body[o + 4]);
        }
        o += 4 + pad4(len);
    }
    Some(itf)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn header_and_epb_layout() {
        let h = file_header(65535, "eth0", 1);
        assert_eq!(&h[0..4], &SHB.to_le_bytes());
        let shb_len = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        assert_eq!(shb_len % 4, 0);
        assert_eq!(&h[shb_len - 4..shb_len], &h[4..8]);
        let idb = &h[shb_len..];
        assert_eq!(u32::from_le_bytes(idb[0..4].try_into().unwrap()), IDB);
        let idb_len = u32::from_le_bytes(idb[4..8].try_into().unwrap()) as usize;
        assert_eq!(idb.len(), idb_len);
        let itf = parse_idb(&idb[8..idb_len - 4], false).unwrap();
        assert_eq!(
            itf,
            Interface {
                linktype: 1,
                snaplen: 65535,
                units: 1_000_000_000
            }
        );
        let mut e = vec![0xffu8; EPB_OVERHEAD + 64];
        write_epb(&mut e, 0x1_0000_0002, &[7; 61], 1514);
        assert_eq!(u32::from_le_bytes(e[4..8].try_into().unwrap()), 96);
        assert_eq!(u32::from_le_bytes(e[12..16].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(e[16..20].try_into().unwrap()), 2);
        assert_eq!(&e[28 + 61..28 + 64], &[0, 0, 0]);
        assert_eq!(u32::from_le_bytes(e[92..96].try_into().unwrap()), 96);
        assert_eq!(tsresol_units(6), 1_000_000);
        assert_eq!(tsresol_units(0x80 | 10), 1024);
        assert_eq!(to_ns(5, 1_000_000), 5000);
    }

    #[test]
    fn one_idb_per_link_type_and_epbs_naming_theirs() {
        let h = file_header_links(262_144, "x", &[1, 101, 113]);
        let mut o = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
        let mut lts = Vec::new();
        while o < h.len() {
            assert_eq!(u32::from_le_bytes(h[o..o + 4].try_into().unwrap()), IDB);
            let n = u32::from_le_bytes(h[o + 4..o + 8].try_into().unwrap()) as usize;
            let itf = parse_idb(&h[o + 8..o + n - 4], false).unwrap();
            assert_eq!(itf.units, 1_000_000_000);
            lts.push(itf.linktype);
            o += n;
        }
        assert_eq!(lts, [1, 101, 113]);
        assert_eq!(
            file_header(65535, "eth0", 1),
            file_header_links(65535, "eth0", &[1])
        );
        let mut e = vec![0u8; EPB_OVERHEAD + 4];
        write_epb_on(&mut e, 2, 1, &[1, 2, 3, 4], 4);
        assert_eq!(u32::from_le_bytes(e[8..12].try_into().unwrap()), 2);
    }
}
