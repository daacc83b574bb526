//! Lists of CPUs and queues as people write them (`0,1,4-6`), and CPU
//! lists checked against the CPUs a process may run on
//! ([`crate::sys::allowed_cpus`]). Typed errors in the library's words:
//! a command names its flag.

/// A list that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// An item is neither a number nor a range `A-B` with A <= B.
    #[error("invalid list item '{0}': use numbers like 0,1 or ranges like 0-3")]
    Item(String),
    /// The list (as given) holds no number.
    #[error("invalid list '{0}': give at least one number")]
    Empty(String),
}

/// A CPU of a list this process may not run on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "CPU {cpu} is not one this process may run on (allowed: {}); see `nproc`, `taskset -p $$` or the service's CPUAffinity=",
    ranges(allowed)
)]
#[non_exhaustive]
pub struct NotAllowed {
    /// The first CPU of the list that is not allowed.
    pub cpu: usize,
    /// The CPUs this process may run on.
    pub allowed: Vec<usize>,
}

/// Parses `0,1,4-6` into `[0, 1, 4, 5, 6]` (blanks around items and
/// empty items are ignored).
pub fn parse(s: &str) -> Result<Vec<u32>, ListError> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || ListError::Item(part.to_string());
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            v.extend(a..=b);
        } else {
            v.push(part.parse().map_err(|_| bad())?);
        }
    }
    if v.is_empty() {
        return Err(ListError::Empty(s.to_string()));
    }
    Ok(v)
}

/// Every CPU of `list` must be in `allowed`: the first that is not, else Ok.
pub fn check(list: &[usize], allowed: &[usize]) -> Result<(), NotAllowed> {
    match list.iter().find(|c| !allowed.contains(c)) {
        Some(&cpu) => Err(NotAllowed {
            cpu,
            allowed: allowed.to_vec(),
        }),
        None => Ok(()),
    }
}

/// `[0, 1, 2, 5]` as `0-2,5` (`none` for no CPU).
pub fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_as_written_and_bad_items_are_named() {
        assert_eq!(parse("0,1, 4-6,").unwrap(), vec![0, 1, 4, 5, 6]);
        assert_eq!(parse("3-1"), Err(ListError::Item("3-1".into())));
        assert_eq!(parse("0,x"), Err(ListError::Item("x".into())));
        assert_eq!(parse(" , "), Err(ListError::Empty(" , ".into())));
    }

    #[test]
    fn a_cpu_outside_the_allowed_ones_is_named_with_them_as_ranges() {
        assert_eq!(check(&[1, 0], &[0, 1, 2]), Ok(()));
        let e = check(&[0, 7], &[0, 1, 2, 5]).unwrap_err();
        assert_eq!(e.cpu, 7);
        assert!(
            e.to_string()
                .starts_with("CPU 7 is not one this process may run on (allowed: 0-2,5);"),
            "{e}"
        );
        assert_eq!(ranges(&[]), "none");
    }
}
