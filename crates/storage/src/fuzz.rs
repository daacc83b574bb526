//! The bodies of the `cargo fuzz` targets (`fuzz/fuzz_targets/*.rs`), as
//! plain functions of the input bytes so that the stable test suite runs
//! them too (`tests/fuzz_seeds.rs`: every target's body over the seed
//! corpus `fuzz/seed.sh` makes). Each returns only if its reader answered
//! (Ok or an error) and what it answered holds together; a broken property
//! panics (what libFuzzer reports as a crash). Hangs are libFuzzer's
//! `-timeout`, single allocations beyond a record's size bound its
//! `-malloc_limit_mb` and the targets' counting allocator.
//!
//! The bodies that need a file (info, repair, the decompressing reader)
//! write the input to a scratch file of their own in the temporary
//! directory (one per process and body, reused).

use crate::repair;
use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};
use wiretape_files::index;
use wiretape_files::walk::{End, Walker};
use wiretape_files::zread;
use wiretape_files::{FileInfo, PcapReader, Record};

/// The largest allocation a reader may make for one record whatever the
/// input: a pcap record of the largest caplen libpcap takes for most link
/// types (256 KiB), a pcapng block up to that much; bigger records (link
/// types with bigger limits, bigger blocks) only as their bytes arrive.
/// The targets' counting allocator checks every allocation against this
/// plus the input's length.
pub const RECORD_ALLOC_BOUND: usize = 256 << 10;

/// Bytes of decompressed stream the decompressing body reads at most (a
/// compressed input may stand for much more).
pub const ZREAD_LIMIT: u64 = 64 << 20;

fn scratch(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wiretape-fuzz-{}-{what}", std::process::id()))
}

fn put(what: &str, data: &[u8]) -> PathBuf {
    let p = scratch(what);
    let _ = std::fs::remove_file(index::path_for(&p));
    std::fs::write(&p, data).expect("write the fuzz scratch file");
    p
}

/// The walker over `data` (pcap µs/ns either byte order, pcapng): every
/// record's bytes are as long as it says, within the file, offsets rise;
/// its stop reads as an error for the strict reader. Then the strict
/// reader ([`PcapReader`]) over the same bytes agrees on the records.
pub fn walk(data: &[u8]) {
    let mut w = Walker::new(Cursor::new(data));
    let mut d = Vec::new();
    let mut n = 0u64;
    let mut last = 0u64;
    while let Some(m) = w.next_into(&mut d) {
        assert_eq!(d.len(), m.caplen as usize, "record at {}", m.offset);
        assert!(m.offset >= last, "offsets rise");
        assert!(
            m.offset + m.file_len <= data.len() as u64,
            "within the input"
        );
        last = m.offset;
        n += 1;
    }
    let stop = w.stop().expect("a walk that ended says how");
    let clean = matches!(stop.end, End::Clean);
    let err = stop.error(Path::new("fuzz"), data.len() as u64);
    assert_eq!(err.is_none(), clean);
    if let Some(e) = err {
        let _ = e.to_string();
    }
    // The strict reader: the same records, an error exactly when unclean.
    let mut r = match PcapReader::new(Cursor::new(data), Path::new("fuzz"), data.len() as u64) {
        Ok(r) => r,
        Err(_) => {
            assert_eq!(n, 0, "a header the reader refuses yields no record");
            return;
        }
    };
    let mut rec = Record::default();
    let mut m = 0u64;
    let ok = loop {
        match r.next_into(&mut rec) {
            Ok(true) => m += 1,
            Ok(false) => break true,
            Err(_) => break false,
        }
    };
    assert_eq!(m, n, "reader and walker agree on the records");
    assert_eq!(
        ok, clean,
        "the reader errs exactly where the walk is unclean"
    );
    // Seeking to where a record started goes on from there.
    if n > 1 {
        let mut w = Walker::new(Cursor::new(data));
        let first = w.next().expect("a first record");
        let second = w.next().expect("a second record");
        let mut w2 = Walker::new(Cursor::new(data));
        w2.seek_to(second.offset);
        let again = w2.next();
        assert!(first.offset < second.offset);
        if let Some(a) = again {
            assert_eq!(a.offset, second.offset);
        }
    }
}

/// `wiretape info` ([`FileInfo::scan_to_damage`], [`FileInfo::scan`]) on
/// the input as a file: they agree, and the packets are the walker's.
pub fn info(data: &[u8]) {
    let p = put("info", data);
    let (i, damage) = FileInfo::scan_to_damage(&p);
    let strict = FileInfo::scan(&p);
    assert_eq!(strict.is_ok(), damage.is_none());
    if let Some(e) = &damage {
        let _ = e.to_string();
    }
    if let Ok(s) = strict {
        assert_eq!(s.packets, i.packets);
        assert!(s.records_odd <= s.packets);
    }
    assert!(
        i.captured_bytes <= data.len() as u64 * 64,
        "bytes come from the input"
    );
}

