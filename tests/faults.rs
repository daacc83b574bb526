//! A disk that fails while `record` writes (an I/O error, not a full disk):
//! the file is cut at its last complete record, the frames that did not
//! make it are `drops.write_error`, the identity holds, and the run stops
//! with one line. Two ways: the I/O engine's fault injection
//! (`WIRETAPE_FAULT_WRITE_EIO=N`: from the Nth block write on the engine
//! reports EIO instead of writing, everything after it is the real code;
//! the cargo feature `fault-injection` of wiretape-storage, which the root
//! package's dev-dependencies turn on for the tests' build of the binary),
//! and, where the machine allows it, a real ext4 on a loop device shut down
//! under the recorder (`EXT4_IOC_SHUTDOWN`: every later write fails with
//! EIO, as when a disk drops off the bus).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use wiretape_testbed::{SizeFn, Testbed};

#[test]
fn an_io_error_cuts_the_file_at_its_last_record_and_stops_with_one_line() {
    require_root();
    let tb = Testbed::create("feio", 1).unwrap();
    let out = TempDir::new("feio");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let bin = bin();
    let mut c = tb.command(bin.to_str().unwrap());
    // 64 KiB blocks: the 30th block write fails, well inside the traffic.
    c.env("WIRETAPE_FAULT_WRITE_EIO", "30").args([
        "record",
        "-i",
        wiretape_testbed::CAP_IF,
        "-w",
        dir.to_str().unwrap(),
        "--block-kib",
        "64",
        "--io",
        "direct",
        "-q",
        "--summary-json",
        json.to_str().unwrap(),
    ]);
    let t0 = now_ns();
    let mut rec = Recorder::started(Recorder::spawn_command(c));
    let n = 6_000u64;
    // The recorder stops at the error; what it does not take the veth drops.
    let _ = tb.send(0..n, SizeFn::Fixed(1000), 4, Some(30_000));
    let st = rec.wait(30);
    let t1 = now_ns();
    assert_eq!(st.code(), Some(1), "{}", rec.stderr_text());
    let errors: Vec<&String> = rec
        .stderr
        .iter()
        .filter(|l| l.starts_with("wiretape: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", rec.stderr_text());
    let e = errors[0];
    assert!(
        e.contains("cannot write") && e.contains("Input/output error (os error 5)"),
        "{e}"
    );
    assert_eq!(e.matches("cannot write").count(), 1, "said once: {e}");
    let j = read_json(&json);
    assert_eq!(j["stop_reason"], "output failed", "{j:#}");
    assert_identity(&j);
    let written = j["packets_written"].as_u64().unwrap();
    let lost = j["drops"]["write_error"].as_u64().unwrap();
    eprintln!("injected EIO: {written} frames in the file, {lost} write_error, error line: {e}");
    assert!(written > 0 && lost > 0, "{j:#}");
    assert_eq!(j["drops"]["disk_full"].as_u64(), Some(0));
    // The file holds exactly what the summary says, every record whole.
    let v = verify_dir(&dir, n, usize::MAX, t0, t1);
    assert_eq!(v.frames, written);
    for f in pcaps(&dir) {
        let (code, _, err) = run_wiretape(None, &["info", f.to_str().unwrap()]);
        assert_eq!(code, 0, "cut at a record boundary: {err}");
        let (code, _, err) = run_wiretape(None, &["repair", f.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        assert!(!err.contains("trimmed"), "nothing left to trim: {err}");
    }
}

/// An ext4 image on a loop device, mounted; unmounted and detached on drop.
struct LoopFs {
    dir: std::path::PathBuf,
    dev: String,
    mnt: std::path::PathBuf,
}

impl LoopFs {
    fn new(dir: &Path) -> Option<LoopFs> {
        let img = dir.join("disk.img");
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).ok()?;
        Command::new("truncate")
            .args(["-s", "256M"])
            .arg(&img)
            .status()
            .ok()?
            .success()
            .then_some(())?;
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
            .ok()?;
        if !o.status.success() {
            return None;
        }
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let fs = LoopFs {
            dir: dir.to_owned(),
            dev,
            mnt,
        };
        let ok = Command::new("mkfs.ext4")
            .args(["-q", &fs.dev])
            .status()
            .is_ok_and(|s| s.success())
            && Command::new("mount")
                .arg(&fs.dev)
                .arg(&fs.mnt)
                .status()
                .is_ok_and(|s| s.success());
        ok.then_some(fs)
    }

    /// `EXT4_IOC_SHUTDOWN` with NOLOGFLUSH: the filesystem fails every
    /// later write with EIO, as when its disk is gone.
    fn shut_down(&self) {
        let st = Command::new("python3")
            .args([
                "-c",
                "import fcntl, os, struct, sys\nfd = os.open(sys.argv[1], os.O_RDONLY)\nfcntl.ioctl(fd, 0x8004587D, struct.pack('I', 2))",
            ])
            .arg(&self.mnt)
            .status()
            .unwrap();
        assert!(st.success(), "EXT4_IOC_SHUTDOWN");
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
        let _ = std::fs::remove_file(self.dir.join("disk.img"));
    }
}

#[test]
fn a_filesystem_that_fails_under_the_recorder_stops_it_with_one_line() {
    require_root();
    let out = TempDir::new("fshut");
    let Some(fs) = LoopFs::new(out.path()) else {
        eprintln!(
            "note: no loop device or ext4 here: the seam injection test covers the I/O error"
        );
        return;
    };
    let tb = Testbed::create("fshut", 1).unwrap();
    let dir = fs.mnt.join("cap");
    let json = out.path().join("s.json");
    let mut rec = Recorder::start(
        &tb,
        &[
            "-w",
            dir.to_str().unwrap(),
            "--block-kib",
            "64",
            "-q",
            "--summary-json",
            json.to_str().unwrap(),
        ],
    );
    let n = 4_000u64;
    let sent = tb.send(0..n, SizeFn::Fixed(800), 4, Some(20_000)).unwrap();
    assert_eq!(sent.sent, n);
    std::thread::sleep(Duration::from_millis(300));
    fs.shut_down();
    let _ = tb.send(n..2 * n, SizeFn::Fixed(800), 4, Some(20_000));
    let st = rec.wait(30);
    assert_eq!(st.code(), Some(1), "{}", rec.stderr_text());
    let errors: Vec<&String> = rec
        .stderr
        .iter()
        .filter(|l| l.starts_with("wiretape: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", rec.stderr_text());
    assert!(errors[0].contains("Input/output error"), "{}", errors[0]);
    let j = read_json(&json);
    assert_eq!(j["stop_reason"], "output failed", "{j:#}");
    assert_identity(&j);
    assert!(j["drops"]["write_error"].as_u64().unwrap() > 0, "{j:#}");
    assert_eq!(j["drops"]["disk_full"].as_u64(), Some(0));
    eprintln!(
        "ext4 shut down: seen {}, written {}, write_error {}; {}",
        j["packets_seen"], j["packets_written"], j["drops"]["write_error"], errors[0]
    );
}
