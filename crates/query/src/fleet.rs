//! The index of a store, for the fleet: the `.idx` and `.kdx` sidecars
//! rebuilt where they are missing or stale ([`rebuild`]), and the block index of a store
//! as one Parquet table ([`block_table`], [`write_table`]): one row per
//! block, with its node, file, time range and flow keys, so that one SQL
//! query (DuckDB, Trino, Spark, ClickHouse) over the tables of many sensors
//! says which sensors, files and blocks hold what. Where a file has a key
//! index (`.kdx`), its blocks' lists are exact and complete (every host of
//! a block, however many; never NULL); elsewhere they come from the
//! `.idx` flow sets (NULL: more than 1,024 of a kind). [`read_table`] takes a
//! sensor's table back, so the tables of several sensors become one
//! ([`write_table`] of all their rows).

use crate::extract::Window;
use crate::QueryError;
use arrow_array::builder::{
    Int32Builder, Int64Builder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wiretape_files::index::{self, Entry, FlowSet};
use wiretape_files::keys::KeyIndex;
use wiretape_files::naming;
use wiretape_files::ReadOptions;
use wiretape_sessions::Tracker;
use wiretape_storage::block::DEFAULT_BLOCK_SIZE;
use wiretape_storage::StorageError;

/// Why an index must be rebuilt, or None when it is current (`force`:
/// always, when it exists); its sidecars where `opts` says they are.
pub fn stale(capture: &Path, opts: &ReadOptions, force: bool) -> Option<&'static str> {
    let ip = opts.index_path(capture);
    let (Ok(cm), Ok(im)) = (std::fs::metadata(capture), std::fs::metadata(&ip)) else {
        return Some("missing");
    };
    if force {
        return Some("forced");
    }
    match index::version(&ip) {
        Ok(2 | 3) => {}
        Ok(_) => return Some("old format, no flow sets"),
        Err(_) => return Some("unreadable"),
    }
    match index::read(&ip) {
        Err(_) => return Some("unreadable"),
        Ok(es) if es.iter().any(|e| e.flows.is_none()) => return Some("no flow sets"),
        Ok(_) => {}
    }
    match (cm.modified(), im.modified()) {
        (Ok(c), Ok(i)) if i < c => return Some("older than its capture"),
        _ => {}
    }
    // With flow sets (Ethernet), a finished file has a complete key index.
    match KeyIndex::open(capture, opts) {
        Ok(Some(k)) if k.complete_for(cm.len()) => {}
        Ok(Some(_)) => return Some("key index incomplete or stale"),
        Ok(None) => return Some("no key index"),
        Err(_) => return Some("key index unreadable"),
    }
    // And its session table (the recorder writes it as the file's last
    // block goes out, before the file is finished: no age comparison).
    if !opts.sessions_path(capture).exists() {
        return Some("no session table");
    }
    None
}

/// The capture files of `inputs`: our files in directories (of `prefix`
/// when given), any file named; a volume of a store stands for all its
/// volumes ([`wiretape_files::store`]).
pub fn captures(inputs: &[PathBuf], prefix: Option<&str>) -> Result<Vec<PathBuf>, StorageError> {
    captures_with(inputs, prefix, &ReadOptions::new())
}

