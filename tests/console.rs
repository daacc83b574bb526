//! The console (`GET /` on `wiretape api`) in a real browser: headless
//! Chromium driven by chromedriver over WebDriver (plain HTTP from this
//! test), against a store recorded by the file engine, beside files whose
//! names are markup (`q"'<img src=x onerror=window.pwned=1>-...pcap`).
//!
//! * the page's answers carry `Content-Security-Policy: default-src 'self'`
//!   (curl); an unknown `/v1/` path still answers JSON;
//! * the DOM holds the store's frame count (that of `/v1/status`, and
//!   of the frames recorded), a drawn SVG timeline whose total is the
//!   window's frames, and the files by their names, as text;
//! * typing a filter updates the count to tcpdump's count of the trace;
//!   a bad filter shows libpcap's own message (as `tcpdump -d` prints it);
//! * hostile file names and `?filter=` payloads run nothing: the `window.`
//!   flags they would set stay unset, no element they would make exists;
//! * a screenshot decodes at the window's size and is not one flat colour;
//! * with every answer held back 1.5 s, the picture says it is loading
//!   until its data comes (and again, over the drawn one, on a refresh);
//!   the three kinds of bytes are named and equal the files' sizes, the
//!   records' bytes and the frames' bytes.

mod common;
#[allow(dead_code, unreachable_pub)]
#[path = "../crates/filter/tests/common/frames.rs"]
mod gen;

use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A chromedriver and one headless Chromium session; both ended on drop.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: TempDir,
}

/// WebDriver's key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One WebDriver call: the answer's `value` (panics on an HTTP error).
fn wd(port: u16, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("chromedriver listens");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // chromedriver keeps the connection open: read the head, then
    // Content-Length bytes.
    let mut raw = Vec::new();
    let mut buf = [0u8; 65536];
    let head_end = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "chromedriver closed the connection");
        raw.extend_from_slice(&buf[..n]);
        if let Some(k) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break k + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("a Content-Length");
    while raw.len() < head_end + len {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "chromedriver closed the connection");
        raw.extend_from_slice(&buf[..n]);
    }
    let rest = String::from_utf8_lossy(&raw[head_end..head_end + len]).to_string();
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let v: Value = serde_json::from_str(rest.trim()).unwrap_or(Value::Null);
    assert!(status < 300, "WebDriver {method} {path}: {status} {v}");
    v["value"].clone()
}

impl Browser {
    fn start() -> Browser {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver is installed (scripts/setup.sh: chromium-driver)");
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = TempDir::new("chromium");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1100,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let v = wd(port, "POST", "/session", Some(&caps));
        b.session = v["sessionId"].as_str().expect("a session").to_string();
        b
    }

