//! The record walker (`wiretape_files::walk`) against the parsers it
//! replaced (`legacy`, verbatim): the reader, repair's scan and the index
//! rebuild give what they gave. Here, beside the write path, since repair
//! and the rebuild are its.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

#[path = "walk/legacy.rs"]
mod legacy;

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use wiretape_files::pcap::RECORD_HEADER_LEN;
use wiretape_files::pcapng;
use wiretape_files::reader::{PcapReader, Record};
use wiretape_files::walk::*;
use wiretape_files::{Format, StorageError};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wt-walk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn put(out: &mut Vec<u8>, v: u32, be: bool) {
    out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

fn frame(i: usize) -> Vec<u8> {
    (0..20 + (i * 37) % 90)
        .map(|j| (i * 7 + j) as u8 | 1)
        .collect()
}

/// A pcap file by hand (any precision and byte order); the record
/// offsets.
fn pcap(nanos: bool, be: bool, n: usize) -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    let magic = if nanos {
        wiretape_files::pcap::MAGIC_NS
    } else {
        wiretape_files::pcap::MAGIC_US
    };
    put(&mut f, magic, be);
    f.extend_from_slice(&if be { [0, 2, 0, 4] } else { [2, 0, 4, 0] });
    f.extend_from_slice(&[0; 8]);
    put(&mut f, 65535, be);
    put(&mut f, 1, be);
    let mut offs = Vec::new();
    for i in 0..n {
        offs.push(f.len());
        let d = frame(i);
        put(&mut f, 1_700_000_000 + i as u32, be);
        put(
            &mut f,
            if nanos { 123_456_789 } else { 123_456 } + i as u32,
            be,
        );
        put(&mut f, d.len() as u32, be);
        put(&mut f, d.len() as u32 + (i as u32 % 3) * 100, be);
        f.extend_from_slice(&d);
    }
    (f, offs)
}

fn block(f: &mut Vec<u8>, kind: u32, body: &[u8], be: bool) -> usize {
    let at = f.len();
    let total = 12 + body.len() as u32;
    put(f, kind, be);
    put(f, total, be);
    f.extend_from_slice(body);
    put(f, total, be);
    at
}

fn shb(f: &mut Vec<u8>, be: bool) {
    let mut b = Vec::new();
    put(&mut b, pcapng::BYTE_ORDER_MAGIC, be);
    b.extend_from_slice(&if be { [0, 1, 0, 0] } else { [1, 0, 0, 0] });
    b.extend_from_slice(&[0xff; 8]);
    block(f, pcapng::SHB, &b, be);
}

fn idb(f: &mut Vec<u8>, be: bool, snaplen: u32, tsresol: u8) {
    let mut b = Vec::new();
    put(&mut b, if be { 1 << 16 } else { 1 }, be); // linktype 1, reserved
    put(&mut b, snaplen, be);
    b.extend_from_slice(&if be { [0, 9, 0, 1] } else { [9, 0, 1, 0] });
    b.extend_from_slice(&[tsresol, 0, 0, 0]);
    put(&mut b, 0, be); // opt_endofopt
    block(f, pcapng::IDB, &b, be);
}

fn epb(f: &mut Vec<u8>, be: bool, ifc: u32, ts: u64, data: &[u8]) -> usize {
    let mut b = Vec::new();
    put(&mut b, ifc, be);
    put(&mut b, (ts >> 32) as u32, be);
    put(&mut b, ts as u32, be);
    put(&mut b, data.len() as u32, be);
    put(&mut b, data.len() as u32 + 4, be);
    b.extend_from_slice(data);
    b.resize(pcapng::pad4(b.len()), 0);
    block(f, pcapng::EPB, &b, be)
}

