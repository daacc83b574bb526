//! `wiretape certs`: a CA of its own name, a server certificate and
//! client certificates signed by it (rcgen: ECDSA P-256, SHA-256, with
//! authority and subject key identifiers so that strict path builders
//! such as Python's `cryptography` take the chain), and the PKCS#12
//! bundle a browser imports.

use super::explain::{cert_info, utc};
use super::{PemRole, TlsError};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};

/// The files `wiretape certs` writes in its directory.
pub mod files {
    /// The CA's certificate (give it as `--client-ca` and `--ca`).
    pub const CA_CERT: &str = "ca.pem";
    /// The CA's key (keep it: it signs new client certificates).
    pub const CA_KEY: &str = "ca.key";
    /// The server's certificate (`--tls-cert`).
    pub const SERVER_CERT: &str = "server.pem";
    /// The server's key (`--tls-key`).
    pub const SERVER_KEY: &str = "server.key";
    /// A client's certificate: `client-NAME.pem` (`--cert`).
    pub fn client_cert(name: &str) -> String {
        format!("client-{name}.pem")
    }
    /// A client's key: `client-NAME.key` (`--key`).
    pub fn client_key(name: &str) -> String {
        format!("client-{name}.key")
    }
    /// A client's key and certificate (and the CA's) as PKCS#12, for
    /// browsers: `client-NAME.p12`.
    pub fn client_p12(name: &str) -> String {
        format!("client-{name}.p12")
    }
}

/// Days a server certificate is valid by default: at most 366 days is
/// what Mozilla's TLS configurations (and sslyze's check of them) allow
/// a server certificate; `wiretape certs server` renews it with the CA.
pub const SERVER_DAYS: u32 = 365;
/// Days a CA is valid by default (ten years: it outlives the
/// certificates it signs, which are renewed under it).
pub const CA_DAYS: u32 = 3650;
/// Days a client certificate is valid by default.
pub const CLIENT_DAYS: u32 = 825;
/// The most days a certificate may be given (a hundred years).
pub const MAX_DAYS: u32 = 36_500;

/// The validity of a new certificate.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    /// Not valid before (UTC).
    pub not_before: time::OffsetDateTime,
    /// Not valid after (UTC).
    pub not_after: time::OffsetDateTime,
}

impl Validity {
    /// From `not_before` to `not_after`, Unix seconds (e.g. a certificate
    /// already expired, for tests of refusal).
    pub fn between(not_before: i64, not_after: i64) -> Validity {
        let t = |s: i64| {
            time::OffsetDateTime::from_unix_timestamp(s).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        };
        Validity {
            not_before: t(not_before),
            not_after: t(not_after),
        }
    }

    /// From a minute ago (clocks differ a little) for `days` days, 1 to
    /// [`MAX_DAYS`] ([`check_days`]).
    pub fn days(days: u32) -> Result<Validity, TlsError> {
        let days = check_days(days)?;
        let now = time::OffsetDateTime::now_utc();
        Ok(Validity {
            not_before: now - time::Duration::minutes(1),
            not_after: now + time::Duration::days(i64::from(days)),
        })
    }
}

/// `days` if a certificate may be valid that long (1 to [`MAX_DAYS`]),
/// else [`TlsError::Days`].
pub fn check_days(days: u32) -> Result<u32, TlsError> {
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(TlsError::Days { days });
    }
    Ok(days)
}

/// Writes `text` to `path`, mode `mode`; an existing file only with `force`.
pub(crate) fn write_file(
    path: &Path,
    text: impl AsRef<[u8]>,
    mode: u32,
    force: bool,
) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| TlsError::Io {
        path: path.to_owned(),
        source,
    };
    if !force && path.exists() {
        return Err(exists(path));
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(text.as_ref()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn exists(p: &Path) -> TlsError {
    TlsError::Exists { path: p.to_owned() }
}

/// Refuses when any of `paths` exists (without `force`): before anything
/// is written.
fn none_exist(paths: &[&Path], force: bool) -> Result<(), TlsError> {
    match paths.iter().find(|p| p.exists()) {
        Some(p) if !force => Err(exists(p)),
        _ => Ok(()),
    }
}

fn rc(e: rcgen::Error) -> TlsError {
    TlsError::Certs(format!("cannot make the certificate: {e}"))
}

/// What [`init`], [`issue_server`] and [`issue_client`] wrote.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// The files, in the order written.
    pub files: Vec<PathBuf>,
    /// What was made, for people: `CA 'CN=wiretape CA x': valid until ...`.
    pub notes: Vec<String>,
}

/// Four random bytes in hex: the part of a CA's name that tells two
/// `certs init` runs apart.
fn random_tag() -> Result<String, TlsError> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| TlsError::Certs("no random numbers from the system".into()))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The CA's common name: `wiretape CA NAME`, NAME being `name` or the
/// first server name and a random tag (`wiretape CA sensor1 3f9a2c1b`),
/// so that two sites' CAs are told apart (a certificate of the other one
/// is then an unknown CA, not a bad signature).
pub fn ca_common_name(name: Option<&str>, server_names: &[String]) -> Result<String, TlsError> {
    let part = match name {
        Some(n) => {
            let n = n.trim();
            if n.is_empty() || n.chars().count() > 48 || n.chars().any(char::is_control) {
                return Err(TlsError::CaName {
                    name: crate::text::quote(n),
                });
            }
            n.to_string()
        }
        None => {
            let first: String = server_names
                .first()
                .map(|s| s.chars().take(32).collect())
                .unwrap_or_default();
            format!("{first} {}", random_tag()?).trim().to_string()
        }
    };
    Ok(format!("wiretape CA {part}"))
}

