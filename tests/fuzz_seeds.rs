//! The fuzz targets' bodies (`wiretape_storage::fuzz`, run by `cargo
//! +nightly fuzz run TARGET` in `fuzz/`) on stable, over the seed corpus
//! `fuzz/seed.sh` makes and over the inputs the fuzzer found crashing
//! (each fixed; kept here as regressions), with the targets' own counting
//! allocator: no panic, no broken property, no single allocation beyond a
//! record's size bound. One test: the allocator's count is global.

#[path = "../fuzz/src/lib.rs"]
mod bound;

use std::path::Path;
use std::process::Command;

#[global_allocator]
static A: bound::Counting = bound::Counting;

type Body = fn(&[u8]);

const BODIES: &[(&str, Body)] = &[
    ("walk", wiretape_storage::fuzz::walk),
    ("info", wiretape_storage::fuzz::info),
    ("repair", wiretape_storage::fuzz::repair),
    ("zread", wiretape_storage::fuzz::zread),
    ("index", wiretape_storage::fuzz::index),
    ("keys", wiretape_storage::fuzz::keys),
];

/// Inputs that broke a property (target, bytes), each fixed since: found
/// while bounding the allocations, or by the fuzzer (benches/results/fuzz-2026-11-24.md).
fn regressions() -> Vec<(&'static str, Vec<u8>)> {
    let mut v: Vec<(&'static str, Vec<u8>)> = Vec::new();
    // A pcap header of link type D-Bus (231, caplen up to 128 MiB) and one
    // record header claiming 100 MB, then 4 bytes: the walker made room
    // for the claim before reading (one 100 MB allocation).
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&(128u32 << 20).to_le_bytes());
    b.extend_from_slice(&231u32.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&100_000_000u32.to_le_bytes());
    b.extend_from_slice(&100_000_000u32.to_le_bytes());
    b.extend_from_slice(&[1, 2, 3, 4]);
    v.push(("walk", b));
    // A pcapng block claiming 16 MiB in a few bytes (same, pcapng).
    let mut b = Vec::new();
    b.extend_from_slice(&0x0a0d_0d0au32.to_le_bytes());
    b.extend_from_slice(&28u32.to_le_bytes());
    b.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    b.extend_from_slice(&[1, 0, 0, 0]);
    b.extend_from_slice(&(-1i64).to_le_bytes());
    b.extend_from_slice(&28u32.to_le_bytes());
    b.extend_from_slice(&6u32.to_le_bytes());
    b.extend_from_slice(&(1u32 << 24).to_le_bytes());
    b.extend_from_slice(&[0; 16]);
    v.push(("walk", b));
    // wiretape's LZ4 frame with a 10-byte block: the decoder made room
    // for a whole 4 MB unit behind it.
    let mut b = wiretape_files::compress::lz4_frame_header().to_vec();
    b.extend_from_slice(&10u32.to_le_bytes());
    b.extend_from_slice(&[0x1f; 10]);
    v.push(("zread", b));
    // A zstd frame stating 1,000,000,000 bytes of content in one 16-byte
    // RLE block: the decoder reserved the stated size before decoding.
    let mut b = 0xfd2f_b528u32.to_le_bytes().to_vec();
    b.push(0xa0); // single segment, 4-byte content size
    b.extend_from_slice(&1_000_000_000u32.to_le_bytes());
    b.extend_from_slice(&[0x83, 0, 0, 7]); // last, RLE, 16 bytes of 7
    v.push(("zread", b));
    // cargo fuzz (walk): a pcapng file whose first packet block (an SPB)
    // comes before its first interface; seek_to the second record handed
    // out the first again (the header had read it ahead).
    v.push(("walk", hex(WALK_SEEK_PENDING)));
    // cargo fuzz (repair): a zstd capture whose first frame is torn: the
    // cut left no bytes, and reopening it panicked ("still compressed").
    v.push(("repair", hex(REPAIR_ZSTD_FIRST_TORN)));
    // cargo fuzz (repair): a pcapng file whose section header is cut
    // short: repair said Ok and cut it to 0 bytes (no capture left).
    v.push(("repair", hex(REPAIR_TORN_SHB)));
    v
}

/// fuzz/artifacts/repair/crash-04e5293b97eeb26f1672621bec79032d864c69fb
const REPAIR_TORN_SHB: &[&str] = &[
    "0a0d0d0a6c0000004d3c2b1a01000000ffffffffffffffff0400450045646974",
    "636170202857694d72",
];

/// fuzz/artifacts/repair/crash-800c3f6de855b0c727bc55e99c275e36d38d894a
const REPAIR_ZSTD_FIRST_TORN: &[&str] = &[
    "28b52ffd6479029d0a00c28f34354073d218d38fdfa3d08509d99f2d862735bc",
    "36f52b288b85867330cf0d2afd25dde850d9e4d4fd80e32f0ee1219e23d926e7",
    "fa9de32edb211d3c680e54c8569c688b03d0317dec21c9e129be9eaec46f6d72",
    "eaeff78a9468a740a8b158444522cb42b11ac00294d1791220331a8a222a8134",
    "c608ce04af5dbf03f0898fe1391b7f01ba4b9284fb98fe5ada0041d36826ff54",
    "431e3d892b328db496aaea4ca1058a28151807093df30c727d45298ef7c53376",
    "298e7cc08611ebd3607604e926231b9780d64a8ce252d14088a2a2643a2f81fb",
    "7b411e2a0a1b87c146",
];

/// fuzz/artifacts/walk/crash-6619f346280d4b024a403395a94e1c2a03fc77db
const WALK_SEEK_PENDING: &[&str] = &[
    "0a0d0d0a1c0000004d3c2b1a01000000ffffffffffffffff1c00000003000000",
    "200000000100000000000000090001000900ffffff0500002000000003000000",
    "2000000001000000000000000900010010000000000000002000000006000000",
    "6000000000000000fe9c971700002a373e0000003e00a4040200000000010404",
    "08040f0404010442403000000000400600000a0000010a00010903e801bb0000",
    "0000000000005002040000000000000000000000000000006000000001000a00",
];

fn hex(lines: &[&str]) -> Vec<u8> {
    let s: String = lines.concat();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_fuzz_body_over_the_seed_corpus_and_the_regressions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("wt-fuzz-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(root.join("fuzz/seed.sh"))
        .arg(&out)
        .output()
        .expect("run fuzz/seed.sh");
    assert!(
        o.status.success(),
        "fuzz/seed.sh: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut ran = 0;
    for (name, body) in BODIES {
        let dir = out.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: seeds");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| bound::bounded(&data, *body));
            assert!(r.is_ok(), "{name} on {}", f.display());
            ran += 1;
        }
    }
    for (name, data) in regressions() {
        let body = BODIES.iter().find(|b| b.0 == name).unwrap().1;
        for (_, b) in BODIES {
            let r = std::panic::catch_unwind(|| bound::bounded(&data, *b));
            assert!(r.is_ok(), "regression of {name} ({} bytes)", data.len());
        }
        bound::bounded(&data, body);
        ran += 1;
    }
    assert!(ran > 100, "{ran} runs");
    let _ = std::fs::remove_dir_all(&out);
}
