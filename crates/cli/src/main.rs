//! `wiretape`: the command line. Thin: parsing, wiring, presentation.
//! Exit codes: 0 done, 1 runtime error (one line naming the thing and the
//! fix), 2 usage error (from clap).

#![recursion_limit = "256"]

// The test build names the storage crate only for its test hooks (Cargo.toml).
#[cfg(test)]
use wiretape_storage as _;
mod api;
mod common;
mod config;
mod ctl;
mod demo;
mod extract;
mod filter;
mod generate;
mod index;
mod info;
mod record;
mod repair;
mod send;
mod sessions;
mod timeline;
mod tsbench;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "wiretape",
    // `wiretape 0.1.0 (commit 3d9c96e1a2b3)`, or `(unknown commit)` when
    // built outside a git checkout (build.rs).
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("WIRETAPE_COMMIT"), ")"),
    about = "Lossless packet recorder: XDP + AF_XDP per RX queue to nanosecond pcap, with exact accounting of every frame",
    long_about = "Lossless packet recorder: XDP + AF_XDP per RX queue to nanosecond pcap, with exact accounting of every frame.\n\n\
Examples:\n  wiretape demo                                  # try it: private veth pair, known traffic, verified\n  \
wiretape record -i eth0 -w /data               # record until Ctrl-C\n  \
wiretape record -i eth0 -w /data -c 1000000 --summary-json sum.json\n  \
wiretape record -i eth0 -w /data tcp port 443   # only what the filter accepts (tcpdump's language)\n  \
wiretape info /data                            # what each file holds; exits 1 if one is corrupt\n  \
wiretape extract /data --from -5m -w - tcp port 53 | tshark -r -   # a window of the store, merged\n  \
wiretape api -w /data --listen 0.0.0.0:8443 --tls-cert .. --tls-key .. --client-ca ..  # the store over HTTPS\n  \
wiretape extract https://s1:8443 https://s2:8443 --from -1h -w case.pcap host 10.1.2.3  # many sensors, merged\n  \
wiretape timeline /data --from -1h -o last-hour.svg  # where the traffic is, where the gaps are\n  \
wiretape record -i eth0 -w /data --ring 4G --serve 127.0.0.1:57012  # time travel, PCAP-over-IP\n  \
wiretape ctl -w /data dump --last 30s           # the last 30 s of the ring into /data\n  \
wiretape replay /data/x.pcap -i eth1 --speed max  # send it again\n  \
wiretape gen -i eth1 --size 64 --count 1000000   # numbered, timed test frames"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Record an interface to pcap files, one per RX queue.
    Record(record::Args),
    /// Talk to a running recorder: `status` (live counters as JSON) and
    /// `dump` (a window of its time-travel ring into a capture file).
    Ctl(ctl::Args),
    /// Show what capture files hold: packets, bytes, time span, resolution, link type.
    Info(info::Args),
    /// Self-contained demonstration: veth pair in a private network namespace,
    /// known frames sent, recorded, checked byte for byte, everything removed.
    Demo(demo::Args),
    /// Frames of a time window (and a filter) from directories and files of
    /// captures, merged in timestamp order into one pcap/pcapng file or stdout.
    Extract(extract::Args),
    /// (Re)build missing or outdated .idx sidecars (block times and flow
    /// keys), key indexes and session tables with a progress bar; --parquet exports the block index as a
    /// Parquet table for fleet-wide SQL (DuckDB, Trino, Spark, ClickHouse).
    Index(index::Args),
    /// Frames and bytes per time bin of stores (and sensors) from their
    /// .idx sidecars: a table, --json, or a picture (-o x.svg, -o x.png).
    Timeline(timeline::Args),
    /// The connections of stores from their session tables (one row per
    /// connection and file, with DNS, TLS SNI/ALPN/JA4, HTTP and QUIC
    /// names): a table or --json, filtered by --from, --to and --where.
    Sessions(sessions::Args),
    /// Serve this sensor's stores over HTTPS with mutual TLS: extract, count,
    /// plan, status and the Parquet block index for SOC tools, analysts and
    /// `wiretape extract https://...`.
    Api(api::ApiArgs),
    /// Make the certificates `api` and its clients use: `init` (a CA and the
    /// server's), `client` (one per client).
    Certs(api::CertsArgs),
    /// After a crash or a full disk: trim torn tails off capture files, and
    /// remove those left without a complete header (FILEs or DIRs).
    Repair(repair::Args),
    /// Send a capture file (pcap or pcapng) on an interface: at its own pace,
    /// as fast as possible, or at a frame or bit rate (AF_XDP transmit).
    Replay(send::ReplayArgs),
    /// Send synthetic UDP frames carrying a sequence number and their send
    /// time: for loss and timestamp-accuracy tests (AF_XDP transmit).
    Gen(send::GenArgs),
    /// Check a capture filter expression; --explain shows the classic BPF
    /// and the eBPF program loaded into the XDP program.
    Filter(filter::Args),
    /// Accuracy of each timestamp mode against ground truth (simulated 10 Gbit/s
    /// link and poller running the real stamping code): a table and a chart.
    Tsbench(tsbench::Args),
    /// Man pages and shell completions from these definitions (for packagers:
    /// `generate man DIR`, `generate complete-bash|complete-zsh|complete-fish`).
    #[command(hide = true)]
    Generate(generate::Args),
}

