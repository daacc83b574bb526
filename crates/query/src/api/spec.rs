//! The API described once: its endpoints, their parameters (with the
//! values each takes) and their answers. The server routes by this table
//! and checks every query string against its parameter lists (an unknown
//! parameter is a 400 naming the ones the endpoint takes); the value
//! checks of [`super::params`] use the same constants as the schemas here
//! (formats, protocols, ranges), and the tests hold each schema against
//! those checks. `GET /v1/openapi.json` is [`openapi`] (OpenAPI 3.1), and
//! `wiretape api --help` lists the endpoints from [`help`].

use serde_json::{json, Value};

/// What an endpoint answers with when all goes well.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A capture (pcap or pcapng), streamed.
    Capture,
    /// JSON of the named schema of `components.schemas`.
    Json(&'static str),
    /// JSON lines (`application/x-ndjson`): one object of the named schema
    /// of `components.schemas` per line.
    JsonLines(&'static str),
    /// A Parquet table.
    Parquet,
    /// A file of the console: its media type.
    Asset(&'static str),
    /// `POST /query`: a query in Stenographer's language in the body, a
    /// pcap as Stenographer's server sends it (the api's `steno` module).
    Steno,
}

/// One endpoint (GET only, but `POST /query`; the console's files also
/// answer HEAD).
#[derive(Clone, Copy, Debug)]
pub struct Endpoint {
    /// Its path.
    pub path: &'static str,
    /// The parameters it takes (names of [`PARAMS`]).
    pub params: &'static [&'static str],
    /// A query over the stores: it takes one of `--max-queries`' slots
    /// (503 when none is free) and can meet an unreadable store (500).
    pub query: bool,
    /// Its answer.
    pub answer: Answer,
    /// One line for `--help` and the OpenAPI summary.
    pub summary: &'static str,
    /// More, for the OpenAPI description (may be empty).
    pub description: &'static str,
}

impl Endpoint {
    /// A file of the console (no parameters checked: the page reads them).
    pub fn is_asset(&self) -> bool {
        matches!(self.answer, Answer::Asset(_))
    }

    /// The methods it answers, for `Allow`.
    pub fn allow(&self) -> &'static str {
        match self.answer {
            Answer::Asset(_) => "GET, HEAD",
            Answer::Steno => "POST",
            _ => "GET",
        }
    }

    /// The method of its operation in the OpenAPI document and `--help`.
    pub fn method(&self) -> &'static str {
        match self.answer {
            Answer::Steno => "POST",
            _ => "GET",
        }
    }
}

/// The output formats of an extraction (`format`).
pub const FORMATS: &[&str] = &["pcap", "pcapng"];
/// The stamp precisions of a pcap extraction (`tsprec`).
pub const TSPRECS: &[&str] = &["ns", "us"];
/// The series of a timeline (`by`).
pub const BY: &[&str] = &["none", "iface", "queue"];
/// The protocol names of the 5-tuple form (`proto`), as tcpdump spells
/// them; any case is taken, or a number 0 to 255.
pub const PROTOS: &[&str] = &["tcp", "udp", "icmp", "icmp6", "sctp"];
/// The picture widths of a timeline (`width`), pixels.
pub const WIDTH: (u64, u64) = (200, 8000);
/// The largest number a numeric parameter takes (10^18: `bin_ns` of 31
/// years).
pub const MAX_NUMBER: u64 = 1_000_000_000_000_000_000;