/// `wiretape repair` on a copy of the input: Ok means the file then reads
/// to its end as the reader reads it, with the records repair said it
/// kept, and nothing libpcap reads was cut (the records before the cut
/// are all there), or it was removed, having no complete header and no
/// record; an error leaves the file as it was.
pub fn repair(data: &[u8]) {
    let p = put("repair", data);
    let before = FileInfo::scan_to_damage(&p).0.packets;
    let compressed = zread::kind(&p).ok().flatten().is_some();
    match repair::repair(&p) {
        Ok(r) if r.removed => {
            assert!(!p.exists(), "removed, yet there");
            assert_eq!((before, r.records), (0, 0), "a file with records removed");
            let w = Walker::new(Cursor::new(data));
            assert!(
                compressed || !w.header_complete(),
                "a plain file with a whole header removed"
            );
        }
        Ok(r) => {
            let after = std::fs::read(&p).expect("read the repaired file");
            assert_eq!(after.len() as u64, r.len_after);
            let info = FileInfo::scan(&p);
            let info = match info {
                Ok(i) => i,
                Err(e) => panic!("repair said Ok ({r:?}) but the file reads: {e}"),
            };
            assert_eq!(info.packets, r.records, "{r:?}");
            assert!(
                info.packets >= before,
                "repair never cuts a frame the reader reads"
            );
            if !r.changed() && info.compression.is_none() {
                assert_eq!(after, data, "a sound file is left alone");
            }
        }
        Err(e) => {
            let _ = e.to_string();
            // A plain file is refused untouched; a compressed one may have
            // lost a torn last unit before damage further in was found.
            let after = std::fs::read(&p).expect("read the file");
            if !compressed {
                assert_eq!(after, data, "a refused repair changes nothing");
            }
        }
    }
}

/// The `.idx` reader ([`index::parse`]) on the input: Ok or an error;
/// entries it gives answer [`index::Entry::may_match`] without panicking.
pub fn index(data: &[u8]) {
    match index::parse(Path::new("fuzz.idx"), data) {
        Ok((entries, _version)) => {
            assert!(entries.len() <= data.len());
            let needs = wiretape_filter::compile("tcp port 80 or udp", 1, 65535)
                .ok()
                .and_then(|p| wiretape_filter::flow::Needs::of(p.insns()));
            for e in &entries {
                if let Some(n) = &needs {
                    let _ = e.may_match(n);
                }
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// The key index reader ([`wiretape_files::keys::KeyIndex`]): the input as the
/// `.kdx` of a capture; every segment it takes is asked for a few filters'
/// places, its block entries and all its keys: Ok or an error, never a
/// panic, and no allocation beyond the file's size.
pub fn keys(data: &[u8]) {
    let p = put("keys", b"");
    let kdx = wiretape_files::keys::path_for(&p);
    std::fs::write(&kdx, data).expect("write the input");
    let needs: Vec<_> = [
        "host 10.0.0.1",
        "tcp port 80 or udp",
        "vlan 7 and host 10.0.0.2 and port 53",
    ]
    .iter()
    .filter_map(|e| wiretape_filter::compile(e, 1, 65535).ok())
    .filter_map(|p| wiretape_filter::flow::Needs::of(p.insns()))
    .collect();
    let Ok(Some(k)) = wiretape_files::keys::KeyIndex::open(&p, &Default::default()) else {
        return;
    };
    let _ = k.complete_for(data.len() as u64);
    for seg in k.segments() {
        assert!(seg.header.seg_len as usize <= data.len());
        for n in &needs {
            if let Ok(hits) = k.select(seg, n) {
                assert!(hits
                    .iter()
                    .all(|h| seg.blocks().contains(&h.block) || h.block >= seg.header.block0));
            }
        }
        let n = seg.header.nblocks;
        if let Ok(es) = k.entries(seg, 0..n.min(4096)) {
            assert_eq!(es.len() as u64, n.min(4096));
        }
        let _ = k.entries_at(seg, &[0, n / 2, n.saturating_sub(1)]);
        let _ = k.flow_sets(seg);
    }
    let _ = std::fs::remove_file(&kdx);
}

/// The decompressing reader ([`zread`](mod@zread)): the input as a file (plain or,
/// by its magic, LZ4 or zstd), read through [`zread::open_buffered`] up to
/// [`ZREAD_LIMIT`] bytes, then walked as a capture, then scanned as
/// `info` scans it.
pub fn zread(data: &[u8]) {
    let p = put("zread", data);
    if let Ok(s) = zread::open_buffered(&p, &Default::default()) {
        let mut sink = Vec::new();
        let _ = s.take(ZREAD_LIMIT).read_to_end(&mut sink);
    }
    if let Ok(s) = zread::open_buffered(&p, &Default::default()) {
        let mut w = Walker::new(s);
        let mut d = Vec::new();
        let mut n = 0u64;
        while w.next_into(&mut d).is_some() && n < 1 << 20 {
            n += 1;
        }
        if let Some(z) = w.get_ref().z() {
            let _ = z.end();
        }
    }
    let (_info, _damage) = FileInfo::scan_to_damage(&p);
    let _ = std::fs::remove_file(&p);
}
