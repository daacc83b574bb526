//! A server's options as plain values, one field per setting with the
//! defaults of `wiretape api`, and [`ApiOptions::build`]: the settings
//! checked against each other into an [`ApiConfig`], or the first problem
//! as a typed [`ApiError`] naming the settings at fault as [`ApiOpt`]s
//! (a command line says them as its flags).

use super::{ApiConfig, ApiError, TlsFiles};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A setting of a server, as its errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiOpt {
    /// The stores served.
    Stores,
    /// The address listened on.
    Listen,
    /// The server's certificate chain.
    TlsCert,
    /// The server's private key.
    TlsKey,
    /// The CA client certificates must chain to.
    ClientCa,
    /// The client names admitted.
    AllowClients,
    /// Queries running at once.
    MaxQueries,
    /// Connections open at once.
    MaxConnections,
    /// How long a client may take to send its first bytes or finish its
    /// TLS handshake.
    HandshakeTimeout,
}

impl std::fmt::Display for ApiOpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ApiOpt::Stores => "the stores",
            ApiOpt::Listen => "the address",
            ApiOpt::TlsCert => "a server certificate",
            ApiOpt::TlsKey => "its key",
            ApiOpt::ClientCa => "a client CA",
            ApiOpt::AllowClients => "the client names admitted",
            ApiOpt::MaxQueries => "the queries at once",
            ApiOpt::MaxConnections => "the connections at once",
            ApiOpt::HandshakeTimeout => "the handshake timeout",
        })
    }
}

/// How a server names its settings in the lines it logs while it runs
/// (a connection closed for a limit or a timeout): the library's own words
/// ([`ApiOpt`]'s `Display`, the default) or the embedder's, e.g. a
/// command line's flags (`wiretape api` says `--max-connections`).
pub type Naming = fn(ApiOpt) -> String;

/// The default [`Naming`]: the library's words ("the connections at once").
pub fn library_naming(opt: ApiOpt) -> String {
    opt.to_string()
}

/// A server's options (`wiretape api`'s flags), with its defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ApiOptions {
    /// The stores served (directories or files), read-only.
    pub stores: Vec<PathBuf>,
    /// Where to listen.
    pub listen: SocketAddr,
    /// The server's certificate chain (PEM); with `tls_key` and
    /// `client_ca`, mutual TLS.
    pub tls_cert: Option<PathBuf>,
    /// The server's private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// The CA client certificates must chain to (PEM).
    pub client_ca: Option<PathBuf>,
    /// Only certificates carrying one of these names; empty: any of the CA.
    pub allow_clients: Vec<String>,
    /// Queries running at once (4).
    pub max_queries: usize,
    /// Connections open at once (2048).
    pub max_connections: usize,
    /// Seconds a TLS handshake may take (10; 0 counts as 1).
    pub handshake_timeout_secs: u64,
    /// Seconds a connection may wait for a request head (30; 0 counts as 1).
    pub idle_timeout_secs: u64,
    /// In directories, only files of this prefix.
    pub prefix: Option<String>,
    /// The node name (None: the host name).
    pub node: Option<String>,
    /// No line per answered request on stderr.
    pub quiet: bool,
    /// How the stores are read (identities, Stenographer's index directory).
    pub read: wiretape_files::ReadOptions,
    /// How the lines logged while serving name the settings
    /// ([`library_naming`] unless set).
    pub naming: Naming,
    /// How TLS's messages name files and fixes
    /// ([`crate::tls::library_terms`] unless set).
    pub tls_naming: crate::tls::Naming,
}

impl ApiOptions {
    /// Serving `stores` on `listen`, with the defaults ([`ApiConfig::new`]'s).
    pub fn new(stores: Vec<PathBuf>, listen: SocketAddr) -> Self {
        let d = ApiConfig::new(Vec::new(), listen);
        ApiOptions {
            stores,
            listen,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            allow_clients: d.allow_clients,
            max_queries: d.max_queries,
            max_connections: d.max_connections,
            handshake_timeout_secs: d.handshake_timeout.as_secs(),
            idle_timeout_secs: d.idle_timeout.as_secs(),
            prefix: d.prefix,
            node: None,
            quiet: d.quiet,
            read: d.read,
            naming: d.naming,
            tls_naming: d.tls_naming,
        }
    }

    /// The configuration, the TLS files checked as a whole: all three or
    /// none ([`ApiError::TlsIncomplete`]; a certificate and key without a
    /// client CA is [`ApiError::OpenToAnyone`]). What needs the files or
    /// the address (loopback or TLS, the stores there, the limits) is
    /// checked when the server binds ([`super::check`]).
    pub fn build(self) -> Result<ApiConfig, ApiError> {
        let tls = match (self.tls_cert, self.tls_key, self.client_ca) {
            (None, None, None) => None,
            (Some(cert), Some(key), Some(client_ca)) => Some(TlsFiles {
                cert,
                key,
                client_ca,
            }),
            (Some(_), Some(_), None) => return Err(ApiError::OpenToAnyone),
            (c, k, ca) => {
                let all = [
                    (ApiOpt::TlsCert, c.is_some()),
                    (ApiOpt::TlsKey, k.is_some()),
                    (ApiOpt::ClientCa, ca.is_some()),
                ];
                let of = |want: bool| -> Vec<ApiOpt> {
                    all.iter()
                        .filter(|(_, g)| *g == want)
                        .map(|(o, _)| *o)
                        .collect()
                };
                return Err(ApiError::TlsIncomplete {
                    given: of(true),
                    missing: of(false),
                });
            }
        };
        let mut cfg = ApiConfig::new(self.stores, self.listen);
        cfg.tls = tls;
        cfg.read = self.read;
        cfg.allow_clients = self.allow_clients;
        cfg.max_queries = self.max_queries;
        cfg.max_connections = self.max_connections;
        cfg.handshake_timeout = Duration::from_secs(self.handshake_timeout_secs.max(1));
        cfg.idle_timeout = Duration::from_secs(self.idle_timeout_secs.max(1));
        cfg.prefix = self.prefix;
        if let Some(n) = self.node {
            cfg.node = n;
        }
        cfg.quiet = self.quiet;
        cfg.naming = self.naming;
        cfg.tls_naming = self.tls_naming;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_files_are_all_three_or_none() {
        let o = || ApiOptions::new(vec!["/s".into()], "127.0.0.1:0".parse().unwrap());
        let cfg = o().build().unwrap();
        assert!(cfg.tls.is_none());
        assert_eq!((cfg.max_queries, cfg.max_connections), (4, 2048));
        let mut a = o();
        a.tls_cert = Some("c.pem".into());
        a.tls_key = Some("k.pem".into());
        assert!(matches!(a.clone().build(), Err(ApiError::OpenToAnyone)));
        a.client_ca = Some("ca.pem".into());
        assert!(a.build().unwrap().tls.is_some());
        let mut a = o();
        a.tls_key = Some("k.pem".into());
        match a.build() {
            Err(e @ ApiError::TlsIncomplete { .. }) => {
                let ApiError::TlsIncomplete { given, missing } = &e else {
                    unreachable!()
                };
                assert_eq!(given, &[ApiOpt::TlsKey]);
                assert_eq!(missing, &[ApiOpt::TlsCert, ApiOpt::ClientCa]);
                assert!(!e.to_string().contains("--"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        let mut a = o();
        a.handshake_timeout_secs = 0;
        assert_eq!(a.build().unwrap().handshake_timeout, Duration::from_secs(1));
    }
}
