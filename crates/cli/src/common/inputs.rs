//! Inputs and filter words on one command line: the one rule every
//! command that takes inputs, a filter or both follows (`extract`,
//! `timeline`, `index`, `record`, `ctl dump`, `filter`), so that a word is
//! never quietly read the other way.
//!
//! The rule (said in each command's `--help` and in docs/errors.md):
//! inputs first, then the filter. A word is an input
//! when it is a sensor URL, starts with `/`, `.` or `~`, ends in a capture
//! extension (`.pcap`, `.pcapng`, with `.lz4`/`.zst`), or names an existing
//! file or directory; the filter starts at the first word that is none of
//! these, and everything after `--` is the filter. A word that names an
//! existing file or directory here *and* reads as a filter (a keyword of
//! pcap-filter such as `tcp` or `host`, `not`, `(`) is refused, naming both
//! readings: `./WORD` is the file, `-- WORD` the filter. Where the trailing
//! words are only a filter (`record`, `ctl dump`, `filter`), a first word
//! naming a file is refused the same way (`-F WORD` is the file).

use std::path::Path;
use wiretape::files::naming::EXTENSIONS;
use wiretape::filter::words::is_filter_word;
use wiretape::query::remote;

/// A word read as an input whatever exists: a URL, a path by its look, a
/// capture file by its extension.
fn looks_like_input(w: &str) -> bool {
    remote::is_url(w)
        || w.starts_with('/')
        || w.starts_with('.')
        || w.starts_with('~')
        || EXTENSIONS.iter().any(|e| w.ends_with(&format!(".{e}")))
}

/// What a word names here: "file", "directory", or None.
type Names<'a> = &'a dyn Fn(&str) -> Option<&'static str>;

/// What kind of thing `w` names here ("file", "directory"), if it exists.
fn names(w: &str) -> Option<&'static str> {
    let m = std::fs::metadata(Path::new(w)).ok()?;
    Some(if m.is_dir() { "directory" } else { "file" })
}

/// The ambiguity: `w` is an existing `kind` and a filter word; `fixes`
/// says how to mean either.
fn ambiguous(w: &str, kind: &str, fixes: &str) -> String {
    format!("'{w}' is both a {kind} here and a filter word: {fixes}")
}

/// How to mean the filter: after `--`.
fn as_filter(w: &str) -> String {
    format!("put the filter after -- (-- {w} ...)")
}

/// The inputs and the filter words of a command that takes both
/// (`extract`): `words` (before any `--`; the first is always an input)
/// classified by the rule, `after` (the words after `--`) added to the
/// filter. Err: the one-line usage error of an ambiguous word.
pub(crate) fn split(
    words: &[String],
    after: &[String],
) -> Result<(Vec<String>, Vec<String>), String> {
    split_in(words, after, &names)
}

fn split_in(
    words: &[String],
    after: &[String],
    names: Names,
) -> Result<(Vec<String>, Vec<String>), String> {
    let mut inputs = Vec::new();
    let mut filter: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if !filter.is_empty() {
            filter.push(w.clone());
            continue;
        }
        if i == 0 && !looks_like_input(w) && names(w).is_none() && is_filter_word(w) {
            // The inputs left out: the filter came first.
            return Err(format!(
                "'{w}' is a filter word, not a file or directory here: give the inputs first \
                 (a store directory, capture files, https:// sensors), then the filter"
            ));
        }
        if i == 0 || looks_like_input(w) {
            inputs.push(w.clone());
            continue;
        }
        match names(w) {
            Some(kind) if is_filter_word(w) => {
                return Err(ambiguous(
                    w,
                    kind,
                    &format!("write ./{w} for the {kind}, or {}", as_filter(w)),
                ))
            }
            Some(_) => inputs.push(w.clone()),
            None => filter.push(w.clone()),
        }
    }
    filter.extend(after.iter().cloned());
    Ok((inputs, filter))
}

/// The inputs of a command that takes no filter words (`timeline`,
/// `index`): every word, checked by the same rule. Err: a word that reads
/// as a filter (`hint`: where this command takes a filter, if anywhere),
/// or one that is ambiguous.
pub(crate) fn inputs_only(words: &[String], cmd: &str, hint: &str) -> Result<Vec<String>, String> {
    inputs_only_in(words, cmd, hint, &names)
}

