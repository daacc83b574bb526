//! Library errors in the command's words. The libraries say what went
//! wrong in their own terms (typed variants with the data); the command
//! names the flag that fixes it, word for word as it always has
//! (tests/mistakes.rs, tests/errors.rs and docs/errors.md hold it to that).

use std::error::Error;
use wiretape::capture::CaptureError;
use wiretape::files::crypt::IdentityNeeded;
use wiretape::pipeline::{LiveError, PipelineError, PreflightError};
use wiretape::query::api::{ApiError, ApiOpt};
use wiretape::query::remote::AddressError;
use wiretape::query::steno::ConfigError;
use wiretape::query::tls::{CertsError, PemRole, Term, TlsError};
use wiretape::query::QueryError;
use wiretape::storage::StorageError;

/// How `extract` asks for pcapng output.
pub(crate) const PCAPNG: &str = "--format pcapng";

/// The flag a PEM file of `role` is given by (its words where no flag
/// names it: the files of a certificate directory).
pub(crate) fn pem_flag(role: PemRole) -> String {
    match role {
        PemRole::ServerCert => "--tls-cert".into(),
        PemRole::ServerKey => "--tls-key".into(),
        PemRole::ClientCa => "--client-ca".into(),
        PemRole::ClientCert => "--cert".into(),
        PemRole::ClientKey => "--key".into(),
        PemRole::ServerCa => "--ca".into(),
        other => other.to_string(),
    }
}

/// What TLS's messages name (files, fixes) in the command's words: a file
/// by its flag, a fix by the `wiretape certs` command that makes it.
pub(crate) fn tls_term(t: &Term) -> String {
    match t {
        Term::File(r) => pem_flag(*r),
        Term::Its(r) => format!("its {}", pem_flag(*r)),
        Term::Sensor(r) => format!("`wiretape api {}`", pem_flag(*r)),
        Term::ClientsCa => "its --ca (curl: --cacert)".into(),
        Term::ClientFiles => "wiretape --cert --key --ca, curl --cert --key --cacert".into(),
        Term::RenewClient => "`wiretape certs client DIR NAME --force`".into(),
        Term::RenewServer => "`wiretape certs server DIR --server-name NAME --force`".into(),
        Term::ServerFor(n) => format!("`wiretape certs server DIR --server-name {n} --force`"),
        Term::ConnectionLimit => "--max-connections".into(),
        Term::NewCa => "`wiretape certs init DIR --server-name NAME --force`, then \
                        `wiretape certs client DIR NAME`"
            .into(),
        other => other.to_string(),
    }
}

/// A TLS error's line, its file named by its flag.
pub(crate) fn tls_line(e: &TlsError) -> String {
    match e {
        TlsError::Pem { role, path, why } => {
            format!("{} {}: {why}", pem_flag(*role), path.display())
        }
        TlsError::KeyMismatch { cert, key, why } => format!(
            "TLS configuration: {} {} with {}: {why} (does the key belong to the certificate?)",
            pem_flag(cert.0),
            cert.1.display(),
            pem_flag(*key)
        ),
        TlsError::Days { days } if *days < 1 => format!(
            "{days} days: a certificate must be valid for at least 1 day (0 would make one that \
             expires within two minutes); give --days 1 or more"
        ),
        TlsError::Days { days } => format!(
            "{days} days: give --days {} (a hundred years) or fewer",
            wiretape::query::tls::MAX_DAYS
        ),
        TlsError::Exists { path } => format!(
            "{} exists: wiretape certs never overwrites a file without --force",
            path.display()
        ),
        TlsError::CaName { name } => format!(
            "--name {name}: give 1 to 48 printable characters (the CA is named 'wiretape CA NAME')"
        ),
        TlsError::NoCa { dir, path, source } => format!(
            "{}: {source}: run `wiretape certs init {} --server-name NAME` first",
            path.display(),
            dir.display()
        ),
        TlsError::NoServerNames => {
            "give the server's names: --server-name NAME (a DNS name or an IP address clients use)"
                .into()
        }
        other => other.to_string(),
    }
}