fn main() {
    // `record --config FILE`: the file's flags join the command line's.
    let args = match config::expand::<Cli>(std::env::args_os().collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("wiretape: error: {}", one_line(&e));
            std::process::exit(if e.downcast_ref::<Usage>().is_some() {
                2
            } else {
                1
            });
        }
    };
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => clap_exit(e, &subcommand_of(&args)),
    };
    if matches!(
        cli.cmd,
        Cmd::Info(_) | Cmd::Extract(_) | Cmd::Ctl(_) | Cmd::Generate(_) | Cmd::Sessions(_)
    ) {
        // `info | head`, `extract -w - | head` end quietly. Not for record: a closed log pipe
        // must never kill a recording (its files would not be finished).
        default_sigpipe();
    }
    let r = match cli.cmd {
        Cmd::Record(a) => record::run(a),
        Cmd::Info(a) => info::run(a),
        Cmd::Ctl(a) => ctl::run(a),
        Cmd::Demo(a) => demo::run(a),
        Cmd::Tsbench(a) => tsbench::run(a),
        Cmd::Filter(a) => filter::run(a),
        Cmd::Repair(a) => repair::run(a),
        Cmd::Extract(a) => extract::run(a),
        Cmd::Index(a) => index::run(a),
        Cmd::Timeline(a) => timeline::run(a),
        Cmd::Sessions(a) => sessions::run(a),
        Cmd::Api(a) => api::api(a),
        Cmd::Certs(a) => api::certs(a),
        Cmd::Replay(a) => send::replay(a),
        Cmd::Gen(a) => send::gen(a),
        Cmd::Generate(a) => generate::run(a),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!(
                "wiretape: error: {}",
                common::flags::in_flags(&e, one_line(&e))
            );
            // Bad input found after parsing (a CPU not allowed...) is a
            // usage error, as clap's are.
            std::process::exit(if e.downcast_ref::<Usage>().is_some() {
                2
            } else {
                1
            });
        }
    }
}

/// clap's refusal of the command line: help and version as clap prints
/// them; any other as one line (exit 2) naming the problem, clap's tip if
/// it has one, and where the help is.
fn clap_exit(e: clap::Error, cmd: &str) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        e.exit();
    }
    eprintln!(
        "wiretape: error: {}",
        clap_line(&e.render().to_string(), cmd)
    );
    std::process::exit(2);
}

/// The (sub)command a command line names: `wiretape certs init`.
fn subcommand_of(args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["wiretape".to_string()];
    for a in args.iter().skip(1) {
        let Some(a) = a.to_str() else { continue };
        if let Some(sc) = cmd.find_subcommand(a).cloned() {
            path.push(sc.get_name().to_string());
            cmd = sc;
        }
    }
    path.join(" ")
}

/// clap's error text (`error: ...`, details, tips, `Usage: ...`, `For more
/// information ...`) as one line, pointing at `cmd --help`.
fn clap_line(text: &str, cmd: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.starts_with("Usage:") || l.starts_with("For more information") {
            break;
        }
        if l.is_empty() {
            continue;
        }
        let l = l.strip_prefix("error: ").unwrap_or(l);
        match parts.last_mut() {
            // Details of the line before (a list of arguments, the
            // possible values) go on it.
            Some(last) if !l.starts_with("tip:") => {
                last.push(' ');
                last.push_str(l);
            }
            _ => parts.push(l.to_string()),
        }
    }
    format!("{} (see `{cmd} --help`)", parts.join("; "))
}

/// A usage error found after parsing: exit code 2, like clap's.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A usage error (exit 2) saying `msg`.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

/// One line: the error and those of its causes its text does not already
/// hold (our errors name their source in their own text, and anyhow's chain
/// lists the source again: it would be printed twice).
pub fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for c in e.chain() {
        let t = c.to_string();
        if msg.contains(&t) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&t);
    }
    msg.replace('\n', " ")
}

/// Restores the default SIGPIPE action (Rust ignores it), so that
/// `wiretape info ... | head` ends quietly like other Unix tools instead of
/// failing on a write to a closed pipe.
pub fn default_sigpipe() {
    // SAFETY: setting a standard signal's disposition to SIG_DFL touches no
    // memory of ours; called once at start-up before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_are_one_line() {
        let line = |args: &[&str]| match Cli::try_parse_from(args) {
            Err(e) => {
                let os: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
                clap_line(&e.render().to_string(), &subcommand_of(&os))
            }
            Ok(_) => panic!("{args:?} parsed"),
        };
        let l = line(&["wiretape", "api", "-w", "/d"]);
        assert_eq!(
            l,
            "the following required arguments were not provided: --listen <ADDR:PORT> \
             (see `wiretape api --help`)"
        );
        let l = line(&["wiretape", "extract", "/d", "--count-only", "--format", "x"]);
        assert!(
            l.starts_with(
                "invalid value 'x' for '--format <FORMAT>' [possible values: pcap, pcapng]"
            ),
            "{l}"
        );
        assert!(l.ends_with("(see `wiretape extract --help`)"), "{l}");
        let l = line(&["wiretape", "info", "--jsn", "x"]);
        assert!(
            l.contains(
                "unexpected argument '--jsn' found; tip: a similar argument exists: '--json'"
            ),
            "{l}"
        );
        assert!(!l.contains('\n'));
        let l = line(&["wiretape", "certs", "init", "/x"]);
        assert!(l.ends_with("(see `wiretape certs init --help`)"), "{l}");
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = wiretape::storage::StorageError::NotWritable {
            path: "/proc/foo".into(),
            source: io,
        };
        let line = one_line(&anyhow::Error::from(e));
        assert_eq!(
            line.matches("No such file or directory").count(),
            1,
            "{line}"
        );
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(one_line(&e), "outer: inner");
    }
}
