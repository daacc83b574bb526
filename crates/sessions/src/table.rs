//! A file's session table as Parquet: one row per session, the columns
//! named as issue 38 names them, the table's counts in the file's
//! key-value metadata (the Parquet file's and the Arrow schema's;
//! `wiretape.sessions.*`: `frames`, `skipped`,
//! `complete`, `not_ip`, `fragments`, `evicted`, `reused`,
//! `names_skipped`).
//!
//! | column | type | what |
//! |---|---|---|
//! | `session_id` | INT64 | stable across files ([`crate::session_id`], 63 bits) |
//! | `file` | UTF8 | the capture file's name |
//! | `first_ns`, `last_ns` | INT64 | first and last frame in this file, ns since the epoch |
//! | `first_time`, `last_time` | TIMESTAMP(ns, UTC) | the same, as timestamps |
//! | `ip_version` | INT32 | 4 or 6 |
//! | `proto` | INT32 | IP protocol (6 TCP, 17 UDP, 1 ICMP, ...) |
//! | `client_ip`, `server_ip` | UTF8 | addresses as text (`10.0.0.1`, `2001:db8::1`) |
//! | `client_port`, `server_port` | INT32 | 0 for protocols without ports |
//! | `vlan` | INT32 | the outer VLAN id, null untagged |
//! | `client_packets`, `client_bytes`, `server_packets`, `server_bytes` | INT64 | per direction, bytes on the wire |
//! | `tcp_flags` | INT32 | TCP flags seen, or-ed (null for other protocols) |
//! | `continued` | BOOLEAN | the session started in an earlier file |
//! | `dns_query`, `dns_type` | UTF8 | the first question (type as its mnemonic, `TYPEn` otherwise) |
//! | `dns_answers` | LIST(UTF8) | A/AAAA addresses, CNAME/DNAME/NS/PTR/MX names |
//! | `tls_sni`, `tls_alpn`, `ja4` | UTF8, LIST(UTF8), UTF8 | the ClientHello's (TLS over TCP or QUIC) |
//! | `http_host`, `http_method`, `http_path`, `http_user_agent` | UTF8 | the first HTTP/1.x request |
//! | `quic_sni` | UTF8 | the QUIC Initial's server name |
//! | `dns_queries` | LIST(UTF8) | every distinct question name, first seen first (at most [`crate::dns::MAX_QUERIES`]) |
//! | `dns_queries_cut` | INT32 | questions not in `dns_queries` because it was full (null without DNS questions) |
//!
//! The last two came later (last, so that a reader matching columns by
//! position still finds the others where they were); a table without them
//! reads back with `dns_queries` holding `dns_query` alone.

use crate::track::{Session, Table, TableStats};
use crate::Names;
use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, ListBuilder, StringBuilder,
    TimestampNanosecondBuilder,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Int32Array, Int64Array, ListArray, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What went wrong writing or reading a session table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TableError {
    /// Arrow or Parquet refused the table.
    #[error("session table {path}: {why}")]
    Parquet {
        /// The table's file.
        path: PathBuf,
        /// Arrow's or Parquet's words.
        why: String,
    },
    /// The table's file could not be written or read.
    #[error("session table {path}: {source}")]
    Io {
        /// The table's file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

const META: &str = "wiretape.sessions.";

/// The schema of a session table (see the module docs).
pub fn schema() -> SchemaRef {
    let list = |name: &str| {
        Field::new(
            name,
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        )
    };
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let text = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("session_id", DataType::Int64, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("first_ns", DataType::Int64, false),
        Field::new("last_ns", DataType::Int64, false),
        Field::new("first_time", ts.clone(), false),
        Field::new("last_time", ts, false),
        Field::new("ip_version", DataType::Int32, false),
        Field::new("proto", DataType::Int32, false),
        Field::new("client_ip", DataType::Utf8, false),
        Field::new("client_port", DataType::Int32, false),
        Field::new("server_ip", DataType::Utf8, false),
        Field::new("server_port", DataType::Int32, false),
        Field::new("vlan", DataType::Int32, true),
        Field::new("client_packets", DataType::Int64, false),
        Field::new("client_bytes", DataType::Int64, false),
        Field::new("server_packets", DataType::Int64, false),
        Field::new("server_bytes", DataType::Int64, false),
        Field::new("tcp_flags", DataType::Int32, true),
        Field::new("continued", DataType::Boolean, false),
        text("dns_query"),
        text("dns_type"),
        list("dns_answers"),
        text("tls_sni"),
        list("tls_alpn"),
        text("ja4"),
        text("http_host"),
        text("http_method"),
        text("http_path"),
        text("http_user_agent"),
        text("quic_sni"),
        list("dns_queries"),
        Field::new("dns_queries_cut", DataType::Int32, true),
    ]))
}

