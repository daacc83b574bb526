//! `wiretape index` as a value: an [`Indexing`] (the capture files, the
//! sensors, whether to rebuild all, where the fleet's tables go) that
//! [`Indexing::run`] carries out: the stale `.idx`/`.kdx` sidecars and
//! session tables rebuilt ([`fleet::rebuild`]), then with `parquet` the
//! block index of every input ([`fleet::block_table`] and each sensor's
//! `/v1/index.parquet`) as one table, and their session tables (local and
//! each sensor's `/v1/sessions`) as another, `sessions/NAME` beside it.
//! What happens on the way comes to a callback as an [`Event`] (progress,
//! a file that failed, a sensor that did); the outcome is a typed
//! [`Report`], the one source of `index --json`.

use crate::fleet::{self, Outcome};
use crate::remote::{Client, Remote};
use crate::{sessions, QueryError, Window};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wiretape_files::{bytes_h, ReadOptions};
use wiretape_storage::StorageError;

/// One run of `wiretape index`: what to rebuild and what to gather.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Indexing {
    /// The capture files ([`fleet::captures`] of the local inputs).
    pub files: Vec<PathBuf>,
    /// Whether there were local inputs (a store with no files still
    /// writes its empty part of the tables).
    pub local: bool,
    /// The sensors whose tables join (only with `parquet`).
    pub remotes: Vec<Remote>,
    /// How the files are read and where their sidecars are.
    pub read: ReadOptions,
    /// Rebuild every index, current or not.
    pub force: bool,
    /// Where the block table goes (None: rebuild only).
    pub parquet: Option<PathBuf>,
    /// The node name of the local rows.
    pub node: String,
}

/// Which of the two tables a sensor's failure leaves it out of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Table {
    /// The block table (`/v1/index.parquet`).
    Blocks,
    /// The session table (`/v1/sessions`).
    Sessions,
}

/// What happens while [`Indexing::run`] runs, in order.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// The rebuild starts: this many files to rebuild, of these bytes.
    Start {
        /// Files to rebuild.
        files: usize,
        /// Their bytes.
        bytes: u64,
    },
    /// The rebuild reads file `file` (from 1); `done` bytes of all read.
    Progress {
        /// The file being read (from 1).
        file: usize,
        /// Bytes read of every file to rebuild, this one's so far included.
        done: u64,
    },
    /// A file's rebuild failed.
    Failed {
        /// The capture file.
        file: &'a Path,
        /// What went wrong.
        error: &'a StorageError,
    },
    /// The rebuild is over (every byte counted).
    Rebuilt,
    /// A file without a usable index: not in the block table.
    NoIndex {
        /// The capture file.
        file: &'a Path,
        /// Why its index cannot be used.
        error: &'a StorageError,
    },
    /// A session table that cannot be read: not in the session table.
    SessionsUnreadable {
        /// The table's capture file.
        file: &'a Path,
        /// Why.
        error: &'a str,
    },
    /// A sensor's note on its sessions' completeness (one line).
    SensorNote(&'a str),
    /// A sensor failed: left out of `table`.
    SensorFailed {
        /// The sensor's address.
        url: &'a str,
        /// What went wrong.
        error: &'a str,
        /// The table it is missing from.
        table: Table,
    },
}

/// One file the rebuild touched ([`Report::details`]).
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct Detail {
    /// The capture file.
    pub file: String,
    /// `rebuilt`, `beingwritten` (left to its writer) or `failed`.
    pub outcome: String,
    /// Why it was rebuilt, or why that failed.
    pub why: Option<String>,
}

/// What [`Indexing::run`] did: `index --json` is [`Report::to_json`].
#[derive(Clone, Debug, serde::Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Capture files considered.
    pub files: usize,
    /// Files whose indexes were rebuilt.
    pub rebuilt: usize,
    /// Files whose indexes were current.
    pub up_to_date: usize,
    /// Files left to their writer.
    pub being_written: usize,
    /// Files whose rebuild failed, and sensors left out of a table.
    pub failed: usize,
    /// Index entries written.
    pub entries_written: u64,
    /// Bytes of the files to rebuild.
    pub bytes_read: u64,
    /// The run's seconds.
    pub seconds: f64,
    /// The block table's file.
    pub parquet: Option<String>,
    /// Its rows.
    pub parquet_rows: usize,
    /// The session table's file.
    pub sessions_parquet: Option<String>,
    /// Its rows.
    pub sessions_parquet_rows: Option<usize>,
    /// Every file not up to date, in the rebuild's order.
    pub details: Vec<Detail>,
}

