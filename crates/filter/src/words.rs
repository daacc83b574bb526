//! The words of tcpdump's filter language, for telling a filter from a
//! file name on a command line ([`is_filter_word`]) and for pointing at a
//! syntax error and its likely fix ([`locate_syntax_error`], [`suggest`]).

/// Every keyword libpcap's scanner knows (libpcap 1.10 `scanner.l`), lower
/// case: a word that is one of these (or begins `KEYWORD[`) reads as the
/// start of a filter expression.
pub const KEYWORDS: &[&str] = &[
    "aarp",
    "action",
    "addr1",
    "addr2",
    "addr3",
    "addr4",
    "address1",
    "address2",
    "address3",
    "address4",
    "ah",
    "and",
    "arp",
    "atalk",
    "bcc",
    "broadcast",
    "byte",
    "carp",
    "clnp",
    "connectmsg",
    "csnp",
    "decnet",
    "dir",
    "direction",
    "dpc",
    "dst",
    "es-is",
    "esis",
    "esp",
    "ether",
    "fddi",
    "fisu",
    "gateway",
    "geneve",
    "greater",
    "hdpc",
    "hfisu",
    "hlssu",
    "hmsu",
    "hopc",
    "host",
    "hsio",
    "hsls",
    "icmp",
    "icmp6",
    "ifindex",
    "ifname",
    "igmp",
    "igrp",
    "iih",
    "ilmic",
    "inbound",
    "ip",
    "ip6",
    "ipx",
    "is-is",
    "isis",
    "iso",
    "l1",
    "l2",
    "lane",
    "lat",
    "len",
    "less",
    "link",
    "llc",
    "lsp",
    "lssu",
    "mask",
    "metac",
    "metaconnect",
    "mopdl",
    "moprc",
    "mpls",
    "msu",
    "multicast",
    "net",
    "netbeui",
    "not",
    "oam",
    "oamf4",
    "oamf4ec",
    "oamf4sc",
    "on",
    "opc",
    "or",
    "outbound",
    "pim",
    "port",
    "portrange",
    "ppp",
    "pppoed",
    "pppoes",
    "proto",
    "protochain",
    "psnp",
    "ra",
    "radio",
    "rarp",
    "reason",
    "rnr",
    "rset",
    "rulenum",
    "sc",
    "sca",
    "sctp",
    "sio",
    "slip",
    "sls",
    "snp",
    "src",
    "srnr",
    "stp",
    "subrulenum",
    "subtype",
    "ta",
    "tcp",
    "tr",
    "type",
    "udp",
    "vci",
    "vlan",
    "vpi",
    "vrrp",
    "wlan",
];

/// The keywords a "did you mean" may offer: those people write every day
/// (a rare keyword one letter from a typo would mislead more than help).
const COMMON: &[&str] = &[
    "and",
    "arp",
    "broadcast",
    "dst",
    "ether",
    "gateway",
    "greater",
    "host",
    "icmp",
    "icmp6",
    "igmp",
    "inbound",
    "ip",
    "ip6",
    "len",
    "less",
    "mpls",
    "multicast",
    "net",
    "not",
    "or",
    "outbound",
    "port",
    "portrange",
    "proto",
    "rarp",
    "sctp",
    "src",
    "tcp",
    "udp",
    "vlan",
];

/// Whether `word` (one command-line word) reads as the start of a filter
/// expression: a keyword (`tcp`, `host`, `not` ...), a keyword followed by
/// `[` (`tcp[13]`), or `(` / `!` / a word with a space in it that starts
/// with one of these (`'tcp port 80'` given as one word).
pub fn is_filter_word(word: &str) -> bool {
    let w = word.trim();
    if w.starts_with('(') || w.starts_with('!') {
        return true;
    }
    let first = w
        .split(|c: char| c.is_whitespace() || c == '[')
        .next()
        .unwrap_or("");
    KEYWORDS.contains(&first.to_ascii_lowercase().as_str())
}

/// The common keywords `word` is most likely a typo of (one or two letters
/// off, or two swapped: `tpc` -> `tcp`, `prt` -> `port`): those nearest,
/// at most three; empty for a keyword itself, numbers, addresses and words
/// far from every keyword.
pub fn suggestions(word: &str) -> Vec<&'static str> {
    let w = word.to_ascii_lowercase();
    if w.len() < 2 || !w.bytes().all(|b| b.is_ascii_lowercase() || b == b'6') {
        return Vec::new();
    }
    if KEYWORDS.contains(&w.as_str()) {
        return Vec::new();
    }
    // Two edits only for words long enough that two edits leave most of it.
    let most = if w.len() >= 4 { 2 } else { 1 };
    let mut near: Vec<(usize, &'static str)> = COMMON
        .iter()
        .map(|k| (distance(&w, k), *k))
        .filter(|(d, _)| *d <= most)
        .collect();
    let Some(best) = near.iter().map(|n| n.0).min() else {
        return Vec::new();
    };
    near.retain(|n| n.0 == best);
    if near.len() > 3 {
        return Vec::new();
    }
    near.into_iter().map(|n| n.1).collect()
}

