//! A command's options from a TOML file (what a service reads:
//! `/etc/wiretape/eth0.conf` for a recording, `/etc/wiretape/api.conf` for
//! the API), as the command-line arguments they stand for.
//!
//! Keys are the long names of the command's flags (`rotate-size`, or
//! `rotate_size`; `create` is `mkdir`), values as on a command line:
//! strings, numbers, `true` for a switch (`false` leaves it off), arrays for
//! lists (`queues = [0, 1]` → `--queues=0,1`) and for a flag given once per
//! value (`write = ["/a", "/b"]` → `--write=/a --write=/b`); where the
//! command takes a capture filter, `filter` is its expression. A flag the
//! command line gives itself ([`Flag::given`]) is left out: the command
//! line wins.
//!
//! The command is described by its flags ([`Command`], [`Flag`]), not by a
//! parser's types: the caller builds the list from its own (the CLI from
//! clap's), parses the arguments [`read`] returns together with the
//! command line's, and so every flag, its checks and its defaults work the
//! same from a file. A key that is no flag, a value of the wrong type and a
//! file that is not TOML are a [`ConfigError`] naming the file, the key and
//! the fix.
//!
//! ```
//! use wiretape_pipeline::options::file::{parse, Command, Flag};
//! let flags = [Flag::value("interface"), Flag::switch("quiet"), Flag::value("queues")];
//! let mut record = Command::new("wiretape record", &flags);
//! record.filter = true;
//! let text = "interface = \"eth0\"\nqueues = [0, 1]\nquiet = true\nfilter = \"tcp port 443\"";
//! let args = parse(text, "eth0.conf".as_ref(), &record).unwrap();
//! assert_eq!(args.flags, ["--interface=eth0", "--queues=0,1", "--quiet"]);
//! assert_eq!(args.filter, ["tcp", "port", "443"]);
//! ```

use std::path::{Path, PathBuf};

/// One flag of the command a file is for ([`Flag::switch`],
/// [`Flag::value`], [`Flag::repeated`]; then set [`Flag::given`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Flag<'a> {
    /// Its long name, without `--` (`rotate-size`): the file's key.
    pub long: &'a str,
    /// It takes a value (`--rotate-size 1G`); without one it is a switch
    /// (`--quiet`), a key taking `true` or `false`.
    pub takes_value: bool,
    /// It is given once per value (`--write /a --write /b`), so an array
    /// becomes one flag per element; otherwise an array is one
    /// comma-separated value (`--queues 0,1`).
    pub repeatable: bool,
    /// The command line gives it: the file's key is left out.
    pub given: bool,
}

impl<'a> Flag<'a> {
    /// A switch (takes no value).
    pub const fn switch(long: &'a str) -> Flag<'a> {
        Flag {
            long,
            takes_value: false,
            repeatable: false,
            given: false,
        }
    }

    /// A flag taking one value (a list: comma-separated).
    pub const fn value(long: &'a str) -> Flag<'a> {
        Flag {
            takes_value: true,
            ..Flag::switch(long)
        }
    }

    /// A flag given once per value.
    pub const fn repeated(long: &'a str) -> Flag<'a> {
        Flag {
            repeatable: true,
            ..Flag::value(long)
        }
    }
}

/// The command a file is for: its name and its flags ([`Command::new`],
/// then set what differs).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Command<'a> {
    /// How a user calls it (`wiretape record`): the unknown-key error
    /// names it.
    pub name: &'a str,
    /// The flags a file may give (those that make no sense there, like the
    /// one naming the file, left out).
    pub flags: &'a [Flag<'a>],
    /// It takes a capture filter: the key `filter` is its expression.
    pub filter: bool,
    /// The command line gives the filter itself: the file's is left out.
    pub filter_given: bool,
    /// Keys the unknown-key error gives as examples (`rotate-size`).
    pub examples: &'a [&'a str],
}

