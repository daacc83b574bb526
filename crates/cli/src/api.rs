//! `wiretape api` (the stores of this sensor over HTTPS with mutual TLS)
//! and `wiretape certs` (the CA, server and client certificates it uses).
//! The server, the TLS and the certificates are the query crate's
//! (`query::api`, `query::tls`); this is the command line around them.

use crate::common::flags::pem_flag;
use anyhow::Result;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use wiretape::query::api::{ApiOptions, Server};

use wiretape::query::tls::{self, Validity};

/// The text after `wiretape api --help`'s options: the endpoints come
/// from the API's own table (the one `/v1/openapi.json` describes).
fn api_help() -> String {
    format!(
        "Serves the stores read-only: the same files `wiretape extract` reads, including those a \
running `wiretape record` is writing (fresh within its flush interval). It is its own process, at a \
lower CPU priority than the recorder (nice +10): run it beside `record` or on a copy of the store.\n\n\
Loopback (127.0.0.0/8, ::1) may be served as plain HTTP; any other address (0.0.0.0 and [::] \
included) needs all of --tls-cert, --tls-key and --client-ca: every client must then present a \
certificate of that CA, within its validity; --allow-client NAME narrows that to certificates \
whose CN or a SAN DNS name is NAME. A refused TLS handshake is logged with its cause (expired, \
another CA, not a client certificate, ...), and plain HTTP sent to the TLS port is answered \
\"this sensor speaks HTTPS\".\n\n\
Endpoints (GET; TIME as extract takes it: RFC 3339, Unix seconds, -5m; the whole description, \
parameters and answers: GET /v1/openapi.json):\n{}\n  \
/v1/extract?src=&dst=&sport=&dport=&proto=  the 5-tuple form (Security Onion's stenoquery)\n\n\
Every refusal is JSON {{\"error\": \"...\"}} and one line on stderr (what a client sent is \
escaped and cut); -q drops the lines of answered requests, never those of refusals.\n\n\
Examples:\n  \
wiretape certs init /etc/wiretape/tls --server-name sensor1.example --server-name 10.0.0.5\n  \
wiretape certs client /etc/wiretape/tls analyst1\n  \
wiretape api -w /data --listen 0.0.0.0:8443 --tls-cert /etc/wiretape/tls/server.pem \\\n      \
--tls-key /etc/wiretape/tls/server.key --client-ca /etc/wiretape/tls/ca.pem --allow-client analyst1\n  \
wiretape api -w /data --listen 127.0.0.1:8080      # local tools only, plain HTTP\n  \
wiretape api --config /etc/wiretape/api.conf       # the flags from a TOML file (wiretape-api.service)\n  \
curl -s 'http://127.0.0.1:8080/v1/extract?from=-5m&filter=tcp+port+443' | tshark -r -",
        wiretape::query::api::spec::help()
    )
}

#[derive(clap::Args)]
#[command(after_help = api_help())]
pub(crate) struct ApiArgs {
    #[command(flatten)]
    read: crate::common::ReadArgs,
    /// A store to serve (a directory wiretape records into, or a capture
    /// file); repeatable. Stores are named only here (api takes no
    /// positional words): a filter is each query's `filter=` parameter,
    /// whose syntax errors name the word (400).
    #[arg(short = 'w', long = "write", value_name = "DIR", required = true)]
    stores: Vec<PathBuf>,
    /// Address and port to listen on (port 0: one is chosen and printed).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// The server's certificate chain (PEM).
    #[arg(long, value_name = "PEM")]
    tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long, value_name = "PEM")]
    tls_key: Option<PathBuf>,
    /// Clients must present a certificate of this CA (PEM).
    #[arg(long, value_name = "PEM")]
    client_ca: Option<PathBuf>,
    /// Admit only client certificates whose CN (or a SAN DNS name) is NAME;
    /// repeatable (default: any certificate of --client-ca).
    #[arg(long, value_name = "NAME")]
    allow_client: Vec<String>,
    /// Queries (extract, count, plan, index) running at once; the next gets
    /// 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 4)]
    max_queries: usize,
    /// Connections open at once; more are closed at once.
    #[arg(long, value_name = "N", default_value_t = 2048)]
    max_connections: usize,
    /// Seconds a client may take to finish its TLS handshake (idle
    /// connections are closed after that).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    handshake_timeout: u64,
    /// Seconds a connection may wait for a request head (keep-alive).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    idle_timeout: u64,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "P")]
    prefix: Option<String>,
    /// The node name in /v1/status, /v1/index.parquet and /v1/sessions'
    /// Wiretape-Node (default: the host name).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// No line per answered request on stderr (refusals are still logged).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Read flags from FILE (TOML; keys are the long flag names, e.g.
    /// `write = ["/var/lib/wiretape/eth0"]`, `listen = "0.0.0.0:8443"`,
    /// `tls-cert = "/etc/wiretape/api/server.pem"`); flags on the command
    /// line override it. What wiretape-api.service reads
    /// (/etc/wiretape/api.conf).
    #[arg(long, value_name = "FILE")]
    #[allow(dead_code)] // read by config::expand, before this parse
    config: Option<PathBuf>,
}