/// The rows of `t` as one record batch (the schema's metadata carries the
/// table's counts).
pub fn to_batch(t: &Table) -> Result<RecordBatch, TableError> {
    let s = &t.stats;
    let meta: HashMap<String, String> = [
        ("frames", s.frames),
        ("skipped", s.skipped),
        ("complete", u64::from(s.complete())),
        ("not_ip", s.not_ip),
        ("fragments", s.fragments),
        ("evicted", s.evicted),
        ("reused", s.reused),
        ("names_skipped", s.names_skipped),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{META}{k}"), v.to_string()))
    .collect();
    let rows: Vec<(&Session, &str)> = t.rows.iter().map(|r| (r, t.file.as_str())).collect();
    rows_batch(&rows, meta, Path::new(&t.file))
}

/// Rows of several files' tables (each with its capture file's name) as
/// one record batch of the table's schema, with `meta` as the schema's
/// metadata (`name` for errors): what `wiretape sessions --parquet` writes.
pub fn rows_batch(
    rows: &[(&Session, &str)],
    meta: HashMap<String, String>,
    name: &Path,
) -> Result<RecordBatch, TableError> {
    let n = rows.len();
    let mut id = Int64Builder::with_capacity(n);
    let mut file = StringBuilder::new();
    let (mut first, mut last) = (
        Int64Builder::with_capacity(n),
        Int64Builder::with_capacity(n),
    );
    let mut first_t = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut last_t = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let (mut ver, mut proto) = (
        Int32Builder::with_capacity(n),
        Int32Builder::with_capacity(n),
    );
    let (mut cip, mut sip) = (StringBuilder::new(), StringBuilder::new());
    let (mut cport, mut sport) = (
        Int32Builder::with_capacity(n),
        Int32Builder::with_capacity(n),
    );
    let mut vlan = Int32Builder::with_capacity(n);
    let mut counts: [Int64Builder; 4] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
    let mut flags = Int32Builder::with_capacity(n);
    let mut cont = BooleanBuilder::with_capacity(n);
    // dns_query, dns_type, tls_sni, ja4, http_host, http_method,
    // http_path, http_user_agent, quic_sni
    let mut texts: [StringBuilder; 9] = std::array::from_fn(|_| StringBuilder::new());
    let mut answers = ListBuilder::new(StringBuilder::new());
    let mut alpn = ListBuilder::new(StringBuilder::new());
    let mut queries = ListBuilder::new(StringBuilder::new());
    let mut cut = Int32Builder::with_capacity(n);
    let none = Names::default();
    for &(r, f) in rows {
        id.append_value(r.id as i64);
        file.append_value(f);
        first.append_value(r.first_ns as i64);
        last.append_value(r.last_ns as i64);
        first_t.append_value(r.first_ns as i64);
        last_t.append_value(r.last_ns as i64);
        ver.append_value(r.ip_version as i32);
        proto.append_value(r.proto as i32);
        cip.append_value(r.client_ip.to_string());
        sip.append_value(r.server_ip.to_string());
        cport.append_value(r.client_port as i32);
        sport.append_value(r.server_port as i32);
        vlan.append_option(r.vlan.map(i32::from));
        for (b, v) in counts.iter_mut().zip([
            r.client_packets,
            r.client_bytes,
            r.server_packets,
            r.server_bytes,
        ]) {
            b.append_value(v as i64);
        }
        flags.append_option((r.proto == 6).then_some(r.tcp_flags as i32));
        cont.append_value(r.continued);
        let nm = r.names.as_deref().unwrap_or(&none);
        let dns_type = nm.dns_type.map(crate::dns::type_name);
        for (b, v) in texts.iter_mut().zip([
            nm.dns_query.as_deref(),
            dns_type.as_deref(),
            nm.tls_sni.as_deref(),
            nm.ja4.as_deref(),
            nm.http_host.as_deref(),
            nm.http_method.as_deref(),
            nm.http_path.as_deref(),
            nm.http_user_agent.as_deref(),
            nm.quic_sni.as_deref(),
        ]) {
            b.append_option(v);
        }
        cut.append_option(
            (!nm.dns_queries.is_empty()).then(|| nm.dns_queries_cut.min(i32::MAX as u32) as i32),
        );
        for (b, v) in [
            (&mut answers, &nm.dns_answers),
            (&mut alpn, &nm.tls_alpn),
            (&mut queries, &nm.dns_queries),
        ] {
            if v.is_empty() {
                b.append_null();
            } else {
                for a in v {
                    b.values().append_value(a);
                }
                b.append(true);
            }
        }
    }
    let [t0, t1, t2, t3, t4, t5, t6, t7, t8] = texts.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let [c0, c1, c2, c3] = counts.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(id.finish()),
        Arc::new(file.finish()),
        Arc::new(first.finish()),
        Arc::new(last.finish()),
        Arc::new(first_t.finish()),
        Arc::new(last_t.finish()),
        Arc::new(ver.finish()),
        Arc::new(proto.finish()),
        Arc::new(cip.finish()),
        Arc::new(cport.finish()),
        Arc::new(sip.finish()),
        Arc::new(sport.finish()),
        Arc::new(vlan.finish()),
        c0,
        c1,
        c2,
        c3,
        Arc::new(flags.finish()),
        Arc::new(cont.finish()),
        t0,
        t1,
        Arc::new(answers.finish()),
        t2,
        Arc::new(alpn.finish()),
        t3,
        t4,
        t5,
        t6,
        t7,
        t8,
        Arc::new(queries.finish()),
        Arc::new(cut.finish()),
    ];
    let schema = Arc::new(schema().as_ref().clone().with_metadata(meta));
    RecordBatch::try_new(schema, cols).map_err(|e| TableError::Parquet {
        path: name.to_owned(),
        why: e.to_string(),
    })
}