/// The query endpoints' parameters.
pub const QUERY: &[&str] = &[
    "from",
    "to",
    "filter",
    "format",
    "tsprec",
    "src",
    "dst",
    "sport",
    "dport",
    "proto",
    "steno",
    "session_where",
];
/// The headers of `POST /query` that bound its answer (`stenoread
/// --limit-packets`, `--limit-bytes`).
pub const STENO_LIMITS: &[(&str, &str)] = &[
    (
        "Steno-Limit-Packets",
        "Stop after this many frames (the frame that reaches it is the last one sent).",
    ),
    (
        "Steno-Limit-Bytes",
        "Stop after this many bytes of the answer: the 16-byte file header and each frame's \
         bytes with its 16-byte record header (the frame that reaches it is the last one sent).",
    ),
];
/// The parameters of `/v1/count` and `/v1/plan` (`format` and `tsprec`
/// are taken as well, and checked, though they change nothing).
pub const COUNT: &[&str] = QUERY;
/// The parameters of `/v1/index.parquet`.
pub const WINDOW: &[&str] = &["from", "to"];
/// The parameters of `/v1/sessions`.
pub const SESSIONS: &[&str] = &["from", "to", "where", "limit"];
/// The most rows one `/v1/sessions` answer holds (and its default
/// `limit`): the answer is built in memory, so this bounds what one query
/// can take.
pub const MAX_SESSION_ROWS: u64 = 100_000;
/// The parameters of `/v1/timeline`.
pub const TIMELINE: &[&str] = &["from", "to", "by", "filter_index", "width", "bin_ns"];

/// Every endpoint.
pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        path: "/v1/extract",
        params: QUERY,
        query: true,
        answer: Answer::Capture,
        summary: "what `wiretape extract` writes, streamed (pcap, or pcapng with format=pcapng)",
        description: "The frames of the stores in the window [from, to) that the filter keeps, merged in \
            stamp order: exactly what `wiretape extract DIR... [--from] [--to] -w - [--format] [--tsprec] \
            FILTER` writes. A client that sends `TE: trailers` gets the summary and any error in the \
            trailers `wiretape-summary` and `wiretape-error`; any other client an answer cut short when a \
            file cannot be read, never one passed off as whole.",
    },
    Endpoint {
        path: "/v1/count",
        params: COUNT,
        query: true,
        answer: Answer::Json("Count"),
        summary: "the JSON of `extract --count-only --json`",
        description: "",
    },
    Endpoint {
        path: "/v1/plan",
        params: COUNT,
        query: true,
        answer: Answer::Json("Plan"),
        summary: "the JSON of `extract --plan`: the blocks an extraction would read",
        description: "",
    },
    Endpoint {
        path: "/v1/status",
        params: &[],
        query: false,
        answer: Answer::Json("Status"),
        summary: "the store: first and last frame, files, bytes on disk, frames, free space, recording",
        description: "",
    },
    Endpoint {
        path: "/v1/files",
        params: &[],
        query: false,
        answer: Answer::Json("Files"),
        summary: "the capture files, oldest first, each with its frames, bytes and first and last frame",
        description: "",
    },
    Endpoint {
        path: "/v1/timeline",
        params: TIMELINE,
        query: false,
        answer: Answer::Json("Timeline"),
        summary: "the JSON of `wiretape timeline --json` (width 200-8000 chooses the bins, or bin_ns)",
        description: "Frames and bytes of records per bin of time, from the block indexes (no capture \
            data read); with filter_index, an upper bound of the frames the filter could keep per bin \
            (from the flow index).",
    },
    Endpoint {
        path: "/v1/index.parquet",
        params: WINDOW,
        query: true,
        answer: Answer::Parquet,
        summary: "the block index as the Parquet table of `wiretape index --parquet`",
        description: "",
    },
    Endpoint {
        path: "/v1/sessions",
        params: SESSIONS,
        query: true,
        answer: Answer::JsonLines("Session"),
        summary: "the rows of `wiretape sessions --json`: the session tables' rows in the window that `where` keeps",
        description: "One JSON object per line and session row (a connection in one capture file; a \
            connection spanning files has a row in each, with the same session_id), by first frame: \
            exactly what `wiretape sessions DIR... [--from] [--to] [--where EXPR] --json` prints. A row \
            is listed when its frames overlap [from, to). The headers Wiretape-Tables, \
            Wiretape-Tables-Incomplete (tables whose recorder skipped frames: sessions may be missing) \
            and Wiretape-Files-Without-Table say how complete the answer is; Wiretape-Node names the \
            sensor. At most `limit` rows (100,000 at most): when more matched, the first ones are \
            sent and Wiretape-Sessions-Cut gives their number.",
    },
    Endpoint {
        path: "/v1/openapi.json",
        params: &[],
        query: false,
        answer: Answer::Json("OpenApi"),
        summary: "this description of the API (OpenAPI 3.1)",
        description: "",
    },
    Endpoint {
        path: "/query",
        params: &[],
        query: true,
        answer: Answer::Steno,
        summary: "Stenographer's endpoint: a query in its language in the body, the pcap its server sends",
        description: "What Stenographer's `stenoread` and `stenocurl` ask, answered as Stenographer's \
            server answers (1.0.1): the frames of every store that the query selects, merged in time \
            order, as a classic pcap with microsecond stamps and a snap length of 65536 (a longer \
            frame is cut, its original length kept), streamed. The headers Steno-Limit-Packets and \
            Steno-Limit-Bytes bound the answer; each is read as Go's strconv.ParseInt(v, 0, 64) \
            (decimal, 0x, 0o, 0b, a leading 0 for octal, underscores between digits, a sign), \
            empty or 0 is no limit, anything else a 400. A query that does not parse is a 400 \
            naming the position; nothing is streamed then.",
    },
    Endpoint {
        path: "/",
        params: &["filter"],
        query: false,
        answer: Answer::Asset("text/html; charset=utf-8"),
        summary: "the console: a page for a browser (`/?filter=EXPR` fills its filter box)",
        description: "One page with its script and style, all from this server, under a \
            Content-Security-Policy of default-src 'self'.",
    },
    Endpoint {
        path: "/console.js",
        params: &[],
        query: false,
        answer: Answer::Asset("text/javascript; charset=utf-8"),
        summary: "the console's script",
        description: "",
    },
    Endpoint {
        path: "/console.css",
        params: &[],
        query: false,
        answer: Answer::Asset("text/css; charset=utf-8"),
        summary: "the console's style",
        description: "",
    },
];

