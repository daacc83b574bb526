//! `record --encrypt-to` end to end: frames sent through a veth pair and
//! recorded by the real engine into age files come back whole through the
//! real `age` tool (Debian's, the Go implementation) and tcpdump, and
//! through `wiretape extract --identity` with either recipient's key;
//! nothing in the files or their sidecars holds an address or a payload in
//! clear; a narrow window decrypts a few chunks; a wrong or missing
//! identity and a bad recipient are refused in one line with nothing made;
//! a recorder killed with SIGKILL leaves files `repair` closes with every
//! whole record of the chunks that went out.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use wiretape_testbed::{SizeFn, Testbed};

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Encrypted capture files in `dir`, sorted.
fn age_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_str().unwrap().ends_with(".age"))
        .collect();
    v.sort();
    v
}

/// Frames and bytes (caplen) `age -d -i KEY F [| decompress] | tcpdump -r -`
/// reads.
fn age_tcpdump(f: &Path, key: &Path) -> (u64, u64) {
    let unz = match f.to_str().unwrap() {
        n if n.ends_with(".lz4.age") => "| lz4 -dc ",
        n if n.ends_with(".zst.age") => "| zstd -dc ",
        _ => "",
    };
    let out = sh(&format!(
        "age -d -i {} {} {unz}| tcpdump -r - -nn -q -e 2>/dev/null | sed -n 's/.*length \\([0-9]*\\):.*/\\1/p'",
        key.display(),
        f.display()
    ));
    let lens: Vec<u64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    (lens.len() as u64, lens.iter().sum())
}