/// Two sections (little-, then big-endian), two interfaces each with
/// their own resolutions, an unknown block; the packet block offsets.
fn pcapng_two_sections() -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    let mut offs = Vec::new();
    shb(&mut f, false);
    idb(&mut f, false, 65535, 9); // ns
    idb(&mut f, false, 65535, 6); // µs
    offs.push(epb(&mut f, false, 0, 1_700_000_000_123_456_789, &frame(0)));
    offs.push(epb(&mut f, false, 1, 1_700_000_000_123_456, &frame(1)));
    block(&mut f, 0x0BAD, &[1, 2, 3, 4], false); // skipped
    offs.push(epb(&mut f, false, 0, 1_700_000_001_000_000_000, &frame(2)));
    shb(&mut f, true);
    idb(&mut f, true, 1500, 0x80 | 10); // 1/1024 s
    idb(&mut f, true, 1500, 3); // ms
    offs.push(epb(&mut f, true, 1, 1_700_000_002_500, &frame(3)));
    offs.push(epb(&mut f, true, 0, 1_700_000_003 * 1024 + 512, &frame(4)));
    offs.push(epb(&mut f, true, 1, 1_700_000_004_001, &frame(5)));
    (f, offs)
}

/// What a reader gives: the header (or error) and every record (or
/// error), as text so that errors compare by their messages.
fn read_all<R>(
    r: Result<R, StorageError>,
    mut next: impl FnMut(&mut R, &mut Record) -> Result<bool, StorageError>,
    pos: impl Fn(&R) -> (u64, u64),
) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(mut r) = r.map_err(|e| out.push(format!("open: {e:?} / {e}"))) else {
        return out;
    };
    let mut rec = Record::default();
    loop {
        match next(&mut r, &mut rec) {
            Ok(true) => out.push(format!("{rec:?} at {:?}", pos(&r))),
            Ok(false) => return out,
            Err(e) => {
                out.push(format!("{e:?} / {e}"));
                return out;
            }
        }
    }
}