/// The endpoint at `path`.
pub fn endpoint(path: &str) -> Option<&'static Endpoint> {
    ENDPOINTS.iter().find(|e| e.path == path)
}

/// One parameter: its name, its schema, its description, examples.
pub struct Param {
    /// Its name in the query string.
    pub name: &'static str,
    /// Its JSON schema (OpenAPI 3.1).
    pub schema: fn() -> Value,
    /// What it means.
    pub description: &'static str,
    /// Values that are taken (the examples phase of a fuzzer starts there).
    pub examples: &'static [&'static str],
}

/// A protocol of the 5-tuple form, as a regular expression (ECMA 262, as
/// JSON Schema's `pattern`): a name of [`PROTOS`] in any case, or 0 to 255
/// without leading zeros.
pub fn proto_pattern() -> String {
    let names: Vec<String> = PROTOS
        .iter()
        .map(|p| {
            p.chars()
                .map(|c| {
                    if c.is_ascii_alphabetic() {
                        format!("[{}{}]", c.to_ascii_uppercase(), c)
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        })
        .collect();
    format!(
        "^(?:{}|[0-9]|[1-9][0-9]|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$",
        names.join("|")
    )
}

const TIME: &str = "A time as `wiretape extract` takes it: RFC 3339 with a zone \
(2025-11-22T14:00:00Z), Unix seconds with up to nine decimals (1763820000.5), or relative to now \
(-5m, -1h30m, -2d).";

/// Every parameter of every endpoint.
pub const PARAMS: &[Param] = &[
    Param {
        name: "from",
        schema: || json!({"type": "string", "minLength": 1}),
        description: "The window's start (included). Default: the first frame.",
        examples: &["1700000000", "-5m", "2023-11-14T22:13:20Z"],
    },
    Param {
        name: "to",
        schema: || json!({"type": "string", "minLength": 1}),
        description: "The window's end (excluded); after `from`. Default: past the last frame.",
        examples: &["1700000010.5", "-1m", "2030-01-01T00:00:00Z"],
    },
    Param {
        name: "filter",
        schema: || json!({"type": "string"}),
        description: "A filter in tcpdump's language (libpcap's pcap-filter); a filter libpcap \
            refuses is a 400 with libpcap's message.",
        examples: &["udp", "tcp port 443 and host 10.0.0.1", "not arp"],
    },
    Param {
        name: "format",
        schema: || json!({"type": "string", "enum": FORMATS}),
        description: "The capture format. Default pcap.",
        examples: &["pcap", "pcapng"],
    },
    Param {
        name: "tsprec",
        schema: || json!({"type": "string", "enum": TSPRECS}),
        description: "The stamps of a pcap: ns or us (pcapng: ns only). Default ns.",
        examples: &["ns", "us"],
    },
    Param {
        name: "src",
        schema: || {
            json!({"anyOf": [
                {"type": "string", "format": "ipv4", "pattern": "^[0-9.]+$"},
                {"type": "string", "format": "ipv6", "pattern": "^[0-9A-Fa-f:.]+$"},
            ]})
        },
        description:
            "The 5-tuple form (Security Onion's stenoquery): `host SRC` (either direction).",
        examples: &["10.0.0.1", "fe80::1"],
    },
    Param {
        name: "dst",
        schema: || {
            json!({"anyOf": [
                {"type": "string", "format": "ipv4", "pattern": "^[0-9.]+$"},
                {"type": "string", "format": "ipv6", "pattern": "^[0-9A-Fa-f:.]+$"},
            ]})
        },
        description: "The 5-tuple form: `host DST` (either direction).",
        examples: &["10.0.0.2"],
    },
    Param {
        name: "sport",
        schema: || json!({"type": "integer", "minimum": 0, "maximum": 65535}),
        description: "The 5-tuple form: `port SPORT` (either direction).",
        examples: &["1000", "53"],
    },
    Param {
        name: "dport",
        schema: || json!({"type": "integer", "minimum": 0, "maximum": 65535}),
        description: "The 5-tuple form: `port DPORT` (either direction).",
        examples: &["53", "443"],
    },
    Param {
        name: "proto",
        schema: || json!({"type": "string", "pattern": proto_pattern()}),
        description:
            "The 5-tuple form: tcp, udp, icmp, icmp6, sctp (any case) or a protocol number \
            0 to 255 (`(ip proto N or ip6 proto N)`).",
        examples: &["udp", "TCP", "47"],
    },
    Param {
        name: "steno",
        schema: || json!({"type": "string"}),
        description: "A query in Stenographer's language instead of `filter` (not with it nor the \
            5-tuple form): what `extract --steno-query` selects, within from/to. One that does not \
            parse is a 400 naming the position.",
        examples: &["tcp and port 443", "host 10.0.0.1 or udp", "ip proto 47"],
    },
    Param {
        name: "session_where",
        schema: || json!({"type": "string", "minLength": 1}),
        description: "Only the frames of the sessions this expression (the `where` language of \
            /v1/sessions) chooses in the sensor's own session tables, within from/to: what \
            `extract --session-where` selects (with a filter too, frames both keep; not with \
            steno). One that does not parse is a 400 naming the position.",
        examples: &["tls_sni ~ '*.example.com'", "dns_queries ~ example and proto = 17"],
    },
    Param {
        name: "where",
        schema: || json!({"type": "string"}),
        description: "Conditions FIELD OP VALUE joined by `and` over the session table's columns \
            (`wiretape sessions --where`): OP is =, !=, <, <=, >, >= or ~ (text: a glob with * and ?, \
            else a substring; ASCII case ignored). One that does not parse is a 400 naming the \
            position.",
        examples: &["tls_sni ~ '*.example.com' and server_port = 443", "proto = 17"],
    },
    Param {
        name: "limit",
        schema: || json!({"type": "integer", "minimum": 1, "maximum": MAX_SESSION_ROWS}),
        description: "At most this many rows, the first by first frame (default and maximum \
            100,000). When rows were left out, the header Wiretape-Sessions-Cut says how many were \
            kept: narrow the window or `where`.",
        examples: &["1000"],
    },
    Param {
        name: "by",
        schema: || json!({"type": "string", "enum": BY}),
        description: "Series of the timeline: none, one per interface, or one per queue.",
        examples: &["none", "queue"],
    },
    Param {
        name: "filter_index",
        schema: || json!({"type": "string"}),
        description:
            "A filter whose upper bound per bin the flow index gives (tcpdump's language).",
        examples: &["udp", "host 10.0.0.2"],
    },
    Param {
        name: "width",
        schema: || json!({"type": "integer", "minimum": WIDTH.0, "maximum": WIDTH.1}),
        description: "The picture's width in pixels: it chooses the bins (about one per 4 pixels).",
        examples: &["200", "1000"],
    },
    Param {
        name: "bin_ns",
        schema: || json!({"type": "integer", "minimum": 1, "maximum": MAX_NUMBER}),
        description: "The bins' length in ns (instead of width).",
        examples: &["1000000000"],
    },
];

/// The parameter `name`.
pub fn param(name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|p| p.name == name)
}

/// The endpoints for `wiretape api --help`, one line each.
pub fn help() -> String {
    let w = ENDPOINTS
        .iter()
        .map(|e| e.path.len() + if e.method() == "GET" { 0 } else { 5 })
        .max()
        .unwrap_or(0);
    ENDPOINTS
        .iter()
        .map(|e| {
            let params = if e.params.is_empty() || e.is_asset() {
                String::new()
            } else {
                format!(" ({})", e.params.join(", "))
            };
            let path = match e.method() {
                "GET" => e.path.to_string(),
                m => format!("{m} {}", e.path),
            };
            format!("  {path:w$}  {}{params}", e.summary)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn error_answer(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi() -> Value {
    let mut paths = serde_json::Map::new();
    for e in ENDPOINTS {
        let mut parameters: Vec<Value> = e
            .params
            .iter()
            .filter_map(|n| param(n))
            .map(|p| {
                let mut v = json!({
                    "name": p.name,
                    "in": "query",
                    "required": false,
                    "description": if PARAMS_TIME.contains(&p.name) {
                        format!("{} {TIME}", p.description)
                    } else {
                        p.description.to_string()
                    },
                    "schema": (p.schema)(),
                });
                if !p.examples.is_empty() {
                    let ex: serde_json::Map<String, Value> = p
                        .examples
                        .iter()
                        .enumerate()
                        .map(|(i, x)| (format!("e{i}"), json!({ "value": x })))
                        .collect();
                    v["examples"] = ex.into();
                }
                v
            })
            .collect();
        let ok = match e.answer {
            Answer::Capture => json!({
                "description": "The capture, streamed (chunked).",
                "content": {
                    "application/vnd.tcpdump.pcap": {"schema": {"type": "string", "format": "binary"}},
                    "application/x-pcapng": {"schema": {"type": "string", "format": "binary"}},
                }
            }),
            Answer::Json(name) => json!({
                "description": "The answer.",
                "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}
            }),
            Answer::JsonLines(name) => json!({
                "description": "One JSON object per line.",
                "content": {"application/x-ndjson": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}
            }),
            Answer::Parquet => json!({
                "description": "The table.",
                "content": {"application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}}}
            }),
            Answer::Asset(ct) => {
                let media = ct.split(';').next().unwrap_or(ct);
                json!({
                    "description": "The file.",
                    "content": { media: {"schema": {"type": "string"}} }
                })
            }
            Answer::Steno => json!({
                "description": "The frames as a classic pcap (little-endian, microsecond stamps, snap length \
                    65536, Ethernet), streamed (chunked), with the media type Stenographer's server gives it.",
                "content": {
                    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
                }
            }),
        };
        if e.answer == Answer::Steno {
            parameters.extend(STENO_LIMITS.iter().map(|(name, d)| {
                json!({
                    "name": name,
                    "in": "header",
                    "required": false,
                    "description": format!("{d} Read as Go's strconv.ParseInt(v, 0, 64); empty or 0: no limit."),
                    "schema": {"type": "string"},
                    "examples": {"e0": {"value": "10"}, "e1": {"value": "0x100"}},
                })
            }));
        }
        let mut responses = serde_json::Map::new();
        responses.insert("200".into(), ok);
        if !e.is_asset() {
            responses.insert(
                "400".into(),
                error_answer(if e.answer == Answer::Steno {
                    "A query that does not parse (the message names the position and what was \
                     expected), one longer than 64 KiB or nested too deep, a body that is not \
                     UTF-8, or a Steno-Limit header that is not a number."
                } else {
                    "A bad request: the message names the parameter and what it takes."
                }),
            );
        }
        responses.insert(
            "403".into(),
            error_answer("The client certificate's names are not among those the server admits."),
        );
        responses.insert(
            "431".into(),
            error_answer("The request head (request line and headers) is over 16 KiB."),
        );
        if e.query {
            responses.insert(
                "503".into(),
                json!({
                    "description": "As many queries as the server runs at once are running: try again.",
                    "headers": {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}},
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
                }),
            );
        }
        if e.query || e.path == "/v1/timeline" {
            responses.insert(
                "500".into(),
                error_answer("A store could not be read (the message says which and why)."),
            );
        }
        let mut op = json!({
            "summary": e.summary,
            "operationId": operation_id(e.path),
            "parameters": parameters,
            "responses": responses,
        });
        if !e.description.is_empty() {
            op["description"] = e.description.into();
        }
        if e.answer == Answer::Steno {
            op["requestBody"] = json!({
                "description": "The query, in Stenographer's language (`host 10.0.0.1 and tcp port 443 \
                    and after 5m ago`), as UTF-8 text of at most 64 KiB.",
                "required": true,
                "content": {"text/plain": {
                    "schema": {"type": "string", "maxLength": crate::steno::MAX_QUERY_BYTES},
                    "examples": {
                        "e0": {"value": "tcp and port 443"},
                        "e1": {"value": "host 10.0.0.1 or udp"},
                    },
                }},
            });
        }
        let method = e.method().to_ascii_lowercase();
        paths.insert(e.path.to_string(), json!({ method: op }));
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "wiretape sensor API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The stores of a wiretape sensor, read-only: extractions, counts, plans, \
                the status, the files, the timeline, the block index, Stenographer's POST /query and \
                the console. Served by `wiretape api`; every client presents a certificate of the \
                server's --client-ca (mutual TLS) unless it serves loopback as plain HTTP. Every \
                refusal is JSON {\"error\": \"...\"}; other methods than an endpoint's get 405 with \
                Allow, unknown paths 404.",
        },
        "servers": [{"url": "/"}],
        "security": [{"clientCertificate": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "clientCertificate": {
                    "type": "mutualTLS",
                    "description": "A client certificate of the server's --client-ca (`wiretape certs client DIR NAME`).",
                }
            },
            "schemas": schemas(),
        },
    })
}

const PARAMS_TIME: &[&str] = &["from", "to"];

/// `/v1/index.parquet` → `v1IndexParquet`, `/` → `console`.
fn operation_id(path: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            if up && !out.is_empty() {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            up = false;
        } else {
            up = true;
        }
    }
    if out.is_empty() {
        "console".into()
    } else {
        out
    }
}

fn int() -> Value {
    json!({"type": "integer", "minimum": 0})
}
fn int_or_null() -> Value {
    json!({"type": ["integer", "null"], "minimum": 0})
}
fn string_or_null() -> Value {
    json!({"type": ["string", "null"]})
}
fn strings() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

/// An object with `props` (name, schema), all of them required; more
/// fields may come (a newer server).
fn object(props: &[(&str, Value)]) -> Value {
    let p: serde_json::Map<String, Value> = props
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    json!({
        "type": "object",
        "required": props.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        "properties": p,
    })
}

/// The store's span (`store_span` of `/v1/count` and `/v1/timeline`).
fn store_span() -> Value {
    described(
        json!({"anyOf": [
            object(&[
                ("first_ns", int()),
                ("last_ns", int()),
                ("first_time", json!({"type": "string"})),
                ("last_time", json!({"type": "string"})),
            ]),
            {"type": "null"},
        ]}),
        "The first and last stamps the store's indexes and file names know (null: none).",
    )
}

fn misses() -> Value {
    described(
        json!({"type": "boolean"}),
        "The window holds none of the store's span: nothing was read.",
    )
}

fn described(mut v: Value, d: &str) -> Value {
    v["description"] = d.into();
    v
}

fn schemas() -> Value {
    let note = object(&[
        ("file", json!({"type": "string"})),
        ("offset", int_or_null()),
        ("error", json!({"type": "string"})),
    ]);
    let counts = {
        let mut c = object(&[("frames", int()), ("bytes", int())]);
        c["properties"]["filter_frames_max"] = int();
        c["properties"]["series"] = json!({"type": "object", "additionalProperties": {"$ref": "#/components/schemas/TimelineCounts"}});
        c
    };
    let mut bin = counts.clone();
    bin["required"] = json!(["frames", "bytes", "start_ns", "end_ns"]);
    bin["properties"]["start_ns"] = int();
    bin["properties"]["end_ns"] = int();
    json!({
        "Error": described(object(&[("error", json!({"type": "string"}))]), "A refusal: what is wrong and what to do."),
        "Count": described(object(&[
            ("frames", described(int(), "Frames kept.")),
            ("bytes", described(int(), "Their captured bytes (of the frames, without record headers).")),
            ("wire_bytes", described(int(), "Their bytes on the wire.")),
            ("files", int()),
            ("files_read", int()),
            ("files_skipped", int()),
            ("files_scanned_without_index", int()),
            ("files_without_index", strings()),
            ("files_being_written", int()),
            ("blocks_read", int()),
            ("blocks_skipped", int()),
            ("bytes_read", described(int(), "Bytes read from disk.")),
            ("blocks_decompressed", int()),
            ("chunks_decrypted", described(int(), "age chunks (64 KiB) decrypted (encrypted captures only).")),
            ("records_read", int()),
            ("records_odd", int()),
            ("out_of_order", int()),
            ("seconds", json!({"type": "number", "minimum": 0})),
            ("from_ns", int_or_null()),
            ("to_ns", int_or_null()),
            ("filter", string_or_null()),
            ("output", string_or_null()),
            ("format", json!({"type": "string"})),
            ("corrupt", json!({"type": "array", "items": note.clone()})),
            ("errors", json!({"type": "array", "items": note})),
            ("blocks_skipped_by_flow_index", int()),
            ("filter_narrows", json!({"type": "boolean"})),
            ("linktypes", json!({"type": "array", "items": object(&[("linktype", int()), ("name", json!({"type": "string"})), ("frames", int())])})),
            ("store_span", store_span()),
            ("window_misses_store", misses()),
        ]), "The summary of an extraction that writes nothing."),
        "Plan": object(&[
            ("blocks", json!({"type": "array", "items": object(&[
                ("file", json!({"type": "string"})),
                ("offset", int()),
                ("first_ns", int()),
                ("last_ns", int()),
                ("frames", int()),
            ])})),
            ("blocks_skipped_by_flow_index", int()),
            ("filter_narrows", json!({"type": "boolean"})),
            ("files_read_whole", strings()),
            ("from_ns", int_or_null()),
            ("to_ns", int_or_null()),
        ]),
        "Status": object(&[
            ("stores", strings()),
            ("first_ns", described(int_or_null(), "The store's first frame (null: no frame).")),
            ("last_ns", described(int_or_null(), "The store's last frame.")),
            ("first_time", string_or_null()),
            ("last_time", string_or_null()),
            ("files", int()),
            ("bytes", described(int(), "Bytes on disk: the capture files' sizes (compressed ones as they lie).")),
            ("frames", described(int(), "Frames in the files, from their indexes and the tails past them.")),
            ("frames_partial", described(json!({"type": "boolean"}),
                "true when `frames` is a lower bound: some file has more than 64 MiB past its last index \
                 entry (or no index), which is not walked to count them.")),
            ("free_bytes", described(int_or_null(), "Free bytes of the stores' filesystems.")),
            ("size_bytes", int_or_null()),
            ("recording", described(json!({"type": "boolean"}), "A recorder is writing into the store.")),
            ("files_being_written", int()),
            ("node", json!({"type": "string"})),
            ("version", json!({"type": "string"})),
        ]),
        "Files": object(&[("files", json!({"type": "array", "items": object(&[
            ("name", string_or_null()),
            ("path", json!({"type": "string"})),
            ("bytes", described(int(), "Its size on disk.")),
            ("frames", int()),
            ("first_ns", int_or_null()),
            ("last_ns", int_or_null()),
            ("first_time", string_or_null()),
            ("last_time", string_or_null()),
            ("being_written", json!({"type": "boolean"})),
        ])}))]),
        "TimelineCounts": described(counts.clone(), "Frames and bytes of records (headers included, as they lie in the files)."),
        "Timeline": object(&[
            ("from_ns", int()),
            ("to_ns", int()),
            ("from_time", json!({"type": "string"})),
            ("to_time", json!({"type": "string"})),
            ("bin_ns", json!({"type": "integer", "minimum": 1})),
            ("by", json!({"type": "string", "enum": BY})),
            ("series", strings()),
            ("filter", string_or_null()),
            ("bins", json!({"type": "array", "items": bin})),
            ("totals", json!({"$ref": "#/components/schemas/TimelineCounts"})),
            ("files", int()),
            ("files_without_index", strings()),
            ("blocks", int()),
            ("blocks_read", int()),
            ("store_span", store_span()),
            ("window_misses_store", misses()),
        ]),
        "Session": described(object(&[
            ("session_id", described(int(), "Stable across files (63 bits).")),
            ("file", json!({"type": "string"})),
            ("first_ns", int()),
            ("last_ns", int()),
            ("first_time", json!({"type": "string"})),
            ("last_time", json!({"type": "string"})),
            ("ip_version", int()),
            ("proto", int()),
            ("client_ip", json!({"type": "string"})),
            ("client_port", int()),
            ("server_ip", json!({"type": "string"})),
            ("server_port", int()),
            ("vlan", int_or_null()),
            ("client_packets", int()),
            ("client_bytes", int()),
            ("server_packets", int()),
            ("server_bytes", int()),
            ("tcp_flags", int_or_null()),
            ("continued", json!({"type": "boolean"})),
            ("dns_query", string_or_null()),
            ("dns_type", string_or_null()),
            ("dns_answers", json!({"type": ["array", "null"], "items": {"type": "string"}})),
            ("tls_sni", string_or_null()),
            ("tls_alpn", json!({"type": ["array", "null"], "items": {"type": "string"}})),
            ("ja4", string_or_null()),
            ("http_host", string_or_null()),
            ("http_method", string_or_null()),
            ("http_path", string_or_null()),
            ("http_user_agent", string_or_null()),
            ("quic_sni", string_or_null()),
            ("dns_queries", json!({"type": ["array", "null"], "items": {"type": "string"}})),
            ("dns_queries_cut", int_or_null()),
        ]), "A session table's row (a connection's frames in one capture file); names escaped."),
        "OpenApi": {"type": "object", "required": ["openapi", "paths"]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_endpoint_and_parameter_is_described_once() {
        for e in ENDPOINTS {
            assert_eq!(
                ENDPOINTS.iter().filter(|x| x.path == e.path).count(),
                1,
                "{}",
                e.path
            );
            for p in e.params {
                assert!(
                    param(p).is_some(),
                    "{}: parameter {p} has no description",
                    e.path
                );
            }
        }
        for p in PARAMS {
            assert!(
                ENDPOINTS.iter().any(|e| e.params.contains(&p.name)),
                "{} is taken by no endpoint",
                p.name
            );
        }
        let doc = openapi();
        assert_eq!(doc["paths"].as_object().unwrap().len(), ENDPOINTS.len());
        assert_eq!(operation_id("/v1/index.parquet"), "v1IndexParquet");
        assert_eq!(operation_id("/"), "console");
        assert_eq!(operation_id("/query"), "query");
        assert!(doc["paths"]["/query"]["post"]["requestBody"]["content"]["text/plain"].is_object());
        assert!(doc["paths"]["/query"].get("get").is_none());
        assert_eq!(
            endpoint(super::super::steno::PATH).map(|e| e.allow()),
            Some("POST")
        );
        let h = help();
        for e in ENDPOINTS {
            assert!(h.contains(e.path), "--help lists {}", e.path);
        }
        // The proto pattern: what the check takes, and only that.
        let p = proto_pattern();
        assert!(p.starts_with("^(?:[Tt][Cc][Pp]|[Uu][Dd][Pp]|"), "{p}");
    }
}
