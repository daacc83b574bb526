//! `wiretape sessions`: the session tables of a store (each capture file's
//! `<file>.sessions.parquet`), read back and filtered by a time window and
//! a small `--where` language.
//!
//! The language: conditions `FIELD OP VALUE` joined by `and` (no `or`, no
//! parentheses). FIELD is a column of the table (`tls_sni`, `server_port`,
//! ...); OP is `=`, `!=`, `<`, `<=`, `>`, `>=` or `~`; VALUE a number, a
//! word, or a string in single or double quotes. `~` matches text: with
//! `*` (any run of characters) or `?` (one character) the whole value must
//! match the pattern, else VALUE is a substring; either way ignoring ASCII
//! case. `=` and `!=` compare text exactly; `<`.. compare numbers (and
//! text, in byte order). On a list column (`dns_queries`, `dns_answers`,
//! `tls_alpn`) a
//! condition holds when it holds for one of its items. A missing name
//! (NULL) satisfies nothing but `!=`.
//!
//! ```text
//! tls_sni ~ '*.evil-cdn.net' and server_port = 443
//! dns_queries ~ example and client_ip = 10.0.0.10
//! ```

use crate::QueryError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use wiretape_sessions::{Session, Table};

/// A column's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Num,
    Text,
    List,
    Bool,
}

/// The columns the language knows, with their kinds (the table's names).
const FIELDS: &[(&str, Kind)] = &[
    ("session_id", Kind::Num),
    ("file", Kind::Text),
    ("first_ns", Kind::Num),
    ("last_ns", Kind::Num),
    ("ip_version", Kind::Num),
    ("proto", Kind::Num),
    ("client_ip", Kind::Text),
    ("client_port", Kind::Num),
    ("server_ip", Kind::Text),
    ("server_port", Kind::Num),
    ("vlan", Kind::Num),
    ("client_packets", Kind::Num),
    ("client_bytes", Kind::Num),
    ("server_packets", Kind::Num),
    ("server_bytes", Kind::Num),
    ("tcp_flags", Kind::Num),
    ("continued", Kind::Bool),
    ("dns_query", Kind::Text),
    ("dns_type", Kind::Text),
    ("dns_answers", Kind::List),
    ("tls_sni", Kind::Text),
    ("tls_alpn", Kind::List),
    ("ja4", Kind::Text),
    ("http_host", Kind::Text),
    ("http_method", Kind::Text),
    ("http_path", Kind::Text),
    ("http_user_agent", Kind::Text),
    ("quic_sni", Kind::Text),
    ("dns_queries", Kind::List),
    ("dns_queries_cut", Kind::Num),
];

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Like,
}

/// One condition.
#[derive(Clone, Debug)]
struct Cond {
    field: &'static str,
    kind: Kind,
    op: Op,
    text: String,
    num: Option<i128>,
}

/// A parsed `--where` expression: its conditions, all of which must hold.
#[derive(Clone, Debug, Default)]
pub struct Where {
    conds: Vec<Cond>,
}

/// A `--where` expression that does not parse: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at character {at}: {why}")]
pub struct WhereError {
    /// The character position (from 1).
    pub at: usize,
    /// What is wrong there, and what would be right.
    pub why: String,
}

fn field_names() -> String {
    FIELDS.iter().map(|f| f.0).collect::<Vec<_>>().join(", ")
}

impl Where {
    /// Parses `expr` (see the module docs).
    pub fn parse(expr: &str) -> Result<Where, WhereError> {
        let toks = lex(expr)?;
        let mut conds = Vec::new();
        let mut i = 0;
        let end = expr.chars().count() + 1;
        let at = |i: usize| toks.get(i).map_or(end, |t: &Tok| t.at);
        loop {
            let Some(Tok {
                text: f,
                quoted: false,
                ..
            }) = toks.get(i)
            else {
                return Err(WhereError {
                    at: at(i),
                    why: format!("a field name expected (one of {})", field_names()),
                });
            };
            let Some(&(field, kind)) = FIELDS.iter().find(|x| x.0 == f.as_str()) else {
                return Err(WhereError {
                    at: at(i),
                    why: format!("unknown field {f:?} (fields: {})", field_names()),
                });
            };
            let op = match toks
                .get(i + 1)
                .filter(|t| !t.quoted)
                .map(|t| t.text.as_str())
            {
                Some("=") | Some("==") => Op::Eq,
                Some("!=") => Op::Ne,
                Some("<") => Op::Lt,
                Some("<=") => Op::Le,
                Some(">") => Op::Gt,
                Some(">=") => Op::Ge,
                Some("~") => Op::Like,
                _ => {
                    return Err(WhereError {
                        at: at(i + 1),
                        why: format!("an operator expected after {field} (=, !=, <, <=, >, >=, ~)"),
                    })
                }
            };
            let Some(v) = toks.get(i + 2) else {
                return Err(WhereError {
                    at: at(i + 2),
                    why: format!("a value expected after {field}"),
                });
            };
            let num = v.text.parse::<i128>().ok();
            let bad = |why: String| Err(WhereError { at: v.at, why });
            match kind {
                Kind::Num if num.is_none() => {
                    return bad(format!("{field} is a number: {:?} is not one", v.text))
                }
                Kind::Num if op == Op::Like => {
                    return bad(format!(
                        "{field} is a number: ~ matches text; use = or <, >"
                    ))
                }
                Kind::Bool if !matches!(v.text.as_str(), "true" | "false") => {
                    return bad(format!("{field} is true or false"))
                }
                Kind::Bool if !matches!(op, Op::Eq | Op::Ne) => {
                    return bad(format!("{field} is true or false: use = or !="))
                }
                _ => {}
            }
            conds.push(Cond {
                field,
                kind,
                op,
                text: v.text.clone(),
                num,
            });
            i += 3;
            match toks.get(i) {
                None => break,
                Some(t) if !t.quoted && t.text.eq_ignore_ascii_case("and") => i += 1,
                Some(t) => {
                    return Err(WhereError {
                        at: t.at,
                        why: format!(
                            "'and' expected between conditions, not {:?} (no 'or': run twice)",
                            t.text
                        ),
                    })
                }
            }
        }
        Ok(Where { conds })
    }