/// `wiretape certs`'s error's line: [`tls_line`], and the Stenographer
/// client's host and files named by their flags.
pub(crate) fn certs_line(e: &CertsError) -> String {
    match e {
        CertsError::Tls(t) => tls_line(t),
        CertsError::Stenographer(ConfigError::Host {
            host,
            cert,
            names,
            dir,
        }) => format!(
            "--host {host}: the API's certificate ({}) is for {}: curl refuses any other name; \
             give one of them, or make the certificate with `wiretape certs init {} \
             --server-name {host} ...`",
            cert.display(),
            names.join(", "),
            dir.display()
        ),
        CertsError::Stenographer(ConfigError::Exists { path }) => {
            tls_line(&TlsError::Exists { path: path.clone() })
        }
        other => other.to_string(),
    }
}

/// A sensor address's error's line, the client's certificate named by its
/// flags.
pub(crate) fn address_line(e: &AddressError) -> String {
    match e {
        AddressError::PlainNotLoopback { url } => format!(
            "{url}: plain http:// is for loopback servers only; use https:// with --cert, --key and --ca"
        ),
        other => other.to_string(),
    }
}

/// A server's setting named by its flag, for the lines `wiretape api`
/// logs while it runs (a connection closed for `--max-connections`).
pub(crate) fn api_flag(opt: ApiOpt) -> String {
    match opt {
        ApiOpt::Stores => "-w".into(),
        ApiOpt::Listen => "--listen".into(),
        ApiOpt::TlsCert => "--tls-cert".into(),
        ApiOpt::TlsKey => "--tls-key".into(),
        ApiOpt::ClientCa => "--client-ca".into(),
        ApiOpt::AllowClients => "--allow-client".into(),
        ApiOpt::MaxQueries => "--max-queries".into(),
        ApiOpt::MaxConnections => "--max-connections".into(),
        ApiOpt::HandshakeTimeout => "--handshake-timeout".into(),
        other => other.to_string(),
    }
}

/// A server's error's line, its settings named by their flags
/// ([`tls_line`] for its certificates).
pub(crate) fn api_line(e: &ApiError) -> String {
    let certs = "`wiretape certs init DIR --server-name NAME`";
    match e {
        ApiError::Tls(t) => tls_line(t),
        ApiError::NoStores => "give the stores to serve: -w DIR (repeatable)".into(),
        ApiError::Store { path, source } => format!(
            "-w {}: {source}: give a directory wiretape records into (or a capture file)",
            path.display()
        ),
        ApiError::ZeroLimit => "--max-queries and --max-connections must be at least 1".into(),
        ApiError::NotLoopback { listen } => format!(
            "--listen {listen}: not a loopback address, so clients must be authenticated: add \
             --tls-cert PEM --tls-key PEM --client-ca PEM (make them with {certs}), or listen on \
             127.0.0.1"
        ),
        ApiError::AllowWithoutTls => {
            "--allow-client needs mutual TLS: add --tls-cert, --tls-key and --client-ca".into()
        }
        ApiError::OpenToAnyone => "--tls-cert and --tls-key without --client-ca would admit \
             anyone: add --client-ca PEM (the CA whose client certificates are admitted; \
             `wiretape certs init` makes one)"
            .into(),
        ApiError::TlsIncomplete { given, .. } => {
            let (given, lacking) = missing([
                ("--tls-cert", given.contains(&ApiOpt::TlsCert)),
                ("--tls-key", given.contains(&ApiOpt::TlsKey)),
                ("--client-ca", given.contains(&ApiOpt::ClientCa)),
            ]);
            format!(
                "{given} given without {lacking}: mutual TLS needs all three of --tls-cert, \
                 --tls-key and --client-ca ({} makes them)",
                certs
            )
        }
        other => other.to_string(),
    }
}