fn ca_params(common_name: &str, validity: Validity) -> CertificateParams {
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "wiretape");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.not_before = validity.not_before;
    ca.not_after = validity.not_after;
    ca
}

/// A leaf's parameters: CN `cn`, SANs `sans`, for `purpose`, within
/// `validity` (cut at the CA's end, `ca_end`, if it comes first).
fn leaf_params(
    cn: &str,
    sans: Vec<String>,
    purpose: ExtendedKeyUsagePurpose,
    validity: Validity,
    ca_end: Option<time::OffsetDateTime>,
) -> Result<CertificateParams, TlsError> {
    let mut p = CertificateParams::new(sans).map_err(rc)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    p.distinguished_name = dn;
    p.is_ca = IsCa::ExplicitNoCa;
    p.extended_key_usages = vec![purpose];
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    p.use_authority_key_identifier_extension = true;
    p.not_before = validity.not_before;
    p.not_after = match ca_end {
        Some(end) if end < validity.not_after => end,
        _ => validity.not_after,
    };
    Ok(p)
}

/// The CA of `dir` (from [`init`]): its key, its issuer and when it ends.
struct Ca {
    key: KeyPair,
    pem: String,
    end: Option<time::OffsetDateTime>,
}

impl Ca {
    fn load(dir: &Path) -> Result<Ca, TlsError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| TlsError::NoCa {
                dir: dir.to_owned(),
                path: p.to_owned(),
                source,
            })
        };
        let key_path = dir.join(files::CA_KEY);
        let key = KeyPair::from_pem(&read(&key_path)?).map_err(|e| TlsError::Pem {
            role: PemRole::CaKey,
            path: key_path.clone(),
            why: e.to_string(),
        })?;
        let pem = read(&dir.join(files::CA_CERT))?;
        let end = CertificateDer::from_pem_slice(pem.as_bytes())
            .ok()
            .and_then(|d| cert_info(&d))
            .and_then(|i| time::OffsetDateTime::from_unix_timestamp(i.not_after).ok());
        Ok(Ca { key, pem, end })
    }

    fn issuer(&self, dir: &Path) -> Result<Issuer<'_, &KeyPair>, TlsError> {
        Issuer::from_ca_cert_pem(&self.pem, &self.key).map_err(|e| TlsError::Pem {
            role: PemRole::CaCert,
            path: dir.join(files::CA_CERT),
            why: e.to_string(),
        })
    }
}

fn check_server_names(names: &[String]) -> Result<(), TlsError> {
    if names.is_empty() {
        return Err(TlsError::NoServerNames);
    }
    Ok(())
}

/// What a written certificate is, for people.
fn note(what: &str, pem: &str) -> String {
    match CertificateDer::from_pem_slice(pem.as_bytes())
        .ok()
        .and_then(|d| cert_info(&d))
    {
        Some(i) => format!(
            "{what} '{}': valid until {} (SHA-256 {})",
            i.subject,
            utc(i.not_after),
            i.fingerprint
        ),
        None => what.to_string(),
    }
}