    /// Whether `r` (a row of the table of `file`) satisfies every condition.
    pub fn matches(&self, r: &Session, file: &str) -> bool {
        self.conds.iter().all(|c| c.holds(r, file))
    }
}

#[derive(Debug)]
struct Tok {
    text: String,
    quoted: bool,
    at: usize,
}

fn lex(s: &str) -> Result<Vec<Tok>, WhereError> {
    let cs: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let at = i + 1;
        if c == '\'' || c == '"' {
            let mut j = i + 1;
            let mut text = String::new();
            while j < cs.len() && cs[j] != c {
                text.push(cs[j]);
                j += 1;
            }
            if j == cs.len() {
                return Err(WhereError {
                    at,
                    why: format!("this quote ({c}) is never closed"),
                });
            }
            out.push(Tok {
                text,
                quoted: true,
                at,
            });
            i = j + 1;
        } else if "=!<>~".contains(c) {
            let mut text = c.to_string();
            if i + 1 < cs.len() && cs[i + 1] == '=' {
                text.push('=');
                i += 1;
            }
            if text == "!" {
                return Err(WhereError {
                    at,
                    why: "! alone is no operator: != is".into(),
                });
            }
            out.push(Tok {
                text,
                quoted: false,
                at,
            });
            i += 1;
        } else {
            let mut text = String::new();
            while i < cs.len() && !cs[i].is_whitespace() && !"=!<>~'\"".contains(cs[i]) {
                text.push(cs[i]);
                i += 1;
            }
            out.push(Tok {
                text,
                quoted: false,
                at,
            });
        }
    }
    Ok(out)
}

/// `*` and `?` against `s`, ignoring ASCII case (iterative, with one
/// backtrack point: linear in practice, never exponential).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&s[si])) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

fn like(pat: &str, s: &str) -> bool {
    if pat.contains(['*', '?']) {
        glob(pat.as_bytes(), s.as_bytes())
    } else {
        s.to_ascii_lowercase().contains(&pat.to_ascii_lowercase())
    }
}

impl Cond {
    fn holds(&self, r: &Session, file: &str) -> bool {
        match self.kind {
            Kind::Num => match num_of(r, self.field) {
                None => self.op == Op::Ne,
                Some(v) => cmp(self.op, v.cmp(&self.num.unwrap_or(0))),
            },
            Kind::Bool => {
                let v = r.continued == (self.text == "true");
                if self.op == Op::Eq {
                    v
                } else {
                    !v
                }
            }
            Kind::Text => match text_of(r, self.field, file) {
                None => self.op == Op::Ne,
                Some(s) => self.text_holds(&s),
            },
            Kind::List => {
                let items = list_of(r, self.field);
                if self.op == Op::Ne {
                    !items.iter().any(|s| s == &self.text)
                } else {
                    items.iter().any(|s| self.text_holds(s))
                }
            }
        }
    }

    fn text_holds(&self, s: &str) -> bool {
        match self.op {
            Op::Like => like(&self.text, s),
            op => cmp(op, s.cmp(self.text.as_str())),
        }
    }
}

fn cmp(op: Op, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => o == Equal,
        Op::Ne => o != Equal,
        Op::Lt => o == Less,
        Op::Le => o != Greater,
        Op::Gt => o == Greater,
        Op::Ge => o != Less,
        Op::Like => false,
    }
}

