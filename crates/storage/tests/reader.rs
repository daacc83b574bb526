//! The pcap reader (`wiretape_files::reader`) reads back what the writer
//! wrote: here, beside the writer.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::path::PathBuf;
use wiretape_files::reader::*;
use wiretape_files::StorageError;
use wiretape_storage::{FileSink, PcapWriter};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wt-storage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn write_then_read_back_with_snaplen() {
    let d = tmpdir("rt");
    let p = d.join("a.pcap");
    // 4 KiB blocks so that many blocks are written.
    let mut w = PcapWriter::with_options(FileSink::with_block_size(&p, 4096).unwrap(), 200, true);
    for i in 0..1000u64 {
        let len = 60 + (i as usize * 37) % 1400;
        let frame: Vec<u8> = (0..len).map(|j| (i as usize + j) as u8).collect();
        w.write(1_700_000_000_000_000_000 + i * 1000, &frame)
            .unwrap();
    }
    let st = w.close().unwrap();
    assert_eq!(st.frames, 1000);
    let mut r = PcapReader::open(&p).unwrap();
    assert!(r.header().nanos);
    assert_eq!(r.header().snaplen, 200);
    let mut rec = Record::default();
    let mut i = 0u64;
    while r.next_into(&mut rec).unwrap() {
        let len = 60 + (i as usize * 37) % 1400;
        assert_eq!(rec.orig_len as usize, len);
        assert_eq!(rec.data.len(), len.min(200));
        assert!(rec
            .data
            .iter()
            .enumerate()
            .all(|(j, &b)| b == (i as usize + j) as u8));
        assert_eq!(rec.ts_ns, 1_700_000_000_000_000_000 + i * 1000);
        i += 1;
    }
    assert_eq!(i, 1000);
    let info = FileInfo::scan(&p).unwrap();
    assert_eq!(info.packets, 1000);
    assert_eq!(info.captured_bytes, st.bytes);
    assert_eq!(info.out_of_order, 0);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn truncated_and_corrupt_files_are_errors() {
    let d = tmpdir("bad");
    let p = d.join("a.pcap");
    let mut w = PcapWriter::new(FileSink::create(&p).unwrap(), 65535);
    for i in 0..10u64 {
        w.write(i, &[7u8; 100]).unwrap();
    }
    w.close().unwrap();
    let full = std::fs::read(&p).unwrap();
    assert_eq!(full.len(), 24 + 10 * 116);
    // torn tail: half a record
    std::fs::write(&p, &full[..full.len() - 50]).unwrap();
    match FileInfo::scan(&p) {
        Err(StorageError::Truncated { good_end, .. }) => assert_eq!(good_end, 24 + 9 * 116),
        other => panic!("expected Truncated, got {other:?}"),
    }
    // garbage record header
    let mut bad = full.clone();
    bad[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&p, &bad).unwrap();
    assert!(matches!(
        FileInfo::scan(&p),
        Err(StorageError::Corrupt { offset: 24, .. })
    ));
    // not a pcap
    std::fs::write(&p, b"hello, this is not a capture file").unwrap();
    assert!(matches!(
        FileInfo::scan(&p),
        Err(StorageError::BadMagic { .. })
    ));
    // Shorter than a header: not a capture says so (its first bytes),
    // a pcap header cut short is truncated.
    std::fs::write(&p, b"short").unwrap();
    assert!(matches!(
        FileInfo::scan(&p),
        Err(StorageError::BadMagic { .. })
    ));
    std::fs::write(&p, &full[..10]).unwrap();
    assert!(matches!(
        FileInfo::scan(&p),
        Err(StorageError::Truncated { .. })
    ));
    std::fs::remove_dir_all(d).unwrap();
}