/// A capture error's line with the flag that fixes it, if it needs one.
pub(crate) fn capture_line(e: &CaptureError) -> Option<String> {
    let afxdp = "--engine afxdp";
    Some(match e {
        CaptureError::Attach {
            ifname,
            mode,
            source,
        } => format!(
            "cannot attach XDP to {ifname} in {mode} mode: {source} (try --xdp-mode generic)"
        ),
        CaptureError::BusyPoll {
            ifname,
            queue,
            option,
            source,
        } => format!(
            "--busy-poll: the kernel refused {option} on the AF_XDP socket of {ifname} queue \
             {queue}: {source} (it needs CAP_NET_ADMIN and a kernel with \
             CONFIG_NET_RX_BUSY_POLL, 5.11 or later; or record without --busy-poll)"
        ),
        CaptureError::NetmapNotBuilt => format!(
            "--engine netmap: this wiretape was built without netmap support: rebuild it with \
             `cargo build --release --features netmap` (or record with {afxdp})"
        ),
        CaptureError::NetmapMissing => format!(
            "/dev/netmap does not exist: the netmap kernel module is not loaded (build it from \
             https://github.com/luigirizzo/netmap and load it with `insmod netmap.ko`), or \
             record with {afxdp}"
        ),
        _ => return None,
    })
}

/// A live side's error's line with the flag that fixes it, if it needs one.
pub(crate) fn live_line(e: &LiveError) -> Option<String> {
    Some(match e {
        LiveError::Memory { bytes, source } => format!(
            "cannot allocate {bytes} bytes for the live chunks: {source}; give --ring a smaller size"
        ),
        LiveError::NotLoopback(a) => format!(
            "--serve {a}: not a loopback address, so anyone who can reach it receives every \
             frame recorded; use 127.0.0.1:PORT, or add --serve-allow-remote to serve it anyway"
        ),
        LiveError::Serve { addr, source } => format!(
            "cannot listen on {addr} for PCAP-over-IP: {source}; choose another --serve address \
             or port"
        ),
        LiveError::Control { path, source } => format!(
            "cannot create the control socket {}: {source}; give --control another path",
            path.display()
        ),
        LiveError::ControlInUse(p) => format!(
            "another wiretape is listening on the control socket {}: give --control another path",
            p.display()
        ),
        _ => return None,
    })
}

/// A storage error's line with the flag that fixes it, if it needs one.
fn storage_line(e: &StorageError) -> Option<String> {
    let fix = "choose another -w directory or fix its permissions";
    match e {
        StorageError::DiskFull { path } => Some(format!(
            "disk full while writing {}: free space or point -w at another disk",
            path.display()
        )),
        StorageError::NotOurs { path } => Some(format!(
            "{}: Stenographer's packet file (stenotype's TPACKET_V3 blocks): wiretape reads it \
             but never changes it, nor writes beside it (`wiretape index --index-dir DIR` puts \
             its indexes in DIR)",
            path.display()
        )),
        StorageError::NotWritable { path, source } => Some(format!(
            "output directory {} is not writable ({source}): {fix}",
            path.display()
        )),
        StorageError::DirectRefused { path } => Some(format!(
            "output directory {} is not writable (the filesystem refuses O_DIRECT; use --io auto \
             or buffered): {fix}",
            path.display()
        )),
        _ => None,
    }
}

/// A storage error in the command's words (its own where no flag fixes it).
pub(crate) fn storage_text(e: &StorageError) -> String {
    storage_line(e).unwrap_or_else(|| identity_words(&e.to_string()))
}

/// `line` with the reader's words of what opens an encrypted file
/// ([`IdentityNeeded`]) replaced by the flag that gives it.
pub(crate) fn identity_words(line: &str) -> String {
    line.replacen(
        &format!(": {}", IdentityNeeded::NONE_GIVEN),
        ": give --identity FILE (or WIRETAPE_IDENTITY) with the secret key of one of its recipients",
        1,
    )
    .replacen(
        &format!(": {}", IdentityNeeded::NOT_ONE),
        ": give --identity FILE with the secret key of a recipient it was recorded for (record \
         --encrypt-to)",
        1,
    )
}

