//! The classic pcap format (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcap-03.html>).
//!
//! wiretape writes little-endian files with nanosecond timestamps (magic
//! `a1b23c4d`) by default; the reader also takes microsecond and big-endian files.

pub use wiretape_format::pcap::{
    FILE_HEADER_LEN, LINKTYPE_ETHERNET, MAGIC_NS, MAGIC_US, RECORD_HEADER_LEN,
};
/// libpcap's `MAXIMUM_SNAPLEN`: the largest caplen it accepts for most
/// link types (see `wiretape_filter::linktype::max_caplen` for the others).
pub const MAX_SNAPLEN: u32 = wiretape_filter::linktype::MAXIMUM_SNAPLEN;

/// What a file is written as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// pcap with nanosecond stamps (magic a1b23c4d): the default.
    PcapNs,
    /// pcap with microsecond stamps (magic a1b2c3d4), for old readers.
    PcapUs,
    /// pcapng: SHB, one IDB (if_name, if_tsresol 9), EPBs.
    PcapNg,
    /// Stenographer's packet files (stenotype's TPACKET_V3 blocks,
    /// [`crate::steno`]): read, never written. A writer never gets it
    /// (`--format` does not name it).
    Steno,
}

impl Format {
    /// Bytes a record of `caplen` captured bytes takes in the file.
    #[inline(always)]
    pub fn record_len(self, caplen: usize) -> usize {
        match self {
            Format::PcapNs | Format::PcapUs => RECORD_HEADER_LEN + caplen,
            Format::PcapNg => crate::pcapng::EPB_OVERHEAD + crate::pcapng::pad4(caplen),
            Format::Steno => crate::steno::HEADER_LEN + caplen,
        }
    }

    /// The file's header bytes, for frames of link type `linktype`.
    pub fn file_header(self, snaplen: u32, ifname: &str, linktype: u32) -> Vec<u8> {
        let pcap = |nanos| {
            let mut h = FileHeader::new(snaplen, nanos);
            h.linktype = linktype;
            h.encode().to_vec()
        };
        match self {
            // Never written: a writer asked for it writes pcap (ns).
            Format::PcapNs | Format::Steno => pcap(true),
            Format::PcapUs => pcap(false),
            Format::PcapNg => crate::pcapng::file_header(snaplen, ifname, linktype),
        }
    }

    /// File name extension (without the dot).
    pub fn extension(self) -> &'static str {
        match self {
            Format::PcapNs | Format::PcapUs => "pcap",
            Format::PcapNg => "pcapng",
            // Never written; stenotype's own files have no extension.
            Format::Steno => "",
        }
    }

    /// The format that a format's name (`pcap`, `pcapng`) and a stamp
    /// precision (`ns`, `us`) name; Err: [`FormatError`] (pcapng has no µs
    /// variant).
    pub fn from_flags(format: &str, tsprec: &str) -> Result<Self, FormatError> {
        match (format, tsprec) {
            ("pcap", "ns") => Ok(Format::PcapNs),
            ("pcap", "us") => Ok(Format::PcapUs),
            ("pcapng", "ns") => Ok(Format::PcapNg),
            ("pcapng", "us") => Err(FormatError::UsForPcapng),
            ("pcap" | "pcapng", t) => Err(FormatError::Tsprec(t.to_string())),
            (f, _) => Err(FormatError::Format(f.to_string())),
        }
    }
}

/// A file format and stamp precision that do not name a format
/// ([`Format::from_flags`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// Microsecond stamps asked of pcapng.
    #[error("stamp precision us is for pcap; pcapng files always carry ns stamps (if_tsresol 9)")]
    UsForPcapng,
    /// A stamp precision other than `ns` and `us`.
    #[error("unknown stamp precision '{0}': use ns or us")]
    Tsprec(String),
    /// A format other than `pcap` and `pcapng`.
    #[error("unknown file format '{0}': use pcap or pcapng")]
    Format(String),
}

impl FormatError {
    /// The line with the settings named `format` and `tsprec` (a
    /// command's flags, an API's parameters) instead of the library's
    /// words.
    pub fn named(&self, format: &str, tsprec: &str) -> String {
        match self {
            FormatError::UsForPcapng => format!(
                "{tsprec} us is for pcap; pcapng files always carry ns stamps (if_tsresol 9)"
            ),
            FormatError::Tsprec(t) => format!("unknown {tsprec} '{t}': use ns or us"),
            FormatError::Format(f) => format!("unknown {format} '{f}': use pcap or pcapng"),
        }
    }
}

