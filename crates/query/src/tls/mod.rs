//! Mutual TLS for the sensor API: the server's configuration (its
//! certificate, and only clients whose certificate chains to the client CA
//! and is within its validity), the client's (the sensors' CA, and its own
//! certificate), the names a client certificate carries (CN and SAN DNS
//! names, for `--allow-client`), and the certificates themselves
//! (`wiretape certs`: a CA, a server certificate, client certificates).
//!
//! Each connection gets its own rustls configuration (cheap: every part
//! is shared but a verifier that writes down what it saw), so that a
//! failed handshake is explained on both sides ([`explain`]): the server
//! logs whose certificate it refused and why, the client says which alert
//! the sensor sent and what its own certificate, CA and the sensor's
//! certificate are.
//!
//! No session resumption: every connection is a full handshake with its
//! client certificate checked (a resumed session would skip the check, so
//! a certificate that expired since, or a CA file replaced since, would
//! still be let in); it costs an ECDHE and two signatures per connection,
//! nothing beside a query. Nothing is kept across restarts (no tickets).
//!
//! rustls with the ring provider; certificates made by rcgen (ECDSA P-256,
//! SHA-256); nothing shells out to openssl.

mod certs;
pub mod explain;

pub(crate) use certs::write_file;
pub use certs::{
    ca_common_name, check_days, client_p12, files, init, issue_client, issue_client_bundle,
    issue_server, CertsError, ClientBundle, ClientIssued, StenoClient, Validity, Written, CA_DAYS,
    CLIENT_DAYS, MAX_DAYS, SERVER_DAYS,
};

use explain::{cert_info, utc, CertInfo, ClientSide, Seen, ServerSide};
pub use explain::{library_terms, Naming, Term};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ResolvesServerCert, WebPkiClientVerifier};
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What a PEM file is for, as [`TlsError::Pem`] names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PemRole {
    /// A server's certificate chain ([`ServerTls::new`]'s `cert`).
    ServerCert,
    /// A server's private key ([`ServerTls::new`]'s `key`).
    ServerKey,
    /// The CA a server admits client certificates of ([`ServerTls::new`]'s
    /// `client_ca`).
    ClientCa,
    /// A client's certificate chain ([`ClientTls::new`]'s `cert`).
    ClientCert,
    /// A client's private key ([`ClientTls::new`]'s `key`).
    ClientKey,
    /// The CA a client trusts sensors of ([`ClientTls::new`]'s `ca`).
    ServerCa,
    /// The CA's key in a certificate directory (`certs`).
    CaKey,
    /// The CA's certificate in a certificate directory (`certs`).
    CaCert,
    /// A client certificate a certificate directory issued (`certs`).
    IssuedClientCert,
    /// A client key a certificate directory issued (`certs`).
    IssuedClientKey,
    /// The certificate of an API Stenographer's clients are pointed at.
    ApiCert,
}

impl PemRole {
    /// What it is, in words.
    pub fn what(self) -> &'static str {
        match self {
            PemRole::ServerCert => "the server's certificate",
            PemRole::ServerKey => "the server's key",
            PemRole::ClientCa => "the client CA",
            PemRole::ClientCert => "the client's certificate",
            PemRole::ClientKey => "the client's key",
            PemRole::ServerCa => "the server CA",
            PemRole::CaKey => "the CA key",
            PemRole::CaCert => "the CA certificate",
            PemRole::IssuedClientCert => "the client certificate",
            PemRole::IssuedClientKey => "the client key",
            PemRole::ApiCert => "the API's certificate",
        }
    }
}

impl std::fmt::Display for PemRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what())
    }
}

