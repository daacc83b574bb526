//! Inputs and filter words on one command line: the rule is the query
//! crate's (`query::words`: which words are inputs, which the filter, and
//! which cannot be read one way for sure); this says its refusals with the
//! command line's ways to mean either reading (`./WORD`, `-- WORD`, `-F`).

use wiretape::query::words::{self, WordsError};

/// How to mean the filter: after `--`.
fn as_filter(w: &str) -> String {
    format!("put the filter after -- (-- {w} ...)")
}

/// The refusal `e` in the command's words: `fix` says how to mean either
/// reading of an ambiguous word, `only` what a filter word is refused for
/// where only inputs are taken.
fn line(e: WordsError, fix: impl Fn(&str, &str) -> String, only: &str) -> String {
    match e {
        WordsError::Ambiguous { word, names } => format!(
            "'{word}' is both a {names} here and a filter word: {}",
            fix(&word, &names.to_string())
        ),
        WordsError::FilterFirst { word } => format!(
            "'{word}' is a filter word, not a file or directory here: give the inputs first \
             (a store directory, capture files, https:// sensors), then the filter"
        ),
        WordsError::NotAnInput { word } => {
            format!("'{word}' is a filter word, not a file or directory here: {only}")
        }
        other => other.to_string(),
    }
}

/// The inputs and the filter words of a command that takes both
/// (`extract`; `after`: the words after `--`). Err: the one-line usage
/// error of an ambiguous word.
pub(crate) fn split(
    words: &[String],
    after: &[String],
) -> Result<(Vec<String>, Vec<String>), String> {
    let s = words::split(words, after).map_err(|e| {
        line(
            e,
            |w, k| format!("write ./{w} for the {k}, or {}", as_filter(w)),
            "",
        )
    })?;
    Ok((s.inputs, s.filter))
}

/// The inputs of a command that takes no filter words (`timeline`,
/// `index`). Err: a word that reads as a filter (`hint`: where this
/// command takes a filter, if anywhere), or one that is ambiguous.
pub(crate) fn inputs_only(words: &[String], cmd: &str, hint: &str) -> Result<Vec<String>, String> {
    let only = format!("{cmd} takes no filter words{hint}");
    words::inputs_only(words)
        .map_err(|e| line(e, |w, k| format!("write ./{w} for the {k}; {only}"), &only))
}

/// The filter words of a command whose trailing words are only a filter
/// (`record`, `ctl dump`, `filter`). Err: a first word before `--` that
/// is a filter word naming a file here, which `-F` could have meant.
pub(crate) fn filter_only(words: &[String], after: &[String]) -> Result<Vec<String>, String> {
    words::filter_only(words, after).map_err(|e| {
        line(
            e,
            |w, k| format!("-F {w} reads the filter from the {k}, or {}", as_filter(w)),
            "",
        )
    })
}