/// Whether `needle` occurs in the file.
fn holds(f: &Path, needle: &[u8]) -> bool {
    let b = std::fs::read(f).unwrap();
    b.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn veth_recordings_encrypted_are_read_by_age_tcpdump_and_extract_and_hide_everything() {
    require_root();
    let tb = Testbed::create("age", 2).unwrap();
    let keys = TempDir::new("agek");
    let (k1, r1) = keygen(keys.path(), "k1");
    let (k2, r2) = keygen(keys.path(), "k2");
    let rfile = keys.path().join("recipients");
    std::fs::write(&rfile, format!("# the second analyst\n{r2}\n")).unwrap();
    for (alg, fmt, ext) in [
        ("none", "pcap", ".pcap.age"),
        ("lz4", "pcap", ".pcap.lz4.age"),
        ("zstd", "pcapng", ".pcapng.zst.age"),
    ] {
        let out = TempDir::new("age");
        let dir = out.path().join("cap");
        let n = 6000u64;
        let t0 = now_ns();
        let mut rec = Recorder::start(
            &tb,
            &[
                "-w",
                dir.to_str().unwrap(),
                "-c",
                &n.to_string(),
                "--format",
                fmt,
                "--compress",
                alg,
                "--encrypt-to",
                &r1,
                "--encrypt-to-file",
                rfile.to_str().unwrap(),
            ],
        );
        let sent = tb.send(0..n, SizeFn::Mixed, 16, Some(100_000)).unwrap();
        assert_eq!(sent.sent, n);
        assert!(rec.wait(30).success(), "{}", rec.stderr_text());
        let t1 = now_ns();
        let files = age_files(&dir);
        assert_eq!(files.len(), 2, "{alg}: one file per queue: {files:?}");
        assert!(files.iter().all(|f| f.to_str().unwrap().ends_with(ext)));
        // The real age tool, with either key: every frame, every byte.
        for k in [&k1, &k2] {
            let (frames, bytes) = files
                .iter()
                .map(|f| age_tcpdump(f, k))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
            assert_eq!(frames, n, "{alg}: frames age -d | tcpdump reads");
            assert_eq!(bytes, sent.bytes, "{alg}: bytes age -d | tcpdump reads");
        }
        // Our reader, byte for byte against what was sent.
        let opts = wiretape::files::ReadOptions::new()
            .with_identities(wiretape::files::crypt::read_identity_file(&k2).unwrap());
        let v = verify_files_with(&files, &opts, n, usize::MAX, t0, t1, true);
        assert_eq!(v.frames, n, "{alg}");
        assert_eq!(v.original_bytes, sent.bytes);
        // extract --identity (either key) gives the same frames tcpdump reads.
        for k in [&k1, &k2] {
            let x = out.path().join("x.pcap");
            let (code, o, e) = run_wiretape(
                None,
                &[
                    "extract",
                    "--identity",
                    k.to_str().unwrap(),
                    dir.to_str().unwrap(),
                    "-w",
                    x.to_str().unwrap(),
                    "--json",
                ],
            );
            assert_eq!(code, 0, "{e}");
            let j: Value = serde_json::from_str(o.trim()).unwrap();
            assert_eq!(j["frames"].as_u64(), Some(n), "{j}");
            assert!(j["chunks_decrypted"].as_u64().unwrap() > 0, "{j}");
            let t = sh(&format!("tcpdump -r {} 2>/dev/null | wc -l", x.display()));
            assert_eq!(t.trim().parse::<u64>().unwrap(), n);
            let all = read_all(&x);
            assert_eq!(
                all.iter().map(|r| r.data.len() as u64).sum::<u64>(),
                sent.bytes
            );
            std::fs::remove_file(&x).unwrap();
        }
        // `info` says what it is, and the index agrees.
        for f in &files {
            let (code, o, e) = run_wiretape(
                None,
                &[
                    "info",
                    "--json",
                    "--identity",
                    k1.to_str().unwrap(),
                    f.to_str().unwrap(),
                ],
            );
            assert_eq!(code, 0, "{e}");
            let i: Value = serde_json::from_str(o.trim()).unwrap();
            assert_eq!(i["encrypted"], true, "{i}");
            assert_eq!(i["index"]["agrees"], true, "{i}");
        }
        // Nothing in clear: no address, MAC or payload in the files or
        // beside them; no key index, no session table.
        let mut side = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.to_str().unwrap().to_owned();
            assert!(
                name.ends_with(".age") || name.ends_with(".age.idx"),
                "{alg}: only the files and their .idx: {name}"
            );
            side += usize::from(name.ends_with(".idx"));
            for (what, needle) in [
                ("the address pair", &[198u8, 18, 0, 1, 198, 18, 0, 2][..]),
                ("the source MAC", &[0x02, 0x77, 0x74, 0x00, 0x00, 0x01][..]),
                (
                    "the destination MAC",
                    &[0x02, 0x77, 0x74, 0x00, 0x00, 0x99][..],
                ),
                ("the payload's magic", &b"WTAP"[..]),
            ] {
                assert!(!holds(&p, needle), "{alg}: {what} in clear in {name}");
            }
        }
        assert_eq!(side, 2, "{alg}: an .idx beside each file");
        // The plain stream does hold them (the search can find them).
        let plain = out.path().join("plain.pcap");
        sh(&format!(
            "age -d -i {} {} > {}",
            k1.display(),
            files[0].display(),
            plain.display()
        ));
        assert!(alg != "none" || holds(&plain, &[198u8, 18, 0, 1, 198, 18, 0, 2]));
    }
}

#[test]
fn a_wrong_or_missing_identity_is_one_line_and_nothing_is_written() {
    let t = TempDir::new("agei");
    let (_, r1) = keygen(t.path(), "k1");
    let (k3, r3) = keygen(t.path(), "k3");
    let tr = t.path().join("trace.pcap");
    let frames: Vec<(u64, Vec<u8>)> = (0..3000u64)
        .map(|i| {
            (
                1_700_000_000_000_000_000 + i * 1_000_000,
                wiretape_testbed::frames::build(i, 200, 1),
            )
        })
        .collect();
    write_ns_pcap(&tr, &frames);
    let d = t.path().join("store");
    record_file(&tr, &d, &["--encrypt-to", &r1]);
    let f = &age_files(&d)[0];
    for (id, what) in [(Some(&k3), "wrong"), (None, "missing")] {
        let x = t.path().join("x.pcap");
        let mut a = vec!["extract", d.to_str().unwrap(), "-w", x.to_str().unwrap()];
        if let Some(k) = id {
            a.extend(["--identity", k.to_str().unwrap()]);
        }
        let (code, _, e) = run_wiretape(None, &a);
        assert_eq!(code, 1, "{what}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{what}: {e}");
        assert!(
            e.contains(f.to_str().unwrap()),
            "{what}: names the file: {e}"
        );
        assert!(e.contains("1 X25519 recipient"), "{what}: {e}");
        assert!(e.contains("--identity"), "{what}: the fix: {e}");
        if id.is_some() {
            assert!(e.contains(&r3), "{what}: the key that did not match: {e}");
        }
        assert!(!x.exists(), "{what}: nothing written");
        // info and timeline refuse it the same way.
        let mut a = vec!["info", f.to_str().unwrap()];
        if let Some(k) = id {
            a.extend(["--identity", k.to_str().unwrap()]);
        }
        let (code, _, e) = run_wiretape(None, &a);
        assert_ne!(code, 0, "{what}");
        assert!(e.contains("X25519"), "{what}: {e}");
    }
}

