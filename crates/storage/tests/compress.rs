//! Compressed captures (`--compress lz4|zstd`): every frame back, equal and
//! in order, through every reader of this crate (the strict reader, `info`'s
//! scan, the index and its rebuild, seeks by the index, repair after a cut),
//! for lz4 and zstd, pcap ns/µs and pcapng; and the standard tools (`lz4
//! -t`, `zstd -t`, `zstdcat | tcpdump -r -`, `capinfos`) accept the files.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape_files::compress::Compress;
use wiretape_files::index;
use wiretape_files::walk::Walker;
use wiretape_files::zread::ZReader;
use wiretape_files::{FileInfo, Format, PcapReader, Record};
use wiretape_storage::compress::Pool;
use wiretape_storage::{AnySink, FileSink, PcapWriter};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wt-compress-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Frame `i`: an Ethernet header (a local EtherType), then half of the
/// frames text-like (compressible), half random.
fn frame(i: u64) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5];
    f.extend(payload(i));
    f
}

fn payload(i: u64) -> Vec<u8> {
    let len = 46 + (i as usize * 131) % 1400;
    if i.is_multiple_of(2) {
        let line = format!("GET /index-{i}.html HTTP/1.1\r\nHost: example.org\r\n\r\n");
        line.bytes().cycle().take(len).collect()
    } else {
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

const N: u64 = 3000;
const T0: u64 = 1_763_806_210_000_000_000;

fn ts(i: u64) -> u64 {
    T0 + i * 1_000_003
}

/// A writer of `path` compressed as `c` (blocks of 64 KiB), without index.
fn writer(
    path: &Path,
    c: Compress,
    fmt: Format,
    pool: &std::sync::Arc<Pool>,
) -> PcapWriter<AnySink> {
    let sink = AnySink::Buffered(FileSink::with_block_size(path, 64 << 10).unwrap())
        .compressed(c, Some(pool))
        .unwrap();
    PcapWriter::with_format(sink, 65535, fmt, "eth9").compressed(true)
}

/// Writes N frames compressed as `c` into `path` (blocks of 64 KiB, a flush
/// every 500 frames), with an index; returns the file's frames as written.
fn write(path: &Path, c: Compress, fmt: Format, pool: &std::sync::Arc<Pool>) -> u64 {
    let mut w = writer(path, c, fmt, pool).with_index(path);
    for i in 0..N {
        w.write(ts(i), &frame(i)).unwrap();
        if i % 500 == 499 {
            w.flush().unwrap();
        }
    }
    assert!(w.index_error().is_none(), "{:?}", w.index_error());
    w.close().unwrap().frames
}

fn unit(fmt: Format) -> u64 {
    if fmt == Format::PcapUs {
        1000
    } else {
        1
    }
}

fn check_all_frames(path: &Path, fmt: Format) {
    let mut r = PcapReader::open(path).unwrap();
    let mut rec = Record::default();
    let mut i = 0;
    while r.next_into(&mut rec).unwrap() {
        assert_eq!(rec.data, frame(i), "frame {i} of {}", path.display());
        assert_eq!(rec.ts_ns, ts(i) - ts(i) % unit(fmt));
        i += 1;
    }
    assert_eq!(i, N, "{}", path.display());
}

fn cases() -> Vec<(Compress, Format)> {
    let mut v = Vec::new();
    for c in [Compress::Lz4, Compress::Zstd(3), Compress::Zstd(1)] {
        for f in [Format::PcapNs, Format::PcapUs, Format::PcapNg] {
            v.push((c, f));
        }
    }
    v
}

fn name(c: Compress, f: Format) -> String {
    format!(
        "t-{}{}-{f:?}.{}{}",
        c.algorithm(),
        c.level(),
        f.extension(),
        c.suffix()
    )
}

#[test]
fn every_frame_back_through_every_reader() {
    let d = tmpdir("rt");
    let pool = Pool::new(2).unwrap();
    for (c, fmt) in cases() {
        let p = d.join(name(c, fmt));
        assert_eq!(write(&p, c, fmt, &pool), N);
        let plain_len: u64 = fmt.file_header(65535, "eth9", 1).len() as u64
            + (0..N)
                .map(|i| fmt.record_len(frame(i).len()) as u64)
                .sum::<u64>();
        let disk = std::fs::metadata(&p).unwrap().len();
        assert!(
            disk < plain_len * 3 / 4,
            "{}: {disk} of {plain_len}",
            p.display()
        );
        // The strict reader and info's scan.
        check_all_frames(&p, fmt);
        let info = FileInfo::scan(&p).unwrap();
        assert_eq!(info.packets, N);
        assert_eq!(info.compression, Some(c.algorithm()));
        // The index: one entry per compressed unit, each where it says.
        let idx = index::read(&index::path_for(&p)).unwrap();
        assert_eq!(index::version(&index::path_for(&p)).unwrap(), 3);
        assert_eq!(idx.iter().map(|e| e.count).sum::<u64>(), N);
        assert!(idx.len() > 10 && idx.iter().all(|e| e.z.is_some()));
        // Seeking by the index decompresses one unit, and the record there
        // is the entry's first.
        let mut first_frame = 0u64;
        for e in &idx {
            let z = ZReader::open(&p, &Default::default()).unwrap().unwrap();
            let mut w = Walker::new(z);
            w.seek_to(e.offset);
            let mut data = Vec::new();
            let m = w.next_into(&mut data).unwrap();
            assert_eq!(m.ts_ns, e.first_ns);
            assert_eq!(data, frame(first_frame));
            // The unit with the file header, and the entry's.
            assert!(w.get_ref().blocks_decompressed() <= 2, "{}", p.display());
            first_frame += e.count;
        }
        // The rebuilt index says the same.
        let k = wiretape_storage::index::rebuild(&p, 1 << 20).unwrap();
        let again = index::read(&index::path_for(&p)).unwrap();
        assert_eq!(k as usize, again.len());
        let strip = |v: &[index::Entry]| {
            v.iter()
                .map(|e| {
                    (
                        e.offset,
                        e.first_ns,
                        e.last_ns,
                        e.count,
                        e.z.map(|z| (z.c_off, z.c_len, z.u_start)),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&again), strip(&idx), "{}", p.display());
        // The standard tools.
        let tool = match c {
            Compress::Lz4 => "lz4",
            _ => "zstd",
        };
        let t = Command::new(tool).arg("-t").arg(&p).output().unwrap();
        assert!(
            t.status.success(),
            "{tool} -t {}: {}",
            p.display(),
            String::from_utf8_lossy(&t.stderr)
        );
        let out = Command::new(tool).arg("-dc").arg(&p).output().unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len() as u64, plain_len);
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_seek_back_and_forth_reads_the_same_bytes() {
    let d = tmpdir("seek");
    let pool = Pool::new(1).unwrap();
    for c in [Compress::Lz4, Compress::Zstd(3)] {
        let p = d.join(name(c, Format::PcapNs));
        write(&p, c, Format::PcapNs, &pool);
        let mut plain = Vec::new();
        ZReader::open(&p, &Default::default())
            .unwrap()
            .unwrap()
            .read_to_end(&mut plain)
            .unwrap();
        let mut z = ZReader::open(&p, &Default::default()).unwrap().unwrap();
        for at in [plain.len() as u64 - 10, 5, 700_000, 24, 300_001, 0] {
            z.seek(SeekFrom::Start(at)).unwrap();
            let mut b = [0u8; 10];
            z.read_exact(&mut b).unwrap();
            assert_eq!(&b[..], &plain[at as usize..at as usize + 10], "at {at}");
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn repair_closes_a_cut_file_with_every_whole_block() {
    let d = tmpdir("repair");
    let pool = Pool::new(2).unwrap();
    for c in [Compress::Lz4, Compress::Zstd(3)] {
        for fmt in [Format::PcapNs, Format::PcapNg] {
            let p = d.join(name(c, fmt));
            write(&p, c, fmt, &pool);
            let full = std::fs::read(&p).unwrap();
            let idx = index::read(&index::path_for(&p)).unwrap();
            // Cut inside the 8th unit: the first 7 units' frames stay.
            let e = &idx[7];
            let z = e.z.unwrap();
            let cut = z.c_off + z.c_len / 2;
            let cut_file = d.join(format!("cut-{}", name(c, fmt)));
            std::fs::write(&cut_file, &full[..cut as usize]).unwrap();
            // Not accepted as whole before the repair.
            assert!(FileInfo::scan(&cut_file).is_err(), "{}", cut_file.display());
            let r = wiretape_storage::repair::repair(&cut_file).unwrap();
            let kept: u64 = idx[..7].iter().map(|e| e.count).sum();
            assert_eq!(r.records, kept, "{}", cut_file.display());
            assert_eq!(FileInfo::scan(&cut_file).unwrap().packets, kept);
            let mut rd = PcapReader::open(&cut_file).unwrap();
            let mut rec = Record::default();
            let mut i = 0;
            while rd.next_into(&mut rec).unwrap() {
                assert_eq!(rec.data, frame(i));
                i += 1;
            }
            assert_eq!(i, kept);
            let tool = if c == Compress::Lz4 { "lz4" } else { "zstd" };
            let t = Command::new(tool)
                .arg("-t")
                .arg(&cut_file)
                .output()
                .unwrap();
            assert!(
                t.status.success(),
                "{tool} -t after repair: {}",
                String::from_utf8_lossy(&t.stderr)
            );
            // Zero padding after the last whole unit (an interrupted aligned
            // write) is cut too.
            let mut padded = full[..z.c_off as usize].to_vec();
            padded.extend_from_slice(&[0u8; 4096]);
            std::fs::write(&cut_file, &padded).unwrap();
            let r = wiretape_storage::repair::repair(&cut_file).unwrap();
            assert_eq!(r.records, kept);
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn tcpdump_and_capinfos_read_them() {
    let d = tmpdir("tools");
    let pool = Pool::new(2).unwrap();
    for (c, fmt) in [
        (Compress::Zstd(3), Format::PcapNs),
        (Compress::Zstd(3), Format::PcapNg),
        (Compress::Lz4, Format::PcapNs),
        (Compress::Lz4, Format::PcapNg),
    ] {
        let p = d.join(name(c, fmt));
        write(&p, c, fmt, &pool);
        // zstdcat F | tcpdump -r -: every frame.
        let sh = format!(
            "{} {} | tcpdump -tt -nn -r - 2>/dev/null | grep -c '^[0-9]'",
            if c == Compress::Lz4 {
                "lz4 -dc"
            } else {
                "zstdcat"
            },
            p.display()
        );
        let out = Command::new("sh").arg("-c").arg(&sh).output().unwrap();
        let n: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(n, N, "{sh}");
        if c == Compress::Lz4 {
            // Wireshark's own reader opens the LZ4 frame directly.
            let out = Command::new("capinfos")
                .args(["-M", "-c"])
                .arg(&p)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(&format!("{N}")),
                "capinfos {}: {text}",
                p.display()
            );
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// A compressed file cut inside its first unit (what a crash right after
/// the file was created leaves) holds no frame: repair removes it and its
/// index. Cut after the first unit, it is closed there as before.
#[test]
fn repair_removes_a_compressed_file_without_one_whole_unit() {
    let d = tmpdir("headerless");
    let pool = Pool::new(2).unwrap();
    for c in [Compress::Lz4, Compress::Zstd(3)] {
        for fmt in [Format::PcapNs, Format::PcapNg] {
            let p = d.join(name(c, fmt));
            write(&p, c, fmt, &pool);
            let full = std::fs::read(&p).unwrap();
            let idx = index::read(&index::path_for(&p)).unwrap();
            let first = idx[0].z.unwrap();
            let end = (first.c_off + first.c_len) as usize;
            let cut_file = d.join(format!("cut-{}", name(c, fmt)));
            for cut in [4, 5, 7, 8, 12, end / 2, end - 1] {
                std::fs::write(&cut_file, &full[..cut]).unwrap();
                std::fs::write(index::path_for(&cut_file), b"WTIDX").unwrap();
                let e = FileInfo::scan(&cut_file).unwrap_err().to_string();
                assert!(e.contains("removes it"), "{cut}: {e}");
                let r = wiretape_storage::repair::repair(&cut_file).unwrap();
                assert!(r.removed, "{} cut at {cut}: {r:?}", name(c, fmt));
                assert!(!cut_file.exists() && !index::path_for(&cut_file).exists());
            }
            std::fs::write(&cut_file, &full[..end + 1]).unwrap();
            let r = wiretape_storage::repair::repair(&cut_file).unwrap();
            assert!(!r.removed && r.records == idx[0].count, "{r:?}");
            std::fs::remove_file(&cut_file).unwrap();
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// An all-zero record header between records (an empty record, as
/// libpcap reads it) inside lz4 and zstd files: the readers share the
/// walker, and read what tcpdump reads through the decompressor.
#[test]
fn an_empty_record_inside_a_compressed_file_reads_as_libpcap_reads_it() {
    let d = tmpdir("empty-record");
    let pool = Pool::new(2).unwrap();
    for c in [Compress::Lz4, Compress::Zstd(3)] {
        for fmt in [Format::PcapNs, Format::PcapUs] {
            let p = d.join(name(c, fmt));
            let mut w = writer(&p, c, fmt, &pool);
            for i in 0..2 {
                w.write(ts(i), &frame(i)).unwrap();
            }
            // Stamp 0, no bytes: a header of 16 zero bytes.
            w.write(0, &[]).unwrap();
            for i in 2..9 {
                w.write(ts(i), &frame(i)).unwrap();
            }
            w.close().unwrap();
            let mut r = PcapReader::open(&p).unwrap();
            let mut rec = Record::default();
            let mut lens = Vec::new();
            while r.next_into(&mut rec).unwrap() {
                lens.push(rec.data.len());
            }
            assert_eq!(lens.len(), 10, "{}", p.display());
            assert_eq!(lens[2], 0);
            assert_eq!(FileInfo::scan(&p).unwrap().packets, 10);
            let tool = if c == Compress::Lz4 {
                "lz4 -dc"
            } else {
                "zstdcat"
            };
            let o = Command::new("sh")
                .arg("-c")
                .arg(format!("{tool} '{}' | tcpdump --count -r -", p.display()))
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let out = String::from_utf8_lossy(&o.stdout);
            assert_eq!(out.trim(), "10 packets", "tcpdump through {tool}");
        }
    }
    std::fs::remove_dir_all(d).unwrap();
}