impl Report {
    /// The JSON object `index --json` prints (its keys in order).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report is plain data")
    }

    /// 1 when a file or a sensor failed, else 0.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.failed > 0)
    }
}

/// The rebuild's progress as one line (`wiretape index` draws it as a
/// bar): the share of the bytes read, the rate, the seconds left and the
/// file being read. [`Meter::update`] takes in each [`Event`] of
/// [`Indexing::run`]; the caller chooses when to draw [`Meter::line`].
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct Meter {
    /// Bytes of every file to rebuild ([`Event::Start`]).
    pub total: u64,
    /// Bytes read so far.
    pub done: u64,
    /// The file being read (from 1), and the files to rebuild.
    pub files: (usize, usize),
}

impl Meter {
    /// A meter with nothing to rebuild yet.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// Takes in an event: the total at the start, the bytes read and the
    /// file as they go, every byte at the end.
    pub fn update(&mut self, e: &Event) {
        match *e {
            Event::Start { files, bytes } => {
                self.total = bytes;
                self.files.1 = files;
            }
            Event::Progress { file, done } => {
                self.files.0 = file;
                self.done = done;
            }
            Event::Rebuilt => self.done = self.total,
            _ => {}
        }
    }

    /// The line `elapsed` after the start (no newline): `[#######    ]
    /// 25% 250 B of 1.00 KB, 250 B/s, ETA 3 s, file 1 of 2`.
    pub fn line(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64().max(1e-3);
        let rate = self.done as f64 / secs;
        let frac = if self.total == 0 {
            1.0
        } else {
            (self.done as f64 / self.total as f64).min(1.0)
        };
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(self.done)) as f64 / rate
        } else {
            0.0
        };
        let w = 30;
        let fill = (frac * w as f64) as usize;
        format!(
            "[{}{}] {:>3.0}% {} of {}, {}/s, ETA {:.0} s, file {} of {}",
            "#".repeat(fill),
            " ".repeat(w - fill),
            frac * 100.0,
            bytes_h(self.done),
            bytes_h(self.total),
            bytes_h(rate as u64),
            eta,
            self.files.0,
            self.files.1
        )
    }
}

/// Where `index --parquet OUT` puts the sessions: `sessions/NAME` in OUT's
/// directory (NAME: OUT's file name), so that a glob over OUT's directory
/// never mixes the two tables.
pub fn sessions_path(out: &Path) -> PathBuf {
    let dir = out.parent().unwrap_or(Path::new(""));
    dir.join("sessions").join(
        out.file_name()
            .unwrap_or_else(|| std::ffi::OsStr::new("sessions.parquet")),
    )
}

impl Indexing {
    /// Rebuilds the stale indexes of `files` (local inputs), gathers
    /// nothing: set `parquet`, `node` and `remotes` to.
    pub fn new(files: Vec<PathBuf>, read: ReadOptions) -> Indexing {
        Indexing {
            local: true,
            files,
            remotes: Vec::new(),
            read,
            force: false,
            parquet: None,
            node: fleet::hostname(),
        }
    }

