//! wiretape as a service: the systemd unit template in `dist/systemd`
//! (checked by `systemd-analyze verify`, its capability set proven by a
//! recording as uid 65534 with exactly those capabilities and its memlock
//! limit), `record --config FILE` (TOML; the command line overrides it),
//! the sd_notify protocol (READY=1 once attached and the files open,
//! WATCHDOG=1 from the control loop, STOPPING=1) read from a real notify
//! socket, and `record --check` (everything checked, nothing attached).

mod common;

use common::*;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wiretape_testbed::{SizeFn, Testbed, CAP_IF};

fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/systemd/wiretape@.service")
}

/// The `Key=` lines of the unit (continuations not used in ours).
fn unit_values(key: &str) -> Vec<String> {
    std::fs::read_to_string(unit_path())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(String::from)
        .collect()
}

/// `systemd-analyze verify` on `unit` saved as `name`, pointing at the
/// binary just built (the units name /usr/bin/wiretape, where the package
/// puts it and verify wants it to exist): no error, no warning.
fn verify(unit: &Path, name: &str) {
    let out = TempDir::new("unit");
    let text = std::fs::read_to_string(unit)
        .unwrap()
        .replace("/usr/bin/wiretape", bin().to_str().unwrap());
    let inst = out.path().join(name);
    std::fs::write(&inst, text).unwrap();
    let o = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&inst)
        .output()
        .expect("systemd-analyze (scripts/setup.sh installs systemd)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.trim().is_empty(), "verify warns: {err}");
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    // An instance of the template.
    verify(&unit_path(), "wiretape@eth0.service");
    // What the issue asks of it.
    assert_eq!(unit_values("Type"), ["notify"]);
    assert_eq!(unit_values("ProtectSystem"), ["strict"]);
    assert_eq!(unit_values("LimitMEMLOCK"), ["infinity"]);
    assert_eq!(unit_values("StateDirectory"), ["wiretape/%i"]);
    assert!(!unit_values("WatchdogSec").is_empty());
    assert_eq!(
        unit_values("AmbientCapabilities"),
        ["CAP_NET_ADMIN CAP_BPF CAP_NET_RAW"]
    );
    assert!(unit_values("ExecStart")[0].contains("--config /etc/wiretape/%i.conf"));
    assert_eq!(unit_values("ExecReload"), ["/bin/kill -HUP $MAINPID"]);
    assert_eq!(unit_values("User"), ["wiretape"]);
}

