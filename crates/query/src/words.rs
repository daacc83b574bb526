//! Inputs and filter words on one command line: the one rule every
//! command that takes inputs, a filter or both follows (`extract`,
//! `timeline`, `index`, `record`, `ctl dump`, `filter`), so that a word is
//! never quietly read the other way.
//!
//! The rule: inputs first, then the filter. A word is an input when it is
//! a sensor URL, starts with `/`, `.` or `~`, ends in a capture extension
//! (`.pcap`, `.pcapng`, with `.lz4`/`.zst`), or names an existing file or
//! directory; the filter starts at the first word that is none of these,
//! and every word after the separator (the command line's `--`) is the
//! filter. A word that names an existing file or directory here *and*
//! reads as a filter (a keyword of pcap-filter such as `tcp` or `host`,
//! `not`, `(`) is refused as [`WordsError::Ambiguous`], naming both
//! readings: `./WORD` is the file, the same word after the separator the
//! filter. Where the trailing words are only a filter ([`filter_only`]), a
//! first word naming a file is refused the same way (the caller's way of
//! reading a filter from a file is the fix).
//!
//! The errors say the word and what it could be; a command line adds how
//! to mean either (its flags).

use std::path::Path;
use wiretape_files::naming::EXTENSIONS;
use wiretape_filter::words::is_filter_word;

/// What an existing word names here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Names {
    /// A file (or anything not a directory).
    File,
    /// A directory.
    Directory,
}

impl std::fmt::Display for Names {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Names::File => "file",
            Names::Directory => "directory",
        })
    }
}

/// A word of a command line that cannot be read one way for sure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WordsError {
    /// The first word is a filter word naming nothing here: the inputs
    /// were left out (the filter came first).
    #[error("'{word}' is a filter word, not a file or directory here: the inputs come first, then the filter")]
    FilterFirst {
        /// The word.
        word: String,
    },
    /// The word names an existing file or directory here and reads as a
    /// filter word: both readings are possible.
    #[error("'{word}' is both a {names} here and a filter word")]
    Ambiguous {
        /// The word.
        word: String,
        /// What it names here.
        names: Names,
    },
    /// Where only inputs are taken ([`inputs_only`]): a filter word that
    /// names nothing here.
    #[error(
        "'{word}' is a filter word, not a file or directory here, where only inputs are taken"
    )]
    NotAnInput {
        /// The word.
        word: String,
    },
}

/// The words of a command that takes inputs and a filter, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Split {
    /// The inputs (directories, capture files, sensor URLs), in order.
    pub inputs: Vec<String>,
    /// The filter's words, in order (those after the separator last).
    pub filter: Vec<String>,
}

/// A word read as an input whatever exists: a URL, a path by its look, a
/// capture file by its extension.
pub fn looks_like_input(w: &str) -> bool {
    crate::remote::is_url(w)
        || w.starts_with('/')
        || w.starts_with('.')
        || w.starts_with('~')
        || EXTENSIONS.iter().any(|e| w.ends_with(&format!(".{e}")))
}

/// What `w` names here, if it exists.
pub fn names(w: &str) -> Option<Names> {
    let m = std::fs::metadata(Path::new(w)).ok()?;
    Some(if m.is_dir() {
        Names::Directory
    } else {
        Names::File
    })
}

/// The inputs and the filter words of a command that takes both (`extract`):
/// `words` (before the separator; the first is always an input) classified
/// by the rule, `after` (the words after the separator) added to the
/// filter.
pub fn split(words: &[String], after: &[String]) -> Result<Split, WordsError> {
    split_in(words, after, &names)
}

/// [`split`] with `names` saying what exists (a test's directory).
pub fn split_in(
    words: &[String],
    after: &[String],
    names: &dyn Fn(&str) -> Option<Names>,
) -> Result<Split, WordsError> {
    let mut s = Split::default();
    for (i, w) in words.iter().enumerate() {
        if !s.filter.is_empty() {
            s.filter.push(w.clone());
            continue;
        }
        if i == 0 && !looks_like_input(w) && names(w).is_none() && is_filter_word(w) {
            return Err(WordsError::FilterFirst { word: w.clone() });
        }
        if i == 0 || looks_like_input(w) {
            s.inputs.push(w.clone());
            continue;
        }
        match names(w) {
            Some(names) if is_filter_word(w) => {
                return Err(WordsError::Ambiguous {
                    word: w.clone(),
                    names,
                })
            }
            Some(_) => s.inputs.push(w.clone()),
            None => s.filter.push(w.clone()),
        }
    }
    s.filter.extend(after.iter().cloned());
    Ok(s)
}

