//! The names of one session, each stored escaped ([`crate::text`]).

/// What the first frames of a connection named.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    /// DNS: the first question's name.
    pub dns_query: Option<String>,
    /// DNS: the first question's type (number; [`crate::dns::type_name`]).
    pub dns_type: Option<u16>,
    /// DNS: every distinct question name of the connection (queries and
    /// the questions responses repeat), in the order first seen, the
    /// first being [`Names::dns_query`]; at most
    /// [`crate::dns::MAX_QUERIES`].
    pub dns_queries: Vec<String>,
    /// DNS: questions not in [`Names::dns_queries`] because it was full
    /// (each such question counted every time it was seen).
    pub dns_queries_cut: u32,
    /// DNS: the answers of the responses (A, AAAA as addresses; CNAME,
    /// DNAME, NS, PTR, MX as names), in order, at most
    /// [`crate::dns::MAX_ANSWERS`].
    pub dns_answers: Vec<String>,
    /// TLS over TCP: the ClientHello's server name.
    pub tls_sni: Option<String>,
    /// TLS or QUIC: the ClientHello's ALPN protocols, in order.
    pub tls_alpn: Vec<String>,
    /// TLS or QUIC: the JA4 client fingerprint ([`crate::tls::ja4`]).
    pub ja4: Option<String>,
    /// HTTP/1.x: the first request's Host header.
    pub http_host: Option<String>,
    /// HTTP/1.x: the first request's method.
    pub http_method: Option<String>,
    /// HTTP/1.x: the first request's target (path and query).
    pub http_path: Option<String>,
    /// HTTP/1.x: the first request's User-Agent header.
    pub http_user_agent: Option<String>,
    /// QUIC: the server name of the client's Initial ClientHello.
    pub quic_sni: Option<String>,
}

impl Names {
    /// Whether nothing was named.
    pub fn is_empty(&self) -> bool {
        *self == Names::default()
    }
}