/// Two stores encrypted to two keys, read side by side in one process,
/// each with its own reader options (a tool holding two teams' keys):
/// every frame and byte of each, and neither key opens the other store.
/// A process-wide identity list would have let one thread's key replace
/// the other's.
#[test]
fn two_stores_with_two_keys_are_read_side_by_side() {
    use wiretape::files::crypt::read_identity_file;
    use wiretape::files::{FileInfo, PcapReader, ReadOptions};
    use wiretape::query::{extract::plan, Merge, Window};
    let t = TempDir::new("agetwo");
    let mut stores = Vec::new();
    for (k, n, size) in [("k1", 3000u64, 200usize), ("k2", 2000, 700)] {
        let (key, r) = keygen(t.path(), k);
        let tr = t.path().join(format!("{k}.pcap"));
        let frames: Vec<(u64, Vec<u8>)> = (0..n)
            .map(|i| {
                (
                    1_700_000_000_000_000_000 + i * 1_000_000,
                    wiretape_testbed::frames::build(i, size, 1),
                )
            })
            .collect();
        write_ns_pcap(&tr, &frames);
        let d = t.path().join(format!("store-{k}"));
        record_file(&tr, &d, &["--encrypt-to", &r]);
        let bytes: u64 = frames.iter().map(|f| f.1.len() as u64).sum();
        let opts = ReadOptions::new().with_identities(read_identity_file(&key).unwrap());
        stores.push((d, opts, n, bytes));
    }
    let threads: Vec<_> = stores
        .iter()
        .cloned()
        .map(|(d, opts, _, _)| {
            std::thread::spawn(move || {
                let mut frames_each = 0u64;
                for f in age_files(&d) {
                    frames_each += FileInfo::scan_with(&f, &opts).unwrap().packets;
                }
                let p = plan(&[d], Window::default(), None, &opts).unwrap();
                let mut m =
                    Merge::new(p, wiretape::files::LINKTYPE_ETHERNET, |_: &[u8], _, _| true);
                let (mut frames, mut bytes) = (0u64, 0u64);
                while let Some(f) = m.next() {
                    frames += 1;
                    bytes += f.data.len() as u64;
                }
                assert!(m.stats().chunks_decrypted > 0);
                (frames_each, frames, bytes)
            })
        })
        .collect();
    for (th, (d, _, n, bytes)) in threads.into_iter().zip(&stores) {
        let (scanned, frames, b) = th.join().unwrap();
        assert_eq!((scanned, frames, b), (*n, *n, *bytes), "{}", d.display());
    }
    // Each key opens its own store only.
    for (i, (d, _, _, _)) in stores.iter().enumerate() {
        let other = &stores[1 - i].1;
        let f = &age_files(d)[0];
        let e = PcapReader::open_with(f, other)
            .err()
            .expect("the other key");
        assert!(e.to_string().contains("is not one of them"), "{e}");
    }
}

#[test]
fn a_bad_recipient_is_one_line_before_anything_is_made() {
    let t = TempDir::new("ager");
    let (k1, _) = keygen(t.path(), "k1");
    let secret = std::fs::read_to_string(&k1)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .unwrap()
        .to_owned();
    let tr = t.path().join("trace.pcap");
    write_ns_pcap(
        &tr,
        &[(
            1_700_000_000_000_000_000,
            wiretape_testbed::frames::build(0, 100, 1),
        )],
    );
    let empty = t.path().join("empty-recipients");
    std::fs::write(&empty, "# nobody\n").unwrap();
    let out = t.path().join("never");
    for (flag, bad, says) in [
        ("--encrypt-to", "age1notarecipient", "age1notarecipient"),
        ("--encrypt-to", secret.as_str(), "age-keygen -y"),
        ("--encrypt-to-file", empty.to_str().unwrap(), "no recipient"),
        (
            "--encrypt-to-file",
            "/nonexistent/recipients",
            "/nonexistent/recipients",
        ),
    ] {
        let (code, _, e) = run_wiretape(
            None,
            &[
                "record",
                "-r",
                tr.to_str().unwrap(),
                "-w",
                out.to_str().unwrap(),
                flag,
                bad,
            ],
        );
        assert_eq!(code, 2, "{flag} {bad}: {e}");
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains(flag) && e.contains(says), "{e}");
        assert!(!out.exists(), "{bad}: nothing made");
    }
}