/// The reader, scan_from (from 0 and from `from`) and the index rebuild
/// give what the old code gave on `bytes`; the walker's records are the
/// old reader's. Returns the old reader's records (text) for checks.
fn same_as_before(d: &Path, bytes: &[u8], from: u64) -> Vec<String> {
    let p = d.join("x.cap");
    std::fs::write(&p, bytes).unwrap();
    let len = bytes.len() as u64;
    let old = read_all(
        legacy::OldReader::new(Cursor::new(bytes), &p, len),
        |r, rec| r.next_into(rec),
        |r| (r.offset(), r.last_len()),
    );
    let new = read_all(
        PcapReader::new(Cursor::new(bytes), &p, len),
        |r, rec| r.next_into(rec),
        |r| (r.offset(), r.last_len()),
    );
    assert_eq!(old, new, "reader");
    // The walker itself: the old reader's records, where they lie.
    let mut oldr = legacy::OldReader::new(Cursor::new(bytes), &p, len).ok();
    let mut w = Walker::new(Cursor::new(bytes));
    let (mut rec, mut data) = (Record::default(), Vec::new());
    while let Some(or) = oldr.as_mut() {
        if !or.next_into(&mut rec).unwrap_or(false) {
            break;
        }
        let m = w.next_into(&mut data).expect("the walker has it too");
        assert_eq!(
            (m.offset, m.file_len, m.ts_ns, m.orig_len, m.caplen as usize),
            (
                or.offset() - or.last_len(),
                or.last_len(),
                rec.ts_ns,
                rec.orig_len,
                rec.data.len()
            )
        );
        assert_eq!(data, rec.data);
    }
    for start in [0, from] {
        let a = legacy::scan_from(&p, start).map_err(|e| e.to_string());
        let b = wiretape_storage::repair::scan_from(&p, start).map_err(|e| e.to_string());
        assert_eq!(a, b, "scan_from {start}");
    }
    let a = legacy::rebuild_entries(&p, 256).map_err(|e| e.to_string());
    // The old index had no flow sets: compare the blocks' places and times.
    let b = wiretape_storage::index::rebuild(&p, 256)
        .map(|_| wiretape_files::index::read(&wiretape_files::index::path_for(&p)).unwrap())
        .map(|es| {
            es.into_iter()
                .map(|e| wiretape_files::index::Entry { flows: None, ..e })
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
    assert_eq!(a, b, "index rebuild");
    old
}

/// Whole, cut at every byte of the last record, zero padded, and with
/// bad lengths in the middle: the same as before, every time.
fn every_damage(name: &str, full: &[u8], offs: &[usize], len_at: usize, ng: bool) {
    let d = tmpdir(name);
    let from = offs[1] as u64;
    let whole = same_as_before(&d, full, from);
    assert_eq!(whole.len(), offs.len(), "{whole:#?}");
    assert!(whole.iter().all(|r| r.starts_with("Record")), "{whole:#?}");
    let last = *offs.last().unwrap();
    for cut in last..full.len() {
        let r = same_as_before(&d, &full[..cut], from);
        let end = r.last().unwrap();
        if cut == last {
            assert_eq!(r.len(), offs.len() - 1, "cut at {cut}: n-1 records");
            assert!(end.starts_with("Record"), "{end}");
        } else {
            assert_eq!(
                r.len(),
                offs.len(),
                "cut at {cut}: n-1 records and the error"
            );
            assert!(
                end.starts_with("Truncated") || end.starts_with("Corrupt"),
                "{end}"
            );
        }
        let (end, n, _) = wiretape_storage::repair::scan_from(&d.join("x.cap"), 0).unwrap();
        assert_eq!((end, n), (last as u64, offs.len() as u64 - 1));
    }
    for zeros in [1, 3, 4, 7, 8, 11, 12, 15, 16, 17, 100, 4096] {
        let mut z = full.to_vec();
        z.resize(full.len() + zeros, 0);
        same_as_before(&d, &z, from);
        let (end, n, _) = wiretape_storage::repair::scan_from(&d.join("x.cap"), 0).unwrap();
        assert_eq!((end, n), (full.len() as u64, offs.len() as u64));
        // Zeros, then data. pcap: each 16 zero bytes before the data
        // are an empty record, as libpcap reads them (the old readers
        // stopped there); pcapng: a block of length 0 is corrupt.
        z.push(1);
        if ng || zeros < RECORD_HEADER_LEN {
            same_as_before(&d, &z, from);
        } else {
            let k = zeros / RECORD_HEADER_LEN;
            let mut w = Walker::new(Cursor::new(&z));
            let metas: Vec<Meta> = std::iter::from_fn(|| w.next()).collect();
            assert_eq!(metas.len(), offs.len() + k, "{zeros} zeros");
            for (j, m) in metas[offs.len()..].iter().enumerate() {
                let at = (full.len() + j * RECORD_HEADER_LEN) as u64;
                assert_eq!(
                    (m.offset, m.file_len, m.caplen, m.orig_len, m.ts_ns, m.odd),
                    (at, 16, 0, 0, 0, true)
                );
            }
            let stop = w.stop().unwrap();
            let end = (full.len() + k * RECORD_HEADER_LEN) as u64;
            assert_eq!(stop.offset, end);
            assert!(matches!(
                stop.end,
                End::Torn {
                    what: "record header",
                    ..
                }
            ));
            std::fs::write(d.join("x.cap"), &z).unwrap();
            let (e, n, _) = wiretape_storage::repair::scan_from(&d.join("x.cap"), 0).unwrap();
            assert_eq!((e, n), (end, (offs.len() + k) as u64));
        }
    }
    // A corrupt length in the middle (and on the last record).
    let mid = offs[offs.len() / 2];
    for at in [mid, last] {
        let values: &[u32] = if ng {
            &[0, 7, 9, 13, 1 << 25, 4, 48, 4096, u32::MAX]
        } else {
            &[0, 1, 262_145, u32::MAX, 4096, 3000]
        };
        for &v in values {
            for be in [false, true] {
                let mut bad = full.to_vec();
                let v = if be { v.to_be_bytes() } else { v.to_le_bytes() };
                bad[at + len_at..at + len_at + 4].copy_from_slice(&v);
                same_as_before(&d, &bad, from);
            }
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn pcap_ns_us_and_big_endian_as_before() {
    for (nanos, be) in [(true, false), (false, false), (true, true), (false, true)] {
        let (f, offs) = pcap(nanos, be, 7);
        // The caplen field; then orig_len and the fraction.
        every_damage(&format!("pcap-{nanos}-{be}"), &f, &offs, 8, false);
        every_damage(&format!("pcap-orig-{nanos}-{be}"), &f, &offs, 12, false);
        every_damage(&format!("pcap-frac-{nanos}-{be}"), &f, &offs, 4, false);
    }
    // Stamps are read in their precision and byte order.
    let (f, _) = pcap(false, true, 2);
    let mut w = Walker::new(Cursor::new(&f));
    assert_eq!(w.format(), Some(Format::PcapUs));
    let m = w.next().unwrap();
    assert_eq!(m.ts_ns, 1_700_000_000_123_456_000);
    assert_eq!((m.offset, m.file_len, m.caplen), (24, 36, 20));
    assert!(w.next().is_some() && w.next().is_none());
    assert!(matches!(w.stop().unwrap().end, End::Clean));
}

#[test]
fn pcapng_two_sections_and_interfaces_as_before() {
    let (f, offs) = pcapng_two_sections();
    // The leading length; then the trailing one of the block.
    every_damage("ng-len", &f, &offs, 4, true);
    let d = tmpdir("ng-trailer");
    for &at in &offs {
        let total = u32::from_le_bytes(f[at + 4..at + 8].try_into().unwrap());
        let total = if at > offs[2] {
            total.swap_bytes()
        } else {
            total
        } as usize;
        let mut bad = f.clone();
        bad[at + total - 4] ^= 4;
        same_as_before(&d, &bad, offs[1] as u64);
    }
    std::fs::remove_dir_all(d).unwrap();
    // Each interface's resolution, each section's byte order.
    let mut w = Walker::new(Cursor::new(&f));
    let ts: Vec<(u64, u32)> = std::iter::from_fn(|| w.next())
        .map(|m| (m.ts_ns, m.interface))
        .collect();
    assert_eq!(
        ts,
        [
            (1_700_000_000_123_456_789, 0),
            (1_700_000_000_123_456_000, 1),
            (1_700_000_001_000_000_000, 0),
            (1_700_000_002_500_000_000, 1),
            (1_700_000_003_500_000_000, 0),
            (1_700_000_004_001_000_000, 1),
        ]
    );
    assert_eq!(w.offset(), f.len() as u64);
}

#[test]
fn wiretape_files_as_before() {
    use wiretape_storage::{FileSink, PcapWriter};
    let d = tmpdir("wt");
    for fmt in [Format::PcapNs, Format::PcapUs, Format::PcapNg] {
        let p = d.join(format!("{fmt:?}.{}", fmt.extension()));
        let mut w =
            PcapWriter::with_format(FileSink::with_block_size(&p, 4096).unwrap(), 100, fmt, "e");
        for i in 0..9 {
            w.write(1_000_000_007 + i * 999, &frame(i as usize))
                .unwrap();
        }
        w.close().unwrap();
        let f = std::fs::read(&p).unwrap();
        let mut offs = Vec::new();
        let mut walk = Walker::new(Cursor::new(&f));
        while let Some(m) = walk.next() {
            offs.push(m.offset as usize);
        }
        let len_at = if fmt == Format::PcapNg { 4 } else { 8 };
        every_damage(
            &format!("wt-{fmt:?}"),
            &f,
            &offs,
            len_at,
            fmt == Format::PcapNg,
        );
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn simple_packet_blocks_read_as_before() {
    let d = tmpdir("spb");
    let mut f = Vec::new();
    shb(&mut f, false);
    idb(&mut f, false, 50, 9);
    let mut offs = Vec::new();
    for i in 0..4 {
        let data = frame(i);
        let mut b = Vec::new();
        put(&mut b, data.len() as u32, false);
        b.extend_from_slice(&data);
        b.resize(pcapng::pad4(b.len()), 0);
        offs.push(block(&mut f, pcapng::SPB, &b, false));
    }
    let p = d.join("x.cap");
    std::fs::write(&p, &f).unwrap();
    let len = f.len() as u64;
    let old = read_all(
        legacy::OldReader::new(Cursor::new(&f), &p, len),
        |r, rec| r.next_into(rec),
        |r| (r.offset(), r.last_len()),
    );
    let new = read_all(
        PcapReader::new(Cursor::new(&f), &p, len),
        |r, rec| r.next_into(rec),
        |r| (r.offset(), r.last_len()),
    );
    assert_eq!(old, new);
    // scan_from counts captured bytes as the reader does (cut to the
    // snap length); the old scan counted whole block bodies.
    let caps: u64 = (0..4).map(|i| frame(i).len().min(50) as u64).sum();
    assert_eq!(
        wiretape_storage::repair::scan_from(&p, 0).unwrap(),
        (len, 4, caps)
    );
    let (end, n, _) = legacy::scan_from(&p, 0).unwrap();
    assert_eq!((end, n), (len, 4));
    std::fs::remove_dir_all(d).unwrap();
}

/// Hands out one byte per read: every read ahead and hand-back path.
struct OneByte<R>(R);

impl<R: Read> Read for OneByte<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = out.len().min(1);
        self.0.read(&mut out[..n])
    }
}

/// A record as [`records`] gives it: offset, caplen, orig_len, stamp, data.
type Rec = (u64, u32, u32, u64, Vec<u8>);

/// Every record the walker gives, read at once and a byte at a time
/// (the same), and the walker (its stop).
fn records(b: &[u8]) -> (Vec<Rec>, Walker<Box<dyn Read + '_>>) {
    let walk = |w: &mut Walker<Box<dyn Read + '_>>| {
        let mut d = Vec::new();
        let mut v = Vec::new();
        while let Some(m) = w.next_into(&mut d) {
            v.push((m.offset, m.caplen, m.orig_len, m.ts_ns, d.clone()));
        }
        v
    };
    let mut w: Walker<Box<dyn Read>> = Walker::new(Box::new(Cursor::new(b)));
    let a = walk(&mut w);
    let mut w1: Walker<Box<dyn Read>> = Walker::new(Box::new(OneByte(Cursor::new(b))));
    assert_eq!(walk(&mut w1), a, "a byte at a time");
    let (s, s1) = (w.stop().unwrap(), w1.stop().unwrap());
    assert_eq!(
        (s.offset, format!("{:?}", s.end)),
        (s1.offset, format!("{:?}", s1.end))
    );
    (a, w)
}

/// `f` with `n` zero bytes put in at `at`.
fn with_zeros(f: &[u8], at: usize, n: usize) -> Vec<u8> {
    let mut b = f[..at].to_vec();
    b.resize(at + n, 0);
    b.extend_from_slice(&f[at..]);
    b
}

/// tcpdump's test capture bgp_vpn_rt-oobr.pcap holds an all-zero
/// record header between records, and libpcap reads it as an empty
/// record (stamped 1970): so does the walker, when anything but zeros
/// follows it; only zeros to the end are padding. ns and µs, either
/// byte order, read at once and a byte at a time; repair cuts nothing
/// libpcap reads after such a record.
#[test]
fn an_all_zero_header_before_records_is_an_empty_record() {
    let d = tmpdir("zero-record");
    let p = d.join("z.pcap");
    for (nanos, be) in [(true, false), (false, false), (true, true), (false, true)] {
        let (f, offs) = pcap(nanos, be, 9);
        let whole = records(&f).0;
        // 2 records, an all-zero header, 7 records: 10, as tcpdump reads.
        let b = with_zeros(&f, offs[2], 16);
        let (got, w) = records(&b);
        let stop = w.stop().unwrap();
        assert_eq!(got.len(), 10, "nanos {nanos}, be {be}");
        assert_eq!(got[2], (offs[2] as u64, 0, 0, 0, Vec::new()));
        for (k, r) in got.iter().enumerate().filter(|(k, _)| *k != 2) {
            let (o, c, l, t, data) = &whole[k - usize::from(k > 2)];
            let shift = if k > 2 { 16 } else { 0 };
            assert_eq!(r, &(o + shift, *c, *l, *t, data.clone()), "record {k}");
        }
        assert!(matches!(stop.end, End::Clean));
        assert_eq!(stop.offset, b.len() as u64);
        let mut w = Walker::new(Cursor::new(&b));
        let odd = std::iter::from_fn(|| w.next()).filter(|m| m.odd).count();
        let odd_before = {
            let mut w = Walker::new(Cursor::new(&f));
            std::iter::from_fn(|| w.next()).filter(|m| m.odd).count()
        };
        assert_eq!(odd, odd_before + 1, "an empty record is odd (orig_len 0)");
        // The strict reader reads it to its end; repair leaves it whole.
        let mut r = PcapReader::new(Cursor::new(&b), &p, b.len() as u64).unwrap();
        let mut rec = Record::default();
        let mut n = 0;
        while r.next_into(&mut rec).unwrap() {
            n += 1;
        }
        assert_eq!(n, 10);
        std::fs::write(&p, &b).unwrap();
        let rep = wiretape_storage::repair::repair(&p).unwrap();
        assert_eq!(
            (rep.records, rep.len_after, rep.changed()),
            (10, b.len() as u64, false)
        );
        assert_eq!(std::fs::read(&p).unwrap(), b);
        // Then zeros to the end: padding, which repair cuts, and only it.
        let mut padded = b.clone();
        padded.resize(b.len() + 4096 + 5, 0);
        let (got, w) = records(&padded);
        let stop = w.stop().unwrap();
        assert_eq!(got.len(), 10);
        assert!(matches!(stop.end, End::Zeros(_)), "{stop:?}");
        assert_eq!(stop.offset, b.len() as u64);
        std::fs::write(&p, &padded).unwrap();
        let rep = wiretape_storage::repair::repair(&p).unwrap();
        assert_eq!((rep.records, rep.len_after), (10, b.len() as u64));
        assert_eq!(std::fs::read(&p).unwrap(), b);
        // Empty records first and in a row, a torn record last: repair
        // cuts the torn record only.
        let b = with_zeros(&with_zeros(&f, offs[5], 48), offs[0], 16);
        let torn = &b[..b.len() - 3];
        let (got, w) = records(torn);
        let stop = w.stop().unwrap();
        assert_eq!(got.len(), 9 + 4 - 1);
        assert_eq!(got[0].1, 0);
        assert!(got[6..9].iter().all(|r| r.1 == 0 && r.4.is_empty()));
        assert!(matches!(stop.end, End::Torn { .. }));
        std::fs::write(&p, torn).unwrap();
        let rep = wiretape_storage::repair::repair(&p).unwrap();
        let last = *offs.last().unwrap() + 64;
        assert_eq!((rep.records, rep.len_after), (12, last as u64));
        assert_eq!(std::fs::read(&p).unwrap(), b[..last]);
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// A long run of zeros before records: one empty record per 16 bytes,
/// the run read ahead once (not once per header). Zeros that are not a
/// whole number of headers before records: the bytes after them are
/// read as libpcap reads them (here a header libpcap refuses), and
/// repair refuses to cut.
#[test]
fn runs_of_zeros_before_records() {
    let (f, offs) = pcap(true, false, 4);
    let n = 100_000;
    let b = with_zeros(&f, offs[1], n * 16);
    let mut w = Walker::new(Cursor::new(&b));
    let metas: Vec<Meta> = std::iter::from_fn(|| w.next()).collect();
    assert_eq!(metas.len(), 4 + n);
    assert!(metas[1..=n].iter().all(|m| m.caplen == 0));
    assert_eq!(metas[n + 1].offset, (offs[1] + n * 16) as u64);
    assert!(matches!(w.stop().unwrap().end, End::Clean));
    // 20 zero bytes: one empty record, then a header made of 4 zeros
    // and the next record's first 12 bytes (its fraction as caplen).
    let b = with_zeros(&f, offs[1], 20);
    let (got, w) = records(&b);
    let stop = w.stop().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(stop.offset, (offs[1] + 16) as u64);
    assert!(matches!(
        stop.end,
        End::Corrupt(Why::RecordHeader {
            caplen: 123_456_790,
            ..
        })
    ));
    let d = tmpdir("zero-run");
    let p = d.join("z.pcap");
    std::fs::write(&p, &b).unwrap();
    assert!(matches!(
        wiretape_storage::repair::repair(&p),
        Err(StorageError::Corrupt { .. })
    ));
    assert_eq!(std::fs::read(&p).unwrap(), b, "left alone");
    std::fs::remove_dir_all(d).unwrap();
}

/// A stream of zeros from its first byte is padding from the start
/// (space allocated ahead that no write reached): no header.
#[test]
fn all_zeros_is_padding_without_a_header() {
    for n in [4, 24, 4096] {
        let z = vec![0u8; n];
        let w = Walker::new(Cursor::new(&z));
        let s = w.stop().unwrap();
        assert!(matches!(s.end, End::Zeros(Why::BadMagic(0))), "{s:?}");
        assert!(!w.header_complete() && !s.header_complete);
    }
    let (f, _) = pcap(true, false, 1);
    // Not a byte: an empty capture (a file whose header never landed), no
    // frame, no damage; still no header (repair removes it).
    let w = Walker::new(Cursor::new(&f[..0]));
    let s = w.stop().unwrap();
    assert!(matches!(s.end, End::Clean) && s.error(Path::new("f"), 0).is_none());
    assert!(!w.header_complete() && !s.header_complete);
    for cut in [3, 10, 23] {
        let w = Walker::new(Cursor::new(&f[..cut]));
        assert!(!w.header_complete());
        let e = w.stop().unwrap().error(Path::new("f"), cut as u64).unwrap();
        assert!(
            e.to_string().contains("`wiretape repair` removes it"),
            "{e}"
        );
    }
    assert!(Walker::new(Cursor::new(&f[..24])).header_complete());
    // pcapng: a section header without an interface is no header
    // (libpcap refuses such a file).
    let mut ng = Vec::new();
    shb(&mut ng, false);
    let shb_len = ng.len();
    idb(&mut ng, false, 65535, 9);
    for cut in [shb_len, shb_len + 8, ng.len() - 1] {
        assert!(!Walker::new(Cursor::new(&ng[..cut])).header_complete());
    }
    assert!(Walker::new(Cursor::new(&ng)).header_complete());
}

#[test]
fn a_stop_says_where_and_how() {
    let (f, offs) = pcap(true, false, 3);
    let cut = &f[..offs[2] + 5];
    let mut w = Walker::new(Cursor::new(cut));
    assert_eq!(std::iter::from_fn(|| w.next()).count(), 2);
    let s = w.stop().unwrap();
    assert_eq!(s.offset, offs[2] as u64);
    assert!(matches!(
        s.end,
        End::Torn {
            what: "record header",
            ..
        }
    ));
    let mut z = f.clone();
    z.resize(f.len() + 100, 0);
    let mut w = Walker::new(Cursor::new(&z));
    assert_eq!(std::iter::from_fn(|| w.next()).count(), 3);
    assert!(matches!(w.stop().unwrap().end, End::Zeros(_)));
    let mut bad = f.clone();
    bad[offs[1] + 8] = 0xff;
    bad[offs[1] + 11] = 0xff;
    let mut w = Walker::new(Cursor::new(&bad));
    assert_eq!(std::iter::from_fn(|| w.next()).count(), 1);
    let s = w.stop().unwrap();
    assert_eq!(s.offset, offs[1] as u64);
    assert!(matches!(s.end, End::Corrupt(Why::RecordHeader { .. })));
    let e = s
        .error(Path::new("f"), bad.len() as u64)
        .unwrap()
        .to_string();
    let at = format!("corrupt record at byte {}: caplen", offs[1]);
    assert!(e.contains(&at), "{e}");
}
