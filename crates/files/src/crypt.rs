//! Encryption at rest (`record --encrypt-to`): capture files as age files
//! (<https://age-encryption.org/v1>: X25519 recipients, the payload a
//! ChaCha20-Poly1305 STREAM of 64 KiB chunks), so `age -d -i KEY F |
//! tcpdump -r -` reads them. The age layer is the last: a compressed
//! capture is compressed first (`.pcap.lz4.age`).
//!
//! Here: the names and numbers of the format, the recipients and
//! identities as the command line gives them (a reader takes them in its
//! [`crate::ReadOptions`]; a library never reads the environment), and
//! [`AgeReader`], the plain stream of an age file, `Read + Seek` in that
//! stream's offsets: a seek decrypts only the chunk it lands in, so a
//! query through the `.idx` decrypts only the chunks it reads
//! ([`AgeReader::chunks_read`]).
//!
//! A file cut short by a crash (no final chunk, or a chunk cut inside) is
//! read up to its last whole chunk, then ends as a torn tail
//! ([`AgeReader::torn`]): the same rule as a plain capture's half-written
//! last record. The writing is `wiretape-storage`'s.

use std::fs::File;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use age::x25519::{Identity, Recipient};

/// The first line of every age file.
pub const MAGIC: &[u8] = b"age-encryption.org/v1\n";
/// The file name suffix of an encrypted capture, after the others
/// (`.pcap.age`, `.pcap.lz4.age`).
pub const SUFFIX: &str = ".age";
/// Plain bytes per STREAM chunk.
pub const CHUNK: u64 = 64 << 10;
/// Bytes of a whole chunk in the file (the Poly1305 tag added).
pub const CHUNK_SEALED: u64 = CHUNK + 16;

/// The recipients a recording encrypts to.
#[derive(Clone, Default)]
pub struct Recipients(pub Vec<Recipient>);

impl Recipients {
    /// Whether there is none (files are written plain).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The recipients as `age1...` strings.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

impl std::fmt::Debug for Recipients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// Why a recipient, a recipients file or an identity file was refused:
/// the text names the value or the file first, then what is wrong and the
/// fix (a command puts its flag before it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A secret key given as a recipient (never echoed: a secret key in a
    /// log is a secret key lost).
    #[error("AGE-SECRET-KEY-1...: a secret key, not a recipient: give its public key (age-keygen -y KEYFILE) and keep the secret key off the sensor")]
    SecretKey,
    /// An SSH key given as a recipient.
    #[error("{0}: an SSH key; wiretape encrypts to age X25519 recipients (age1..., age-keygen makes one)")]
    SshKey(String),
    /// Not an age X25519 recipient.
    #[error("{0}: not an age X25519 recipient (age1 and 58 more characters, as age-keygen -y KEYFILE prints)")]
    NotRecipient(String),
    /// A recipients or identity file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line of a recipients file is no recipient.
    #[error("{} line {line}: {why}", path.display())]
    RecipientLine {
        /// The file.
        path: std::path::PathBuf,
        /// Its line (from 1).
        line: usize,
        /// What is wrong with it.
        why: Box<KeyError>,
    },
    /// A recipients file holds none.
    #[error("{}: no recipient in it (one age1... a line)", path.display())]
    NoRecipient {
        /// The file.
        path: std::path::PathBuf,
    },
    /// A line of an identity file is no identity.
    #[error("{} line {line}: not an age X25519 identity (AGE-SECRET-KEY-1..., as age-keygen writes)", path.display())]
    NotIdentity {
        /// The file.
        path: std::path::PathBuf,
        /// Its line (from 1).
        line: usize,
    },
    /// An identity file holds none.
    #[error("{}: no identity in it (AGE-SECRET-KEY-1..., as age-keygen writes)", path.display())]
    NoIdentity {
        /// The file.
        path: std::path::PathBuf,
    },
}

/// Parses one `age1...` X25519 recipient; the error names it and the fix.
pub fn parse_recipient(s: &str) -> Result<Recipient, KeyError> {
    let t = s.trim();
    t.parse::<Recipient>().map_err(|_| {
        if t.starts_with("AGE-SECRET-KEY-") {
            KeyError::SecretKey
        } else if t.starts_with("ssh-") {
            KeyError::SshKey(t.to_owned())
        } else {
            KeyError::NotRecipient(t.to_owned())
        }
    })
}

