//! Mutual TLS for the sensor API: the server's configuration (its
//! certificate, and only clients whose certificate chains to the client CA
//! and is within its validity), the client's (the sensors' CA, and its own
//! certificate), the names a client certificate carries (CN and SAN DNS
//! names, for `--allow-client`), and the certificates themselves
//! (`wiretape certs`: a CA, a server certificate, client certificates).
//!
//! rustls with the ring provider; certificates made by rcgen (ECDSA P-256,
//! SHA-256); nothing shells out to openssl.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What went wrong with a certificate, a key or a TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing of the kind wanted.
    #[error("{flag} {path}: {why}")]
    Pem {
        /// The flag (or file role) it was given for, e.g. `--tls-cert`.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, with what to do.
        why: String,
    },
    /// rustls refused the configuration (e.g. a key that does not match the
    /// certificate).
    #[error("TLS configuration: {0}")]
    Config(String),
    /// Making or writing a certificate failed.
    #[error("{0}")]
    Certs(String),
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
pub fn load_certs(
    path: &Path,
    flag: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |why: String| TlsError::Pem {
        flag,
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
pub fn load_key(path: &Path, flag: &'static str) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bad = |why: String| TlsError::Pem {
        flag,
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

fn roots(ca: &Path, flag: &'static str) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca, flag)? {
        roots.add(c).map_err(|e| TlsError::Pem {
            flag,
            path: ca.to_owned(),
            why: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

/// The server's configuration: its certificate chain and key, and only
/// clients with a certificate that chains to `client_ca` (and is within
/// its validity) admitted. HTTP/1.1 by ALPN.
pub fn server_config(cert: &Path, key: &Path, client_ca: &Path) -> Result<ServerConfig, TlsError> {
    let chain = load_certs(cert, "--tls-cert")?;
    let key = load_key(key, "--tls-key")?;
    let roots = roots(client_ca, "--client-ca")?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsError::Config(format!("--client-ca {}: {e}", client_ca.display())))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| {
            TlsError::Config(format!(
                "--tls-cert {} with --tls-key: {e} (does the key belong to the certificate?)",
                cert.display()
            ))
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// A client's configuration: sensors whose certificate chains to `ca`,
/// and this client's certificate and key.
pub fn client_config(cert: &Path, key: &Path, ca: &Path) -> Result<ClientConfig, TlsError> {
    let chain = load_certs(cert, "--cert")?;
    let key = load_key(key, "--key")?;
    let roots = roots(ca, "--ca")?;
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| {
            TlsError::Config(format!(
                "--cert {} with --key: {e} (does the key belong to the certificate?)",
                cert.display()
            ))
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
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

    /// From a minute ago (clocks differ a little) for `days` days.
    pub fn days(days: u32) -> Validity {
        let now = time::OffsetDateTime::now_utc();
        Validity {
            not_before: now - time::Duration::minutes(1),
            not_after: now + time::Duration::days(i64::from(days)),
        }
    }
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
        return Err(TlsError::Certs(format!(
            "{} exists: wiretape certs never overwrites a file without --force",
            path.display()
        )));
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

fn rc(e: rcgen::Error) -> TlsError {
    TlsError::Certs(format!("cannot make the certificate: {e}"))
}

/// What [`init`] and [`issue_client`] wrote.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// The files, in the order written.
    pub files: Vec<PathBuf>,
}

/// `wiretape certs init`: a new CA (self-signed) and a server certificate
/// signed by it whose SANs are `names` (DNS names, and IP addresses where a
/// name is one), in `dir` (created; keys mode 0600).
pub fn init(
    dir: &Path,
    names: &[String],
    validity: Validity,
    force: bool,
) -> Result<Written, TlsError> {
    if names.is_empty() {
        return Err(TlsError::Certs(
            "give the server's names: --server-name NAME (a DNS name or an IP address clients use)"
                .into(),
        ));
    }
    std::fs::create_dir_all(dir).map_err(|source| TlsError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let paths = [
        files::CA_CERT,
        files::CA_KEY,
        files::SERVER_CERT,
        files::SERVER_KEY,
    ]
    .map(|f| dir.join(f));
    if !force {
        if let Some(p) = paths.iter().find(|p| p.exists()) {
            return Err(TlsError::Certs(format!(
                "{} exists: wiretape certs never overwrites a file without --force",
                p.display()
            )));
        }
    }
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "wiretape CA");
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
    let ca_key = KeyPair::generate().map_err(rc)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(rc)?;

    let mut sp = CertificateParams::new(names.to_vec()).map_err(rc)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names[0].as_str());
    sp.distinguished_name = dn;
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    sp.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    sp.not_before = validity.not_before;
    sp.not_after = validity.not_after;
    let s_key = KeyPair::generate().map_err(rc)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let s_cert = sp.signed_by(&s_key, &issuer).map_err(rc)?;

    write_file(&paths[0], ca_cert.pem(), 0o644, force)?;
    write_file(&paths[1], ca_key.serialize_pem(), 0o600, force)?;
    write_file(&paths[2], s_cert.pem(), 0o644, force)?;
    write_file(&paths[3], s_key.serialize_pem(), 0o600, force)?;
    Ok(Written {
        files: paths.to_vec(),
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
            "client name '{name}': use letters, digits, '-', '_' and '.' only (it names the files and the certificate's CN)"
        )));
    }
    let ca_pem_path = dir.join(files::CA_CERT);
    let ca_key_path = dir.join(files::CA_KEY);
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|e| {
            TlsError::Certs(format!(
                "{}: {e}: run `wiretape certs init {} --server-name NAME` first",
                p.display(),
                dir.display()
            ))
        })
    };
    let ca_key = KeyPair::from_pem(&read(&ca_key_path)?).map_err(|e| TlsError::Pem {
        flag: "the CA key",
        path: ca_key_path.clone(),
        why: e.to_string(),
    })?;
    let issuer =
        Issuer::from_ca_cert_pem(&read(&ca_pem_path)?, &ca_key).map_err(|e| TlsError::Pem {
            flag: "the CA certificate",
            path: ca_pem_path.clone(),
            why: e.to_string(),
        })?;
    let mut cp = CertificateParams::new(vec![name.to_string()]).map_err(rc)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    cp.distinguished_name = dn;
    cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    cp.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    cp.not_before = validity.not_before;
    cp.not_after = validity.not_after;
    let key = KeyPair::generate().map_err(rc)?;
    let cert = cp.signed_by(&key, &issuer).map_err(rc)?;
    let cert_path = dir.join(files::client_cert(name));
    let key_path = dir.join(files::client_key(name));
    if !force {
        if let Some(p) = [&cert_path, &key_path].into_iter().find(|p| p.exists()) {
            return Err(TlsError::Certs(format!(
                "{} exists: wiretape certs never overwrites a file without --force",
                p.display()
            )));
        }
    }
    write_file(&cert_path, cert.pem(), 0o644, force)?;
    write_file(&key_path, key.serialize_pem(), 0o600, force)?;
    Ok(Written {
        files: vec![cert_path, key_path],
    })
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
    let read = |p: &Path, flag: &'static str| -> Result<Vec<u8>, TlsError> {
        let text = std::fs::read(p).map_err(|e| TlsError::Pem {
            flag,
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
                flag,
                path: p.to_owned(),
                why: "no certificate in it".into(),
            })
    };
    let cert = read(
        &dir.join(files::client_cert(name)),
        "the client certificate",
    )?;
    let ca = read(&dir.join(files::CA_CERT), "the CA certificate")?;
    let key_path = dir.join(files::client_key(name));
    let key_text = std::fs::read(&key_path).map_err(|e| TlsError::Io {
        path: key_path.clone(),
        source: e,
    })?;
    let key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| TlsError::Pem {
        flag: "the client key",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_signs_a_server_and_a_client_and_the_configs_take_them() {
        let d = std::env::temp_dir().join(format!("wt-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let names = vec!["sensor1.example".to_string(), "127.0.0.1".to_string()];
        let w = init(&d, &names, Validity::days(30), false).unwrap();
        assert_eq!(w.files.len(), 4);
        // Never over an existing file without force.
        assert!(init(&d, &names, Validity::days(30), false).is_err());
        issue_client(&d, "analyst-1", Validity::days(30), false).unwrap();
        assert!(issue_client(&d, "bad name", Validity::days(30), false).is_err());
        use std::os::unix::fs::PermissionsExt;
        for k in [
            files::CA_KEY,
            files::SERVER_KEY,
            &files::client_key("analyst-1"),
        ] {
            let m = std::fs::metadata(d.join(k)).unwrap().permissions().mode();
            assert_eq!(m & 0o777, 0o600, "{k}");
        }
        server_config(
            &d.join(files::SERVER_CERT),
            &d.join(files::SERVER_KEY),
            &d.join(files::CA_CERT),
        )
        .unwrap();
        client_config(
            &d.join(files::client_cert("analyst-1")),
            &d.join(files::client_key("analyst-1")),
            &d.join(files::CA_CERT),
        )
        .unwrap();
        let der = load_certs(&d.join(files::client_cert("analyst-1")), "x").unwrap();
        assert_eq!(cert_names(&der[0]), vec!["analyst-1"]);
        let der = load_certs(&d.join(files::SERVER_CERT), "x").unwrap();
        assert_eq!(cert_names(&der[0]), vec!["sensor1.example"]);
        // A key that is not the certificate's.
        let e = server_config(
            &d.join(files::SERVER_CERT),
            &d.join(files::CA_KEY),
            &d.join(files::CA_CERT),
        )
        .unwrap_err();
        assert!(e.to_string().contains("--tls-cert"), "{e}");
        let e = load_certs(&d.join(files::SERVER_KEY), "--tls-cert").unwrap_err();
        assert!(e.to_string().contains("holds no certificate"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
