//! `wiretape sessions`: the session tables of local stores and sensors
//! (`/v1/sessions`), merged, as a table, one JSON object per line or one
//! Parquet file (the reading and the `--where` language are the query
//! crate's: `query::sessions`).

use anyhow::{anyhow, Result};
use std::path::PathBuf;
use wiretape::pipeline::summary::thousands;
use wiretape::query::fleet;
use wiretape::query::remote::{self, Remote};
use wiretape::query::sessions::{self, Where};

#[derive(clap::Args)]
#[command(
    mut_arg("from", |a| a.help("Sessions with a frame at or after TIME (RFC 3339, Unix seconds, or back from now: -10m)")),
    mut_arg("to", |a| a.help("Sessions with a frame before TIME")),
    after_help = "Every capture file `record` writes has a session table beside it, \
<file>.sessions.parquet: one row per connection (IP version, address pair, protocol, port pair, \
both directions) with frames in the file, and the names its first frames carried. A connection \
that spans files has a row in each, with the same session_id (continued = true after the first). \
`record -r` writes them too; `wiretape index DIR` writes those missing (files recorded with \
--no-sessions, or before). Any Parquet reader asks them with SQL:\n\n  \
duckdb -c \"SELECT client_ip, server_ip, tls_sni FROM '/data/*.sessions.parquet' WHERE tls_sni LIKE '%.evil-cdn.net'\"\n\n\
--where: conditions FIELD OP VALUE joined by `and`. FIELD: a column (session_id, file, first_ns, \
last_ns, ip_version, proto, client_ip, client_port, server_ip, server_port, vlan, client_packets, \
client_bytes, server_packets, server_bytes, tcp_flags, continued, dns_query, dns_type, \
dns_answers, tls_sni, tls_alpn, ja4, http_host, http_method, http_path, http_user_agent, \
quic_sni, dns_queries, dns_queries_cut). OP: = != < <= > >= and ~ (text: with * or ? the whole value matches the pattern, \
else it contains VALUE; ASCII case ignored). VALUE: a number, a word, or 'quoted text'. On a list \
(dns_queries: every distinct DNS question of the connection, dns_answers, tls_alpn) a condition \
holds when it holds for one item. A missing name satisfies \
only !=. A mistake is named by its character position.\n\n\
Output: a table (first frame, protocol, client -> server, frames and bytes each way, the names), \
--json: one object per line with the table's column names, or --parquet OUT: one Parquet file \
with the session table's columns (DuckDB: SELECT ... FROM 'OUT'). Sessions are listed by their \
first frame; a session overlapping [--from, --to) is listed. A table marked incomplete (the \
recorder's session thread fell behind and skipped frames: sessions_skipped) is named on stderr.\n\n\
SENSORS: an https://HOST:PORT input asks that sensor's /v1/sessions (the same window and --where, \
with --cert, --key and --ca); its rows are merged with the local ones by first frame. \
`wiretape extract --session-where EXPR` writes the chosen sessions' frames.\n\n\
Examples:\n  \
wiretape sessions /data --from -1h\n  \
wiretape sessions https://sensor1:8443 https://sensor2:8443 --where 'dns_queries ~ evil' --parquet case.parquet\n  \
wiretape sessions /data --where \"tls_sni ~ '*.evil-cdn.net' and server_port = 443\"\n  \
wiretape sessions /data --where \"dns_queries ~ example.com\" --json | jq .dns_answers"
)]
pub(crate) struct Args {
    /// Directories (their capture files' session tables), capture files and
    /// sensors (https://HOST:PORT: their /v1/sessions).
    #[arg(value_name = "DIR|FILE|URL", required = true)]
    inputs: Vec<String>,
    #[command(flatten)]
    index_dir: crate::common::IndexDirArg,
    #[command(flatten)]
    window: crate::common::WindowArgs,
    /// Only sessions satisfying EXPR, e.g. "tls_sni ~ '*.example.com' and
    /// server_port = 443" (see below).
    #[arg(long = "where", value_name = "EXPR")]
    filter: Option<String>,
    /// One JSON object per session and line, the table's column names.
    #[arg(long, conflicts_with = "parquet")]
    json: bool,
    /// Write the sessions as one Parquet file OUT (the session table's
    /// columns) instead of listing them.
    #[arg(long, value_name = "OUT.parquet")]
    parquet: Option<PathBuf>,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    #[command(flatten)]
    tls: crate::common::tls::ClientTls,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let w = match a.filter.as_deref().map(Where::parse).transpose() {
        Ok(w) => w.unwrap_or_default(),
        Err(e) => return crate::common::usage_exit(format!("--where: {e}")),
    };
    let window = match a.window.window() {
        Ok(w) => w,
        Err(e) => return crate::common::usage_exit(e),
    };
    let mut local = Vec::new();
    let mut remotes = Vec::new();
    for i in &a.inputs {
        if remote::is_url(i) {
            match Remote::parse(i) {
                Ok(r) => remotes.push(r),
                Err(e) => return crate::common::usage_exit(crate::common::flags::address_line(&e)),
            }
        } else if !std::path::Path::new(i).exists() {
            return crate::common::usage_exit(format!(
                "{i}: no such directory or file (give a store, e.g. /data, or a sensor, \
                 https://HOST:PORT)"
            ));
        } else {
            local.push(PathBuf::from(i));
        }
    }
    if let Some(out) = a.parquet.as_ref().filter(|o| o.is_dir()) {
        return crate::common::usage_exit(format!(
            "--parquet {} is a directory: give a file name, e.g. {}/sessions.parquet",
            out.display(),
            out.display()
        ));
    }
    let client = match a.tls.client(&remotes.iter().collect::<Vec<_>>()) {
        Ok(c) => c,
        Err(e) => return crate::common::usage_exit(e),
    };
    let files = fleet::captures(&local, a.prefix.as_deref()).map_err(|e| anyhow!("{e}"))?;
    let read = a.index_dir.apply(wiretape::files::ReadOptions::new());
    let mut l = sessions::list(&files, &read, window.from_ns, window.to_ns, &w)
        .map_err(|e| anyhow!("{e}"))?;
    for n in l.notes(files.len()) {
        eprintln!("wiretape: sessions: {n}");
    }
    let mut failed = 0;
    if let Some(c) = &client {
        let query = sessions::sessions_query(&window, a.filter.as_deref());
        failed = l.add_sensors(c, &remotes, &query, &mut |e| match e {
            sessions::Event::Note(n) => eprintln!("wiretape: sessions: {n}"),
            sessions::Event::SensorFailed { url, error } => {
                eprintln!("wiretape: error: sensor {url}: {error}")
            }
            _ => {}
        });
    }
    if let Some(out) = &a.parquet {
        let f = std::fs::File::create(out)
            .map_err(|e| anyhow!("cannot create {}: {e}", out.display()))?;
        sessions::write_rows_parquet(std::io::BufWriter::new(f), &l.rows, out)
            .map_err(|e| anyhow!("{e}"))?;
        eprintln!(
            "wiretape: sessions: {} sessions to {}",
            thousands(l.rows.len() as u64),
            out.display()
        );
        return Ok(i32::from(failed > 0));
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    use std::io::Write;
    if a.json {
        for (r, f) in &l.rows {
            writeln!(out, "{}", sessions::row_json(r, f))?;
        }
    } else {
        writeln!(out, "{}", sessions::table_header())?;
        for (r, _) in &l.rows {
            writeln!(out, "{}", sessions::row_text(r))?;
        }
        out.flush()?;
        eprintln!(
            "wiretape: sessions: {} sessions from {} tables{}",
            thousands(l.rows.len() as u64),
            l.tables,
            if remotes.is_empty() {
                String::new()
            } else {
                format!(" and {} sensor(s)", remotes.len())
            }
        );
    }
    out.flush()?;
    Ok(i32::from(failed > 0))
}