/// The 24-byte pcap file header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// Nanosecond stamps (magic a1b23c4d); false: microseconds.
    pub nanos: bool,
    /// Snap length the header states, in bytes (other writers' records
    /// sometimes exceed it; readers accept up to [`MAX_SNAPLEN`]).
    pub snaplen: u32,
    /// Link-layer type of every record ([`LINKTYPE_ETHERNET`] in wiretape's files).
    pub linktype: u32,
    /// Byte order of the file (readers only; wiretape writes little-endian).
    pub big_endian: bool,
}

impl FileHeader {
    /// The header wiretape writes: Ethernet, little-endian, `snaplen`, ns
    /// stamps if `nanos`, else µs.
    pub fn new(snaplen: u32, nanos: bool) -> Self {
        FileHeader {
            nanos,
            snaplen,
            linktype: LINKTYPE_ETHERNET,
            big_endian: false,
        }
    }

    /// The 24 header bytes, always little-endian (`big_endian` is ignored).
    pub fn encode(&self) -> [u8; FILE_HEADER_LEN] {
        let mut h = [0u8; FILE_HEADER_LEN];
        let magic = if self.nanos { MAGIC_NS } else { MAGIC_US };
        h[0..4].copy_from_slice(&magic.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs: 0
        h[16..20].copy_from_slice(&self.snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&self.linktype.to_le_bytes());
        h
    }

    /// Parses a header; `Err(magic)` when the magic is not a pcap one.
    pub fn decode(b: &[u8; FILE_HEADER_LEN]) -> Result<Self, u32> {
        let le = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let (nanos, big_endian) = match le {
            MAGIC_US => (false, false),
            MAGIC_NS => (true, false),
            m if m.swap_bytes() == MAGIC_US => (false, true),
            m if m.swap_bytes() == MAGIC_NS => (true, true),
            m => return Err(m),
        };
        let rd = |o: usize| {
            let v = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            if big_endian {
                v.swap_bytes()
            } else {
                v
            }
        };
        Ok(FileHeader {
            nanos,
            snaplen: rd(16),
            // libpcap's LT_LINKTYPE: the upper bits are FCS-length flags.
            linktype: wiretape_filter::linktype::linktype_of_field(rd(20)),
            big_endian,
        })
    }
}

/// Encodes a record header for a frame stamped `ts_ns` (UTC ns since the epoch).
#[inline(always)]
pub fn record_header(
    ts_ns: u64,
    nanos: bool,
    caplen: u32,
    orig_len: u32,
) -> [u8; RECORD_HEADER_LEN] {
    let sec = (ts_ns / 1_000_000_000) as u32;
    let sub = (ts_ns % 1_000_000_000) as u32;
    let frac = if nanos { sub } else { sub / 1000 };
    let w0 = sec as u64 | ((frac as u64) << 32);
    let w1 = caplen as u64 | ((orig_len as u64) << 32);
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..8].copy_from_slice(&w0.to_le_bytes());
    h[8..16].copy_from_slice(&w1.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn header_roundtrip() {
        let h = FileHeader::new(65535, true);
        let b = h.encode();
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(FileHeader::decode(&b).unwrap(), h);
        let mut be = b;
        be[0..4].copy_from_slice(&MAGIC_US.to_be_bytes());
        be[16..20].copy_from_slice(&65535u32.to_be_bytes());
        be[20..24].copy_from_slice(&1u32.to_be_bytes());
        let d = FileHeader::decode(&be).unwrap();
        assert!(d.big_endian && !d.nanos);
        assert_eq!(d.snaplen, 65535);
        assert_eq!(FileHeader::decode(&[0u8; 24]), Err(0));
    }
    #[test]
    fn record_header_fields() {
        let h = record_header(1_700_000_000_123_456_789, true, 60, 1514);
        assert_eq!(
            u32::from_le_bytes(h[0..4].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(u32::from_le_bytes(h[4..8].try_into().unwrap()), 123_456_789);
        assert_eq!(u32::from_le_bytes(h[8..12].try_into().unwrap()), 60);
        assert_eq!(u32::from_le_bytes(h[12..16].try_into().unwrap()), 1514);
        let u = record_header(1_700_000_000_123_456_789, false, 60, 60);
        assert_eq!(u32::from_le_bytes(u[4..8].try_into().unwrap()), 123_456);
    }
}
