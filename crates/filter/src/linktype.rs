//! Link types as libpcap reads them from capture files: the `LINKTYPE_`
//! number a file states, the `DLT_` value libpcap compiles filters for
//! (`linktype_to_dlt` in libpcap's pcap-common.c, as on Linux), and the
//! largest record libpcap accepts for it (`max_snaplen_for_dlt`).

/// The link type of a pcap file header's link-type field: its low 16 bits
/// (libpcap's `LT_LINKTYPE`; the upper bits are the FCS length and
/// reserved flags, `LT_LINKTYPE_EXT`).
#[inline]
pub fn linktype_of_field(field: u32) -> u32 {
    field & 0xffff
}

/// The `DLT_` value libpcap (on Linux) gives a file of link type
/// `linktype`: `LINKTYPE_ATM_RFC1483` (100) is `DLT_ATM_RFC1483` (11),
/// `LINKTYPE_RAW` (101) `DLT_RAW` (12), `LINKTYPE_SLIP_BSDOS` (102) 15,
/// `LINKTYPE_PPP_BSDOS` (103) 16, `LINKTYPE_ATM_CLIP` (106) 19; every
/// other value is its own DLT.
pub fn linktype_to_dlt(linktype: u32) -> u32 {
    match linktype {
        100 => 11,
        101 => 12,
        102 => 15,
        103 => 16,
        106 => 19,
        lt => lt,
    }
}

/// libpcap's `MAXIMUM_SNAPLEN`: the largest record it accepts for most
/// link types.
pub const MAXIMUM_SNAPLEN: u32 = 262_144;

/// The largest captured length libpcap accepts in a record of link type
/// `linktype` (libpcap's `max_snaplen_for_dlt` of its DLT): 128 MiB for
/// D-Bus (231), 8 MiB for EBHSCR (279), 1 MiB for USBPcap (249),
/// [`MAXIMUM_SNAPLEN`] otherwise. A larger record is what libpcap calls a
/// damaged file.
pub fn max_caplen(linktype: u32) -> u32 {
    match linktype_to_dlt(linktype) {
        231 => 128 << 20,
        279 => 8 << 20,
        249 => 1 << 20,
        _ => MAXIMUM_SNAPLEN,
    }
}

/// The snapshot length libpcap reads a file of link type `linktype` with,
/// from the `snaplen` its header states (`pcap_adjust_snapshot`): 0, or
/// more than [`max_caplen`], is [`max_caplen`]. Records longer than it
/// (and within [`max_caplen`]) are cut to it.
pub fn snapshot(linktype: u32, snaplen: u32) -> u32 {
    let max = max_caplen(linktype);
    if snaplen == 0 || snaplen > max {
        max
    } else {
        snaplen
    }
}

/// The link type's name for messages: `Ethernet (1)`, libpcap's name
/// of the others (`RAW (101)`, `LINUX_SLL (113)`, ...), or its number.
pub fn name(linktype: u32) -> String {
    let n = match linktype {
        0 => "NULL",
        1 => "Ethernet",
        9 => "PPP",
        101 => "RAW",
        104 => "C_HDLC",
        105 => "IEEE802_11",
        113 => "LINUX_SLL",
        127 => "IEEE802_11_RADIOTAP",
        228 => "IPV4",
        229 => "IPV6",
        276 => "LINUX_SLL2",
        _ => return format!("link type {linktype}"),
    };
    format!("{n} ({linktype})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_libpcap_on_linux() {
        assert_eq!(linktype_of_field(0x3000_0001), 1);
        assert_eq!(linktype_to_dlt(101), 12);
        assert_eq!(linktype_to_dlt(1), 1);
        assert_eq!(linktype_to_dlt(113), 113);
        assert_eq!(max_caplen(1), 262_144);
        assert_eq!(max_caplen(231), 128 << 20);
        assert_eq!(snapshot(1, 0), 262_144);
        assert_eq!(snapshot(1, 1 << 30), 262_144);
        assert_eq!(snapshot(1, 96), 96);
    }
}
