//! libbpf's own log, routed through wiretape's: libbpf prints to stderr by
//! default (`libbpf: prog 'wiretape_steer_hw': BPF program load failed:
//! -EOPNOTSUPP` at every start on an interface without NIC stamps, where
//! that failure is expected and handled). Installed on the first load, the
//! callback keeps the latest lines instead; a load that fails folds the
//! lines that explain it (the verifier's last words) into its one-line
//! error, and with [`set_verbose`] (`-v`) every line is also printed, as
//! `wiretape: libbpf: ...`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

/// Lines kept (a verifier log can be long: the end is what explains).
const KEEP: usize = 256;

static VERBOSE: AtomicBool = AtomicBool::new(false);
static LINES: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
static INSTALL: Once = Once::new();

/// Prints libbpf's lines on stderr as they come (`-v`), besides keeping them.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
    install();
}

/// Routes libbpf's output here (once per process; later calls do nothing).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, on_line)));
    });
}

fn on_line(level: libbpf_rs::PrintLevel, msg: String) {
    let verbose = VERBOSE.load(Ordering::Relaxed);
    // Debug lines are only worth keeping (or showing) with -v: they are
    // many and never explain a failure the verifier's log does not.
    if matches!(level, libbpf_rs::PrintLevel::Debug) && !verbose {
        return;
    }
    for l in msg.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if verbose {
            eprintln!("wiretape: libbpf: {l}");
        }
        let mut v = LINES.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() == KEEP {
            v.pop_front();
        }
        v.push_back(l.to_string());
    }
}

/// Forgets what was kept (called before a load, so that its failure is
/// explained by its own lines).
pub(crate) fn clear() {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// The lines that explain a failed load, at most `max`, joined by ` | `
/// (see [`pick`]). Empty when nothing was logged.
pub(crate) fn reason(max: usize) -> String {
    let v = LINES.lock().unwrap_or_else(|e| e.into_inner());
    let lines: Vec<&str> = v.iter().map(String::as_str).collect();
    pick(&lines, max)
}

/// The verifier's last lines before libbpf's own summary (`-- END PROG
/// LOAD LOG --`, its counts left out), else libbpf's last lines.
fn pick(lines: &[&str], max: usize) -> String {
    let mut picked: Vec<&str> = match lines.iter().rposition(|l| l.contains("END PROG LOAD LOG")) {
        Some(end) => lines[..end]
            .iter()
            .rev()
            .filter(|l| !l.starts_with("processed ") && !l.starts_with("verification time"))
            .take(max)
            .copied()
            .collect(),
        None => lines
            .iter()
            .rev()
            // libbpf's generic closing lines say nothing the error does not.
            .filter(|l| !l.contains("failed to load"))
            .take(max)
            .map(|l| l.strip_prefix("libbpf: ").unwrap_or(l))
            .collect(),
    };
    picked.reverse();
    picked.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifier_lines_explain_a_failed_load() {
        let log = [
            "libbpf: prog 'x': BPF program load failed: Permission denied",
            "libbpf: prog 'x': -- BEGIN PROG LOAD LOG --",
            "0: R1=ctx() R10=fp0",
            "23: (1f) r9 -= r1",
            "R9 pointer -= pointer prohibited",
            "processed 24 insns (limit 1000000)",
            "-- END PROG LOAD LOG --",
            "libbpf: prog 'x': failed to load: -EACCES",
        ];
        assert_eq!(
            pick(&log, 2),
            "23: (1f) r9 -= r1 | R9 pointer -= pointer prohibited"
        );
        let log = [
            "libbpf: prog 'y': BPF program load failed: -EOPNOTSUPP",
            "libbpf: prog 'y': failed to load: -EOPNOTSUPP",
            "libbpf: failed to load object '55f2b63eb340-1860'",
        ];
        assert_eq!(
            pick(&log, 3),
            "prog 'y': BPF program load failed: -EOPNOTSUPP"
        );
        assert_eq!(pick(&[], 3), "");
    }
}
