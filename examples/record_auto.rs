//! Records an interface as `wiretape record -i IFACE -c COUNT --summary-json
//! FILE` does, each part a few lines of the library: the automatic engine
//! choice and its reason, the preflight, the metrics endpoint, the typed
//! summary (the same JSON as the CLI's).
//!
//! ```sh
//! cargo run --release --example record_auto -- eth0 /data 100000 summary.json   # root
//! ```
use std::io::{Read, Write};
use std::sync::atomic::AtomicBool;
use wiretape::pipeline::metrics::Metrics;
use wiretape::pipeline::{preflight, AutoHints};
use wiretape::{Event, RecordConfig, RunSummary, StorageProgress};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [iface, dir, count, json] = &args[..] else {
        return Err("usage: record_auto IFACE DIR COUNT SUMMARY.json".into());
    };
    // The engine `--engine auto` would pick, and why.
    let (mut cfg, choice) = RecordConfig::auto(&[iface], dir, &AutoHints::default());
    eprintln!(
        "engine {}: {}",
        choice.engine,
        choice.reason.as_deref().unwrap_or("(no reason known)")
    );
    cfg.stage.count = Some(count.parse()?);
    // Everything the recording would trip on, before anything is attached.
    let checked = preflight(&cfg, None)?;
    eprintln!("preflight passed: {}", checked.passed.join(", "));
    // Prometheus metrics on loopback (port 0: the system picks one).
    let metrics = Metrics::serve("127.0.0.1:0".parse()?, false, iface, dir.into())?;
    // Record, the metrics fed from the progress events.
    let (mut why, mut fin) = (String::new(), StorageProgress::default());
    let stop = AtomicBool::new(false);
    let report = wiretape::record(&cfg, &stop, |ev| {
        metrics.observe(&ev);
        match ev {
            Event::Started(i) => eprintln!("wiretape: recording {} ({})", i.ifname, i.engine),
            Event::Stopping(w) => why = w.to_string(),
            Event::Finished(st) => fin = st,
            _ => {}
        }
    })?;
    metrics.finish(&report, &fin);
    // The typed summary: the CLI's --summary-json and closing text.
    let summary = RunSummary::new(&report, &cfg, &why, &fin, choice.reason.as_deref());
    std::fs::write(json, summary.to_json())?;
    eprint!("{}", summary.text());
    // What a scrape of the endpoint says now (the final numbers).
    let mut c = std::net::TcpStream::connect(metrics.addr)?;
    c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut page = String::new();
    c.read_to_string(&mut page)?;
    for line in page
        .lines()
        .filter(|l| l.starts_with("wiretape_frames_written_total"))
    {
        eprintln!("metrics: {line}");
    }
    Ok(())
}