fn num_of(r: &Session, f: &str) -> Option<i128> {
    Some(match f {
        "session_id" => r.id as i128,
        "first_ns" => r.first_ns as i128,
        "last_ns" => r.last_ns as i128,
        "ip_version" => r.ip_version as i128,
        "proto" => r.proto as i128,
        "client_port" => r.client_port as i128,
        "server_port" => r.server_port as i128,
        "vlan" => r.vlan? as i128,
        "client_packets" => r.client_packets as i128,
        "client_bytes" => r.client_bytes as i128,
        "server_packets" => r.server_packets as i128,
        "server_bytes" => r.server_bytes as i128,
        "tcp_flags" if r.proto == 6 => r.tcp_flags as i128,
        "dns_queries_cut" => {
            let n = r.names.as_deref()?;
            if n.dns_queries.is_empty() {
                return None;
            }
            n.dns_queries_cut as i128
        }
        _ => return None,
    })
}

fn text_of(r: &Session, f: &str, file: &str) -> Option<String> {
    let n = r.names.as_deref();
    Some(match f {
        "file" => file.to_string(),
        "client_ip" => r.client_ip.to_string(),
        "server_ip" => r.server_ip.to_string(),
        "dns_query" => n?.dns_query.clone()?,
        "dns_type" => wiretape_sessions::dns::type_name(n?.dns_type?),
        "tls_sni" => n?.tls_sni.clone()?,
        "ja4" => n?.ja4.clone()?,
        "http_host" => n?.http_host.clone()?,
        "http_method" => n?.http_method.clone()?,
        "http_path" => n?.http_path.clone()?,
        "http_user_agent" => n?.http_user_agent.clone()?,
        "quic_sni" => n?.quic_sni.clone()?,
        _ => return None,
    })
}

fn list_of<'a>(r: &'a Session, f: &str) -> &'a [String] {
    match (r.names.as_deref(), f) {
        (Some(n), "dns_answers") => &n.dns_answers,
        (Some(n), "tls_alpn") => &n.tls_alpn,
        (Some(n), "dns_queries") => &n.dns_queries,
        _ => &[],
    }
}

/// One row as JSON, with the table's column names (names absent: null).
pub fn row_json(r: &Session, file: &str) -> Value {
    let n = r.names.as_deref().cloned().unwrap_or_default();
    let list = |v: &[String]| {
        if v.is_empty() {
            Value::Null
        } else {
            json!(v)
        }
    };
    json!({
        "session_id": r.id,
        "file": file,
        "first_ns": r.first_ns,
        "last_ns": r.last_ns,
        "first_time": wiretape_timestamp::format_rfc3339(r.first_ns),
        "last_time": wiretape_timestamp::format_rfc3339(r.last_ns),
        "ip_version": r.ip_version,
        "proto": r.proto,
        "client_ip": r.client_ip.to_string(),
        "client_port": r.client_port,
        "server_ip": r.server_ip.to_string(),
        "server_port": r.server_port,
        "vlan": r.vlan,
        "client_packets": r.client_packets,
        "client_bytes": r.client_bytes,
        "server_packets": r.server_packets,
        "server_bytes": r.server_bytes,
        "tcp_flags": (r.proto == 6).then_some(r.tcp_flags),
        "continued": r.continued,
        "dns_query": n.dns_query,
        "dns_type": n.dns_type.map(wiretape_sessions::dns::type_name),
        "dns_answers": list(&n.dns_answers),
        "tls_sni": n.tls_sni,
        "tls_alpn": list(&n.tls_alpn),
        "ja4": n.ja4,
        "http_host": n.http_host,
        "http_method": n.http_method,
        "http_path": n.http_path,
        "http_user_agent": n.http_user_agent,
        "quic_sni": n.quic_sni,
        "dns_queries": list(&n.dns_queries),
        "dns_queries_cut": (!n.dns_queries.is_empty()).then_some(n.dns_queries_cut),
    })
}

/// What [`list`] found.
#[derive(Debug, Default)]
pub struct Listing {
    /// The matching rows with their tables' file names, by first frame.
    pub rows: Vec<(Session, String)>,
    /// Tables read.
    pub tables: usize,
    /// Of them, incomplete (frames skipped while recording): their file's
    /// name.
    pub incomplete: Vec<String>,
    /// Capture files without a table (`--no-sessions`, older recordings,
    /// being written).
    pub without: Vec<PathBuf>,
    /// Tables that could not be read, and why.
    pub unreadable: Vec<(PathBuf, String)>,
    /// Rows that matched but were left out by [`list_first`]'s limit.
    pub cut: bool,
}

/// The sessions of the capture files `captures` whose time overlaps
/// `[from_ns, to_ns)` and that satisfy `w` (their tables where `opts`
/// says).
pub fn list(
    captures: &[PathBuf],
    opts: &wiretape_files::ReadOptions,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
    w: &Where,
) -> Result<Listing, QueryError> {
    list_first(captures, opts, from_ns, to_ns, w, usize::MAX)
}

