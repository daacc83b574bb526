//! The reference: a query evaluated directly on a frame's keys
//! ([`Decoded`]) and its stamp, as the definition of what it selects. The
//! compiled form ([`super::Selection`]) is proved equal to it.

use super::decode::Decoded;
use super::parse::Query;

/// Whether a frame of keys `d`, stamped `ts_ns`, is selected by `q`: a
/// primitive holds when one of the frame's keys is its value (an address
/// in its range); `after T` is `ts >= T`, `before T` is `ts < T`.
pub fn eval(q: &Query, d: &Decoded, ts_ns: u64) -> bool {
    let ts = i128::from(ts_ns);
    match q {
        Query::Net4(lo, hi) => d.ip4.iter().any(|a| (lo..=hi).contains(&a)),
        Query::Net6(lo, hi) => d.ip6.iter().any(|a| (lo..=hi).contains(&a)),
        Query::Port(p) => d.ports.contains(p),
        Query::Proto(p) => d.proto == Some(*p),
        Query::Vlan(v) => d.vlans.contains(v),
        Query::Mpls(m) => d.mpls.contains(m),
        Query::After(t) => ts >= *t,
        Query::Before(t) => ts < *t,
        Query::And(v) => v.iter().all(|q| eval(q, d, ts_ns)),
        Query::Or(v) => v.iter().any(|q| eval(q, d, ts_ns)),
    }
}