/// Writes `t` as a Parquet table into `w` (`name` for errors).
pub fn write_parquet<W: Write + Send>(w: W, t: &Table, name: &Path) -> Result<(), TableError> {
    write_batch(w, &to_batch(t)?, name)
}

/// Writes `batch` (of [`to_batch`] or [`rows_batch`]) as a Parquet file
/// into `w`, its schema's metadata as the file's key-value metadata too.
pub fn write_batch<W: Write + Send>(
    w: W,
    batch: &RecordBatch,
    name: &Path,
) -> Result<(), TableError> {
    let err = |e: parquet::errors::ParquetError| TableError::Parquet {
        path: name.to_owned(),
        why: e.to_string(),
    };
    // The counts also as the file's own key-value metadata (besides the
    // Arrow schema's): what any Parquet reader shows (DuckDB's
    // parquet_kv_metadata).
    let mut kv: Vec<parquet::file::metadata::KeyValue> = batch
        .schema()
        .metadata()
        .iter()
        .map(|(k, v)| parquet::file::metadata::KeyValue::new(k.clone(), v.clone()))
        .collect();
    kv.sort_by(|a, b| a.key.cmp(&b.key));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_key_value_metadata(Some(kv))
        .build();
    let mut pw =
        parquet::arrow::ArrowWriter::try_new(w, batch.schema(), Some(props)).map_err(err)?;
    pw.write(batch).map_err(err)?;
    pw.close().map_err(err)?;
    Ok(())
}

/// Writes `t` to the file `out`: to `OUT.tmp` first, then renamed, so a
/// reader never sees half a table.
pub fn write_parquet_file(out: &Path, t: &Table) -> Result<(), TableError> {
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let io = |source| TableError::Io {
        path: out.to_owned(),
        source,
    };
    let file = std::fs::File::create(&tmp).map_err(io)?;
    if let Err(e) = write_parquet(std::io::BufWriter::new(file), t, out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(io)
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a T, TableError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| TableError::Parquet {
            path: path.to_owned(),
            why: format!("not a wiretape session table (column {name} missing or of another type)"),
        })
}

fn list_at(l: &ListArray, i: usize) -> Vec<String> {
    if l.is_null(i) {
        return Vec::new();
    }
    let v = l.value(i);
    let Some(s) = v.as_any().downcast_ref::<StringArray>() else {
        return Vec::new();
    };
    (0..s.len())
        .filter(|&j| !s.is_null(j))
        .map(|j| s.value(j).to_string())
        .collect()
}