/// What went wrong with a certificate, a key or a TLS configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing of the kind wanted.
    #[error("{role} {path}: {why}")]
    Pem {
        /// What the file is for (a command names it by its flag).
        role: PemRole,
        /// The file.
        path: PathBuf,
        /// What is wrong, with what to do.
        why: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
    /// rustls refused a certificate with its key (most often: the key is
    /// not the certificate's).
    #[error("TLS configuration: {} {} with {key}: {why} (does the key belong to the certificate?)", cert.0, cert.1.display())]
    KeyMismatch {
        /// The certificate: what it is for, and its file.
        cert: (PemRole, PathBuf),
        /// What the key is for (a command names it by its flag).
        key: PemRole,
        /// rustls's words.
        why: String,
    },
    /// Making or writing a certificate failed.
    #[error("{0}")]
    Certs(String),
    /// A certificate's validity out of bounds: 1 to [`MAX_DAYS`] days.
    #[error(
        "{days} days: {}",
        if *days < 1 {
            "a certificate must be valid for at least 1 day (0 would make one that expires within two minutes)".to_string()
        } else {
            format!("a certificate may be valid for at most {MAX_DAYS} days (a hundred years)")
        }
    )]
    Days {
        /// The days asked for.
        days: u32,
    },
    /// A file `wiretape certs` would write exists, and overwriting was
    /// not asked for.
    #[error("{} exists: wiretape certs overwrites a file only when told to", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A CA's name that is empty, too long or not printable.
    #[error(
        "CA name {name}: give 1 to 48 printable characters (the CA is named 'wiretape CA NAME')"
    )]
    CaName {
        /// The name as given, quoted where it needs to be.
        name: String,
    },
    /// A certificate directory without its CA (made by [`init`]).
    #[error("{}: {source}: make the CA of {} first", path.display(), dir.display())]
    NoCa {
        /// The certificate directory.
        dir: PathBuf,
        /// The CA's file that could not be read.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A server certificate asked for without any name for the server.
    #[error("give the server's names (a DNS name or an IP address clients use)")]
    NoServerNames,
    /// A file of `wiretape certs` could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// ring's suites, AES-128-GCM first: as safe as AES-256-GCM for this use
/// and 10 rounds instead of 14 per block (on a 2-core test machine the
/// cipher is a seventh of a remote extraction's CPU on each side).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::cipher_suite as cs;
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(p)
}

/// The certificates of a PEM file (a chain: leaf first).
pub fn load_certs(path: &Path, role: PemRole) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |why: String| TlsError::Pem {
        role,
        path: path.to_owned(),
        why,
    };
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(bad(
            "holds no certificate (a PEM file with -----BEGIN CERTIFICATE----- is wanted)".into(),
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, SEC1 or PKCS#1).
pub fn load_key(path: &Path, role: PemRole) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bad = |why: String| TlsError::Pem {
        role,
        path: path.to_owned(),
        why,
    };
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        bad(format!(
            "no private key in it ({e}): a PEM file with -----BEGIN PRIVATE KEY----- is wanted"
        ))
    })
}

fn roots(ca: &Path, role: PemRole) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca, role)? {
        roots.add(c).map_err(|e| TlsError::Pem {
            role,
            path: ca.to_owned(),
            why: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

/// Days before its end from which a certificate is said to expire soon.
pub const EXPIRY_WARNING_DAYS: i64 = 30;

/// The leaf of a chain, described; an error naming `role` when it does
/// not parse.
fn leaf_info(
    chain: &[CertificateDer<'_>],
    path: &Path,
    role: PemRole,
) -> Result<CertInfo, TlsError> {
    chain
        .first()
        .and_then(|c| cert_info(c))
        .ok_or_else(|| TlsError::Pem {
            role,
            path: path.to_owned(),
            why: "not an X.509 certificate this program can read".into(),
        })
}

/// Refuses a certificate outside its validity now, naming `role`, the
/// date, and `fix`.
fn in_validity(c: &CertInfo, path: &Path, role: PemRole, fix: &str) -> Result<(), TlsError> {
    let now = explain::now();
    let why = if now > c.not_after {
        format!(
            "'{}' expired on {} ({} ago): {fix}",
            c.subject,
            utc(c.not_after),
            explain::span(now - c.not_after)
        )
    } else if now < c.not_before {
        format!(
            "'{}' is not valid before {} (in {}): check this machine's clock (`date -u`)",
            c.subject,
            utc(c.not_before),
            explain::span(c.not_before - now)
        )
    } else {
        return Ok(());
    };
    Err(TlsError::Pem {
        role,
        path: path.to_owned(),
        why,
    })
}

/// A line for each certificate that ends within [`EXPIRY_WARNING_DAYS`].
fn expiring(list: &[(PemRole, &Path, &CertInfo)]) -> Vec<Expiring> {
    let now = explain::now();
    list.iter()
        .filter(|(_, _, c)| c.not_after - now < EXPIRY_WARNING_DAYS * 86_400)
        .map(|(role, p, c)| Expiring {
            role: *role,
            path: p.to_path_buf(),
            note: format!(
                "'{}' expires on {} (in {})",
                c.subject,
                utc(c.not_after),
                explain::span(c.not_after - now)
            ),
        })
        .collect()
}

/// A certificate that ends soon (within 30 days): the warning a server
/// gives at its start, `{role} {path}: {note}`; a command names the file by
/// its flag.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Expiring {
    /// What the file is for.
    pub role: PemRole,
    /// The file.
    pub path: PathBuf,
    /// Whose certificate, when it ends and how soon.
    pub note: String,
}

impl std::fmt::Display for Expiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.role, self.path.display(), self.note)
    }
}