/// Reads a recipients file: one `age1...` a line, blank lines and `#`
/// comments skipped. An empty one is an error.
pub fn read_recipients_file(path: &Path) -> Result<Vec<Recipient>, KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        out.push(parse_recipient(l).map_err(|e| KeyError::RecipientLine {
            path: path.to_path_buf(),
            line: i + 1,
            why: Box::new(e),
        })?);
    }
    if out.is_empty() {
        return Err(KeyError::NoRecipient {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// Reads an identity file (what `age-keygen -o` writes): its
/// `AGE-SECRET-KEY-1...` lines, `#` comments skipped.
pub fn read_identity_file(path: &Path) -> Result<Vec<Identity>, KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        out.push(l.parse::<Identity>().map_err(|_| KeyError::NotIdentity {
            path: path.to_path_buf(),
            line: i + 1,
        })?);
    }
    if out.is_empty() {
        return Err(KeyError::NoIdentity {
            path: path.to_path_buf(),
        });
    }
    Ok(out)
}

/// Whether `head` (a file's first bytes) starts an age file.
pub fn is_age_bytes(head: &[u8]) -> bool {
    head.len() >= 4 && MAGIC.starts_with(&head[..head.len().min(MAGIC.len())])
}

/// Whether the file at `path` is an age file (by its first bytes).
pub fn is_age(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut m = [0u8; 22];
    let n = File::open(path)?.read_at(&mut m, 0)?;
    Ok(is_age_bytes(&m[..n]))
}

/// What an age header says of its recipients: the stanza types, and how
/// many of each (X25519 stanzas name no public key: nothing else can be
/// said of who may open the file).
pub fn header_recipients(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut head = vec![0u8; 16 << 10];
    let n = read_full(&mut f, &mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for l in text.lines().skip(1) {
        if l.starts_with("---") {
            break;
        }
        if let Some(rest) = l.strip_prefix("-> ") {
            let t = rest.split(' ').next().unwrap_or("").to_owned();
            if t.ends_with("-grease") {
                // Random stanzas age adds so that parsers stay lenient.
                continue;
            }
            match kinds.iter_mut().find(|(k, _)| *k == t) {
                Some((_, c)) => *c += 1,
                None => kinds.push((t, 1)),
            }
        }
    }
    Ok(if kinds.is_empty() {
        "no recipient stanza".into()
    } else {
        kinds
            .iter()
            .map(|(k, c)| format!("{c} {k} recipient{}", if *c == 1 { "" } else { "s" }))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

fn read_full(f: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The file under an age stream, counting what is read of it (the
/// stream owns it: the counts are shared).
struct Counted {
    file: File,
    counts: std::sync::Arc<Counts>,
}

#[derive(Default)]
struct Counts {
    bytes: AtomicU64,
    chunks: AtomicU64,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // The stream reads a sealed chunk into a buffer of that size (its
        // later reads, a short read's rest, into what is left of it).
        if buf.len() as u64 == CHUNK_SEALED {
            self.counts.chunks.fetch_add(1, Ordering::Relaxed);
        }
        let n = self.file.read(buf)?;
        self.counts.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for Counted {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.file.seek(to)
    }
}

/// Why an age file cannot be opened: no identity given, or none of those
/// given is one of its recipients. Its text is one line saying what the
/// header says of its recipients and what opens the file, in the
/// library's terms (the callers' errors name the file, "cannot read FILE:
/// ..."; a command line says how it takes identities, by the fixed words
/// [`IdentityNeeded::NONE_GIVEN`] and [`IdentityNeeded::NOT_ONE`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct IdentityNeeded {
    /// The file.
    pub file: PathBuf,
    /// Its recipients as its header says them ("2 X25519 recipients"; age's
    /// X25519 stanzas name no public key), or why the header is unreadable.
    pub recipients: String,
    /// The public keys of the identities tried (none: none was given).
    pub tried: Vec<String>,
}

impl IdentityNeeded {
    /// The end of the text when no identity was given.
    pub const NONE_GIVEN: &'static str =
        "no identity was given; the secret key of one of its recipients opens it";
    /// The end of the text when the identities given are not recipients.
    pub const NOT_ONE: &'static str =
        "only the secret key of a recipient it was recorded for opens it";

    /// The refusal of `file`, whose header says `recipients`, the public
    /// keys `tried` having been tried (none: none was given).
    pub fn new(file: PathBuf, recipients: String, tried: Vec<String>) -> Self {
        IdentityNeeded {
            file,
            recipients,
            tried,
        }
    }

    /// The [`IdentityNeeded`] inside `e` (an [`identity_error`]), if it is one.
    pub fn of(e: &std::io::Error) -> Option<&IdentityNeeded> {
        e.get_ref()?.downcast_ref()
    }
}

impl std::fmt::Display for IdentityNeeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "encrypted (age, to {})", self.recipients)?;
        if self.tried.is_empty() {
            write!(f, ": {}", Self::NONE_GIVEN)
        } else {
            let tried = self.tried.join(", ");
            write!(
                f,
                ", and the identity given ({tried}) is not one of them: {}",
                Self::NOT_ONE
            )
        }
    }
}

impl std::error::Error for IdentityNeeded {}

/// Why an age file cannot be opened ([`IdentityNeeded`]), as the
/// `PermissionDenied` I/O error the readers return.
pub fn identity_error(path: &Path, tried: &[Identity]) -> std::io::Error {
    let recipients = header_recipients(path).unwrap_or_else(|e| format!("header unreadable: {e}"));
    let tried = tried.iter().map(|i| i.to_public().to_string()).collect();
    let e = IdentityNeeded::new(path.to_path_buf(), recipients, tried);
    std::io::Error::new(ErrorKind::PermissionDenied, e)
}

/// The plain stream of an age file, `Read + Seek` in its offsets.
pub struct AgeReader {
    stream: age::stream::StreamReader<Counted>,
    counts: std::sync::Arc<Counts>,
    /// The same file, for its lock ([`crate::is_being_written`]).
    file: File,
    header_len: u64,
    pos: u64,
    /// The stream stopped here before its final chunk: a torn tail.
    torn: Option<u64>,
    /// A seek went past the end: reads give nothing until the next seek.
    past_end: bool,
}

impl AgeReader {
    /// Opens `path` with the identities `ids`; a wrong or missing one is a
    /// `PermissionDenied` error saying so ([`identity_error`]).
    pub fn open(path: &Path, ids: &[Identity]) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let counts = std::sync::Arc::<Counts>::default();
        let counted = Counted {
            file: file.try_clone()?,
            counts: counts.clone(),
        };
        let d = age::Decryptor::new(counted).map_err(|e| decrypt_error(path, e, &[]))?;
        let header_len = counts.bytes.load(Ordering::Relaxed);
        let stream = d
            .decrypt(ids.iter().map(|i| i as &dyn age::Identity))
            .map_err(|e| decrypt_error(path, e, ids))?;
        Ok(AgeReader {
            stream,
            counts,
            file,
            header_len,
            pos: 0,
            torn: None,
            past_end: false,
        })
    }

    /// The file (for its lock).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Bytes of the file read so far (header and sealed chunks).
    pub fn bytes_read(&self) -> u64 {
        self.counts.bytes.load(Ordering::Relaxed)
    }

    /// Chunks decrypted so far.
    pub fn chunks_read(&self) -> u64 {
        self.counts.chunks.load(Ordering::Relaxed)
    }

    /// Where the plain stream stopped before its final chunk (a file cut
    /// short by a crash, or one being written), once read there.
    pub fn torn(&self) -> Option<u64> {
        self.torn
    }

    /// Bytes of the age header and the payload nonce after it: where the
    /// first sealed chunk starts.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The plain length the file's size implies (not authenticated: a torn
    /// file's last partial chunk counts too).
    pub fn plain_len(&self) -> std::io::Result<u64> {
        let len = self.file.metadata()?.len();
        Ok(plain_len_of(len.saturating_sub(self.header_len)))
    }

    /// Reads at plain offset `at` (a seek, decrypting only the chunk it
    /// lands in, when not there already).
    pub fn read_at(&mut self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        if at != self.pos || self.past_end {
            self.seek(SeekFrom::Start(at))?;
        }
        self.read(buf)
    }

    /// The stream ended before its final chunk at `self.pos`.
    fn stop(&mut self) -> usize {
        self.torn = Some(self.torn.map_or(self.pos, |t| t.min(self.pos)));
        self.past_end = true;
        0
    }
}

impl Read for AgeReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.past_end || buf.is_empty() {
            return Ok(0);
        }
        match self.stream.read(buf) {
            Ok(n) => {
                self.pos += n as u64;
                Ok(n)
            }
            // No final chunk (cut at a chunk's end), or a chunk that does
            // not open (cut inside it, zeros of an interrupted write): the
            // stream's whole chunks end here, as a torn tail.
            Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData) => {
                Ok(self.stop())
            }
            Err(e) => Err(e),
        }
    }
}

