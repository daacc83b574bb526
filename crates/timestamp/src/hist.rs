//! Percentiles, one way for the whole house: an HDR histogram
//! (`hdrhistogram`, Gil Tene's High Dynamic Range histogram) records values
//! in constant time and memory with a bounded relative error, and answers
//! quantiles, counts under a bound (Prometheus buckets) and merges. Used for
//! the disk write latency (storage, the metrics endpoint), the stamping
//! error of the accuracy simulator and of `tsbench --live`.

pub use hdrhistogram::Histogram;

/// Highest write latency recorded exactly, µs (a minute; slower writes are
/// counted at this value).
pub const LATENCY_MAX_US: u64 = 60_000_000;

/// An empty histogram of latencies in µs, 1 µs to [`LATENCY_MAX_US`], two
/// significant digits (1 %: about 19 KiB of counts).
pub fn latency_us() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 2).expect("valid histogram bounds")
}

/// An empty, self-resizing histogram of any non-negative values, three
/// significant digits (0.1 %).
pub fn values() -> Histogram<u64> {
    Histogram::new(3).expect("valid histogram precision")
}

/// The `q` quantile (0 to 1) of `h`; 0 when it is empty.
pub fn quantile(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_the_precision() {
        let mut h = latency_us();
        for v in 1..=10_000u64 {
            h.saturating_record(v);
        }
        let p50 = quantile(&h, 0.5) as f64;
        let p99 = quantile(&h, 0.99) as f64;
        assert!((p50 - 5_000.0).abs() / 5_000.0 < 0.01, "{p50}");
        assert!((p99 - 9_900.0).abs() / 9_900.0 < 0.01, "{p99}");
        assert_eq!(quantile(&latency_us(), 0.99), 0);
        h.saturating_record(u64::MAX);
        assert_eq!(h.len(), 10_001);
        let mut v = values();
        v.record(3_000_000_000).unwrap();
        assert!(quantile(&v, 1.0) >= 3_000_000_000);
    }
}