#[test]
fn a_narrow_window_decrypts_a_few_chunks() {
    let t = TempDir::new("agew");
    let (k1, r1) = keygen(t.path(), "k1");
    let tr = t.path().join("trace.pcap");
    let n = 40_000u64;
    let frames: Vec<(u64, Vec<u8>)> = (0..n)
        .map(|i| {
            (
                1_700_000_000_000_000_000 + i * 1_000_000,
                wiretape_testbed::frames::build(i, 300 + (i % 900) as usize, (i % 7) as u16),
            )
        })
        .collect();
    write_ns_pcap(&tr, &frames);
    let mut outs = Vec::new();
    for (name, extra) in [
        ("plain", vec![]),
        ("age", vec!["--encrypt-to", r1.as_str()]),
        (
            "lz4-age",
            vec!["--encrypt-to", r1.as_str(), "--compress", "lz4"],
        ),
    ] {
        let d = t.path().join(name);
        let mut a = vec!["--block-kib", "64"];
        a.extend(extra);
        record_file(&tr, &d, &a);
        let mut row = Vec::new();
        for w in [
            vec![],
            vec![
                "--from",
                "1700000020.000000000",
                "--to",
                "1700000020.050000000",
            ],
        ] {
            let x = t.path().join(format!("{name}-{}.pcap", w.len()));
            let mut a = vec![
                "extract",
                "--identity",
                k1.to_str().unwrap(),
                d.to_str().unwrap(),
                "-w",
                x.to_str().unwrap(),
                "--json",
            ];
            a.extend(w.iter().copied());
            let (code, o, e) = run_wiretape(None, &a);
            assert_eq!(code, 0, "{e}");
            let j: Value = serde_json::from_str(o.trim()).unwrap();
            row.push((std::fs::read(&x).unwrap(), j));
        }
        outs.push(row);
    }
    for (i, row) in outs.iter().enumerate().skip(1) {
        let store = t.path().join(["plain", "age", "lz4-age"][i]);
        let whole_file: u64 = age_files(&store)
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        for (w, (bytes, j)) in row.iter().enumerate() {
            assert!(
                bytes == &outs[0][w].0,
                "store {i} window {w}: differs from plain"
            );
            assert_eq!(j["frames"], outs[0][w].1["frames"]);
        }
        let all = row[0].1["chunks_decrypted"].as_u64().unwrap();
        let narrow = row[1].1["chunks_decrypted"].as_u64().unwrap();
        assert_eq!(row[1].1["frames"].as_u64(), Some(50));
        eprintln!(
            "store {i}: whole {all} chunks, {} bytes read; 50 ms window {narrow} chunks, {} bytes read",
            row[0].1["bytes_read"], row[1].1["bytes_read"]
        );
        // Every chunk of the store once (and a few twice: a seek to a
        // block's start in another chunk), not a chunk per block.
        let chunks = whole_file.div_ceil((64 << 10) + 16);
        assert!(
            (chunks..=chunks * 2).contains(&all),
            "{all} chunks for {chunks} in the store"
        );
        assert!(
            (1..=4).contains(&narrow),
            "a narrow window: {narrow} chunks"
        );
        // The window reads the chunks it decrypts and the age header,
        // nothing more. (A ratio to the whole store would depend on how
        // well lz4 did: the compression pool stores a block raw when it
        // falls behind, so the compressed store's size varies by machine.)
        let narrow_read = row[1].1["bytes_read"].as_u64().unwrap();
        assert!(
            narrow_read <= narrow * ((64 << 10) + 16) + 4096,
            "a narrow window read {narrow_read} bytes for {narrow} chunks"
        );
        if i == 1 {
            assert!(narrow_read * 20 < row[0].1["bytes_read"].as_u64().unwrap());
        }
    }
    assert_eq!(outs[0][1].1["chunks_decrypted"], 0);
    // The API decrypts with `api --identity` (curl as the client, plain
    // HTTP on loopback): the window's frames, as extract gave them.
    let store = t.path().join("lz4-age");
    let api = Api::start(&[
        "-w",
        store.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "-q",
        "--identity",
        k1.to_str().unwrap(),
    ]);
    let o = Command::new("curl")
        .args(["-sS", "-f"])
        .arg(format!(
            "{}/v1/extract?from=1700000020.000000000&to=1700000020.050000000",
            api.url
        ))
        .output()
        .expect("curl is installed (scripts/setup.sh)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout == outs[0][1].0,
        "the API's window differs from extract's"
    );
    // Without the identity, the API refuses the store's files.
    let api2 = Api::loopback(&store, true);
    let o = Command::new("curl")
        .args(["-sS"])
        .arg(format!(
            "{}/v1/extract?from=1700000020.000000000&to=1700000020.050000000",
            api2.url
        ))
        .output()
        .unwrap();
    let body = String::from_utf8_lossy(&o.stdout);
    assert!(
        body.contains("encrypted")
            && body.contains("started without an identity")
            && !body.contains("--"),
        "{body}"
    );
    drop((api, api2));
}

