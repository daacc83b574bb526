//! What Debian's `stenoread` and `stenocurl` (1.0.1) read, written for a
//! wiretape sensor: `stenocurl` takes `Host`, `Port` and `CertPath` from
//! the JSON file `$STENOGRAPHER_CONFIG` and runs `curl --cert
//! $CertPath/client_cert.pem --key $CertPath/client_key.pem --cacert
//! $CertPath/ca_cert.pem https://$Host:$Port/query` (upstream's later
//! script gives `server_cert.pem` as `--cacert`). curl checks the API's
//! certificate against `Host`, so `Host` must be one of its names.

use crate::tls::{self, files};
use std::path::{Path, PathBuf};

/// What [`client_config`] wrote.
#[derive(Clone, Debug)]
pub struct StenoConfig {
    /// `OUT/config`, for `STENOGRAPHER_CONFIG`.
    pub config: PathBuf,
    /// The host written (a name of the API's certificate).
    pub host: String,
    /// The port written.
    pub port: u16,
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
}

/// Why the files could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The host asked for is not one the API's certificate names.
    #[error(
        "host {host}: the API's certificate ({}) is for {}: curl refuses any other name; give \
         one of them, or make the certificate of {} for {host}",
        cert.display(), names.join(", "), dir.display()
    )]
    Host {
        /// The host asked for.
        host: String,
        /// The API's certificate.
        cert: PathBuf,
        /// The names it is for.
        names: Vec<String>,
        /// The certificate directory.
        dir: PathBuf,
    },
    /// A file of the configuration exists, and overwriting was not asked for.
    #[error("{} exists: wiretape certs overwrites a file only when told to", path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// Any other failure, in words.
    #[error("{0}")]
    Other(String),
}

/// The names of a certificate clients can reach its server by: its SAN
/// DNS names and IP addresses, else its CN.
fn server_names(cert: &Path) -> Result<Vec<String>, ConfigError> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let der = tls::load_certs(cert, tls::PemRole::ApiCert)
        .map_err(|e| ConfigError::Other(e.to_string()))?;
    let first = der
        .first()
        .ok_or_else(|| ConfigError::Other(format!("{}: no certificate in it", cert.display())))?;
    let (_, c) = X509Certificate::from_der(first.as_ref())
        .map_err(|e| ConfigError::Other(format!("{}: {e}", cert.display())))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => names.push(d.to_string()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => names.push(
                        std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())
                            .to_string(),
                    ),
                    16 => names.push(
                        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())
                            .to_string(),
                    ),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    if names.is_empty() {
        names = tls::cert_names(first.as_ref());
    }
    Ok(names)
}

fn same_name(a: &str, b: &str) -> bool {
    match (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    }
}

/// Writes, for the client `name` of the certificates in `certs` (made by
/// `wiretape certs init` and `certs client`), `out/config` (`Host`, `Port`,
/// `CertPath`: `out`, absolute) and in `out` `client_cert.pem`,
/// `client_key.pem` (mode 0600), and the CA as `ca_cert.pem` and
/// `server_cert.pem`. `host`: a name of the API's certificate (default its
/// first); never over a file without `force`.
pub fn client_config(
    certs: &Path,
    name: &str,
    out: &Path,
    host: Option<&str>,
    port: u16,
    force: bool,
) -> Result<StenoConfig, ConfigError> {
    let names = server_names(&certs.join(files::SERVER_CERT))?;
    let host = match host {
        Some(h) => names
            .iter()
            .find(|n| same_name(n, h))
            .cloned()
            .ok_or_else(|| ConfigError::Host {
                host: h.to_string(),
                cert: certs.join(files::SERVER_CERT),
                names: names.clone(),
                dir: certs.to_owned(),
            })?,
        None => names.first().cloned().ok_or_else(|| {
            ConfigError::Other(format!(
                "{}: the certificate names no host",
                certs.join(files::SERVER_CERT).display()
            ))
        })?,
    };
    let read = |f: &str| {
        let p = certs.join(f);
        std::fs::read(&p).map_err(|e| ConfigError::Other(format!("{}: {e}", p.display())))
    };
    let (cert, key, ca) = (
        read(&files::client_cert(name))?,
        read(&files::client_key(name))?,
        read(files::CA_CERT)?,
    );
    std::fs::create_dir_all(out)
        .map_err(|e| ConfigError::Other(format!("{}: {e}", out.display())))?;
    let dir = std::fs::canonicalize(out)
        .map_err(|e| ConfigError::Other(format!("{}: {e}", out.display())))?;
    let config = serde_json::json!({
        "Host": host,
        "Port": port,
        "CertPath": dir.display().to_string(),
    });
    let mut text = serde_json::to_string_pretty(&config).unwrap_or_default();
    text.push('\n');
    let plan: [(&str, &[u8], u32); 5] = [
        ("client_cert.pem", &cert, 0o644),
        ("client_key.pem", &key, 0o600),
        ("ca_cert.pem", &ca, 0o644),
        ("server_cert.pem", &ca, 0o644),
        ("config", text.as_bytes(), 0o644),
    ];
    if !force {
        if let Some((f, _, _)) = plan.iter().find(|(f, _, _)| dir.join(f).exists()) {
            return Err(ConfigError::Exists { path: dir.join(f) });
        }
    }
    let mut written = Vec::new();
    for (f, bytes, mode) in plan {
        let p = dir.join(f);
        tls::write_file(&p, bytes, mode, true).map_err(|e| ConfigError::Other(e.to_string()))?;
        written.push(p);
    }
    Ok(StenoConfig {
        config: dir.join("config"),
        host,
        port,
        files: written,
    })
}
