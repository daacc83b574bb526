//! `wiretape demo`: the embedded default run (`wiretape_testbed::demo`): a
//! veth pair in a private network namespace, a known set of frames sent
//! through it, recorded by the real engine (XDP + AF_XDP), read back and
//! checked byte for byte; then everything is removed. Here: the flags and
//! the lines.

use anyhow::Result;
use std::path::PathBuf;
use wiretape::capture::XdpMode;
use wiretape::pipeline::summary::thousands;
use wiretape::timestamp::format_rfc3339;
use wiretape::Event;
use wiretape_testbed::demo::{self, DemoEvent, DemoOptions};
use wiretape_testbed::{CAP_IF, GEN_IF};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Frames to send (sizes 60..1514, spread over flows and queues).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    count: u64,
    /// RX queues of the veth pair.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    queues: u32,
    /// Frames per second the sender offers.
    #[arg(long, default_value_t = 50_000)]
    rate: u64,
    /// XDP mode: auto, native or generic.
    #[arg(long, default_value = "auto", value_parser = ["auto", "native", "generic"])]
    xdp_mode: String,
    /// Keep the capture files in DIR (default: a temporary directory, removed).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let mut opts = DemoOptions::default();
    opts.count = a.count;
    opts.queues = a.queues;
    opts.rate = a.rate;
    opts.dir = a.dir;
    opts.xdp_mode = match a.xdp_mode.as_str() {
        "native" => Some(XdpMode::Native),
        "generic" => Some(XdpMode::Generic),
        _ => None,
    };
    let mut meter = wiretape::pipeline::ProgressMeter::new();
    let r = demo::run(&opts, |ev| {
        match ev {
        DemoEvent::Created { netns } => println!(
            "demo: network namespace {netns} with veth {GEN_IF} <-> {CAP_IF} ({} RX queues); sending {} frames of 60..1514 bytes at {} frames/s",
            a.queues,
            thousands(a.count),
            thousands(a.rate)
        ),
        DemoEvent::Record { event, config } => match event {
            Event::Started(info) => println!(
                "demo: {}",
                wiretape::pipeline::StartLine::new(info, config, None)
            ),
            Event::Progress {
                elapsed,
                snapshot,
                storage,
            } => eprintln!("{}", meter.line(*elapsed, snapshot, storage)),
            Event::Notice(n) => println!("demo: {n}"),
            _ => {}
        },
        _ => {}
    }
    })?;
    print!("{}", r.summary.text());
    println!("demo: recorded files:");
    for f in &r.files {
        println!("  {:>8} frames  {}", thousands(f.frames), f.path.display());
    }
    println!("demo: first records:");
    for e in &r.first_records {
        println!(
            "  {}  queue {}  seq {:>6}  {:>5} bytes",
            format_rfc3339(e.ts_ns),
            e.queue,
            e.seq,
            e.len
        );
    }
    if r.ok() {
        println!(
            "demo: OK: sent {} frames ({} bytes); recorded {} in {} files, every one byte-identical, timestamps in order; seen = written + drops{}",
            thousands(r.sent),
            thousands(r.sent_bytes),
            thousands(r.recorded),
            r.files.len(),
            if r.kept { format!("; files kept in {}", r.dir.display()) } else { String::new() }
        );
        Ok(0)
    } else {
        let problems: Vec<String> = r.mismatches.iter().map(|m| m.to_string()).collect();
        println!(
            "demo: FAILED: sent {}, recorded {}: {}",
            r.sent,
            r.recorded,
            problems.join("; ")
        );
        Ok(1)
    }
}