pub(crate) fn api(a: ApiArgs) -> Result<i32> {
    let mut o = ApiOptions::new(a.stores, a.listen);
    o.read = a.read.options()?;
    (o.tls_cert, o.tls_key, o.client_ca) = (a.tls_cert, a.tls_key, a.client_ca);
    o.allow_clients = a.allow_client;
    (o.max_queries, o.max_connections) = (a.max_queries, a.max_connections);
    (o.handshake_timeout_secs, o.idle_timeout_secs) = (a.handshake_timeout, a.idle_timeout);
    (o.prefix, o.node, o.quiet) = (a.prefix, a.node, a.quiet);
    o.naming = crate::common::flags::api_flag;
    o.tls_naming = crate::common::flags::tls_term;
    let stores = o.stores.len();
    let server = match o.build().and_then(Server::bind) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("wiretape: error: {}", crate::common::flags::api_line(&e));
            return Ok(e.exit_code());
        }
    };
    // The recorder comes first: every thread of this process (the
    // runtime's, the queries') runs 10 nice steps lower.
    for w in server.warnings() {
        let w = format!("{} {}: {}", pem_flag(w.role), w.path.display(), w.note);
        eprintln!("wiretape: api: warning: {w}: renew it (`wiretape certs server DIR --server-name NAME --force` for --tls-cert)");
    }
    wiretape::query::api::escape_panics();
    let _ = wiretape::capture::sys::lower_thread_priority(10);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    eprintln!(
        "wiretape: api: serving {stores} store(s) on {}{}",
        server.url(),
        if server.url().starts_with("https") {
            " (mutual TLS)"
        } else {
            " (plain HTTP, loopback only)"
        }
    );
    server.run(&stop).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(0)
}

#[derive(clap::Args)]
pub(crate) struct CertsArgs {
    #[command(subcommand)]
    cmd: CertsCmd,
}

/// `--days N`: 1 to 36500 (a certificate of 0 days would expire within
/// two minutes).
fn days_arg(s: &str) -> std::result::Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of days"))?;
    tls::check_days(n).map_err(|e| crate::common::flags::tls_line(&e))
}