/// [`list`], keeping only the first `limit` rows (by first frame): what
/// it holds is bounded by `limit` and one table's rows, not by the
/// window's ([`Listing::cut`] says whether rows were left out).
pub fn list_first(
    captures: &[PathBuf],
    opts: &wiretape_files::ReadOptions,
    from_ns: Option<u64>,
    to_ns: Option<u64>,
    w: &Where,
    limit: usize,
) -> Result<Listing, QueryError> {
    let mut out = Listing::default();
    let order = |a: &(Session, String), b: &(Session, String)| {
        (a.0.first_ns, a.0.id, &a.1).cmp(&(b.0.first_ns, b.0.id, &b.1))
    };
    for c in captures {
        let p = opts.sessions_path(c);
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                out.without.push(c.clone());
                continue;
            }
            Err(e) => {
                out.unreadable.push((p, e.to_string()));
                continue;
            }
        };
        let t: Table = match wiretape_sessions::read_parquet(bytes, &p) {
            Ok(t) => t,
            Err(e) => {
                out.unreadable.push((p.clone(), e.to_string()));
                continue;
            }
        };
        out.tables += 1;
        let file = if t.file.is_empty() {
            file_name(c)
        } else {
            t.file.clone()
        };
        if !t.stats.complete() {
            out.incomplete.push(file.clone());
        }
        for r in t.rows {
            if from_ns.is_some_and(|f| r.last_ns < f) || to_ns.is_some_and(|t| r.first_ns >= t) {
                continue;
            }
            if w.matches(&r, &file) {
                out.rows.push((r, file.clone()));
            }
        }
        if out.rows.len() / 2 >= limit {
            out.rows.sort_by(order);
            out.rows.truncate(limit);
            out.cut = true;
        }
    }
    out.rows.sort_by(order);
    if out.rows.len() > limit {
        out.rows.truncate(limit);
        out.cut = true;
    }
    Ok(out)
}

/// A row of [`row_json`] read back (from a sensor's `/v1/sessions`): the
/// session and its file's name. None: not such a row.
pub fn row_from_json(v: &Value) -> Option<(Session, String)> {
    let u = |k: &str| v.get(k)?.as_u64();
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let list = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let names = wiretape_sessions::Names {
        // A sensor of an older version sends no list: its first question.
        dns_queries: match v.get("dns_queries") {
            Some(Value::Array(_)) => list("dns_queries"),
            _ => s("dns_query").into_iter().collect(),
        },
        dns_queries_cut: u("dns_queries_cut").map_or(0, |c| c.min(u32::MAX as u64) as u32),
        dns_query: s("dns_query"),
        dns_type: s("dns_type").and_then(|t| wiretape_sessions::dns::type_number(&t)),
        dns_answers: list("dns_answers"),
        tls_sni: s("tls_sni"),
        tls_alpn: list("tls_alpn"),
        ja4: s("ja4"),
        http_host: s("http_host"),
        http_method: s("http_method"),
        http_path: s("http_path"),
        http_user_agent: s("http_user_agent"),
        quic_sni: s("quic_sni"),
    };
    let named = names != wiretape_sessions::Names::default();
    Some((
        Session {
            id: u("session_id")?,
            first_ns: u("first_ns")?,
            last_ns: u("last_ns")?,
            ip_version: u8::try_from(u("ip_version")?).ok()?,
            proto: u8::try_from(u("proto")?).ok()?,
            client_ip: s("client_ip")?.parse().ok()?,
            client_port: u16::try_from(u("client_port")?).ok()?,
            server_ip: s("server_ip")?.parse().ok()?,
            server_port: u16::try_from(u("server_port")?).ok()?,
            vlan: u("vlan").and_then(|x| u16::try_from(x).ok()),
            client_packets: u("client_packets")?,
            client_bytes: u("client_bytes")?,
            server_packets: u("server_packets")?,
            server_bytes: u("server_bytes")?,
            tcp_flags: u("tcp_flags").map_or(0, |f| f as u8),
            continued: v.get("continued")?.as_bool()?,
            names: named.then(|| Box::new(names)),
        },
        s("file")?,
    ))
}

/// The query string of a sensor's `/v1/sessions`: the window (absolute)
/// and `where`.
pub fn sessions_query(window: &crate::Window, wher: Option<&str>) -> String {
    let q = crate::remote::query_string(window, None, false);
    match wher {
        Some(w) => crate::remote::with_param(&q, "where", w),
        None => q,
    }
}

/// A sensor's answer to `/v1/sessions` ([`remote_rows`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct RemoteRows {
    /// The sensor's node name (its URL when it gives none).
    pub node: String,
    /// Its rows, each with its file's name.
    pub rows: Vec<(Session, String)>,
    /// Its tables that are incomplete (its session thread fell behind).
    pub tables_incomplete: u64,
    /// Its capture files without a session table.
    pub files_without_table: u64,
    /// The sensor's row limit cut its answer: only this many rows (the
    /// first by first frame) came.
    pub cut_at: Option<u64>,
}