/// `wiretape certs init`: a new CA (self-signed, valid `ca_validity`,
/// named by [`ca_common_name`]) and a server certificate signed by it
/// (valid `validity`) whose SANs are `names` (DNS names, and IP
/// addresses where a name is one), in `dir` (created; keys mode 0600).
pub fn init(
    dir: &Path,
    names: &[String],
    ca_name: Option<&str>,
    validity: Validity,
    ca_validity: Validity,
    force: bool,
) -> Result<Written, TlsError> {
    check_server_names(names)?;
    let cn = ca_common_name(ca_name, names)?;
    let paths = [
        files::CA_CERT,
        files::CA_KEY,
        files::SERVER_CERT,
        files::SERVER_KEY,
    ]
    .map(|f| dir.join(f));
    none_exist(
        &paths.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        force,
    )?;
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let ca = ca_params(&cn, ca_validity);
    let ca_key = KeyPair::generate().map_err(rc)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(rc)?;
    let sp = leaf_params(
        &names[0],
        names.to_vec(),
        ExtendedKeyUsagePurpose::ServerAuth,
        validity,
        Some(ca_validity.not_after),
    )?;
    let s_key = KeyPair::generate().map_err(rc)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let s_cert = sp.signed_by(&s_key, &issuer).map_err(rc)?;

    write_file(&paths[0], ca_cert.pem(), 0o644, force)?;
    write_file(&paths[1], ca_key.serialize_pem(), 0o600, force)?;
    write_file(&paths[2], s_cert.pem(), 0o644, force)?;
    write_file(&paths[3], s_key.serialize_pem(), 0o600, force)?;
    Ok(Written {
        files: paths.to_vec(),
        notes: vec![note("CA", &ca_cert.pem()), note("server", &s_cert.pem())],
    })
}

/// `wiretape certs server`: a new server certificate (and key) of `names`
/// signed by the CA of `dir` (renewal, or other names), replacing
/// `server.pem` and `server.key` (with `force`).
pub fn issue_server(
    dir: &Path,
    names: &[String],
    validity: Validity,
    force: bool,
) -> Result<Written, TlsError> {
    check_server_names(names)?;
    let paths = [files::SERVER_CERT, files::SERVER_KEY].map(|f| dir.join(f));
    none_exist(&[&paths[0], &paths[1]], force)?;
    let ca = Ca::load(dir)?;
    let issuer = ca.issuer(dir)?;
    let sp = leaf_params(
        &names[0],
        names.to_vec(),
        ExtendedKeyUsagePurpose::ServerAuth,
        validity,
        ca.end,
    )?;
    let key = KeyPair::generate().map_err(rc)?;
    let cert = sp.signed_by(&key, &issuer).map_err(rc)?;
    write_file(&paths[0], cert.pem(), 0o644, force)?;
    write_file(&paths[1], key.serialize_pem(), 0o600, force)?;
    Ok(Written {
        files: paths.to_vec(),
        notes: vec![note("server", &cert.pem())],
    })
}

/// `wiretape certs client`: a client certificate of CN `name` signed by
/// the CA of `dir` (from [`init`]), written beside it.
pub fn issue_client(
    dir: &Path,
    name: &str,
    validity: Validity,
    force: bool,
) -> Result<Written, TlsError> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(TlsError::Certs(format!(
            "client name {}: use letters, digits, '-', '_' and '.' only (it names the files and the certificate's CN)",
            crate::text::quote(name)
        )));
    }
    let cert_path = dir.join(files::client_cert(name));
    let key_path = dir.join(files::client_key(name));
    none_exist(&[&cert_path, &key_path], force)?;
    let ca = Ca::load(dir)?;
    let issuer = ca.issuer(dir)?;
    let cp = leaf_params(
        name,
        vec![name.to_string()],
        ExtendedKeyUsagePurpose::ClientAuth,
        validity,
        ca.end,
    )?;
    let key = KeyPair::generate().map_err(rc)?;
    let cert = cp.signed_by(&key, &issuer).map_err(rc)?;
    write_file(&cert_path, cert.pem(), 0o644, force)?;
    write_file(&key_path, key.serialize_pem(), 0o600, force)?;
    Ok(Written {
        files: vec![cert_path, key_path],
        notes: vec![note("client", &cert.pem())],
    })
}

/// What `wiretape certs client` makes besides (or instead of) the
/// certificate and key: a PKCS#12 bundle, a Stenographer client's
/// configuration. See [`issue_client_bundle`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ClientBundle {
    /// Write over files that exist.
    pub force: bool,
    /// Also the PKCS#12 bundle ([`client_p12`]), encrypted with this.
    pub p12_password: Option<String>,
    /// Also a Stenographer client's directory
    /// ([`crate::steno::client_config`]).
    pub stenographer: Option<StenoClient>,
}

/// Where and how a Stenographer client reaches the API (see
/// [`crate::steno::client_config`]).
#[derive(Clone, Debug)]
pub struct StenoClient {
    /// The directory its files go into.
    pub out: PathBuf,
    /// A name of the API's certificate (default: its first).
    pub host: Option<String>,
    /// The API's port.
    pub port: u16,
}