/// [`suggestions`] as a phrase: `'tcp'`, `'port' or 'proto'`; None when
/// there are none.
pub fn suggest(word: &str) -> Option<String> {
    let s: Vec<String> = suggestions(word).iter().map(|k| format!("'{k}'")).collect();
    match s.len() {
        0 => None,
        1 => Some(s[0].clone()),
        n => Some(format!("{} or {}", s[..n - 1].join(", "), s[n - 1])),
    }
}

/// Edits (insert, delete, replace, swap two neighbours) from `a` to `b`.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// What follows a prefix of an expression when asking "can this prefix
/// still become a valid expression?": an argument, an operand, a closing
/// bracket or parenthesis. Numbers and addresses only: no name is looked up.
const CONTINUATIONS: &[&str] = &[
    "1", "ip", "1 = 1", "1.1.1.1", "and ip", "1 and ip", ")", "1)", "= 1", "] = 1", "1] = 1",
    ":1] = 1", "1:1] = 1",
];

/// Where a syntax error is, as a phrase for libpcap's "syntax error": the
/// first word (whitespace-separated) at which no continuation makes the
/// words so far a valid expression (`at 'prt' (word 2 of 3)`, with `: did
/// you mean 'port'?` when it is a typo of a keyword), or `at its end: ...`
/// when every prefix can go on but the whole stops too soon. `compiles`
/// says whether libpcap parses an expression (a refusal other than a
/// syntax error counts as parsing). None when no word can be blamed.
pub fn locate_syntax_error(expr: &str, compiles: &mut dyn FnMut(&str) -> bool) -> Option<String> {
    let words: Vec<&str> = expr.split_whitespace().collect();
    let n = words.len();
    let started = std::time::Instant::now();
    for k in 1..=n {
        // A slow resolver (a name in the prefix) must not hold up the error.
        if started.elapsed() > std::time::Duration::from_secs(2) {
            return None;
        }
        let prefix = words[..k].join(" ");
        let viable = compiles(&prefix)
            || CONTINUATIONS
                .iter()
                .any(|c| compiles(&format!("{prefix} {c}")) || compiles(&format!("{prefix}{c}")));
        if !viable {
            let w = words[k - 1];
            // The word before may be the typo that made this one wrong
            // (`tpc port`: `tpc` is read as a name, `port` then fails).
            let blamed = suggest(w).map(|s| (k, w, s)).or_else(|| {
                (k > 1)
                    .then(|| suggest(words[k - 2]).map(|s| (k - 1, words[k - 2], s)))
                    .flatten()
            });
            return Some(match blamed {
                Some((i, w, s)) => format!("at '{w}' (word {i} of {n}): did you mean {s}?"),
                // A whole expression, then a primitive: `and`/`or` left out.
                None if k > 1 && is_filter_word(w) && compiles(&words[..k - 1].join(" ")) => {
                    format!("at '{w}' (word {k} of {n}): 'and' or 'or' missing before it?")
                }
                None => format!("at '{w}' (word {k} of {n})"),
            });
        }
    }
    let last = words.last()?;
    Some(format!(
        "at its end: it stops after '{last}' where more must follow (an argument, an operand, a closing parenthesis)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_words_and_suggestions() {
        for w in [
            "tcp",
            "TCP",
            "host",
            "not",
            "(tcp",
            "!udp",
            "tcp[13]",
            "tcp port 80",
        ] {
            assert!(is_filter_word(w), "{w}");
        }
        for w in ["data", "store", "./tcp", "x.pcap", "10.0.0.1", "tpc"] {
            assert!(!is_filter_word(w), "{w}");
        }
        assert_eq!(suggest("tpc").as_deref(), Some("'tcp'"));
        assert_eq!(suggest("prt").as_deref(), Some("'port'"));
        assert_eq!(suggest("hots").as_deref(), Some("'host'"));
        assert_eq!(suggest("upd").as_deref(), Some("'udp'"));
        assert_eq!(suggest("prot").as_deref(), Some("'port' or 'proto'"));
        assert_eq!(suggest("tcp"), None);
        assert_eq!(suggest("80"), None);
        assert_eq!(suggest("example"), None);
    }
}
