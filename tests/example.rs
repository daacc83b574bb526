//! `examples/record_auto.rs`, the library used as the CLI uses it (the
//! automatic engine choice, the preflight, the metrics endpoint, the typed
//! summary), run on a veth pair against `wiretape record --summary-json`
//! on the same traffic: the two summaries are equal field for field, but
//! for what differs from run to run.

mod common;

use common::*;
use serde_json::Value;
use wiretape_testbed::{SizeFn, Testbed, CAP_IF};

/// Fields that differ between two runs of the same traffic: times
/// (`duration_s`, `write_bytes_per_s`, the writers' latencies), paths
/// (`files`, `control`: the CLI has a control socket, the example none),
/// CPU time (`cpu_s`: the session thread's).
const RUN_TO_RUN: [&str; 7] = [
    "duration_s",
    "write_bytes_per_s",
    "latency_p50_us",
    "latency_p99_us",
    "cpu_s",
    "files",
    "control",
];

/// `v` without the fields of [`RUN_TO_RUN`], at any depth.
fn scrub(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !RUN_TO_RUN.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), scrub(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(scrub).collect()),
        v => v.clone(),
    }
}

/// The example's binary, built beside the tests (`cargo build --all-targets`).
fn example() -> std::path::PathBuf {
    let p = bin().parent().unwrap().join("examples/record_auto");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build --release --all-targets`",
        p.display()
    );
    p
}

#[test]
fn the_example_records_with_auto_and_summarizes_as_the_cli_does() {
    require_root();
    let tb = Testbed::create("example", 1).unwrap();
    let out = TempDir::new("example");
    let mut got = Vec::new();
    for who in ["cli", "example"] {
        let dir = out.path().join(who);
        let json = out.path().join(format!("{who}.json"));
        let (d, j) = (dir.to_str().unwrap(), json.to_str().unwrap());
        let mut c = match who {
            "cli" => {
                let mut c = tb.command(bin().to_str().unwrap());
                c.args([
                    "record",
                    "-i",
                    CAP_IF,
                    "-w",
                    d,
                    "-c",
                    "500",
                    "--summary-json",
                    j,
                ]);
                c
            }
            _ => {
                let mut c = tb.command(example().to_str().unwrap());
                c.args([CAP_IF, d, "500", j]);
                c
            }
        };
        // What auto picks by itself (veth: the packet engine).
        c.env_remove("WIRETAPE_ENGINE");
        let mut rec = Recorder::started(Recorder::spawn_command(c));
        tb.send(0..500, SizeFn::Mixed, 4, Some(20_000)).unwrap();
        assert!(rec.wait(30).success(), "{who}: {}", rec.stderr_text());
        let text = rec.stderr_text();
        if who == "example" {
            assert!(
                text.contains("engine packet: auto: packet, wt-cap (veth)"),
                "{text}"
            );
            assert!(
                text.contains("preflight passed: interfaces wt-cap"),
                "{text}"
            );
            let line = text
                .lines()
                .find(|l| l.starts_with("metrics: wiretape_frames_written_total"));
            assert!(line.is_some_and(|l| l.ends_with(" 500")), "{text}");
            assert!(text.contains("500 packets captured"), "{text}");
        }
        got.push(read_json(&json));
    }
    let (cli, ex) = (&got[0], &got[1]);
    assert_eq!(cli["packets_written"], 500, "{cli}");
    assert_eq!(cli["engine"], "packet", "{cli}");
    // Every field of the CLI's summary is in the example's, and equal.
    let (a, b) = (scrub(cli), scrub(ex));
    for (k, v) in a.as_object().unwrap() {
        assert_eq!(Some(v), b.get(k), "field {k}");
    }
    assert_eq!(a, b);
}