impl RemoteRows {
    /// What the answer says about its completeness, one line each (the
    /// sensor named by `url`).
    pub fn notes(&self, url: &str) -> Vec<String> {
        let mut v = Vec::new();
        if self.tables_incomplete > 0 {
            v.push(format!(
                "sensor {url}: {} tables incomplete (its session thread fell behind \
                 while recording)",
                self.tables_incomplete
            ));
        }
        if self.files_without_table > 0 {
            v.push(format!(
                "sensor {url}: {} capture files have no session table",
                self.files_without_table
            ));
        }
        if let Some(n) = self.cut_at {
            v.push(format!(
                "sensor {url}: answer cut at its row limit, the first {n} sessions only: \
                 narrow the window (--from/--to) or --where"
            ));
        }
        v
    }
}

/// A sensor's node name and rows (`GET /v1/sessions?query`, `query` from
/// [`sessions_query`]).
pub fn remote_rows(
    c: &crate::remote::Client,
    r: &crate::remote::Remote,
    query: &str,
) -> Result<RemoteRows, crate::remote::RemoteError> {
    let (head, body) = c.get_with_headers(r, &format!("/v1/sessions?{query}"))?;
    let n = |k: &str| {
        head.get(k)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut rows = Vec::new();
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let row = serde_json::from_slice(line)
            .ok()
            .and_then(|v| row_from_json(&v))
            .ok_or_else(|| {
                crate::remote::RemoteError(format!(
                    "a line that is no session row: {}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                ))
            })?;
        rows.push(row);
    }
    let node = head
        .get("wiretape-node")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| r.url.clone(), str::to_string);
    Ok(RemoteRows {
        node,
        rows,
        tables_incomplete: n("wiretape-tables-incomplete"),
        files_without_table: n("wiretape-files-without-table"),
        cut_at: head
            .get("wiretape-sessions-cut")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok()),
    })
}

/// What [`Listing::add_sensors`] hears, sensor by sensor.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A sensor's note on its answer's completeness (one line, naming it).
    Note(&'a str),
    /// A sensor failed: its address and why.
    SensorFailed {
        /// The sensor's address.
        url: &'a str,
        /// What went wrong.
        error: &'a str,
    },
}

impl Listing {
    /// What the listing could not read and how complete it is, one line
    /// each: the unreadable tables, the incomplete ones, the capture files
    /// without one (of `captures`, the files listed).
    pub fn notes(&self, captures: usize) -> Vec<String> {
        let mut v: Vec<String> = (self.unreadable.iter())
            .map(|(p, e)| format!("{}: {e}", p.display()))
            .collect();
        if !self.incomplete.is_empty() {
            v.push(format!(
                "{} tables incomplete (the session thread fell behind while recording; \
                 `wiretape index --force FILE` rebuilds one): {}",
                self.incomplete.len(),
                self.incomplete.join(", ")
            ));
        }
        if !self.without.is_empty() {
            v.push(format!(
                "{} of {} capture files have no session table (recorded with --no-sessions or \
                 before, or being written); `wiretape index` writes them",
                self.without.len(),
                captures
            ));
        }
        v
    }

    /// Adds the rows of every sensor's `/v1/sessions?query` (`query` from
    /// [`sessions_query`]) and sorts all by first frame (then session id,
    /// then file); `on` hears each sensor's notes and failures. Returns
    /// how many sensors failed.
    pub fn add_sensors(
        &mut self,
        c: &crate::remote::Client,
        remotes: &[crate::remote::Remote],
        query: &str,
        on: &mut dyn FnMut(Event),
    ) -> usize {
        let mut failed = 0;
        for r in remotes {
            match remote_rows(c, r, query) {
                Ok(part) => {
                    for n in part.notes(&r.url) {
                        on(Event::Note(&n));
                    }
                    self.rows.extend(part.rows);
                }
                Err(e) => {
                    failed += 1;
                    on(Event::SensorFailed {
                        url: &r.url,
                        error: &e.to_string(),
                    });
                }
            }
        }
        self.rows
            .sort_by(|a, b| (a.0.first_ns, a.0.id, &a.1).cmp(&(b.0.first_ns, b.0.id, &b.1)));
        failed
    }
}

/// The header line of the sessions table ([`row_text`]'s columns), without
/// a newline.
pub fn table_header() -> String {
    format!(
        "{:<30} {:<5} {:<47} {:>17} {:>21}  names",
        "first frame (UTC)", "proto", "client -> server", "frames c/s", "bytes c/s"
    )
}