/// The server's TLS: its certificate and key, and only clients with a
/// certificate that chains to the client CA (and is within its validity)
/// admitted. HTTP/1.1 by ALPN; TLS 1.3 and 1.2 with ECDHE and AEAD suites only.
pub struct ServerTls {
    provider: Arc<rustls::crypto::CryptoProvider>,
    verifier: Arc<dyn ClientCertVerifier>,
    resolver: Arc<dyn ResolvesServerCert>,
    side: Arc<ServerSide>,
    warnings: Vec<Expiring>,
}

/// What a connection's verifier said of a refused client certificate.
pub type Refusal = Arc<Mutex<Option<String>>>;

impl ServerTls {
    /// Reads and checks the files: the key belongs to the certificate,
    /// the certificate and the CA are within their validity. Its messages
    /// in the library's words ([`library_terms`]).
    pub fn new(cert: &Path, key: &Path, client_ca: &Path) -> Result<ServerTls, TlsError> {
        ServerTls::named(cert, key, client_ca, library_terms)
    }

    /// [`ServerTls::new`], its messages (its errors' fixes, the handshakes
    /// it refuses) naming files and fixes by `naming`.
    pub fn named(
        cert: &Path,
        key: &Path,
        client_ca: &Path,
        naming: Naming,
    ) -> Result<ServerTls, TlsError> {
        let chain = load_certs(cert, PemRole::ServerCert)?;
        let key_der = load_key(key, PemRole::ServerKey)?;
        let ca_certs = load_certs(client_ca, PemRole::ClientCa)?;
        let me = leaf_info(&chain, cert, PemRole::ServerCert)?;
        in_validity(
            &me,
            cert,
            PemRole::ServerCert,
            &format!("make a new one with its CA: {}", naming(&Term::RenewServer)),
        )?;
        let mut cas = Vec::new();
        for c in &ca_certs {
            let info = leaf_info(std::slice::from_ref(c), client_ca, PemRole::ClientCa)?;
            in_validity(
                &info,
                client_ca,
                PemRole::ClientCa,
                &format!(
                    "no client certificate of it is admitted any more: make a new CA and client \
                     certificates ({})",
                    naming(&Term::NewCa)
                ),
            )?;
            cas.push(info);
        }
        let mut warnings = expiring(&[(PemRole::ServerCert, cert, &me)]);
        warnings.extend(expiring(
            &cas.iter()
                .map(|c| (PemRole::ClientCa, client_ca, c))
                .collect::<Vec<_>>(),
        ));
        let roots = roots(client_ca, PemRole::ClientCa)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| TlsError::Pem {
                role: PemRole::ClientCa,
                path: client_ca.to_path_buf(),
                why: e.to_string(),
            })?;
        let base = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier.clone())
            .with_single_cert(chain, key_der)
            .map_err(|e| TlsError::KeyMismatch {
                cert: (PemRole::ServerCert, cert.to_path_buf()),
                key: PemRole::ServerKey,
                why: e.to_string(),
            })?;
        Ok(ServerTls {
            provider: provider(),
            verifier,
            resolver: base.cert_resolver.clone(),
            side: Arc::new(ServerSide {
                cert: me,
                client_cas: cas,
                naming,
            }),
            warnings,
        })
    }

    /// Certificates that end within [`EXPIRY_WARNING_DAYS`], one line each.
    pub fn warnings(&self) -> &[Expiring] {
        &self.warnings
    }

    /// A configuration for one connection, and where its verifier writes
    /// why it refused the client's certificate.
    pub fn connection(&self) -> Result<(Arc<ServerConfig>, Refusal), TlsError> {
        let refusal: Refusal = Arc::new(Mutex::new(None));
        let v = Arc::new(ExplainingVerifier {
            inner: self.verifier.clone(),
            side: self.side.clone(),
            refusal: refusal.clone(),
        });
        let mut cfg = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(v)
            .with_cert_resolver(self.resolver.clone());
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
        Ok((Arc::new(cfg), refusal))
    }

    /// Why a handshake failed with `err` (and what the verifier said).
    pub fn explain(&self, err: &rustls::Error, refusal: &Refusal) -> String {
        let said = refusal.lock().ok().and_then(|mut r| r.take());
        explain::handshake_refused(err, said, &self.side)
    }
}