/// The inputs of a command that takes no filter words (`timeline`,
/// `index`): every word, checked by the same rule (a filter word is
/// [`WordsError::NotAnInput`], or ambiguous where it names something).
pub fn inputs_only(words: &[String]) -> Result<Vec<String>, WordsError> {
    inputs_only_in(words, &names)
}

/// [`inputs_only`] with `names` saying what exists.
pub fn inputs_only_in(
    words: &[String],
    names: &dyn Fn(&str) -> Option<Names>,
) -> Result<Vec<String>, WordsError> {
    for w in words {
        if looks_like_input(w) || !is_filter_word(w) {
            continue;
        }
        let word = w.clone();
        return Err(match names(w) {
            Some(names) => WordsError::Ambiguous { word, names },
            None => WordsError::NotAnInput { word },
        });
    }
    Ok(words.to_vec())
}

/// The filter words of a command whose trailing words are only a filter
/// (`record`, `ctl dump`, `filter`): `words` (before the separator) and
/// `after`. Err: a first word before the separator that is a filter word
/// naming a file here (a directory is nothing these commands read:
/// `record -w /data src host X` in a directory holding `src/` is the
/// filter).
pub fn filter_only(words: &[String], after: &[String]) -> Result<Vec<String>, WordsError> {
    filter_only_in(words, after, &names)
}

/// [`filter_only`] with `names` saying what exists.
pub fn filter_only_in(
    words: &[String],
    after: &[String],
    names: &dyn Fn(&str) -> Option<Names>,
) -> Result<Vec<String>, WordsError> {
    if let Some(w) = words.first() {
        if names(w) == Some(Names::File) && is_filter_word(w) {
            return Err(WordsError::Ambiguous {
                word: w.clone(),
                names: Names::File,
            });
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
            "tcp" => Some(Names::File),
            "store" => Some(Names::Directory),
            _ => None,
        };
        let split_ = |w: &[&str], a: &[&str]| split_in(&v(w), &v(a), &here);
        let s = split_(&["/no/such", "udp", "port", "80"], &[]).unwrap();
        assert_eq!((s.inputs, s.filter.len()), (v(&["/no/such"]), 3));
        let s = split_(
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
        assert_eq!((s.inputs.len(), s.filter.len()), (4, 2));
        let s = split_(&["store", "store", "udp"], &["tcp"]).unwrap();
        assert_eq!((s.inputs.len(), s.filter), (2, v(&["udp", "tcp"])));
        let s = split_(&["store", "./tcp"], &["tcp"]).unwrap();
        assert_eq!((s.inputs, s.filter), (v(&["store", "./tcp"]), v(&["tcp"])));
        let e = split_(&["store", "tcp"], &[]).unwrap_err();
        assert_eq!(
            e,
            WordsError::Ambiguous {
                word: "tcp".into(),
                names: Names::File
            }
        );
        assert_eq!(e.to_string(), "'tcp' is both a file here and a filter word");
        let e = split_(&["udp", "port", "53"], &[]).unwrap_err();
        assert_eq!(e, WordsError::FilterFirst { word: "udp".into() });
        // After the filter starts, a word is the filter's whatever exists.
        let s = split_(&["store", "udp", "or", "tcp"], &[]).unwrap();
        assert_eq!(s.filter, v(&["udp", "or", "tcp"]));
        // Inputs only.
        let only = |w: &[&str]| inputs_only_in(&v(w), &here);
        assert!(only(&["store", "./tcp"]).is_ok());
        assert!(matches!(
            only(&["store", "tcp"]),
            Err(WordsError::Ambiguous {
                names: Names::File,
                ..
            })
        ));
        assert_eq!(
            only(&["store", "udp"]),
            Err(WordsError::NotAnInput { word: "udp".into() })
        );
        // A filter alone.
        let fo = |w: &[&str], a: &[&str]| filter_only_in(&v(w), &v(a), &here);
        assert!(matches!(
            fo(&["tcp", "port", "80"], &[]),
            Err(WordsError::Ambiguous { .. })
        ));
        assert_eq!(fo(&[], &["tcp"]).unwrap(), v(&["tcp"]));
        assert_eq!(fo(&["udp"], &[]).unwrap(), v(&["udp"]));
        let store_then = fo(&["store", "host", "10.0.0.1"], &[]).unwrap();
        assert_eq!(store_then.len(), 3, "a directory is no filter file");
        // No error names a flag: the command line adds its own.
        for e in [
            WordsError::FilterFirst { word: "udp".into() },
            WordsError::NotAnInput { word: "udp".into() },
            WordsError::Ambiguous {
                word: "tcp".into(),
                names: Names::Directory,
            },
        ] {
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