#[derive(clap::Subcommand)]
enum CertsCmd {
    /// A new CA (self-signed, named `wiretape CA NAME`: --name, else the
    /// first server name and a random tag, so that two sites' CAs differ)
    /// and a server certificate and key signed by it, whose SANs are the
    /// --server-name names (DNS names, and IP addresses where a name is
    /// one): DIR/ca.pem, ca.key, server.pem, server.key.
    Init {
        /// Directory to write into (created).
        dir: PathBuf,
        /// A name clients reach the server by (DNS name or IP address);
        /// repeatable.
        #[arg(long, value_name = "NAME", required = true)]
        server_name: Vec<String>,
        /// The CA's name: `wiretape CA NAME` (default: the first
        /// --server-name and a random tag).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Days the server certificate is valid (at most 366 is what
        /// browsers and Mozilla's TLS configurations accept; renew it with
        /// `certs server`).
        #[arg(long, value_name = "N", default_value_t = tls::SERVER_DAYS, value_parser = days_arg)]
        days: u32,
        /// Days the CA is valid.
        #[arg(long, value_name = "N", default_value_t = tls::CA_DAYS, value_parser = days_arg)]
        ca_days: u32,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// A new server certificate and key signed by DIR's CA (renewal, or
    /// other names): DIR/server.pem and server.key (--force replaces
    /// them; restart `wiretape api` after).
    Server {
        /// The directory of `certs init`.
        dir: PathBuf,
        /// A name clients reach the server by (DNS name or IP address);
        /// repeatable.
        #[arg(long, value_name = "NAME", required = true)]
        server_name: Vec<String>,
        /// Days the certificate is valid.
        #[arg(long, value_name = "N", default_value_t = tls::SERVER_DAYS, value_parser = days_arg)]
        days: u32,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
    },
    /// A client certificate and key of CN NAME signed by DIR's CA:
    /// DIR/client-NAME.pem and client-NAME.key; with --p12 also
    /// DIR/client-NAME.p12 (key, certificate and CA as PKCS#12, for a
    /// browser to import: the console over mutual TLS); with
    /// --stenographer OUT the files of Stenographer's clients.
    Client {
        /// The directory of `certs init`.
        dir: PathBuf,
        /// The client's name (its certificate's CN; what --allow-client admits).
        name: String,
        /// Days the certificate is valid (cut at the CA's end).
        #[arg(long, value_name = "N", default_value_t = tls::CLIENT_DAYS, value_parser = days_arg)]
        days: u32,
        /// Overwrite existing files.
        #[arg(long)]
        force: bool,
        /// Also write DIR/client-NAME.p12 (PKCS#12, AES-256, for browsers);
        /// a certificate and key of NAME already there are bundled as they are.
        #[arg(long)]
        p12: bool,
        /// The PKCS#12 password: the first line of FILE (default: asked on
        /// the terminal, or read from standard input when it is not one).
        #[arg(long, value_name = "FILE", requires = "p12")]
        password_file: Option<PathBuf>,
        /// Also write what Stenographer's stenoread and stenocurl read:
        /// OUT/config (JSON: Host, Port, CertPath) and in OUT
        /// client_cert.pem, client_key.pem, and the CA as ca_cert.pem and
        /// server_cert.pem; then `STENOGRAPHER_CONFIG=OUT/config stenoread
        /// QUERY ...` asks `wiretape api`'s POST /query.
        #[arg(long, value_name = "OUT")]
        stenographer: Option<PathBuf>,
        /// With --stenographer: the Host to write, one of the names of the
        /// API's certificate (DIR/server.pem) (default: its first).
        #[arg(long, value_name = "HOST", requires = "stenographer")]
        host: Option<String>,
        /// With --stenographer: the Port to write (the port of `wiretape api
        /// --listen`).
        #[arg(
            long,
            value_name = "PORT",
            default_value_t = 8443,
            requires = "stenographer"
        )]
        port: u16,
    },
}

/// The terminal's echo off while it lives (by `stty`, on standard input's
/// terminal: no unsafe code for one prompt).
struct EchoOff;

impl EchoOff {
    fn new() -> EchoOff {
        let _ = std::process::Command::new("stty").arg("-echo").status();
        EchoOff
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        let _ = std::process::Command::new("stty").arg("echo").status();
    }
}