/// A row of the sessions table (`wiretape sessions` without `--json`):
/// first frame, protocol, client -> server, frames and bytes each way,
/// the names ([`names_text`]); without a newline.
pub fn row_text(r: &Session) -> String {
    let ep = |ip: &std::net::IpAddr, port: u16| match (ip, port) {
        (std::net::IpAddr::V6(_), 0) => format!("[{ip}]"),
        (std::net::IpAddr::V6(_), p) => format!("[{ip}]:{p}"),
        (_, 0) => ip.to_string(),
        (_, p) => format!("{ip}:{p}"),
    };
    let proto = match r.proto {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        1 => "icmp".to_string(),
        58 => "icmp6".to_string(),
        p => p.to_string(),
    };
    let n = wiretape_files::thousands;
    format!(
        "{:<30} {:<5} {:<47} {:>17} {:>21}  {}",
        wiretape_timestamp::format_rfc3339(r.first_ns),
        proto,
        format!(
            "{} -> {}",
            ep(&r.client_ip, r.client_port),
            ep(&r.server_ip, r.server_port)
        ),
        format!("{}/{}", n(r.client_packets), n(r.server_packets)),
        format!("{}/{}", n(r.client_bytes), n(r.server_bytes)),
        names_text(r)
    )
}

/// The names of a row, as `key=value` words (stored escaped: no control
/// characters): `dns=` (every question, with how many were cut), `sni=`,
/// `ja4=`, `host=`, `quic_sni=`, the HTTP method and path, `answers=`,
/// `alpn=`.
pub fn names_text(r: &Session) -> String {
    let Some(n) = r.names.as_deref() else {
        return String::new();
    };
    let mut v = Vec::new();
    let mut put = |k: &str, x: &Option<String>| {
        if let Some(x) = x {
            v.push(format!("{k}={x}"));
        }
    };
    let dns = if n.dns_queries.len() > 1 {
        let cut = if n.dns_queries_cut > 0 {
            format!(" (+{} cut)", n.dns_queries_cut)
        } else {
            String::new()
        };
        Some(format!("{}{cut}", n.dns_queries.join(",")))
    } else {
        n.dns_query.clone()
    };
    put("dns", &dns);
    put("sni", &n.tls_sni);
    put("ja4", &n.ja4);
    put("host", &n.http_host);
    put("quic_sni", &n.quic_sni);
    if let (Some(m), Some(p)) = (&n.http_method, &n.http_path) {
        v.push(format!("{m} {p}"));
    }
    if !n.dns_answers.is_empty() {
        v.push(format!("answers={}", n.dns_answers.join(",")));
    }
    if !n.tls_alpn.is_empty() {
        v.push(format!("alpn={}", n.tls_alpn.join(",")));
    }
    v.join(" ")
}

/// Rows (each with its file's name) as one Parquet file into `w`, with
/// the session table's columns (`wiretape sessions --parquet`).
pub fn write_rows_parquet<W: std::io::Write + Send>(
    w: W,
    rows: &[(Session, String)],
    name: &Path,
) -> Result<(), QueryError> {
    let refs: Vec<(&Session, &str)> = rows.iter().map(|(r, f)| (r, f.as_str())).collect();
    let err = |e: wiretape_sessions::TableError| QueryError::Parquet {
        path: name.to_owned(),
        why: e.to_string(),
    };
    let batch = wiretape_sessions::rows_batch(&refs, Default::default(), name).map_err(err)?;
    wiretape_sessions::write_batch(w, &batch, name).map_err(err)
}

/// The session rows of a fleet as one Parquet file into `w`: the session
/// table's columns after a first column `node` (the sensor each row
/// comes from), each part's rows under its node (`wiretape index
/// --parquet`).
pub fn write_fleet_parquet<W: std::io::Write + Send>(
    w: W,
    parts: &[(String, Vec<(Session, String)>)],
    name: &Path,
) -> Result<(), QueryError> {
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let err = |why: String| QueryError::Parquet {
        path: name.to_owned(),
        why,
    };
    let refs: Vec<(&Session, &str)> = parts
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|(r, f)| (r, f.as_str())))
        .collect();
    let nodes: StringArray = parts
        .iter()
        .flat_map(|(n, rows)| std::iter::repeat_n(Some(n.as_str()), rows.len()))
        .collect();
    let b = wiretape_sessions::rows_batch(&refs, Default::default(), name)
        .map_err(|e| err(e.to_string()))?;
    let mut fields = vec![std::sync::Arc::new(Field::new(
        "node",
        DataType::Utf8,
        false,
    ))];
    fields.extend(b.schema().fields().iter().cloned());
    let mut cols: Vec<ArrayRef> = vec![std::sync::Arc::new(nodes)];
    cols.extend(b.columns().iter().cloned());
    let batch = RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), cols)
        .map_err(|e| err(e.to_string()))?;
    wiretape_sessions::write_batch(w, &batch, name).map_err(|e| err(e.to_string()))
}

/// A connection as the session tracker keys it: IP version, protocol, the
/// two endpoints (address as 16 bytes, port), the lower first.
type ConnKey = (u8, u8, ([u8; 16], u16), ([u8; 16], u16));