/// What [`issue_client_bundle`] wrote.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ClientIssued {
    /// The files, in the order written, and the notes on them.
    pub written: Written,
    /// The Stenographer configuration, where one was asked for.
    pub stenographer: Option<crate::steno::StenoConfig>,
}

/// Why [`issue_client_bundle`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertsError {
    /// A certificate, key or bundle could not be made or written.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The Stenographer client's configuration could not be written.
    #[error(transparent)]
    Stenographer(#[from] crate::steno::ConfigError),
}

/// `wiretape certs client` whole: the client certificate of `name`
/// ([`issue_client`], valid `days`), unless the bundle or the
/// Stenographer configuration is asked for, the certificate exists and
/// `force` is off (then the one there is used); then the Stenographer
/// configuration and the PKCS#12 bundle, as `also` asks.
pub fn issue_client_bundle(
    dir: &Path,
    name: &str,
    days: u32,
    also: &ClientBundle,
) -> Result<ClientIssued, CertsError> {
    let have = [files::client_cert(name), files::client_key(name)]
        .iter()
        .all(|f| dir.join(f).exists());
    let extra = also.p12_password.is_some() || also.stenographer.is_some();
    let mut out = ClientIssued::default();
    if !(extra && have && !also.force) {
        out.written = issue_client(dir, name, Validity::days(days)?, also.force)?;
    }
    if let Some(s) = &also.stenographer {
        let c =
            crate::steno::client_config(dir, name, &s.out, s.host.as_deref(), s.port, also.force)?;
        out.written.files.extend(c.files.iter().cloned());
        out.stenographer = Some(c);
    }
    if let Some(pw) = &also.p12_password {
        let p = client_p12(dir, name, pw, also.force)?;
        out.written.files.push(p);
    }
    Ok(out)
}

/// Bundles the client certificate and key of `name` in `dir` (made by
/// [`issue_client`]) with the CA's certificate into `client-NAME.p12`
/// (PKCS#12: PBES2 with PBKDF2-HMAC-SHA-256 and AES-256-CBC, an
/// HMAC-SHA-256 MAC), encrypted with `password`, for a browser to import.
pub fn client_p12(
    dir: &Path,
    name: &str,
    password: &str,
    force: bool,
) -> Result<PathBuf, TlsError> {
    if password.is_empty() {
        return Err(TlsError::Certs(
            "the PKCS#12 password is empty: browsers import only an encrypted bundle; give one"
                .into(),
        ));
    }
    let read = |p: &Path, role: PemRole| -> Result<Vec<u8>, TlsError> {
        let text = std::fs::read(p).map_err(|e| TlsError::Pem {
            role,
            path: p.to_owned(),
            why: format!(
                "{e}: `wiretape certs client {} {name}` makes it",
                dir.display()
            ),
        })?;
        CertificateDer::pem_slice_iter(&text)
            .next()
            .and_then(Result::ok)
            .map(|c| c.as_ref().to_vec())
            .ok_or_else(|| TlsError::Pem {
                role,
                path: p.to_owned(),
                why: "no certificate in it".into(),
            })
    };
    let cert = read(
        &dir.join(files::client_cert(name)),
        PemRole::IssuedClientCert,
    )?;
    let ca = read(&dir.join(files::CA_CERT), PemRole::CaCert)?;
    let key_path = dir.join(files::client_key(name));
    let key_text = std::fs::read(&key_path).map_err(|e| TlsError::Io {
        path: key_path.clone(),
        source: e,
    })?;
    let key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| TlsError::Pem {
        role: PemRole::IssuedClientKey,
        path: key_path.clone(),
        why: e.to_string(),
    })?;
    let p12 = |e: p12_keystore::error::Error| {
        TlsError::Certs(format!("cannot make the PKCS#12 bundle: {e}"))
    };
    let chain = p12_keystore::PrivateKeyChain::new(
        name.as_bytes().to_vec(),
        p12_keystore::PrivateKey::from_der(key.secret_der()).map_err(p12)?,
        [
            p12_keystore::Certificate::from_der(&cert).map_err(p12)?,
            p12_keystore::Certificate::from_der(&ca).map_err(p12)?,
        ],
    );
    let mut ks = p12_keystore::KeyStore::new();
    ks.add_entry(name, p12_keystore::KeyStoreEntry::PrivateKeyChain(chain));
    let bytes = ks
        .writer(password)
        .encryption_algorithm(p12_keystore::EncryptionAlgorithm::PbeWithHmacSha256AndAes256)
        .mac_algorithm(p12_keystore::MacAlgorithm::HmacSha256)
        .write()
        .map_err(p12)?;
    let out = dir.join(files::client_p12(name));
    write_file(&out, bytes, 0o600, force)?;
    Ok(out)
}