    /// Rebuilds what is stale and, with `parquet`, writes the fleet's two
    /// tables (`client` asks the sensors). `on` hears every [`Event`].
    /// Err: the block table or the session table could not be written.
    pub fn run(
        &self,
        client: Option<&Client>,
        on: &mut dyn FnMut(Event),
    ) -> Result<Report, QueryError> {
        let started = Instant::now();
        let (todo, _) = fleet::triage(&self.files, &self.read, self.force);
        let lens: Vec<u64> = todo
            .iter()
            .map(|(f, _)| std::fs::metadata(f).map_or(0, |m| m.len()))
            .collect();
        let total: u64 = lens.iter().sum();
        on(Event::Start {
            files: todo.len(),
            bytes: total,
        });
        let r = {
            let on = std::cell::RefCell::new(&mut *on);
            // The file being read, and the bytes of those read before it.
            let (mut file, mut before) = (0, 0);
            fleet::rebuild(
                &self.files,
                &self.read,
                self.force,
                &mut |n, at| {
                    if file != n {
                        if file > 0 {
                            before += lens[file - 1];
                        }
                        file = n;
                    }
                    (on.borrow_mut())(Event::Progress {
                        file: n,
                        done: before + at,
                    })
                },
                &mut |file, error| (on.borrow_mut())(Event::Failed { file, error }),
            )
        };
        on(Event::Rebuilt);
        let mut report = Report {
            files: self.files.len(),
            rebuilt: r.count(Outcome::Rebuilt),
            up_to_date: r.count(Outcome::UpToDate),
            being_written: r.count(Outcome::BeingWritten),
            failed: r.count(Outcome::Failed),
            entries_written: r.entries,
            bytes_read: total,
            seconds: 0.0,
            parquet: None,
            parquet_rows: 0,
            sessions_parquet: None,
            sessions_parquet_rows: None,
            details: r
                .files
                .iter()
                .filter(|o| o.outcome != Outcome::UpToDate)
                .map(|o| Detail {
                    file: o.file.display().to_string(),
                    outcome: format!("{:?}", o.outcome).to_lowercase(),
                    why: o.why.clone(),
                })
                .collect(),
        };
        if let Some(out) = &self.parquet {
            report.parquet = Some(out.display().to_string());
            report.parquet_rows = self.blocks(out, client, &mut report.failed, on)?;
            let (path, n) = self.sessions(out, client, &mut report.failed, on)?;
            report.sessions_parquet = Some(path.display().to_string());
            report.sessions_parquet_rows = Some(n);
        }
        report.seconds = started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The block table of the local files and every sensor, written to
    /// `out`; its rows.
    fn blocks(
        &self,
        out: &Path,
        client: Option<&Client>,
        failed: &mut usize,
        on: &mut dyn FnMut(Event),
    ) -> Result<usize, QueryError> {
        let mut tables = Vec::new();
        if self.local {
            tables.push(fleet::block_table(
                &self.node,
                &self.files,
                &self.read,
                &Window::default(),
                &mut |file, error| on(Event::NoIndex { file, error }),
            )?);
        }
        if let Some(c) = client {
            for r in &self.remotes {
                let got = c
                    .get_bytes(r, "/v1/index.parquet")
                    .map_err(|e| e.to_string())
                    .and_then(|b| fleet::read_table(b, &r.url).map_err(|e| e.to_string()));
                match got {
                    Ok(t) => tables.extend(t),
                    Err(e) => {
                        *failed += 1;
                        on(Event::SensorFailed {
                            url: &r.url,
                            error: &e,
                            table: Table::Blocks,
                        });
                    }
                }
            }
        }
        fleet::write_table_file(out, &tables)?;
        Ok(tables.iter().map(|t| t.num_rows()).sum())
    }

    /// The session rows of the local files' tables (under `node`) and of
    /// every sensor's `/v1/sessions` (under its node name) as one Parquet
    /// file at [`sessions_path`]; the file and its rows.
    fn sessions(
        &self,
        out: &Path,
        client: Option<&Client>,
        failed: &mut usize,
        on: &mut dyn FnMut(Event),
    ) -> Result<(PathBuf, usize), QueryError> {
        let mut parts = Vec::new();
        if self.local {
            let l = sessions::list(
                &self.files,
                &self.read,
                None,
                None,
                &sessions::Where::default(),
            )?;
            for (file, error) in &l.unreadable {
                on(Event::SessionsUnreadable { file, error });
            }
            parts.push((self.node.clone(), l.rows));
        }
        if let Some(c) = client {
            let q = sessions::sessions_query(&Window::default(), None);
            for r in &self.remotes {
                match sessions::remote_rows(c, r, &q) {
                    Ok(part) => {
                        for n in part.notes(&r.url) {
                            on(Event::SensorNote(&n));
                        }
                        parts.push((part.node, part.rows));
                    }
                    Err(e) => {
                        *failed += 1;
                        on(Event::SensorFailed {
                            url: &r.url,
                            error: &e.to_string(),
                            table: Table::Sessions,
                        });
                    }
                }
            }
        }
        let path = sessions_path(out);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|source| QueryError::Create {
                path: d.to_owned(),
                source,
            })?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let f = std::fs::File::create(&tmp).map_err(|source| QueryError::Create {
            path: tmp.clone(),
            source,
        })?;
        sessions::write_fleet_parquet(std::io::BufWriter::new(f), &parts, &path)?;
        std::fs::rename(&tmp, &path).map_err(|source| QueryError::Output {
            what: path.display().to_string(),
            source,
        })?;
        Ok((path, parts.iter().map(|p| p.1.len()).sum()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_table_goes_to_sessions_beside_the_block_table() {
        assert_eq!(
            sessions_path(Path::new("idx/s1.parquet")),
            Path::new("idx/sessions/s1.parquet")
        );
        assert_eq!(
            sessions_path(Path::new("s1.parquet")),
            Path::new("sessions/s1.parquet")
        );
    }

    #[test]
    fn an_empty_store_rebuilds_nothing_and_its_report_has_the_json_fields() {
        let dir = std::env::temp_dir().join(format!("wt-q-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = fleet::captures(std::slice::from_ref(&dir), None).unwrap();
        let mut events = Vec::new();
        let r = Indexing::new(files, ReadOptions::new())
            .run(None, &mut |e| events.push(format!("{e:?}")))
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(events, ["Start { files: 0, bytes: 0 }", "Rebuilt"]);
        assert_eq!(r.exit_code(), 0);
        let j = r.to_json();
        let keys: Vec<&str> = j.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "being_written",
                "bytes_read",
                "details",
                "entries_written",
                "failed",
                "files",
                "parquet",
                "parquet_rows",
                "rebuilt",
                "seconds",
                "sessions_parquet",
                "sessions_parquet_rows",
                "up_to_date"
            ]
        );
        assert_eq!(j["files"], 0);
        assert!(j["parquet"].is_null());
    }

    #[test]
    fn the_meter_line_says_the_share_the_rate_and_the_seconds_left() {
        let mut m = Meter::new();
        m.update(&Event::Start {
            files: 2,
            bytes: 1000,
        });
        m.update(&Event::Progress { file: 1, done: 250 });
        assert_eq!(
            m.line(Duration::from_secs(1)),
            "[#######                       ]  25% 250 B of 1.00 KB, 250 B/s, ETA 3 s, file 1 of 2"
        );
        m.update(&Event::Rebuilt);
        assert_eq!(
            m.line(Duration::from_secs(2)),
            "[##############################] 100% 1.00 KB of 1.00 KB, 500 B/s, ETA 0 s, file 1 of 2"
        );
    }

    #[test]
    fn the_meter_counts_every_byte_of_a_real_rebuild() {
        use wiretape_storage::{FileSink, PcapWriter};
        let dir = std::env::temp_dir().join(format!("wt-q-meter-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("trace.pcap");
        let mut w = PcapWriter::new(FileSink::with_block_size(&p, 4096).unwrap(), 65535);
        for i in 0..300u64 {
            let mut f = vec![0u8; 60];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[20..28].copy_from_slice(&i.to_be_bytes());
            w.write(1_763_820_000_000_000_000 + i * 1000, &f).unwrap();
        }
        w.close().unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        let mut m = Meter::new();
        let mut progress = 0;
        let mut ix = Indexing::new(vec![p.clone()], ReadOptions::new());
        ix.force = true;
        let r = ix
            .run(None, &mut |e| {
                progress += usize::from(matches!(e, Event::Progress { .. }));
                m.update(&e);
            })
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!((r.rebuilt, r.bytes_read), (1, len));
        assert!(progress > 0, "the rebuild reports its reading");
        assert_eq!((m.total, m.done, m.files), (len, len, (1, 1)));
        assert_eq!(
            m.line(Duration::from_secs(1)),
            format!(
                "[{}] 100% {} of {}, {}/s, ETA 0 s, file 1 of 1",
                "#".repeat(30),
                bytes_h(len),
                bytes_h(len),
                bytes_h(len)
            )
        );
    }
}