fn conn_key(version: u8, proto: u8, a: ([u8; 16], u16), b: ([u8; 16], u16)) -> ConnKey {
    if a <= b {
        (version, proto, a, b)
    } else {
        (version, proto, b, a)
    }
}

fn addr16(ip: &std::net::IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        std::net::IpAddr::V4(a) => out[..4].copy_from_slice(&a.octets()),
        std::net::IpAddr::V6(a) => out = a.octets(),
    }
    out
}

/// The frames of chosen sessions (`extract --session-where`): each
/// session's connection (as the tracker keys it: version, protocol, the
/// endpoint pair) within its first and last frame. A frame is selected
/// when it belongs to such a connection and is stamped in one of its
/// sessions' spans (within the query's window).
#[derive(Debug, Default)]
pub struct Selected {
    /// Per connection: its spans `[first, last]`, sorted, not overlapping.
    conns: std::collections::HashMap<ConnKey, Vec<(u64, u64)>>,
    /// Per span, the window and what a block must hold for it (for the plan).
    pieces: Vec<(crate::Window, wiretape_filter::flow::Needs)>,
    /// Distinct sessions (by session_id).
    pub sessions: usize,
    /// The listing's tables read, incomplete ones, files without a table.
    pub tables: usize,
    /// Incomplete tables (their files' names): sessions may be missing.
    pub incomplete: Vec<String>,
    /// Capture files without a table (their sessions cannot be chosen).
    pub without: Vec<PathBuf>,
    /// Tables that could not be read, and why.
    pub unreadable: Vec<(PathBuf, String)>,
}

impl Selected {
    /// How many connections the chosen sessions are.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// The sessions of `l` (a [`list`] in `window`) as spans of their
    /// connections, cut to `window`.
    pub fn of(l: Listing, window: crate::Window) -> Selected {
        use wiretape_filter::flow::{Key, Needs};
        let mut conns: std::collections::HashMap<ConnKey, Vec<(u64, u64)>> = Default::default();
        let mut ids = std::collections::HashSet::new();
        for (r, _) in &l.rows {
            ids.insert(r.id);
            let first = window.from_ns.map_or(r.first_ns, |f| r.first_ns.max(f));
            let last = window
                .to_ns
                .map_or(r.last_ns, |t| r.last_ns.min(t.saturating_sub(1)));
            if last < first {
                continue;
            }
            let k = conn_key(
                r.ip_version,
                r.proto,
                (addr16(&r.client_ip), r.client_port),
                (addr16(&r.server_ip), r.server_port),
            );
            conns.entry(k).or_default().push((first, last));
        }
        let mut pieces = Vec::new();
        for (k, spans) in conns.iter_mut() {
            spans.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
            for &(f, t) in spans.iter() {
                match merged.last_mut() {
                    Some(m) if f <= m.1.saturating_add(1) => m.1 = m.1.max(t),
                    _ => merged.push((f, t)),
                }
            }
            *spans = merged;
            // What every frame of the connection holds, as the flow index
            // reads it: both addresses, the protocol, both ports (when
            // the protocol has them and they were captured).
            let (version, proto, a, b) = *k;
            let mut keys = vec![Key::Proto(proto)];
            for (addr, port) in [a, b] {
                keys.push(if version == 4 {
                    Key::Ip4(u32::from_be_bytes([addr[0], addr[1], addr[2], addr[3]]))
                } else {
                    Key::Ip6(u128::from_be_bytes(addr))
                });
                if matches!(proto, 6 | 17 | 132) && a.1 != 0 && b.1 != 0 {
                    keys.push(Key::Port(port));
                }
            }
            let needs = Needs::from_alternatives(vec![keys]);
            for &(f, t) in spans.iter() {
                pieces.push((
                    crate::Window {
                        from_ns: Some(f),
                        to_ns: Some(t.saturating_add(1)),
                    },
                    needs.clone(),
                ));
            }
        }
        pieces.sort_by_key(|p| (p.0.from_ns, p.0.to_ns));
        Selected {
            conns,
            pieces,
            sessions: ids.len(),
            tables: l.tables,
            incomplete: l.incomplete,
            without: l.without,
            unreadable: l.unreadable,
        }
    }

    /// Whether no frame can be selected.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The window holding every span (None: no span).
    pub fn hull(&self) -> Option<crate::Window> {
        let from = self.pieces.iter().filter_map(|p| p.0.from_ns).min()?;
        let to = self.pieces.iter().filter_map(|p| p.0.to_ns).max()?;
        Some(crate::Window {
            from_ns: Some(from),
            to_ns: Some(to),
        })
    }

    /// The spans with what a block must hold in each (for planning).
    pub fn pieces(&self) -> impl Iterator<Item = (crate::Window, &wiretape_filter::flow::Needs)> {
        self.pieces.iter().map(|(w, n)| (*w, n))
    }