impl Seek for AgeReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let SeekFrom::Start(to) = to else {
            return Err(std::io::Error::other("only absolute seeks"));
        };
        if to == self.pos && !self.past_end {
            return Ok(to);
        }
        if self.torn.is_some_and(|t| to >= t) {
            self.pos = to;
            self.past_end = true;
            return Ok(to);
        }
        self.past_end = false;
        // A seek to a chunk's start makes the age reader authenticate the
        // stream's length (its final chunk), which a torn or live file has
        // not: land one byte before and step over it instead.
        let r = if to > 0 && to % CHUNK == 0 {
            self.stream.seek(SeekFrom::Start(to - 1)).and_then(|_| {
                let mut b = [0u8; 1];
                self.stream.read_exact(&mut b)
            })
        } else {
            self.stream.seek(SeekFrom::Start(to)).map(|_| ())
        };
        self.pos = to;
        match r {
            Ok(()) => Ok(to),
            Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData) => {
                self.stop();
                Ok(to)
            }
            Err(e) => Err(e),
        }
    }
}

/// Plain bytes in a payload of `sealed` bytes.
pub fn plain_len_of(sealed: u64) -> u64 {
    let chunks = sealed.div_ceil(CHUNK_SEALED);
    sealed.saturating_sub(chunks * 16)
}

fn decrypt_error(path: &Path, e: age::DecryptError, tried: &[Identity]) -> std::io::Error {
    match e {
        age::DecryptError::NoMatchingKeys => identity_error(path, tried),
        age::DecryptError::Io(e) if e.kind() == ErrorKind::UnexpectedEof => std::io::Error::new(
            ErrorKind::UnexpectedEof,
            "an age header cut short (a crash right after the file was created)",
        ),
        age::DecryptError::Io(e) => e,
        e => std::io::Error::new(
            ErrorKind::InvalidData,
            format!("not a readable age file: {e}"),
        ),
    }
}