    fn call(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}{what}", self.session);
        wd(self.port, method, &path, body)
    }

    fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(&json!({ "url": url })));
    }

    /// Runs `script` (a function body) in the page; its return value.
    fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    /// Waits until `script` returns true.
    fn wait_for(&self, script: &str, what: &str) {
        let t0 = Instant::now();
        while self.js(script) != Value::Bool(true) {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "waited 20 s for {what}; page text: {}",
                self.js("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `text` into the element of `css` (after clearing it).
    fn type_into(&self, css: &str, text: &str) {
        let e = self.call(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        let id = e[ELEMENT].as_str().unwrap().to_string();
        self.call("POST", &format!("/element/{id}/clear"), Some(&json!({})));
        self.call(
            "POST",
            &format!("/element/{id}/value"),
            Some(&json!({ "text": text })),
        );
    }

    /// Drags the mouse across the element of `css` from `x0` to `x1`
    /// pixels off its centre (WebDriver actions).
    fn drag(&self, css: &str, x0: i64, x1: i64) {
        let e = self.call(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        let origin = json!({ ELEMENT: e[ELEMENT] });
        let actions = json!({"actions": [{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
            "actions": [
                {"type": "pointerMove", "duration": 0, "origin": origin, "x": x0, "y": 0},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerMove", "duration": 150, "origin": origin, "x": x1, "y": 0},
                {"type": "pointerUp", "button": 0}
            ]
        }]});
        self.call("POST", "/actions", Some(&actions));
    }

    fn screenshot(&self, out: &Path) {
        let b64 = self.call("GET", "/screenshot", None);
        std::fs::write(out, base64(b64.as_str().unwrap())).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(|| {
                wd(
                    self.port,
                    "DELETE",
                    &format!("/session/{}", self.session),
                    None,
                )
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (a screenshot) to bytes.
fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let b: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    for chunk in b.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        let k = chunk.len() * 6 / 8;
        out.extend_from_slice(&n.to_be_bytes()[1..1 + k]);
    }
    out
}

const T0_US: u64 = 1_700_000_000_000_000;

/// The frames of the trace: the filter crate's generator, 3000 of them,
/// 40 µs apart in three bursts a second apart.
fn frames() -> Vec<(Vec<u8>, u32, u64)> {
    let mut rng = gen::Rng::new(0xc0501e);
    let mut out = Vec::new();
    while out.len() < 3000 {
        let f = gen::frame(&mut rng);
        if f.data.is_empty() {
            continue;
        }
        let i = out.len() as u64;
        let us = T0_US + (i / 1000) * 1_000_000 + (i % 1000) * 40;
        out.push((f.data, f.wire_len, us));
    }
    out
}

const HOSTILE: &[&str] = &[
    "q\"'<img src=x onerror=window.pwned=1>",
    "<svg onload=window.pwned=2>",
    "&lt;b&gt;x&amp;",
];

/// A trace, its frames and the store recorded from it.
struct Recorded {
    trace: std::path::PathBuf,
    frames: Vec<(Vec<u8>, u32, u64)>,
    store: std::path::PathBuf,
}

/// The trace of [`frames`] recorded by the file engine under `t`.
fn recorded(t: &TempDir) -> Recorded {
    let trace = t.path().join("trace.pcap");
    let frames = frames();
    write_us_pcap(&trace, &frames);
    let store = t.path().join("store");
    record_file(&trace, &store, &["--block-kib", "64"]);
    Recorded {
        trace,
        frames,
        store,
    }
}

#[test]
fn the_console_in_headless_chromium() {
    let t = TempDir::new("console");
    let Recorded {
        trace,
        frames: fr,
        store,
    } = recorded(&t);
    // Files named as markup, each a copy of the recording (with its index).
    let orig = pcaps(&store)[0].clone();
    let name = orig.file_name().unwrap().to_str().unwrap().to_string();
    let tail = &name[name.find("-trace-").expect("the file engine's name")..];
    for h in HOSTILE {
        let p = store.join(format!("{h}{tail}"));
        std::fs::copy(&orig, &p).unwrap();
        std::fs::copy(
            format!("{}.idx", orig.display()),
            format!("{}.idx", p.display()),
        )
        .unwrap();
    }
    let total = (fr.len() * (HOSTILE.len() + 1)) as u64;
    let api = Api::loopback(&store, true);

    // The policy, by curl.
    let o = Command::new("curl")
        .args(["-sS", "-D", "-", "-o", "/dev/null"])
        .arg(format!("{}/", api.url))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&o.stdout).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
    assert!(head.contains("content-type: text/html"), "{head}");
    let o = Command::new("curl")
        .args(["-sS"])
        .arg(format!("{}/v1/nope", api.url))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).expect("a JSON error");
    assert!(v["error"].as_str().unwrap().contains("no such endpoint"));
    let status = curl_json(&format!("{}/v1/status", api.url));
    assert_eq!(status["frames"], total);

    let b = Browser::start();
    b.goto(&format!("{}/", api.url));
    b.wait_for(
        "return document.body.dataset.ready === '1'",
        "the page to load",
    );
    let digits = |v: Value| v.as_str().unwrap_or("").replace(',', "");
    assert_eq!(
        digits(b.js("return document.getElementById('status-frames').textContent")),
        total.to_string()
    );
    let bars = b
        .js("return document.querySelectorAll('#timeline #bars rect').length")
        .as_u64()
        .unwrap();
    assert!(bars >= 3, "{bars} bars drawn");
    let tl = b.js("return document.getElementById('timeline-total').textContent");
    assert!(
        digits(tl.clone()).starts_with(&format!("{total} frames")),
        "{tl}"
    );
    // The files: names as text, exactly; no element made of them.
    let names = b.js(
        "return Array.from(document.querySelectorAll('#files td.name')).map(e => e.textContent)",
    );
    let names: Vec<&str> = names
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(names.len(), HOSTILE.len() + 1, "{names:?}");
    for h in HOSTILE {
        assert!(
            names.contains(&format!("{h}{tail}").as_str()),
            "{h}: {names:?}"
        );
    }
    assert_eq!(
        b.js("return document.querySelectorAll('img, #files svg, b').length"),
        0
    );
    assert_eq!(b.js("return typeof window.pwned"), "undefined");
    let shot = t.path().join("console.png");
    b.screenshot(&shot);
    let (w, h, colours) = png_info(&shot);
    assert!(w >= 1000 && h >= 600, "{w}x{h}");
    assert!(colours > 10, "{colours} colours");
    if let Ok(keep) = std::env::var("WIRETAPE_CONSOLE_SHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    // A filter as one types: tcpdump's count of the trace, four times over.
    let sel = tcpdump_select(&trace, "udp", t.path());
    assert!(!sel.is_empty());
    b.type_into("#filter", "udp");
    let want = format!("{} frames", sel.len() as u64 * (HOSTILE.len() as u64 + 1));
    b.wait_for(
        &format!("return document.getElementById('count').textContent.replace(/,/g, '').startsWith('{want}')"),
        "the count of udp",
    );
    let href = b.js("return document.getElementById('download').getAttribute('href')");
    assert!(
        href.as_str().unwrap().starts_with("/v1/extract?")
            && href.as_str().unwrap().contains("filter=udp"),
        "{href}"
    );

    // A bad filter: libpcap's message, as tcpdump prints it.
    let o = Command::new("tcpdump")
        .args(["-d", "port 99999"])
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&o.stderr);
    let msg = msg
        .lines()
        .find_map(|l| l.strip_prefix("tcpdump: "))
        .expect("tcpdump refuses it")
        .trim()
        .to_string();
    assert!(msg.contains("illegal port number"), "{msg}");
    b.type_into("#filter", "port 99999");
    b.wait_for(
        &format!(
            "return document.getElementById('filter-error').textContent.includes({})",
            json!(msg)
        ),
        "libpcap's message",
    );
    assert_eq!(
        b.js("return document.getElementById('count').textContent"),
        ""
    );

    // ?filter= payloads: prefilled as text, nothing run.
    for payload in [
        "\"><img src=x onerror=window.pwned=3><script>window.pwned=4</script>",
        "</textarea><svg/onload=window.pwned=5>",
        "udp' onfocus='window.pwned=6",
    ] {
        let q: String = payload.bytes().map(|c| format!("%{c:02X}")).collect();
        b.goto(&format!("{}/?filter={q}", api.url));
        b.wait_for(
            "return document.body.dataset.ready === '1'",
            "the page to load",
        );
        assert_eq!(
            b.js("return document.getElementById('filter').value"),
            payload
        );
        b.wait_for(
            "return document.getElementById('filter-error').textContent.length > 0",
            "the payload's syntax error",
        );
        let err = b.js("return document.getElementById('filter-error').textContent");
        assert!(
            err.as_str().unwrap().contains("parameter 'filter'"),
            "{err}"
        );
        b.js("document.getElementById('filter').focus(); return 0");
        assert_eq!(b.js("return typeof window.pwned"), "undefined", "{payload}");
        assert_eq!(
            b.js("return document.querySelectorAll('img, script:not([src])').length"),
            0
        );
    }

    // Drag across the middle of the picture: the window shrinks to the
    // second burst (frames 1000..2000 of each of the four files), and the
    // server's own count over the window the page now offers agrees.
    b.goto(&format!("{}/", api.url));
    b.wait_for(
        "return document.body.dataset.ready === '1'",
        "the page to load",
    );
    b.drag("#timeline", -150, 150);
    b.wait_for(
        "return document.getElementById('timeline-total').textContent.replace(/,/g, '').startsWith('4000 frames')",
        "the zoomed window's total",
    );
    let href = b.js("return document.getElementById('download').getAttribute('href')");
    let href = href.as_str().unwrap();
    assert!(href.contains("from=") && href.contains("to="), "{href}");
    let q = href.split_once('?').unwrap().1;
    let count = curl_json(&format!("{}/v1/count?{q}", api.url));
    assert_eq!(count["frames"], 4000, "{count}");
}

/// `curl` of `url` with `args`: (exit code, HTTP status, body).
fn curl(args: &[&str], url: &str) -> (i32, String, String) {
    let o = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        o.status.code().unwrap_or(-1),
        code.to_string(),
        body.to_string(),
    )
}

/// The JSON curl gets from `url`.
fn curl_json(url: &str) -> Value {
    let (code, status, body) = curl(&[], url);
    assert_eq!((code, status.as_str()), (0, "200"), "{url}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn a_p12_bundle_opens_the_console_over_mutual_tls() {
    let t = TempDir::new("console-p12");
    let trace = t.path().join("trace.pcap");
    let fr = frames();
    write_us_pcap(&trace, &fr[..500]);
    let store = t.path().join("store");
    record_file(&trace, &store, &[]);
    let certs = t.path().join("tls");
    let c = certs.to_str().unwrap();
    let (code, _, err) = run_wiretape(None, &["certs", "init", c, "--server-name", "127.0.0.1"]);
    assert_eq!(code, 0, "{err}");
    let pw = t.path().join("pw");
    std::fs::write(&pw, "correct horse\n").unwrap();
    let (code, out, err) = run_wiretape(
        None,
        &[
            "certs",
            "client",
            c,
            "alice",
            "--p12",
            "--password-file",
            pw.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let p12 = certs.join("client-alice.p12");
    assert!(out.contains(&format!("wrote {}", p12.display())), "{out}");
    // The password from standard input; an existing certificate is bundled as it is.
    let pem_before = std::fs::read(certs.join("client-alice.pem")).unwrap();
    let mut child = Command::new(bin())
        .args(["certs", "client", c, "alice", "--p12"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"battery staple\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "an existing .p12 is not overwritten"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(
        std::fs::read(certs.join("client-alice.pem")).unwrap(),
        pem_before
    );

    let ca = certs.join("ca.pem");
    let api = Api::start(&[
        "-w",
        store.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "-q",
        "--tls-cert",
        certs.join("server.pem").to_str().unwrap(),
        "--tls-key",
        certs.join("server.key").to_str().unwrap(),
        "--client-ca",
        ca.to_str().unwrap(),
    ]);
    assert!(api.url.starts_with("https://"));
    let bundle = format!("{}:correct horse", p12.display());
    let with = [
        "--cert-type",
        "P12",
        "--cert",
        &bundle,
        "--cacert",
        ca.to_str().unwrap(),
    ];
    // curl (OpenSSL) opens the bundle and is admitted: the page, then the status.
    let (code, status, body) = curl(&with, &format!("{}/", api.url));
    assert_eq!((code, status.as_str()), (0, "200"), "{body}");
    assert!(body.contains("<script src=\"/console.js\""));
    let (_, status, body) = curl(&with, &format!("{}/v1/status", api.url));
    assert_eq!(status, "200");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["frames"], 500);
    // Without it, or with the wrong password: nothing.
    let (code, _, _) = curl(
        &["--cacert", ca.to_str().unwrap()],
        &format!("{}/", api.url),
    );
    assert_ne!(code, 0, "no client certificate: refused");
    let wrong = format!("{}:battery staple", p12.display());
    let (code, _, _) = curl(
        &[
            "--cert-type",
            "P12",
            "--cert",
            &wrong,
            "--cacert",
            ca.to_str().unwrap(),
        ],
        &format!("{}/", api.url),
    );
    assert_ne!(code, 0, "the wrong password opens nothing");
}

#[test]
fn the_console_names_its_three_bytes_and_shows_the_picture_loading() {
    let t = TempDir::new("console-bytes");
    let Recorded {
        frames: fr, store, ..
    } = recorded(&t);
    let api = Api::loopback(&store, true);
    // The three figures: the files' sizes, the records as the files hold
    // them (16-byte headers and the frames), the frames alone.
    let on_disk: u64 = pcaps(&store)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let of_frames: u64 = fr.iter().map(|f| f.0.len() as u64).sum();
    let of_records: u64 = fr.iter().map(|f| f.0.len() as u64 + 16).sum();
    assert!(on_disk > of_records && of_records > of_frames);

    let b = Browser::start();
    // Every answer 1.5 s late: the picture must say it is loading.
    b.call(
        "POST",
        "/chromium/network_conditions",
        Some(&json!({"network_conditions": {
            "offline": false, "latency": 1500,
            "download_throughput": 100_000_000, "upload_throughput": 100_000_000
        }})),
    );
    b.goto(&format!("{}/", api.url));
    let loading = b.js(
        "const s = document.getElementById('timeline'); \
         return [s.getAttribute('data-loading'), s.textContent, document.body.dataset.ready || '']",
    );
    assert_eq!(loading[0], "1", "{loading}");
    assert!(
        loading[1]
            .as_str()
            .unwrap()
            .contains("loading the timeline"),
        "{loading}"
    );
    assert_eq!(loading[2], "", "not ready yet: {loading}");
    let shot = t.path().join("loading.png");
    b.screenshot(&shot);
    let (w, h, colours) = png_info(&shot);
    assert!(w >= 1000 && h >= 600 && colours > 5, "{w}x{h} {colours}");
    if let Ok(keep) = std::env::var("WIRETAPE_CONSOLE_SHOT_LOADING") {
        std::fs::copy(&shot, keep).unwrap();
    }
    b.wait_for(
        "return document.body.dataset.ready === '1'",
        "the page to load",
    );
    assert_eq!(
        b.js("return document.getElementById('timeline').getAttribute('data-loading')"),
        Value::Null,
        "the sign goes once the picture is drawn"
    );
    assert_eq!(
        b.js("return document.getElementById('timeline-loading') === null"),
        true
    );
    // A refresh veils the picture drawn and says so again, until the new one.
    b.js("document.getElementById('btn-all').click(); return 0");
    assert_eq!(
        b.js("return document.getElementById('timeline').getAttribute('data-loading')"),
        "1"
    );
    assert!(
        b.js("return document.querySelectorAll('#timeline #bars rect').length")
            .as_u64()
            .unwrap()
            >= 3
    );
    b.wait_for(
        "return document.getElementById('timeline').getAttribute('data-loading') === null",
        "the refreshed picture",
    );
    b.call(
        "POST",
        "/chromium/network_conditions",
        Some(&json!({"network_conditions": {
            "offline": false, "latency": 0,
            "download_throughput": 100_000_000, "upload_throughput": 100_000_000
        }})),
    );

    // Each figure says which bytes it is, and is that one.
    let digits = |v: Value| v.as_str().unwrap_or("").replace(',', "");
    let status = b.js("return document.getElementById('status').textContent");
    assert!(
        status.as_str().unwrap().contains("bytes on disk"),
        "{status}"
    );
    assert_eq!(
        digits(b.js("return document.getElementById('status-bytes').title")),
        format!("{on_disk} bytes")
    );
    let tl = digits(b.js("return document.getElementById('timeline-total').textContent"));
    assert!(
        tl.starts_with(&format!(
            "{} frames in the window {of_records} bytes of records",
            fr.len()
        )),
        "{tl}"
    );
    b.type_into("#filter", "ip or ip6 or not ip");
    b.wait_for(
        "return document.getElementById('count').textContent.includes('bytes of frames')",
        "the count",
    );
    let count = digits(b.js("return document.getElementById('count').textContent"));
    assert_eq!(
        count,
        format!("{} frames {of_frames} bytes of frames", fr.len())
    );
    let head = b.js("return document.querySelector('#files thead').textContent");
    assert!(head.as_str().unwrap().contains("bytes on disk"), "{head}");
    let legend = b.js("return document.getElementById('bytes-legend').textContent");
    for w in ["on disk", "of records", "of frames"] {
        assert!(legend.as_str().unwrap().contains(w), "{legend}");
    }
    let shot = t.path().join("bytes.png");
    b.screenshot(&shot);
    if let Ok(keep) = std::env::var("WIRETAPE_CONSOLE_SHOT_BYTES") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// A mix of connections of different sizes, with names (one of them
/// hostile: markup and control characters in the HTTP Host and
/// User-Agent, an escape sequence in a DNS name), written as a pcap:
/// (the trace, the connections' tcpdump 5-tuples by name).
fn named_trace(dir: &Path) -> (std::path::PathBuf, Vec<(&'static str, String)>) {
    use std::net::IpAddr;
    use wiretape_sessions::synth::{self, Hello, Tcp};
    let v4 = |d: u8| IpAddr::from([10, 9, 0, d]);
    let mut frames = Vec::new();
    let mut conns = Vec::new();
    // TLS to big.example.com: the most bytes (40 records of 1200).
    let mut t = Tcp::new((v4(1), 41000), (v4(100), 443), None, 10);
    frames.extend(t.open());
    let h = Hello::browser(Some(b"big.example.com"), &[b"h2"], 0x2a2a);
    frames.push(t.seg(false, 0x18, &h.records(1 << 14)));
    for k in 0..40 {
        frames.push(t.seg(k % 2 == 0, 0x18, &[0x17u8; 1200]));
    }
    frames.extend(t.close());
    conns.push((
        "big.example.com",
        "tcp and host 10.9.0.1 and host 10.9.0.100 and port 41000 and port 443".to_string(),
    ));
    // HTTP with a hostile Host and User-Agent: fewer bytes.
    let mut u = Tcp::new((v4(2), 41001), (v4(80), 80), None, 20);
    frames.extend(u.open());
    frames.push(u.seg(
        false,
        0x18,
        &synth::http_get(
            "<img src=x onerror=window.pwned=3>",
            "/\x1b[31mred",
            "curl\x07\x1b]0;title\x07<script>window.pwned=4</script>",
        ),
    ));
    frames.push(u.seg(true, 0x18, &[b'x'; 3000][..]));
    frames.extend(u.close());
    conns.push((
        "<img",
        "tcp and host 10.9.0.2 and host 10.9.0.80 and port 41001 and port 80".to_string(),
    ));
    // DNS: the least.
    for i in 0..3u16 {
        let (c, s) = ((v4(3), 53000 + i), (v4(53), 53));
        let name = format!("q{i}.example.org");
        frames.push(synth::udp(None, c, s, &synth::dns_query(i, &name, 1)));
    }
    let t0 = 1_764_100_000_000_000_000u64;
    let timed: Vec<(u64, Vec<u8>)> = frames
        .into_iter()
        .enumerate()
        .map(|(i, f)| (t0 + i as u64 * 1_000_000, f))
        .collect();
    let p = dir.join("named.pcap");
    std::fs::write(&p, synth::pcap(&timed)).unwrap();
    (p, conns)
}

#[test]
fn the_console_lists_the_windows_top_sessions_with_links_to_their_packets() {
    let t = TempDir::new("console-sess");
    let (trace, conns) = named_trace(t.path());
    let store = t.path().join("store");
    record_file(&trace, &store, &[]);
    let api = Api::loopback(&store, true);
    let b = Browser::start();
    b.goto(&format!("{}/", api.url));
    b.wait_for(
        "return document.body.dataset.ready === '1' && document.querySelectorAll('#sessions tbody tr').length > 0",
        "the sessions",
    );
    let rows = b.js(
        "return Array.from(document.querySelectorAll('#sessions tbody tr')).map(tr => \
         [Array.from(tr.cells).map(c => c.textContent), tr.querySelector('a.packets').getAttribute('href')])",
    );
    let rows = rows.as_array().unwrap();
    // Every session, by bytes (the sums of `wiretape sessions --json`),
    // each with its names as text.
    let (code, o, e) = run_wiretape(None, &["sessions", store.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{e}");
    let mut want: Vec<(u64, String)> = o
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (
                r["client_bytes"].as_u64().unwrap() + r["server_bytes"].as_u64().unwrap(),
                r["session_id"].to_string(),
            )
        })
        .collect();
    want.sort_by_key(|b| std::cmp::Reverse(b.0));
    assert_eq!(rows.len(), want.len(), "{rows:?}");
    let shown: Vec<u64> = rows
        .iter()
        .map(|r| r[0][4].as_str().unwrap().replace(',', "").parse().unwrap())
        .collect();
    assert_eq!(
        shown,
        want.iter().map(|w| w.0).collect::<Vec<_>>(),
        "by bytes"
    );
    let names = |i: usize| rows[i][0][5].as_str().unwrap().to_string();
    assert!(names(0).contains("sni=big.example.com"), "{}", names(0));
    let hostile = names(1);
    assert!(
        hostile.contains("host=<img src=x onerror=window.pwned=3>"),
        "{hostile}"
    );
    assert!(
        hostile.contains("<script>window.pwned=4</script>"),
        "{hostile}"
    );
    let table_text = b.js("return document.getElementById('sessions').textContent");
    let table_text = table_text.as_str().unwrap();
    assert!(
        !table_text.chars().any(|c| c.is_control() && c != '\n'),
        "no raw control character: {table_text:?}"
    );
    assert!(
        table_text.contains("\\u{001b}[31m"),
        "escaped: {table_text:?}"
    );
    assert_eq!(
        b.js("return document.querySelectorAll('#sessions img, #sessions script').length"),
        0
    );
    assert_eq!(b.js("return typeof window.pwned"), "undefined");
    // Each link: the session's packets, as tcpdump selects its 5-tuple.
    for (i, (name, tuple)) in conns.iter().enumerate() {
        assert!(names(i).contains(name), "{i}: {}", names(i));
        let href = rows[i][1].as_str().unwrap();
        assert!(
            href.starts_with("/v1/extract?") && href.contains("session_where=session_id"),
            "{href}"
        );
        let out = t.path().join(format!("s{i}.pcap"));
        let o = Command::new("curl")
            .args(["-sS", "-o"])
            .arg(&out)
            .arg(format!("{}{href}", api.url))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let got = read_all(&out);
        let want = tcpdump_select(&trace, tuple, t.path());
        assert!(!want.is_empty());
        assert_eq!(got.len(), want.len(), "{name}: frames");
        assert_eq!(
            got.iter().map(|r| r.data.len()).sum::<usize>(),
            want.iter().map(|r| r.data.len()).sum::<usize>(),
            "{name}: bytes"
        );
        assert!(got == want, "{name}: frame by frame");
    }
    b.js("document.getElementById('sessions-box').scrollIntoView(); return 0");
    let shot = t.path().join("sessions.png");
    b.screenshot(&shot);
    let (w, h, colours) = png_info(&shot);
    assert!(w >= 1000 && h >= 600 && colours > 10, "{w}x{h} {colours}");
    if let Ok(keep) = std::env::var("WIRETAPE_CONSOLE_SESSIONS_SHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}