/// The server's verifier of client certificates, which writes down why it
/// refused one.
#[derive(Debug)]
struct ExplainingVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    side: Arc<ServerSide>,
    refusal: Refusal,
}

impl ClientCertVerifier for ExplainingVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let r = self
            .inner
            .verify_client_cert(end_entity, intermediates, now);
        if let Err(e) = &r {
            let why = explain::client_cert_refused(e, end_entity, now.as_secs() as i64, &self.side);
            if let Ok(mut slot) = self.refusal.lock() {
                *slot = Some(why);
            }
        }
        r
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A client's TLS: sensors whose certificate chains to the CA, and this
/// client's certificate and key.
pub struct ClientTls {
    base: ClientConfig,
    verifier: Arc<dyn ServerCertVerifier>,
    resolver: Arc<dyn ResolvesClientCert>,
    side: Arc<ClientSide>,
}

/// What a connection saw of its sensor (for [`ClientTls::explain`]).
pub type SeenSlot = Arc<Mutex<Seen>>;

impl ClientTls {
    /// Reads the files; the key must belong to the certificate. Its
    /// messages in the library's words ([`library_terms`]).
    pub fn new(cert: &Path, key: &Path, ca: &Path) -> Result<ClientTls, TlsError> {
        ClientTls::named(cert, key, ca, library_terms)
    }

    /// [`ClientTls::new`], its messages (why a sensor and this client could
    /// not agree) naming files and fixes by `naming`.
    pub fn named(
        cert: &Path,
        key: &Path,
        ca: &Path,
        naming: Naming,
    ) -> Result<ClientTls, TlsError> {
        let chain = load_certs(cert, PemRole::ClientCert)?;
        let key_der = load_key(key, PemRole::ClientKey)?;
        let me = leaf_info(&chain, cert, PemRole::ClientCert)?;
        let cas = load_certs(ca, PemRole::ServerCa)?
            .iter()
            .map(|c| leaf_info(std::slice::from_ref(c), ca, PemRole::ServerCa))
            .collect::<Result<Vec<_>, _>>()?;
        let roots = Arc::new(roots(ca, PemRole::ServerCa)?);
        let verifier = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| TlsError::Pem {
                role: PemRole::ServerCa,
                path: ca.to_path_buf(),
                why: e.to_string(),
            })?;
        let mut base = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key_der)
            .map_err(|e| TlsError::KeyMismatch {
                cert: (PemRole::ClientCert, cert.to_path_buf()),
                key: PemRole::ClientKey,
                why: e.to_string(),
            })?;
        base.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ClientTls {
            resolver: base.client_auth_cert_resolver.clone(),
            base,
            verifier,
            side: Arc::new(ClientSide {
                cert_path: cert.to_owned(),
                cert: me,
                ca_path: ca.to_owned(),
                cas,
                naming,
            }),
        })
    }

    /// A configuration for one connection, and what it will see.
    pub fn connection(&self) -> (Arc<ClientConfig>, SeenSlot) {
        let seen: SeenSlot = Arc::new(Mutex::new(Seen::default()));
        let mut cfg = self.base.clone();
        cfg.dangerous()
            .set_certificate_verifier(Arc::new(RecordingVerifier {
                inner: self.verifier.clone(),
                seen: seen.clone(),
            }));
        cfg.client_auth_cert_resolver = Arc::new(RecordingResolver {
            inner: self.resolver.clone(),
            seen: seen.clone(),
        });
        (Arc::new(cfg), seen)
    }

    /// Why the handshake with `host:port` failed with `err`.
    pub fn explain(&self, err: &rustls::Error, seen: &SeenSlot, host: &str, port: u16) -> String {
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        explain::sensor_refused(err, &self.side, &seen, host, port)
    }
}