/// [`captures`], directories listed by `opts` ([`ReadOptions::list_any`]:
/// their listings kept where `opts` says).
pub fn captures_with(
    inputs: &[PathBuf],
    prefix: Option<&str>,
    opts: &ReadOptions,
) -> Result<Vec<PathBuf>, StorageError> {
    let rd = |p: &Path, source| StorageError::Read {
        path: p.to_owned(),
        source,
    };
    let mut out = Vec::new();
    for p in &wiretape_files::store::expand_inputs(inputs) {
        let m = std::fs::metadata(p).map_err(|e| rd(p, e))?;
        if m.is_dir() {
            out.extend(opts.list_any(p, prefix).map_err(|e| rd(p, e))?);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Whether a writer holds `p` (its index grows as its blocks go out).
pub fn being_written(p: &Path) -> bool {
    std::fs::File::open(p).is_ok_and(|f| wiretape_files::is_being_written(&f))
}

/// What [`rebuild`] did to one file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Its index is current.
    UpToDate,
    /// Its index was rebuilt.
    Rebuilt,
    /// A writer holds it: left to the writer.
    BeingWritten,
    /// The rebuild failed.
    Failed,
}

/// One file's line in [`Rebuilt`].
#[derive(Clone, Debug)]
pub struct FileOutcome {
    /// The capture file.
    pub file: PathBuf,
    /// What happened.
    pub outcome: Outcome,
    /// Why it was rebuilt, or why that failed.
    pub why: Option<String>,
}

/// What [`rebuild`] did.
#[derive(Clone, Debug, Default)]
pub struct Rebuilt {
    /// Every file, in the order given.
    pub files: Vec<FileOutcome>,
    /// Index entries written.
    pub entries: u64,
    /// Bytes of the files that were rebuilt.
    pub bytes: u64,
    /// Sidecars of Stenographer's files moved from the sidecar directory's
    /// old layout (a directory per path component) to their flat names
    /// ([`naming::migrate_steno_sidecars`]): kept, not rebuilt.
    pub moved: usize,
}

impl Rebuilt {
    /// How many files had `o`.
    pub fn count(&self, o: Outcome) -> usize {
        self.files.iter().filter(|f| f.outcome == o).count()
    }
}

/// The files [`rebuild`] would rebuild (why), and the others' outcomes.
pub fn triage(
    files: &[PathBuf],
    opts: &ReadOptions,
    force: bool,
) -> (Vec<(PathBuf, &'static str)>, Vec<FileOutcome>) {
    let mut todo = Vec::new();
    let mut done = Vec::new();
    for f in files {
        if being_written(f) {
            done.push(FileOutcome {
                file: f.clone(),
                outcome: Outcome::BeingWritten,
                why: None,
            });
        } else if let Some(why) = stale(f, opts, force) {
            todo.push((f.clone(), why));
        } else {
            done.push(FileOutcome {
                file: f.clone(),
                outcome: Outcome::UpToDate,
                why: None,
            });
        }
    }
    (todo, done)
}

/// Rebuilds the stale indexes of `files` (all of them with `force`),
/// leaving files being written to their writer. `progress(file_number,
/// bytes_done_in_file)` is called as the walk goes (file numbers from 1);
/// `failed(file, error)` for each failure. Encrypted files are read with
/// the identities of `opts`; the sidecars of Stenographer's files go where
/// it says (none given: they are refused, never written beside them).
pub fn rebuild(
    files: &[PathBuf],
    opts: &ReadOptions,
    force: bool,
    progress: &mut dyn FnMut(usize, u64),
    failed: &mut dyn FnMut(&Path, &StorageError),
) -> Rebuilt {
    // Sidecars of Stenographer's files in the old deep layout: moved to
    // their flat names first (a rename each), so they count as up to date.
    let mut moved = 0;
    if opts.steno_sidecar_dir().is_some() {
        for f in files {
            if wiretape_files::steno::is_steno_file(f) {
                moved += opts.migrate_steno_sidecars(f).unwrap_or(0);
            }
        }
    }
    let (todo, done) = triage(files, opts, force);
    let mut r = Rebuilt {
        files: done,
        moved,
        ..Rebuilt::default()
    };
    // Session tables: a file's connections go on into the next file of its
    // series (one queue's files, in time order) with their ids when that
    // file is rebuilt right after it.
    let series = |f: &Path| {
        let name = f.file_name()?.to_str()?;
        Some((
            f.parent()?.to_owned(),
            naming::parse_any(name)?.series.to_owned(),
        ))
    };
    let mut prev: std::collections::HashMap<PathBuf, PathBuf> = Default::default();
    let mut last: std::collections::HashMap<(PathBuf, String), PathBuf> = Default::default();
    for f in files {
        if let Some(k) = series(f) {
            if let Some(p) = last.insert(k, f.clone()) {
                prev.insert(f.clone(), p);
            }
        }
    }
    let mut carry: std::collections::HashMap<(PathBuf, String), (PathBuf, Tracker)> =
        Default::default();
    for (i, (f, why)) in todo.iter().enumerate() {
        let len = std::fs::metadata(f).map_or(0, |m| m.len());
        let res = steno_sidecars(f, opts)
            .and_then(|()| {
                wiretape_storage::index::rebuild_with(
                    f,
                    DEFAULT_BLOCK_SIZE as u64,
                    opts,
                    &mut |at| progress(i + 1, at),
                )
            })
            .and_then(|n| {
                let key = series(f);
                let mut t = key
                    .as_ref()
                    .and_then(|k| carry.remove(k))
                    .filter(|(p, _)| prev.get(f) == Some(p))
                    .map(|(_, t)| t)
                    .unwrap_or_default();
                wiretape_storage::sessions::rebuild(f, opts, &mut t)?;
                if let Some(k) = key {
                    carry.insert(k, (f.clone(), t));
                }
                Ok(n)
            });
        r.bytes += len;
        match res {
            Ok(n) => {
                r.entries += n;
                r.files.push(FileOutcome {
                    file: f.clone(),
                    outcome: Outcome::Rebuilt,
                    why: Some(why.to_string()),
                });
            }
            Err(e) => {
                failed(f, &e);
                r.files.push(FileOutcome {
                    file: f.clone(),
                    outcome: Outcome::Failed,
                    why: Some(e.to_string()),
                });
            }
        }
    }
    r
}

/// Stenographer's file `f`: its sidecars go to the sidecar directory
/// ([`ReadOptions::steno_sidecar_dir`]; its directories made), never
/// beside it. Err: none given.
fn steno_sidecars(f: &Path, opts: &ReadOptions) -> Result<(), StorageError> {
    if !wiretape_files::steno::is_steno_file(f) {
        return Ok(());
    }
    if opts.steno_sidecar_dir().is_none() {
        return Err(StorageError::NotOurs { path: f.to_owned() });
    }
    let idx = opts.index_path(f);
    let dir = idx.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| StorageError::from_write(dir, e))
}

/// The host name (`/proc/sys/kernel/hostname`), the default node name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The schema of the block table.
pub fn schema() -> SchemaRef {
    let list = |name: &str, item: DataType| {
        Field::new(
            name,
            DataType::List(Arc::new(Field::new("item", item, true))),
            true,
        )
    };
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("node", DataType::Utf8, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("iface", DataType::Utf8, true),
        Field::new("queue", DataType::Int32, true),
        Field::new("block", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("frames", DataType::Int64, false),
        Field::new("first_ns", DataType::Int64, false),
        Field::new("last_ns", DataType::Int64, false),
        Field::new("first_time", ts.clone(), false),
        Field::new("last_time", ts, false),
        list("ether_types", DataType::Int32),
        list("vlans", DataType::Int32),
        list("protos", DataType::Int32),
        list("ip4", DataType::Utf8),
        list("ip6", DataType::Utf8),
        list("ports", DataType::Int32),
    ]))
}

/// One row per indexed block of `files` that overlaps `window`, for node
/// `node` (their indexes where `opts` says). A file without a usable index
/// is left out and passed to `skipped(file, why)`.
pub fn block_table(
    node: &str,
    files: &[PathBuf],
    opts: &ReadOptions,
    window: &Window,
    skipped: &mut dyn FnMut(&Path, &StorageError),
) -> Result<RecordBatch, QueryError> {
    let mut node_b = StringBuilder::new();
    let mut file_b = StringBuilder::new();
    let mut iface_b = StringBuilder::new();
    let mut queue_b = Int32Builder::new();
    let mut block_b = Int32Builder::new();
    let mut off_b = Int64Builder::new();
    let mut bytes_b = Int64Builder::new();
    let mut frames_b = Int64Builder::new();
    let mut first_b = Int64Builder::new();
    let mut last_b = Int64Builder::new();
    let mut first_t = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut last_t = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut eth_b = ListBuilder::new(Int32Builder::new());
    let mut vlan_b = ListBuilder::new(Int32Builder::new());
    let mut proto_b = ListBuilder::new(Int32Builder::new());
    let mut ip4_b = ListBuilder::new(StringBuilder::new());
    let mut ip6_b = ListBuilder::new(StringBuilder::new());
    let mut port_b = ListBuilder::new(Int32Builder::new());
    let ints = |b: &mut ListBuilder<Int32Builder>, any: bool, v: &mut dyn Iterator<Item = i32>| {
        if any {
            b.append_null();
        } else {
            v.for_each(|x| b.values().append_value(x));
            b.append(true);
        }
    };
    let strs =
        |b: &mut ListBuilder<StringBuilder>, any: bool, v: &mut dyn Iterator<Item = String>| {
            if any {
                b.append_null();
            } else {
                v.for_each(|x| b.values().append_value(x));
                b.append(true);
            }
        };
    for f in files {
        let mut entries: Vec<Entry> = match index::read(&opts.index_path(f)) {
            Ok(e) => e,
            Err(e) => {
                skipped(f, &e);
                continue;
            }
        };
        exact_flow_sets(f, opts, &mut entries, window);
        let abs = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parsed = naming::parse_any(name);
        // The interface: the series without its prefix and queue.
        let iface = parsed.as_ref().and_then(|p| {
            p.series
                .rsplit_once('-')
                .and_then(|(head, _)| head.split_once('-'))
                .map(|(_, i)| i.to_string())
        });
        let len = std::fs::metadata(f).map_or(0, |m| m.len());
        for (i, e) in entries.iter().enumerate() {
            if !window.overlaps(e.first_ns, e.last_ns) {
                continue;
            }
            // A compressed capture's block: its bytes on disk.
            let end = match e.z {
                Some(z) => e.offset + z.c_len,
                None => entries.get(i + 1).map_or(len, |n| n.offset),
            };
            node_b.append_value(node);
            file_b.append_value(abs.display().to_string());
            iface_b.append_option(iface.as_deref());
            queue_b.append_option(parsed.as_ref().map(|p| p.queue as i32));
            block_b.append_value(i as i32);
            off_b.append_value(e.offset as i64);
            bytes_b.append_value(end.saturating_sub(e.offset) as i64);
            frames_b.append_value(e.count as i64);
            first_b.append_value(e.first_ns as i64);
            last_b.append_value(e.last_ns as i64);
            first_t.append_value(e.first_ns as i64);
            last_t.append_value(e.last_ns as i64);
            let any = FlowSet::anything();
            let fs = e.flows.as_ref().unwrap_or(&any);
            ints(
                &mut eth_b,
                fs.any[0],
                &mut fs.ether_types.iter().map(|&x| x as i32),
            );
            ints(
                &mut vlan_b,
                fs.any[1],
                &mut fs.vlans.iter().map(|&x| x as i32),
            );
            ints(
                &mut proto_b,
                fs.any[2],
                &mut fs.protos.iter().map(|&x| x as i32),
            );
            strs(
                &mut ip4_b,
                fs.any[3],
                &mut fs
                    .ip4
                    .iter()
                    .map(|&a| std::net::Ipv4Addr::from(a).to_string()),
            );
            strs(
                &mut ip6_b,
                fs.any[4],
                &mut fs
                    .ip6
                    .iter()
                    .map(|&a| std::net::Ipv6Addr::from(a).to_string()),
            );
            ints(
                &mut port_b,
                fs.any[5],
                &mut fs.ports.iter().map(|&x| x as i32),
            );
        }
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(node_b.finish()),
        Arc::new(file_b.finish()),
        Arc::new(iface_b.finish()),
        Arc::new(queue_b.finish()),
        Arc::new(block_b.finish()),
        Arc::new(off_b.finish()),
        Arc::new(bytes_b.finish()),
        Arc::new(frames_b.finish()),
        Arc::new(first_b.finish()),
        Arc::new(last_b.finish()),
        Arc::new(first_t.finish()),
        Arc::new(last_t.finish()),
        Arc::new(eth_b.finish()),
        Arc::new(vlan_b.finish()),
        Arc::new(proto_b.finish()),
        Arc::new(ip4_b.finish()),
        Arc::new(ip6_b.finish()),
        Arc::new(port_b.finish()),
    ];
    RecordBatch::try_new(schema(), cols).map_err(|e| QueryError::Parquet {
        path: PathBuf::from("<block table>"),
        why: e.to_string(),
    })
}

/// The blocks of `entries` (a file's `.idx`) that its key index covers,
/// in `window`, get exact flow sets from it: every host, port, protocol,
/// VLAN and EtherType, however many (the `.idx` lists at most 1,024 of a
/// kind). A key index that is stale, has a gap or cannot be read changes
/// nothing.
fn exact_flow_sets(capture: &Path, opts: &ReadOptions, entries: &mut [Entry], window: &Window) {
    let Ok(Some(k)) = KeyIndex::open(capture, opts) else {
        return;
    };
    let len = std::fs::metadata(capture).map_or(0, |m| m.len());
    if !k.complete_for(len) && !being_written(capture) {
        return;
    }
    let mut next = 0;
    for seg in k.segments() {
        let h = &seg.header;
        if h.block0 != next || h.block0 + h.nblocks > entries.len() as u64 {
            return;
        }
        next += h.nblocks;
        if h.nblocks == 0 || !window.overlaps(h.first_ns, h.last_ns) {
            continue;
        }
        let Ok(sets) = k.flow_sets(seg) else { return };
        for (i, s) in sets.into_iter().enumerate() {
            entries[h.block0 as usize + i].flows = Some(s);
        }
    }
}

/// Writes `batches` as one Parquet table into `w` (`name` for errors).
pub fn write_table<W: Write + Send>(
    w: W,
    batches: &[RecordBatch],
    name: &Path,
) -> Result<(), QueryError> {
    let err = |e: parquet::errors::ParquetError| QueryError::Parquet {
        path: name.to_owned(),
        why: e.to_string(),
    };
    let mut pw = parquet::arrow::ArrowWriter::try_new(w, schema(), None).map_err(err)?;
    for b in batches {
        pw.write(b).map_err(err)?;
    }
    pw.close().map_err(err)?;
    Ok(())
}

/// Writes `batches` as one Parquet table to the file `out`: to a temporary
/// name first, then renamed, so readers never see half a table.
pub fn write_table_file(out: &Path, batches: &[RecordBatch]) -> Result<(), QueryError> {
    let tmp = {
        let mut s = out.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let io = |source| QueryError::Output {
        what: out.display().to_string(),
        source,
    };
    let file = std::fs::File::create(&tmp).map_err(io)?;
    if let Err(e) = write_table(file, batches, out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(io)
}

/// The rows of a Parquet table (e.g. a sensor's `/v1/index.parquet`),
/// checked against the block table's schema.
pub fn read_table(bytes: Vec<u8>, name: &str) -> Result<Vec<RecordBatch>, QueryError> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let err = |why: String| QueryError::Parquet {
        path: PathBuf::from(name),
        why,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| err(e.to_string()))?
        .build()
        .map_err(|e| err(e.to_string()))?;
    let want = schema();
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| err(e.to_string()))?;
        if b.schema().fields() != want.fields() {
            return Err(err("not a wiretape block table (its columns differ)".into()));
        }
        // The same columns, with the schema's metadata of ours.
        let b = RecordBatch::try_new(want.clone(), b.columns().to_vec())
            .map_err(|e| err(e.to_string()))?;
        out.push(b);
    }
    Ok(out)
}