/// Reads a session table written by [`write_parquet`] back into its rows
/// (the file name of the first row, the counts from the metadata).
pub fn read_parquet(bytes: Vec<u8>, path: &Path) -> Result<Table, TableError> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let err = |why: String| TableError::Parquet {
        path: path.to_owned(),
        why,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| err(e.to_string()))?;
    let meta = builder.schema().metadata().clone();
    let get = |k: &str| {
        meta.get(&format!("{META}{k}"))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut t = Table {
        stats: TableStats {
            frames: get("frames"),
            not_ip: get("not_ip"),
            fragments: get("fragments"),
            evicted: get("evicted"),
            reused: get("reused"),
            names_skipped: get("names_skipped"),
            skipped: get("skipped"),
        },
        ..Table::default()
    };
    let reader = builder.build().map_err(|e| err(e.to_string()))?;
    for b in reader {
        let b = b.map_err(|e| err(e.to_string()))?;
        let i64s = |n: &str| col::<Int64Array>(&b, n, path);
        let i32s = |n: &str| col::<Int32Array>(&b, n, path);
        let strs = |n: &str| col::<StringArray>(&b, n, path);
        let lists = |n: &str| col::<ListArray>(&b, n, path);
        let (id, first, last) = (i64s("session_id")?, i64s("first_ns")?, i64s("last_ns")?);
        let (ver, proto, cport, sport) = (
            i32s("ip_version")?,
            i32s("proto")?,
            i32s("client_port")?,
            i32s("server_port")?,
        );
        let (vlan, flags) = (i32s("vlan")?, i32s("tcp_flags")?);
        let (file, cip, sip) = (strs("file")?, strs("client_ip")?, strs("server_ip")?);
        let counts = [
            i64s("client_packets")?,
            i64s("client_bytes")?,
            i64s("server_packets")?,
            i64s("server_bytes")?,
        ];
        let cont = col::<BooleanArray>(&b, "continued", path)?;
        let names = [
            "dns_query",
            "dns_type",
            "tls_sni",
            "ja4",
            "http_host",
            "http_method",
            "http_path",
            "http_user_agent",
            "quic_sni",
        ]
        .map(strs);
        let [q, ty, sni, ja4, host, method, tpath, ua, qsni] = names;
        let (q, ty, sni, ja4, host, method, tpath, ua, qsni) =
            (q?, ty?, sni?, ja4?, host?, method?, tpath?, ua?, qsni?);
        let (answers, alpn) = (lists("dns_answers")?, lists("tls_alpn")?);
        // Tables written before these columns have none.
        let queries = b
            .column_by_name("dns_queries")
            .map(|_| lists("dns_queries"))
            .transpose()?;
        let cut = b
            .column_by_name("dns_queries_cut")
            .map(|_| i32s("dns_queries_cut"))
            .transpose()?;
        let ip = |s: &StringArray, i: usize| {
            s.value(i)
                .parse::<IpAddr>()
                .map_err(|e| err(format!("{}: {e}", s.value(i))))
        };
        let opt = |s: &StringArray, i: usize| (!s.is_null(i)).then(|| s.value(i).to_string());
        for i in 0..b.num_rows() {
            if t.file.is_empty() {
                t.file = file.value(i).to_string();
            }
            let dns_query = opt(q, i);
            let dns_queries = match queries {
                Some(l) => list_at(l, i),
                None => dns_query.iter().cloned().collect(),
            };
            let nm = Names {
                dns_queries,
                dns_queries_cut: cut
                    .filter(|c| !c.is_null(i))
                    .map_or(0, |c| c.value(i).max(0) as u32),
                dns_query,
                dns_type: opt(ty, i).and_then(|s| crate::dns::type_number(&s)),
                dns_answers: list_at(answers, i),
                tls_sni: opt(sni, i),
                tls_alpn: list_at(alpn, i),
                ja4: opt(ja4, i),
                http_host: opt(host, i),
                http_method: opt(method, i),
                http_path: opt(tpath, i),
                http_user_agent: opt(ua, i),
                quic_sni: opt(qsni, i),
            };
            t.rows.push(Session {
                id: id.value(i) as u64,
                first_ns: first.value(i) as u64,
                last_ns: last.value(i) as u64,
                ip_version: ver.value(i) as u8,
                proto: proto.value(i) as u8,
                client_ip: ip(cip, i)?,
                client_port: cport.value(i) as u16,
                server_ip: ip(sip, i)?,
                server_port: sport.value(i) as u16,
                vlan: (!vlan.is_null(i)).then(|| vlan.value(i) as u16),
                client_packets: counts[0].value(i) as u64,
                client_bytes: counts[1].value(i) as u64,
                server_packets: counts[2].value(i) as u64,
                server_bytes: counts[3].value(i) as u64,
                tcp_flags: if flags.is_null(i) {
                    0
                } else {
                    flags.value(i) as u8
                },
                continued: cont.value(i),
                names: (!nm.is_empty()).then(|| Box::new(nm)),
            });
        }
    }
    Ok(t)
}