/// The client's verifier of a sensor's certificate, which writes down
/// what the sensor presented.
#[derive(Debug)]
struct RecordingVerifier {
    inner: Arc<dyn ServerCertVerifier>,
    seen: SeenSlot,
}

impl ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Ok(mut s) = self.seen.lock() {
            s.server = cert_info(end_entity);
        }
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// The client's certificate, which writes down the CA names the sensor
/// asks for.
#[derive(Debug)]
struct RecordingResolver {
    inner: Arc<dyn ResolvesClientCert>,
    seen: SeenSlot,
}

impl ResolvesClientCert for RecordingResolver {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        if let Ok(mut s) = self.seen.lock() {
            s.hints = Some(
                root_hint_subjects
                    .iter()
                    .filter_map(|d| explain::dn_text(d))
                    .collect(),
            );
        }
        self.inner.resolve(root_hint_subjects, sigschemes)
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

/// The names a certificate carries: its subject's CN(s), then its SAN DNS
/// names not already there. Empty for a certificate that cannot be parsed.
pub fn cert_names(der: &[u8]) -> Vec<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                if !names.iter().any(|x| x == d) {
                    names.push(d.to_string());
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_signs_a_server_and_a_client_and_the_configs_take_them() {
        let d = std::env::temp_dir().join(format!("wt-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let names = vec!["sensor1.example".to_string(), "127.0.0.1".to_string()];
        let v = |days| Validity::days(days).unwrap();
        let w = init(&d, &names, None, v(SERVER_DAYS), v(CA_DAYS), false).unwrap();
        assert_eq!(w.files.len(), 4);
        // Never over an existing file without force.
        assert!(init(&d, &names, None, v(30), v(30), false).is_err());
        issue_client(&d, "analyst-1", v(30), false).unwrap();
        assert!(issue_client(&d, "bad name", v(30), false).is_err());
        use std::os::unix::fs::PermissionsExt;
        for k in [
            files::CA_KEY,
            files::SERVER_KEY,
            &files::client_key("analyst-1"),
        ] {
            let m = std::fs::metadata(d.join(k)).unwrap().permissions().mode();
            assert_eq!(m & 0o777, 0o600, "{k}");
        }
        let s = ServerTls::new(
            &d.join(files::SERVER_CERT),
            &d.join(files::SERVER_KEY),
            &d.join(files::CA_CERT),
        )
        .unwrap();
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
        s.connection().unwrap();
        ClientTls::new(
            &d.join(files::client_cert("analyst-1")),
            &d.join(files::client_key("analyst-1")),
            &d.join(files::CA_CERT),
        )
        .unwrap()
        .connection();
        let der = load_certs(&d.join(files::client_cert("analyst-1")), PemRole::CaCert).unwrap();
        assert_eq!(cert_names(&der[0]), vec!["analyst-1"]);
        let der = load_certs(&d.join(files::SERVER_CERT), PemRole::CaCert).unwrap();
        assert_eq!(cert_names(&der[0]), vec!["sensor1.example"]);
        // The CA has a name of its own; the leaves name it as issuer and
        // carry its key identifier; the server certificate is valid for a
        // year, the CA for ten.
        let ca = load_certs(&d.join(files::CA_CERT), PemRole::CaCert).unwrap();
        let (ca, leaf) = (cert_info(&ca[0]).unwrap(), cert_info(&der[0]).unwrap());
        assert!(
            ca.subject.starts_with("CN=wiretape CA sensor1.example "),
            "{}",
            ca.subject
        );
        assert_eq!(leaf.issuer, ca.subject);
        assert_eq!(
            (leaf.server_auth, leaf.client_auth),
            (Some(true), Some(false))
        );
        let days = |c: &CertInfo| (c.not_after - c.not_before) / 86_400;
        assert_eq!((days(&leaf), days(&ca)), (365, 3650));
        {
            use x509_parser::prelude::{FromDer, X509Certificate};
            let (_, c) = X509Certificate::from_der(&der[0]).unwrap();
            let oids: Vec<String> = c
                .extensions()
                .iter()
                .map(|e| e.oid.to_id_string())
                .collect();
            assert!(
                oids.contains(&"2.5.29.35".to_string()),
                "authority key id: {oids:?}"
            );
        }
        // A renewed server certificate: the same CA, new names.
        let names2 = vec!["sensor2.example".to_string()];
        assert!(
            issue_server(&d, &names2, v(10), false).is_err(),
            "no --force"
        );
        issue_server(&d, &names2, v(10), true).unwrap();
        let der = load_certs(&d.join(files::SERVER_CERT), PemRole::CaCert).unwrap();
        assert_eq!(cert_names(&der[0]), vec!["sensor2.example"]);
        let s = ServerTls::new(
            &d.join(files::SERVER_CERT),
            &d.join(files::SERVER_KEY),
            &d.join(files::CA_CERT),
        )
        .unwrap();
        assert_eq!(s.warnings().len(), 1, "10 days left: {:?}", s.warnings());
        // Two CAs are named apart, or as --name says.
        let other = ca_common_name(None, &names).unwrap();
        assert_ne!(format!("CN={other}, O=wiretape"), ca.subject);
        assert_eq!(
            ca_common_name(Some("site-b"), &names).unwrap(),
            "wiretape CA site-b"
        );
        assert!(ca_common_name(Some("a\u{1b}b"), &names).is_err());
        // 0 days and more than a hundred years are refused.
        assert!(check_days(0)
            .unwrap_err()
            .to_string()
            .contains("at least 1 day"));
        assert!(check_days(MAX_DAYS + 1).is_err());
        assert!(Validity::days(0).is_err());
        // A key that is not the certificate's.
        let e = ServerTls::new(
            &d.join(files::SERVER_CERT),
            &d.join(files::CA_KEY),
            &d.join(files::CA_CERT),
        )
        .err()
        .unwrap();
        assert!(
            matches!(&e, TlsError::KeyMismatch { cert, key: PemRole::ServerKey, .. } if cert.0 == PemRole::ServerCert),
            "{e}"
        );
        assert!(e.to_string().contains("the server's certificate"), "{e}");
        assert!(!e.to_string().contains("--"), "{e}");
        let e = load_certs(&d.join(files::SERVER_KEY), PemRole::ServerCert).unwrap_err();
        assert!(e.to_string().contains("holds no certificate"), "{e}");
        // An expired server certificate: refused before anything listens,
        // with its date and the fix.
        let now = explain::now();
        issue_server(
            &d,
            &names,
            Validity::between(now - 86_400 * 3, now - 86_400),
            true,
        )
        .unwrap();
        let e = ServerTls::new(
            &d.join(files::SERVER_CERT),
            &d.join(files::SERVER_KEY),
            &d.join(files::CA_CERT),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("the server's certificate")
                && e.contains("expired on")
                && e.contains("make a new one with its CA: tls::issue_server with force")
                && !e.contains("--"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
