//! Every `--ts` mode on a real veth pair: frames complete and byte-identical,
//! stamps inside the run and in order per queue; `hw` falls back to XDP
//! stamps cleanly where the device gives none (veth) and says so.

mod common;

use common::*;
use wiretape::files::{PcapReader, Record};
use wiretape_testbed::{SizeFn, Testbed};

fn run_mode(
    tb: &Testbed,
    mode: &str,
    xdp_mode: &str,
    n: u64,
) -> (serde_json::Value, Verified, TempDir) {
    let out = TempDir::new(mode);
    let json = out.path().join("s.json");
    let dir = out.path().join("cap");
    let t0 = now_ns();
    let mut rec = Recorder::start(
        tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "-c",
            &n.to_string(),
            "--ts",
            mode,
            "--xdp-mode",
            xdp_mode,
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    tb.send(0..n, SizeFn::Mixed, 4, Some(100_000)).unwrap();
    assert!(rec.wait(30).success(), "{mode}: {}", rec.stderr_text());
    let t1 = now_ns();
    let j = read_json(&json);
    assert_identity(&j);
    assert_eq!(j["timestamp_mode"], mode);
    let v = if mode == "off" {
        // Every stamp is zero; the frames are all there all the same.
        let mut k = 0;
        let mut rec = Record::default();
        for f in pcaps(&dir) {
            let mut r = PcapReader::open(&f).unwrap();
            while r.next_into(&mut rec).unwrap() {
                assert_eq!(rec.ts_ns, 0, "mode off writes zero stamps");
                k += 1;
            }
        }
        Verified {
            frames: k,
            ..Default::default()
        }
    } else {
        verify_dir(&dir, n, usize::MAX, t0, t1)
    };
    assert_eq!(v.frames, n, "{mode}: frames");
    (j, v, out)
}

#[test]
fn every_mode_stamps_in_order_within_the_run() {
    require_root();
    let tb = Testbed::create("ts", 2).unwrap();
    for mode in ["xdp", "kpt", "batch", "udts", "wdts", "hybrid", "off"] {
        let (j, _, _) = run_mode(&tb, mode, "native", 4000);
        let t = &j["timestamps"];
        assert_eq!(t["frames"].as_u64(), Some(4000), "{mode}: {t}");
        if mode == "xdp" {
            assert_eq!(
                t["xdp"].as_u64(),
                Some(4000),
                "every frame had an XDP stamp"
            );
        }
        if mode == "hybrid" {
            let b = t["hybrid_wdts_batches"].as_u64().unwrap()
                + t["hybrid_kpt_batches"].as_u64().unwrap();
            assert!(b > 0, "hybrid took decisions: {t}");
        }
    }
}

#[test]
fn hw_falls_back_to_xdp_stamps_on_veth_native_and_generic() {
    require_root();
    let tb = Testbed::create("tshw", 1).unwrap();
    // Native: the device-bound program loads on veth (it has the metadata
    // kfunc), but veth has no receive time for these frames: every frame gets
    // its XDP stamp and the report says 0% hardware stamps.
    let (j, _, _) = run_mode(&tb, "hw", "native", 3000);
    let t = &j["timestamps"];
    assert_eq!(t["hw"].as_u64(), Some(0), "{t}");
    assert_eq!(t["xdp"].as_u64(), Some(3000), "{t}");
    assert_eq!(t["hw_share"].as_f64(), Some(0.0));
    // Generic mode cannot run a device-bound program: xdp stamps, with the reason.
    let (j, _, _) = run_mode(&tb, "hw", "generic", 3000);
    assert_eq!(j["xdp_mode"], "generic");
    assert_eq!(j["timestamps"]["xdp"].as_u64(), Some(3000));
    assert!(
        j["hw_timestamps_refused"]
            .as_str()
            .unwrap()
            .contains("generic"),
        "{j}"
    );
}