impl<'a> Command<'a> {
    /// `name` with `flags`, taking no filter.
    pub fn new(name: &'a str, flags: &'a [Flag<'a>]) -> Command<'a> {
        Command {
            name,
            flags,
            ..Command::default()
        }
    }
}

/// The arguments a file stands for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileArgs {
    /// Flags, each one argument `--long=value` (or `--long` for a switch),
    /// in the file's key order (sorted).
    pub flags: Vec<String>,
    /// The words of the filter expression (empty without one): they go
    /// after `--`, never taken for a file name.
    pub filter: Vec<String>,
}

/// What is wrong with a file: each error names the file, the key and the
/// fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("cannot read the config file {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("config {}: not valid TOML: {message}", file.display())]
    Toml {
        /// The file.
        file: PathBuf,
        /// The parser's message (one line: the line, the column and what
        /// it expected).
        message: String,
    },
    /// A key that is none of the command's flags.
    #[error(
        "config {}: unknown key '{key}' (keys are the long flag names of `{command}`, e.g. {examples})",
        file.display()
    )]
    UnknownKey {
        /// The file.
        file: PathBuf,
        /// The key as written.
        key: String,
        /// The command ([`Command::name`]).
        command: String,
        /// Keys it takes ([`Command::examples`], and `filter` where it
        /// takes one).
        examples: String,
    },
    /// `filter` with a value that is no string.
    #[error("config {}: '{key}' is the filter expression: give a string", file.display())]
    Filter {
        /// The file.
        file: PathBuf,
        /// The key as written.
        key: String,
    },
    /// A switch with a value that is no boolean.
    #[error("config {}: '{key}' is a switch: give true or false", file.display())]
    Switch {
        /// The file.
        file: PathBuf,
        /// The key as written.
        key: String,
    },
    /// A flag's value (or an element of its array) that is neither a
    /// string nor a number.
    #[error("config {}: '{key}': give a string or a number", file.display())]
    Value {
        /// The file.
        file: PathBuf,
        /// The key as written.
        key: String,
    },
}

/// The arguments the file `path` stands for, as [`parse`] makes them.
pub fn read(path: &Path, command: &Command) -> Result<FileArgs, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        file: path.to_owned(),
        source,
    })?;
    parse(&text, path, command)
}