#[test]
fn sigkill_then_repair_keeps_every_whole_chunk() {
    require_root();
    let tb = Testbed::create("agek", 1).unwrap();
    let keys = TempDir::new("agekk");
    let (k1, r1) = keygen(keys.path(), "k1");
    let id = wiretape::files::crypt::read_identity_file(&k1).unwrap();
    for alg in ["none", "lz4"] {
        let out = TempDir::new("agek");
        let dir = out.path().join("cap");
        let t0 = now_ns();
        let rec = Recorder::start(
            &tb,
            &[
                "-w",
                dir.to_str().unwrap(),
                "--compress",
                alg,
                "--encrypt-to",
                &r1,
            ],
        );
        let n = 5000u64;
        let sent = tb.send(0..n, SizeFn::Mixed, 4, Some(100_000)).unwrap();
        assert_eq!(sent.sent, n);
        // Past two flush intervals: every whole chunk went out.
        std::thread::sleep(std::time::Duration::from_millis(2500));
        rec.signal(libc::SIGKILL);
        drop(rec);
        let t1 = now_ns();
        let files = age_files(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let f = files[0].to_str().unwrap();
        // Without the key, repair cannot close it: it says so.
        let (code, _, e) = run_wiretape(None, &["repair", f]);
        assert_ne!(code, 0, "{alg}: repair without a key");
        assert!(e.contains("--identity"), "{e}");
        let (code, o, e) = run_wiretape(None, &["repair", "--identity", k1.to_str().unwrap(), f]);
        assert_eq!(code, 0, "repair {alg}: {o}{e}");
        // What the file holds now, read by the real age tool: every frame
        // of the whole chunks, and no frame twice or altered.
        let (frames, _) = age_tcpdump(&files[0], &k1);
        let opts = wiretape::files::ReadOptions::new().with_identities(id.clone());
        let v = verify_files_with(&files, &opts, n, usize::MAX, t0, t1, true);
        assert_eq!(
            v.frames, frames,
            "{alg}: age -d | tcpdump and wiretape agree"
        );
        // At most one 64 KiB chunk of the stream waited in memory (plain:
        // the smallest record is 16 + 60 bytes; lz4: that chunk held more
        // records, compressed), and those kept are the first ones.
        let lost = n - frames;
        let most = if alg == "none" {
            (64 << 10) / 76
        } else {
            n / 4
        };
        assert!(lost <= most, "{alg}: {lost} frames lost");
        assert!(frames > 0);
        eprintln!("{alg}: {frames} of {n} frames kept after SIGKILL + repair");
        let (code, o, e) = run_wiretape(
            None,
            &["info", "--json", "--identity", k1.to_str().unwrap(), f],
        );
        assert_eq!(code, 0, "{e}");
        let i: Value = serde_json::from_str(o.trim()).unwrap();
        assert_eq!(i["packets"].as_u64(), Some(frames));
        assert_eq!(i["index"]["agrees"], true, "{i}");
    }
}