/// The PKCS#12 password: the first line of `file`, else asked on the
/// terminal (not echoed), else the first line of standard input.
fn p12_password(file: Option<&std::path::Path>) -> Result<String> {
    use std::io::{BufRead, IsTerminal, Write};
    let first_line = |t: &str| t.lines().next().unwrap_or("").to_string();
    if let Some(f) = file {
        let t = std::fs::read_to_string(f)
            .map_err(|e| anyhow::anyhow!("--password-file {}: {e}", f.display()))?;
        return Ok(first_line(&t));
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        return Ok(first_line(&line));
    }
    let ask = |prompt: &str| -> Result<String> {
        eprint!("{prompt}");
        std::io::stderr().flush()?;
        let _quiet = EchoOff::new();
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        eprintln!();
        Ok(first_line(&line))
    };
    let a = ask("PKCS#12 password: ")?;
    let b = ask("again: ")?;
    if a != b {
        anyhow::bail!("the two passwords differ: nothing written");
    }
    Ok(a)
}

pub(crate) fn certs(a: CertsArgs) -> Result<i32> {
    let (written, hint) = match a.cmd {
        CertsCmd::Init {
            dir,
            server_name,
            name,
            days,
            ca_days,
            force,
        } => {
            let w = Validity::days(days).and_then(|v| {
                let ca = Validity::days(ca_days)?;
                tls::init(&dir, &server_name, name.as_deref(), v, ca, force)
            });
            let w = w.map_err(tls::CertsError::from);
            let d = dir.display();
            let hint = format!(
                "serve:   wiretape api -w DIR --listen 0.0.0.0:8443 --tls-cert {d}/server.pem --tls-key {d}/server.key --client-ca {d}/ca.pem\n\
                 clients: wiretape certs client {d} NAME"
            );
            (w, hint)
        }
        CertsCmd::Server {
            dir,
            server_name,
            days,
            force,
        } => {
            let w = Validity::days(days)
                .and_then(|v| tls::issue_server(&dir, &server_name, v, force))
                .map_err(tls::CertsError::from);
            let d = dir.display();
            let hint = format!(
                "serve:   wiretape api -w DIR --listen 0.0.0.0:8443 --tls-cert {d}/server.pem --tls-key {d}/server.key --client-ca {d}/ca.pem\n\
                 (a running `wiretape api` reads its certificate at start: restart it)"
            );
            (w, hint)
        }
        CertsCmd::Client {
            dir,
            name,
            days,
            force,
            p12,
            password_file,
            stenographer,
            host,
            port,
        } => {
            let password = if p12 {
                // Asked first: a typo costs nothing.
                Some(p12_password(password_file.as_deref())?)
            } else {
                None
            };
            let mut also = tls::ClientBundle::default();
            also.force = force;
            also.p12_password = password;
            also.stenographer = stenographer.map(|out| tls::StenoClient { out, host, port });
            let w = tls::issue_client_bundle(&dir, &name, days, &also);
            let steno_hint = match &w {
                Ok(tls::ClientIssued {
                    stenographer: Some(c),
                    ..
                }) => Some(format!(
                    "\nstenoread: STENOGRAPHER_CONFIG={} stenoread 'host 10.1.2.3' -w case.pcap   \
                     (wiretape api --listen ...:{} with these certificates)",
                    c.config.display(),
                    c.port
                )),
                _ => None,
            };
            let w = w.map(|i| i.written);
            let d = dir.display();
            let mut hint = format!(
                "use:     wiretape extract https://HOST:8443 --cert {d}/client-{name}.pem --key {d}/client-{name}.key --ca {d}/ca.pem -w case.pcap ...\n\
                 curl:    curl --cacert {d}/ca.pem --cert {d}/client-{name}.pem --key {d}/client-{name}.key https://HOST:8443/v1/status"
            );
            if p12 {
                hint.push_str(&format!(
                    "\nbrowser: import {d}/client-{name}.p12 (and trust {d}/ca.pem), then open https://HOST:8443/"
                ));
            }
            if let Some(h) = steno_hint {
                hint.push_str(&h);
            }
            (w, hint)
        }
    };
    match written {
        Ok(w) => {
            for f in &w.files {
                println!("wrote {}", f.display());
            }
            for n in &w.notes {
                println!("{n}");
            }
            println!("{hint}");
            Ok(0)
        }
        Err(e) => {
            eprintln!("wiretape: error: {}", crate::common::flags::certs_line(&e));
            Ok(1)
        }
    }
}