/// A run's error lines (`RecordReport::errors`) in the command's words: each
/// writer's typed error's text replaced by its line with the flag.
pub(crate) fn run_errors(rep: &wiretape::pipeline::RecordReport) -> Vec<String> {
    let typed: Vec<(String, String)> = rep
        .queues
        .iter()
        .filter_map(|q| q.error())
        .filter_map(|e| storage_line(e).map(|c| (e.to_string(), c)))
        .collect();
    rep.errors()
        .into_iter()
        .map(|l| match typed.iter().find(|(lib, _)| *lib == l) {
            Some((_, cli)) => cli.clone(),
            None => l,
        })
        .collect()
}

/// The library's words of the typed error `e` is, and the command's.
fn words(e: &(dyn Error + 'static)) -> Option<(String, String)> {
    let with = |lib: &dyn std::fmt::Display, cli: Option<String>| cli.map(|c| (lib.to_string(), c));
    if let Some(s) = e.downcast_ref::<StorageError>() {
        return with(s, storage_line(s));
    }
    if let Some(p) = e.downcast_ref::<PipelineError>() {
        return match p {
            PipelineError::Storage(s) => with(s, storage_line(s)),
            PipelineError::Live(l) => with(l, live_line(l)),
            PipelineError::Capture(c) => with(c, capture_line(c)),
            PipelineError::InterfaceTwice(i) => with(
                p,
                Some(format!("interface {i} is given twice: give each -i once")),
            ),
            _ => None,
        };
    }
    if let Some(PreflightError::Storage(s)) = e.downcast_ref::<PreflightError>() {
        return with(s, storage_line(s));
    }
    if let Some(q) = e.downcast_ref::<QueryError>() {
        return match q {
            QueryError::Storage(s) => with(s, storage_line(s)),
            QueryError::MixedLinkTypes(m) => with(m, Some(m.with_fix(PCAPNG))),
            _ => None,
        };
    }
    if let Some(c) = e.downcast_ref::<CaptureError>() {
        return with(c, capture_line(c));
    }
    if let Some(l) = e.downcast_ref::<LiveError>() {
        return with(l, live_line(l));
    }
    if let Some(t) = e.downcast_ref::<TlsError>() {
        return with(t, Some(tls_line(t)));
    }
    if let Some(a) = e.downcast_ref::<ApiError>() {
        return with(a, Some(api_line(a)));
    }
    None
}

/// `line` (the one line of `e`) with a typed library error's words in it
/// replaced by the command's (the error itself, or one under a context).
pub(crate) fn in_flags(e: &anyhow::Error, line: String) -> String {
    let line = match e.chain().find_map(words) {
        Some((lib, cli)) if lib != cli => line.replacen(&lib, &cli, 1),
        _ => line,
    };
    identity_words(&line)
}

/// Which of three flags (`given`) are missing, in words: `--key and --ca`.
pub(crate) fn missing(flags: [(&str, bool); 3]) -> (String, String) {
    let list = |want: bool| {
        let v: Vec<&str> = flags
            .iter()
            .filter(|(_, g)| *g == want)
            .map(|(f, _)| *f)
            .collect();
        match v.as_slice() {
            [] => String::new(),
            [a] => a.to_string(),
            [a, b] => format!("{a} and {b}"),
            [a, b, c] => format!("{a}, {b} and {c}"),
            _ => v.join(", "),
        }
    };
    (list(true), list(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(e: impl Into<anyhow::Error>) -> String {
        let e = e.into();
        in_flags(&e, crate::one_line(&e))
    }

    #[test]
    fn library_words_become_the_flags_of_old() {
        let io = std::io::Error::from_raw_os_error(30);
        let e = StorageError::NotWritable {
            path: "/ro".into(),
            source: io,
        };
        assert!(!e.to_string().contains("-w"), "{e}");
        assert_eq!(
            line(PipelineError::Storage(e)),
            "output directory /ro is not writable (Read-only file system (os error 30)): \
             choose another -w directory or fix its permissions"
        );
        let e = StorageError::DirectRefused {
            path: "/tmp".into(),
        };
        assert!(!e.to_string().contains("--io"), "{e}");
        assert_eq!(
            line(anyhow::Error::from(e).context("starting")),
            "starting: output directory /tmp is not writable (the filesystem refuses O_DIRECT; \
             use --io auto or buffered): choose another -w directory or fix its permissions"
        );
        let e = StorageError::DiskFull {
            path: "/d/a.pcap".into(),
        };
        assert!(!e.to_string().contains("-w"), "{e}");
        assert_eq!(
            line(PipelineError::Storage(e)),
            "disk full while writing /d/a.pcap: free space or point -w at another disk"
        );
        let e = StorageError::NotOurs {
            path: "/s/1".into(),
        };
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            storage_text(&e),
            "/s/1: Stenographer's packet file (stenotype's TPACKET_V3 blocks): wiretape reads it \
             but never changes it, nor writes beside it (`wiretape index --index-dir DIR` puts \
             its indexes in DIR)"
        );
        let e = PipelineError::InterfaceTwice("eth0".into());
        assert!(!e.to_string().contains("-i"), "{e}");
        assert_eq!(line(e), "interface eth0 is given twice: give each -i once");
        let m = wiretape::query::job::mixed_linktypes(&[
            (1, vec!["a.pcap".into()]),
            (101, vec!["b.pcap".into()]),
        ])
        .unwrap();
        assert!(!m.to_string().contains("--format"), "{m}");
        assert!(line(QueryError::MixedLinkTypes(m)).contains("(--format pcapng: one interface"));
        let e = TlsError::Pem {
            role: PemRole::ServerCert,
            path: "/c.pem".into(),
            why: "holds no certificate".into(),
        };
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            line(ApiError::Tls(e)),
            "--tls-cert /c.pem: holds no certificate"
        );
        let e = wiretape::query::remote::Remote::parse("http://10.0.0.1:80").unwrap_err();
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            address_line(&e),
            "http://10.0.0.1:80: plain http:// is for loopback servers only; use https:// with \
             --cert, --key and --ca"
        );
        let mut e =
            IdentityNeeded::new("/s/a.pcap.age".into(), "1 X25519 recipient".into(), vec![]);
        assert!(!e.to_string().contains("--"), "{e}");
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.clone());
        assert_eq!(
            line(anyhow::Error::from(io).context("cannot read /s/a.pcap.age")),
            "cannot read /s/a.pcap.age: encrypted (age, to 1 X25519 recipient): give --identity \
             FILE (or WIRETAPE_IDENTITY) with the secret key of one of its recipients"
        );
        e.tried = vec!["age1x".into()];
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            identity_words(&e.to_string()),
            "encrypted (age, to 1 X25519 recipient), and the identity given (age1x) is not one \
             of them: give --identity FILE with the secret key of a recipient it was recorded for \
             (record --encrypt-to)"
        );
    }

    #[test]
    fn capture_errors_say_the_flags_of_old() {
        let e = CaptureError::Attach {
            ifname: "lo".into(),
            mode: "native",
            source: std::io::Error::from_raw_os_error(95),
        };
        assert!(!e.to_string().contains("--"), "{e}");
        assert!(line(PipelineError::Capture(e)).ends_with(" (try --xdp-mode generic)"));
        let e = CaptureError::NetmapNotBuilt;
        assert!(!e.to_string().contains("--engine"), "{e}");
        assert_eq!(
            line(e),
            "--engine netmap: this wiretape was built without netmap support: rebuild it with \
             `cargo build --release --features netmap` (or record with --engine afxdp)"
        );
        let e = CaptureError::NetmapMissing;
        assert!(!e.to_string().contains("--"), "{e}");
        assert!(line(e).ends_with("), or record with --engine afxdp"));
        let e = CaptureError::BusyPoll {
            ifname: "eth0".into(),
            queue: 0,
            option: "SO_BUSY_POLL",
            source: std::io::Error::from_raw_os_error(1),
        };
        assert!(!e.to_string().contains("--"), "{e}");
        let l = line(PipelineError::Capture(e));
        assert!(
            l.starts_with("--busy-poll: the kernel refused SO_BUSY_POLL")
                && l.ends_with("or record without --busy-poll)"),
            "{l}"
        );
    }

    #[test]
    fn live_errors_say_the_flags_of_old() {
        let e = LiveError::NotLoopback("0.0.0.0:9".parse().unwrap());
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            line(PipelineError::Live(e)),
            "--serve 0.0.0.0:9: not a loopback address, so anyone who can reach it receives \
             every frame recorded; use 127.0.0.1:PORT, or add --serve-allow-remote to serve it \
             anyway"
        );
        let e = LiveError::ControlInUse("/run/c.sock".into());
        assert!(!e.to_string().contains("--"), "{e}");
        assert_eq!(
            line(anyhow::Error::from(e).context("starting")),
            "starting: another wiretape is listening on the control socket /run/c.sock: give \
             --control another path"
        );
        let e = LiveError::Memory {
            bytes: 8,
            source: std::io::Error::from_raw_os_error(12),
        };
        assert!(!e.to_string().contains("--"), "{e}");
        assert!(line(PipelineError::Live(e)).ends_with("; give --ring a smaller size"));
    }

    /// TLS's explanations, in the library's words by default, say the
    /// flags and `wiretape certs` commands of old with [`tls_term`].
    #[test]
    fn tls_explanations_say_the_flags_of_old() {
        use wiretape::query::tls::explain::{self, CertInfo, ClientSide, Seen, ServerSide};
        use wiretape::query::tls::library_terms;
        let info = |s: &str| CertInfo {
            subject: s.into(),
            issuer: "CN=ca".into(),
            not_before: 0,
            not_after: 1,
            names: vec!["127.0.0.1".into()],
            server_auth: Some(true),
            client_auth: Some(false),
            fingerprint: "ab:cd".into(),
        };
        let client = |naming| ClientSide {
            cert_path: "/c.pem".into(),
            cert: info("CN=alice"),
            ca_path: "/ca.pem".into(),
            cas: vec![info("CN=ca")],
            naming,
        };
        let server = |naming| ServerSide {
            cert: info("CN=server"),
            client_cas: vec![info("CN=ca")],
            naming,
        };
        let seen = Seen::default();
        let required = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
        let lib = explain::sensor_refused(&required, &client(library_terms), &seen, "h", 1);
        assert!(!lib.contains("--"), "{lib}");
        assert_eq!(
            explain::sensor_refused(&required, &client(tls_term), &seen, "h", 1),
            "the sensor wants a client certificate and got none (alert certificate_required): \
             give --cert, --key and --ca"
        );
        let unknown = rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA);
        assert_eq!(
            explain::sensor_refused(&unknown, &client(tls_term), &seen, "h", 1),
            "the sensor does not admit certificates of this client's CA (alert unknown_ca): \
             --cert /c.pem ('CN=alice') was issued by 'CN=ca'; use a certificate made with the \
             sensor's CA (`wiretape certs client DIR NAME` in the directory of its --client-ca)"
        );
        let none = rustls::Error::NoCertificatesPresented;
        let lib = explain::handshake_refused(&none, None, &server(library_terms));
        assert!(!lib.contains("--"), "{lib}");
        assert_eq!(
            explain::handshake_refused(&none, None, &server(tls_term)),
            "the client presented no certificate: every client needs one of --client-ca 'CN=ca' \
             (SHA-256 ab:cd) (`wiretape certs client DIR NAME`; then wiretape --cert --key --ca, \
             curl --cert --key --cacert)"
        );
    }
}