fn inputs_only_in(
    words: &[String],
    cmd: &str,
    hint: &str,
    names: Names,
) -> Result<Vec<String>, String> {
    for w in words {
        if looks_like_input(w) || !is_filter_word(w) {
            continue;
        }
        return Err(match names(w) {
            Some(kind) => ambiguous(
                w,
                kind,
                &format!("write ./{w} for the {kind}; {cmd} takes no filter words{hint}"),
            ),
            None => format!(
                "'{w}' is a filter word, not a file or directory here: {cmd} takes no filter \
                 words{hint}"
            ),
        });
    }
    Ok(words.to_vec())
}

/// The filter words of a command whose trailing words are only a filter
/// (`record`, `ctl dump`, `filter`): `words` (before any `--`) and `after`
/// (after it). Err: a first word before `--` that is ambiguous: a filter
/// word naming a file here, which `-F` could have meant (a directory is
/// nothing these commands read: `record -w /data src host X` in a
/// directory holding `src/` is the filter).
pub(crate) fn filter_only(words: &[String], after: &[String]) -> Result<Vec<String>, String> {
    filter_only_in(words, after, &names)
}

fn filter_only_in(words: &[String], after: &[String], names: Names) -> Result<Vec<String>, String> {
    if let Some(w) = words.first() {
        if let Some(kind) = names(w).filter(|k| *k == "file" && is_filter_word(w)) {
            return Err(ambiguous(
                w,
                kind,
                &format!(
                    "-F {w} reads the filter from the {kind}, or {}",
                    as_filter(w)
                ),
            ));
        }
    }
    Ok(words.iter().chain(after).cloned().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn one_rule_for_inputs_and_filters() {
        // A directory holding a file named `tcp` and a directory `store`
        // (tests/mistakes.rs runs the commands in a real one).
        let here = |w: &str| match w {
            "tcp" => Some("file"),
            "store" => Some("directory"),
            _ => None,
        };
        let split_ = |w: &[&str], a: &[&str]| split_in(&v(w), &v(a), &here);
        let (i, f) = split_(&["/no/such", "udp", "port", "80"], &[]).unwrap();
        assert_eq!((i, f.len()), (v(&["/no/such"]), 3));
        let (i, f) = split_(
            &[
                "/tmp",
                "/no/such",
                "x.pcap",
                "y.pcap.zst",
                "net",
                "10.0.0.0/8",
            ],
            &[],
        )
        .unwrap();
        assert_eq!((i.len(), f.len()), (4, 2));
        let (i, f) = split_(&["store", "store", "udp"], &["tcp"]).unwrap();
        assert_eq!((i.len(), f), (2, v(&["udp", "tcp"])));
        let (i, f) = split_(&["store", "./tcp"], &["tcp"]).unwrap();
        assert_eq!((i, f), (v(&["store", "./tcp"]), v(&["tcp"])));
        let e = split_(&["store", "tcp"], &[]).unwrap_err();
        assert_eq!(
            e,
            "'tcp' is both a file here and a filter word: write ./tcp for the file, or put the \
             filter after -- (-- tcp ...)"
        );
        let e = split_(&["udp", "port", "53"], &[]).unwrap_err();
        assert!(e.contains("give the inputs first"), "{e}");
        // After the filter starts, a word is the filter's whatever exists.
        let (_, f) = split_(&["store", "udp", "or", "tcp"], &[]).unwrap();
        assert_eq!(f, v(&["udp", "or", "tcp"]));
        // Inputs only.
        let only = |w: &[&str], hint: &str| inputs_only_in(&v(w), "index", hint, &here);
        assert!(only(&["store", "./tcp"], "").is_ok());
        let e = only(&["store", "tcp"], "").unwrap_err();
        assert!(
            e.contains("write ./tcp for the file; index takes no filter words"),
            "{e}"
        );
        let e = only(&["store", "udp"], " (--filter-index EXPR)").unwrap_err();
        assert!(
            e.contains("'udp' is a filter word, not a file or directory here"),
            "{e}"
        );
        // A filter alone.
        let fo = |w: &[&str], a: &[&str]| filter_only_in(&v(w), &v(a), &here);
        let e = fo(&["tcp", "port", "80"], &[]).unwrap_err();
        assert!(e.contains("-F tcp reads the filter from the file"), "{e}");
        assert_eq!(fo(&[], &["tcp"]).unwrap(), v(&["tcp"]));
        assert_eq!(fo(&["udp"], &[]).unwrap(), v(&["udp"]));
        let store_then = fo(&["store", "host", "10.0.0.1"], &[]).unwrap();
        assert_eq!(store_then.len(), 3, "a directory is no filter file");
    }
}