    /// Whether the frame `data` (of `linktype`), stamped `ts`, belongs to
    /// a chosen session (no allocation: one parse, one lookup).
    pub fn matches(&self, linktype: u32, data: &[u8], ts: u64) -> bool {
        let wiretape_filter::conn::Frame::Ip(p) = wiretape_filter::conn::parse(linktype, data)
        else {
            return false;
        };
        let k = conn_key(p.version, p.proto, (p.src, p.sport), (p.dst, p.dport));
        self.conns
            .get(&k)
            .is_some_and(|spans| spans.iter().any(|&(f, t)| ts >= f && ts <= t))
    }

    /// The JSON of `extract --json`'s `sessions`: sessions chosen, tables
    /// read, incomplete tables, files without one.
    pub fn to_json(&self) -> Value {
        json!({
            "matched": self.sessions,
            "connections": self.connections(),
            "tables": self.tables,
            "incomplete": self.incomplete,
            "files_without_table": self.without.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        })
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use wiretape_sessions::Names;

    fn row() -> Session {
        Session {
            id: 7,
            first_ns: 10,
            last_ns: 20,
            ip_version: 4,
            proto: 6,
            client_ip: IpAddr::from([10, 0, 0, 1]),
            client_port: 40000,
            server_ip: IpAddr::from([10, 0, 0, 2]),
            server_port: 443,
            vlan: None,
            client_packets: 3,
            client_bytes: 300,
            server_packets: 2,
            server_bytes: 200,
            tcp_flags: 0x1b,
            continued: false,
            names: Some(Box::new(Names {
                tls_sni: Some("a.evil-cdn.net".into()),
                tls_alpn: vec!["h2".into(), "http/1.1".into()],
                ..Names::default()
            })),
        }
    }

    #[test]
    fn conditions_hold_as_documented() {
        let r = row();
        let yes = |e: &str| Where::parse(e).unwrap().matches(&r, "f.pcap");
        assert!(yes("tls_sni ~ '*.evil-cdn.net' and server_port = 443"));
        assert!(yes("tls_sni ~ EVIL"));
        assert!(yes("tls_sni = \"a.evil-cdn.net\""));
        assert!(!yes("tls_sni ~ '*.evil-cdn.ne'"));
        assert!(yes("tls_alpn = h2 and tls_alpn ~ 'http/*'"));
        assert!(yes("tls_alpn != h3"));
        assert!(!yes("http_host ~ x"));
        assert!(yes("http_host != x"));
        assert!(yes("vlan != 1") && !yes("vlan = 1"));
        assert!(yes("client_bytes>=300 and client_bytes<301 and proto=6"));
        assert!(yes("continued = false and file ~ f.pcap"));
        assert!(yes("client_ip = 10.0.0.1"));
        assert!(glob(b"*a*b*c", b"xxaxxbxxc") && !glob(b"a?c", b"ac"));
    }

    #[test]
    fn errors_name_the_position() {
        let e = |s: &str| Where::parse(s).unwrap_err();
        assert_eq!(e("tls_snii ~ x").at, 1);
        assert!(e("tls_snii ~ x").why.contains("unknown field \"tls_snii\""));
        assert_eq!(e("server_port = 443 and tls_sni").at, 30);
        assert_eq!(e("server_port = x").at, 15);
        assert_eq!(e("server_port ~ 1").at, 15);
        assert_eq!(e("tls_sni ~ 'x").at, 11);
        assert_eq!(e("proto = 6 or proto = 17").at, 11);
        assert_eq!(e("proto 6").at, 7);
        assert_eq!(e("").at, 1);
        assert_eq!(
            e("server_port = x").to_string(),
            "at character 15: server_port is a number: \"x\" is not one"
        );
    }

    #[test]
    fn a_listing_notes_the_tables_it_could_not_read_and_the_files_without() {
        let d = std::env::temp_dir().join(format!("wt-q-listing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let (a, b) = (d.join("a.pcap"), d.join("b.pcap"));
        let opts = wiretape_files::ReadOptions::new();
        std::fs::write(opts.sessions_path(&b), b"not parquet").unwrap();
        let mut l = list(&[a, b.clone()], &opts, None, None, &Where::default()).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
        assert_eq!((l.tables, l.without.len(), l.unreadable.len()), (0, 1, 1));
        let notes = l.notes(2);
        assert_eq!(notes.len(), 2);
        let table = opts.sessions_path(&b);
        assert!(notes[0].starts_with(&format!("{}: ", table.display())));
        assert_eq!(
            notes[1],
            "1 of 2 capture files have no session table (recorded with --no-sessions or before, \
             or being written); `wiretape index` writes them"
        );
        // A table whose thread fell behind (read back, its stats say so).
        l.incomplete = vec!["x.pcap".into(), "y.pcap".into()];
        assert_eq!(
            l.notes(2)[1],
            "2 tables incomplete (the session thread fell behind while recording; \
             `wiretape index --force FILE` rebuilds one): x.pcap, y.pcap"
        );
        assert!(Listing::default().notes(0).is_empty());
    }
}