/// wiretape-api.service: verified the same way; no capabilities at all,
/// its flags from /etc/wiretape/api.conf, the key by LoadCredential=.
#[test]
fn the_api_unit_passes_systemd_analyze_verify() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/systemd/wiretape-api.service");
    verify(&path, "wiretape-api.service");
    let text = std::fs::read_to_string(&path).unwrap();
    let values = |key: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(String::from)
            .collect()
    };
    assert_eq!(values("CapabilityBoundingSet"), [""]);
    assert_eq!(values("User"), ["wiretape"]);
    assert_eq!(
        values("ExecStart"),
        ["/usr/bin/wiretape api --config /etc/wiretape/api.conf --tls-key %d/server.key"]
    );
    // The key the unit hands over is the one the package's config names.
    let conf = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/systemd/api.conf"),
    )
    .unwrap();
    let key = conf
        .lines()
        .find_map(|l| l.strip_prefix("tls-key = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    assert_eq!(values("LoadCredential"), [format!("server.key:{key}")]);
}

/// The unit's rights, as a process gets them: uid 65534, exactly its
/// ambient capabilities, an unlimited memlock limit. Every frame recorded.
#[test]
fn the_units_capability_set_records_every_frame() {
    require_root();
    let caps: Vec<String> = unit_values("AmbientCapabilities")[0]
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let caps = caps.join(",");
    let tb = Testbed::create("svcap", 1).unwrap();
    let out = TempDir::new("svcap");
    let open = |p: &Path, mode: u32| {
        let mut perm = std::fs::metadata(p).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, mode);
        std::fs::set_permissions(p, perm).unwrap();
    };
    open(out.path(), 0o777);
    let b = out.path().join("wiretape");
    std::fs::copy(bin(), &b).unwrap();
    open(&b, 0o755);
    let dir = out.path().join("cap");
    let n = 3_000u64;
    // LimitMEMLOCK=infinity where this machine lets root raise the limit
    // (CAP_SYS_RESOURCE); else a UMEM that fits the limit there is: either
    // way no CAP_IPC_LOCK.
    let unlimited = std::process::Command::new("prlimit")
        .args(["--memlock=unlimited:unlimited", "true"])
        .status()
        .is_ok_and(|s| s.success());
    let frames = if unlimited {
        "32768"
    } else {
        eprintln!("note: cannot raise RLIMIT_MEMLOCK here (no CAP_SYS_RESOURCE): 1024 UMEM frames under the current limit");
        "1024"
    };
    let mut c = tb.command("prlimit");
    let limit = if unlimited {
        "--memlock=unlimited:unlimited"
    } else {
        "--memlock=8388608:8388608"
    };
    c.args([limit, "--", "setpriv"])
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            &format!("--inh-caps=-all,{caps}"),
            &format!("--ambient-caps=-all,{caps}"),
        ])
        .arg(&b)
        .args(["record", "-i", CAP_IF, "-w", dir.to_str().unwrap(), "-c"])
        .arg(n.to_string())
        .args(["--frames", frames]);
    let mut rec = Recorder::started(Recorder::spawn_command(c));
    let sent = tb.send(0..n, SizeFn::Mixed, 4, Some(50_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let v = verify_dir(&dir, n, usize::MAX, 0, u64::MAX);
    assert_eq!((v.frames, v.original_bytes), (n, sent.bytes));
}

#[test]
fn config_file_flags_with_the_command_line_overriding() {
    require_root();
    let tb = Testbed::create("svconf", 1).unwrap();
    let out = TempDir::new("svconf");
    let dir = out.path().join("cap");
    let json = out.path().join("s.json");
    let conf = out.path().join("wt-cap.conf");
    // count 5000 in the file, 2000 on the command line: the command line wins.
    std::fs::write(
        &conf,
        format!(
            "# /etc/wiretape/wt-cap.conf\nwrite = {:?}\ncount = 5000\nrotate-size = \"256K\"\nsummary_json = {:?}\nformat = \"pcapng\"\nfilter = \"udp\"\nquiet = true\n",
            dir.to_str().unwrap(),
            json.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut c = tb.command(bin().to_str().unwrap());
    c.args([
        "record",
        "--config",
        conf.to_str().unwrap(),
        "-i",
        CAP_IF,
        "-c",
        "2000",
    ]);
    let mut rec = Recorder::started(Recorder::spawn_command(c));
    let sent = tb.send(0..2_000, SizeFn::Mixed, 4, Some(50_000)).unwrap();
    assert!(rec.wait(30).success(), "{}", rec.stderr_text());
    let j = read_json(&json);
    assert_eq!(j["packets_written"].as_u64(), Some(2_000), "{j:#}");
    assert_eq!(j["bytes_written"].as_u64(), Some(sent.bytes));
    assert_eq!(j["format"], "pcapng");
    assert_eq!(j["filter"], "udp");
    assert!(
        j["files"].as_array().unwrap().len() > 1,
        "rotate-size applied"
    );
    assert!(
        !rec.stderr.iter().any(|l| l.starts_with('[')),
        "quiet applied"
    );
    // An unknown key is a usage error naming it and the file.
    std::fs::write(&conf, "write = \"/tmp\"\nrotate-sise = \"1G\"\n").unwrap();
    let (code, _, err) = run_wiretape(
        Some(&tb),
        &["record", "--config", conf.to_str().unwrap(), "-i", CAP_IF],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("unknown key 'rotate-sise'") && err.contains(conf.to_str().unwrap()),
        "{err}"
    );
}

/// Reads notify messages until one contains `want` (or the time is up).
fn notified(sock: &UnixDatagram, want: &str, secs: u64, got: &mut Vec<String>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let m = String::from_utf8_lossy(&buf[..n]).into_owned();
            let hit = m.lines().any(|l| l == want);
            got.push(m);
            if hit {
                return true;
            }
        }
    }
    false
}

#[test]
fn sd_notify_ready_after_attach_watchdog_from_the_control_loop_and_stopping() {
    require_root();
    let tb = Testbed::create("svnot", 1).unwrap();
    let out = TempDir::new("svnot");
    let path = out.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let dir = out.path().join("cap");
    let mut c = tb.command(bin().to_str().unwrap());
    c.env("NOTIFY_SOCKET", &path)
        .args(["record", "-i", CAP_IF, "-w", dir.to_str().unwrap(), "-q"]);
    let mut rec = Recorder::started(Recorder::spawn_command(c));
    let mut got = Vec::new();
    assert!(notified(&sock, "READY=1", 5, &mut got), "{got:?}");
    // Ready means attached and the files open.
    assert!(xdp_attached(&tb));
    assert_eq!(pcaps(&dir).len(), 1);
    let sent = tb
        .send(0..100, SizeFn::Fixed(100), 1, Some(10_000))
        .unwrap();
    assert_eq!(sent.sent, 100);
    // Fed once a second, with the numbers in the status line.
    let mut watchdogs = 0;
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(3500) {
        if notified(&sock, "WATCHDOG=1", 2, &mut got) {
            watchdogs += 1;
        }
    }
    assert!(watchdogs >= 2, "{got:?}");
    assert!(
        got.iter()
            .any(|m| m.contains("STATUS=100 frames seen, 100 written")),
        "{got:?}"
    );
    rec.signal(libc::SIGTERM);
    assert!(notified(&sock, "STOPPING=1", 5, &mut got), "{got:?}");
    assert!(rec.wait(20).success(), "{}", rec.stderr_text());
}

#[test]
fn check_validates_everything_and_attaches_nothing() {
    require_root();
    let tb = Testbed::create("svchk", 2).unwrap();
    let out = TempDir::new("svchk");
    let dir = out.path().join("not-yet");
    let d = dir.to_str().unwrap();
    let (code, stdout, err) = run_wiretape(
        Some(&tb),
        &[
            "record", "-i", CAP_IF, "-w", d, "--queues", "0,1", "--cpus", "0", "--check", "udp",
            "port", "53",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.starts_with("wiretape: check passed: interface wt-cap"),
        "{stdout}"
    );
    assert!(
        stdout.contains("filter 'udp port 53' (loaded, not attached)"),
        "{stdout}"
    );
    assert!(stdout.contains("(will be created)"), "{stdout}");
    assert!(!dir.exists(), "--check creates nothing");
    assert!(!xdp_attached(&tb));
    // The first problem, named, and still nothing attached.
    for (args, want_code, want) in [
        (vec!["--queues", "5"], 2, "has no RX queue 5"),
        (vec!["--cpus", "999"], 2, "CPU 999 is not one"),
        (vec!["--", "tcp", "port"], 2, "tcp port"),
        (vec!["-w", "/proc/wt-check"], 1, "not writable"),
    ] {
        let mut a = vec!["record", "-i", CAP_IF, "--check"];
        if !args.contains(&"-w") {
            a.extend(["-w", d]);
        }
        a.extend(&args);
        let (code, _, err) = run_wiretape(Some(&tb), &a);
        assert_eq!(code, want_code, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!xdp_attached(&tb));
    }
    let (code, _, err) = run_wiretape(Some(&tb), &["record", "-i", "wt-none", "-w", d, "--check"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such interface 'wt-none'"), "{err}");
    // Another program attached (a running recorder's): named, untouched.
    let other = out.path().join("other");
    let mut rec = Recorder::start(&tb, &["-w", other.to_str().unwrap(), "-q"]);
    let (code, _, err) = run_wiretape(Some(&tb), &["record", "-i", CAP_IF, "-w", d, "--check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("already has an XDP program attached"), "{err}");
    assert!(xdp_attached(&tb), "the other recorder's program stays");
    rec.signal(libc::SIGINT);
    assert!(rec.wait(20).success());
}