/// The arguments the TOML `text` (of the file `path`, named in errors)
/// stands for: see the module docs.
pub fn parse(text: &str, path: &Path, command: &Command) -> Result<FileArgs, ConfigError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Toml {
        file: path.to_owned(),
        message: e.to_string().replace('\n', " "),
    })?;
    let mut out = FileArgs::default();
    for (key, value) in &table {
        let bad = |make: fn(PathBuf, String) -> ConfigError| make(path.to_owned(), key.clone());
        let long = key.replace('_', "-");
        // `create = true`: the flag is --mkdir (create the whole -w path).
        let long = if long == "create" {
            "mkdir".into()
        } else {
            long
        };
        if long == "filter" && command.filter {
            if command.filter_given {
                continue;
            }
            let toml::Value::String(s) = value else {
                return Err(bad(|file, key| ConfigError::Filter { file, key }));
            };
            out.filter.extend(s.split_whitespace().map(String::from));
            continue;
        }
        let Some(flag) = command.flags.iter().find(|f| f.long == long) else {
            let mut examples = command.examples.join(", ");
            if command.filter {
                examples.push_str(", and filter");
            }
            return Err(ConfigError::UnknownKey {
                file: path.to_owned(),
                key: key.clone(),
                command: command.name.to_string(),
                examples,
            });
        };
        if flag.given {
            continue; // the command line wins
        }
        let text = |v: &toml::Value| match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            _ => Err(bad(|file, key| ConfigError::Value { file, key })),
        };
        match value {
            toml::Value::Boolean(b) if !flag.takes_value => {
                if *b {
                    out.flags.push(format!("--{long}"));
                }
            }
            _ if !flag.takes_value => {
                return Err(bad(|file, key| ConfigError::Switch { file, key }))
            }
            toml::Value::Array(list) => {
                let parts = list.iter().map(text).collect::<Result<Vec<_>, _>>()?;
                if flag.repeatable {
                    out.flags
                        .extend(parts.iter().map(|p| format!("--{long}={p}")));
                } else {
                    out.flags.push(format!("--{long}={}", parts.join(",")));
                }
            }
            v => out.flags.push(format!("--{long}={}", text(v)?)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: [Flag; 9] = [
        Flag::repeated("interface"),
        Flag::repeated("write"),
        Flag::value("rotate-size"),
        Flag::value("keep-files"),
        Flag::value("queues"),
        Flag::value("count"),
        Flag::switch("wait-iface"),
        Flag::switch("quiet"),
        Flag::switch("mkdir"),
    ];

    fn record<'a>(flags: &'a [Flag<'a>]) -> Command<'a> {
        Command {
            name: "wiretape record",
            flags,
            filter: true,
            filter_given: false,
            examples: &["rotate-size"],
        }
    }

    fn args(text: &str, command: &Command) -> Result<FileArgs, ConfigError> {
        parse(text, Path::new("t.conf"), command)
    }

    #[test]
    fn keys_are_long_flags_and_the_command_line_wins() {
        let text = r#"
            interface = "eth0"
            write = "/data"
            rotate-size = "1G"
            keep_files = 10
            queues = [0, 1]
            wait-iface = true
            quiet = false
            create = true
            filter = "tcp port 443"
        "#;
        let a = args("interface = [\"a\", \"b\"]", &record(&FLAGS)).unwrap();
        assert_eq!(a.flags, ["--interface=a", "--interface=b"]);
        let mut flags = FLAGS;
        flags[3].given = true; // keep-files
        let a = args(text, &record(&flags)).unwrap();
        assert_eq!(
            a.flags,
            [
                "--mkdir",
                "--interface=eth0",
                "--queues=0,1",
                "--rotate-size=1G",
                "--wait-iface",
                "--write=/data"
            ]
        );
        assert_eq!(a.filter, ["tcp", "port", "443"]);
        let given = Command {
            filter_given: true,
            ..record(&FLAGS)
        };
        assert!(args(text, &given).unwrap().filter.is_empty());
        // Given on the command line, even a wrong filter value is left out.
        assert!(args("filter = 1", &given).is_ok());
    }

    #[test]
    fn filter_is_a_key_only_where_the_command_takes_one() {
        let api = Command {
            name: "wiretape api",
            flags: &FLAGS,
            filter: false,
            filter_given: false,
            examples: &["listen", "tls-cert"],
        };
        let e = args("filter = \"udp\"", &api).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config t.conf: unknown key 'filter' (keys are the long flag names of \
             `wiretape api`, e.g. listen, tls-cert)"
        );
    }

    #[test]
    fn unknown_keys_wrong_types_and_bad_toml_name_the_file_key_and_fix() {
        for (text, want) in [
            (
                "rotate-sise = \"1G\"",
                "config t.conf: unknown key 'rotate-sise' (keys are the long flag names of \
                 `wiretape record`, e.g. rotate-size, and filter)",
            ),
            (
                "wait-iface = 1",
                "config t.conf: 'wait-iface' is a switch: give true or false",
            ),
            (
                "quiet = [true]",
                "config t.conf: 'quiet' is a switch: give true or false",
            ),
            (
                "count = true",
                "config t.conf: 'count': give a string or a number",
            ),
            (
                "queues = [0, true]",
                "config t.conf: 'queues': give a string or a number",
            ),
            (
                "filter = [\"tcp\"]",
                "config t.conf: 'filter' is the filter expression: give a string",
            ),
        ] {
            let e = args(text, &record(&FLAGS)).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
        let e = args("write = ", &record(&FLAGS)).unwrap_err();
        assert!(matches!(e, ConfigError::Toml { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.starts_with("config t.conf: not valid TOML: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = read(Path::new("/nonexistent/x.conf"), &record(&FLAGS)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read the config file /nonexistent/x.conf: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }
}
