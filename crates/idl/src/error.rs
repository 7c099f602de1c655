//! The front end's error: what was wrong and where (`line:col`), for every
//! rejected IDL text, and the I/O failures of the build helper.
//!
//! ```
//! let src = "interface i {\n  union u;\n};\n";
//! let e = idl::parse(src).unwrap_err();
//! assert_eq!(e.pos(), idl::Pos { line: 2, col: 3 });
//! assert_eq!(e.to_string(), "2:3: `union` is not supported (unions are outside the IDL4 subset)");
//! assert_eq!(e.render(src), "2:3: `union` is not supported (unions are outside the IDL4 subset)\n  union u;\n  ^\n");
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::{LimitName, Pos};

/// Why an IDL text was rejected (or could not be read or written).
#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    /// The text does not lex or parse: an unexpected character or token.
    #[error("{0}")]
    Syntax(String),
    /// A construct of CORBA IDL or MIDL outside the subset this compiler
    /// accepts (IDL4's: no `any`, floating point, unions, exceptions,
    /// attributes, `oneway`, inheritance, ...).
    #[error("{what} is not supported ({why})")]
    Unsupported {
        /// The construct, e.g. "`union`".
        what: String,
        /// Why, or what to write instead.
        why: String,
    },
    /// The text parses but breaks a static rule: an undeclared or
    /// duplicate name, a type where it may not be, a wrong `size_is`.
    #[error("{0}")]
    Check(String),
    /// Two declarations whose names clash: they differ only in case (one
    /// name in CORBA IDL), or the generated C or Rust would give them the
    /// same identifier. The error's position is `second`'s; `first` is
    /// the earlier declaration, at `first_pos`.
    #[error("{second} clashes with {first} at {first_pos}: {why}")]
    Clash {
        /// The earlier declaration, e.g. "operation `a` of interface `I`".
        first: String,
        /// Where the earlier declaration is.
        first_pos: Pos,
        /// The later declaration (at the error's position).
        second: String,
        /// How they clash, e.g. "names that differ only in case are one
        /// name in IDL".
        why: String,
    },
    /// A name the generated code cannot take: the run time's prefix
    /// `idl_`, or a name the C standard headers it includes define
    /// (`INT32_MAX`, `size_t`, `memset`, ...).
    #[error("`{name}` is reserved: {why}; choose another name")]
    Reserved {
        /// The name.
        name: String,
        /// Whose it is.
        why: String,
    },
    /// An interface or operation exceeds a limit: one of the configured
    /// [`crate::Limits`] (named by `limit`, and by the message as
    /// `(Limits::max_record)`), or a fixed one of the wire (`limit` is
    /// `None`).
    #[error("{message}{}", limit.map(|l| format!(" (Limits::{})", l.field())).unwrap_or_default())]
    Limit {
        /// What exceeded what, e.g. "the message record of `f` is 4100
        /// bytes, more than the limit of 4096".
        message: String,
        /// The configured limit it exceeds, if any.
        limit: Option<LimitName>,
    },
    /// Reading the IDL file or writing the generated code failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. "cannot read pfs.idl".
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

/// An error of the IDL front end or of the build helper: a [`Pos`] in the
/// source (`0:0` when the error is not at a place in it, as an I/O error),
/// the file when known, and what was wrong.
///
/// Displays as `line:col: message` (`file:line:col: message` with a file).
#[derive(Debug)]
pub struct CompileError {
    pos: Pos,
    kind: ErrorKind,
    file: Option<PathBuf>,
}

impl CompileError {
    /// An error of `kind` at `pos`.
    pub fn new(pos: Pos, kind: ErrorKind) -> CompileError {
        CompileError {
            pos,
            kind,
            file: None,
        }
    }

    /// A syntax error at `pos`.
    pub fn syntax(pos: Pos, msg: impl Into<String>) -> CompileError {
        CompileError::new(pos, ErrorKind::Syntax(msg.into()))
    }

    /// An unsupported construct `what` at `pos`, with why or what to write
    /// instead.
    pub fn unsupported(pos: Pos, what: impl Into<String>, why: impl Into<String>) -> CompileError {
        CompileError::new(
            pos,
            ErrorKind::Unsupported {
                what: what.into(),
                why: why.into(),
            },
        )
    }

    /// A broken static rule at `pos`.
    pub fn check(pos: Pos, msg: impl Into<String>) -> CompileError {
        CompileError::new(pos, ErrorKind::Check(msg.into()))
    }

    /// A clash of `second` (at `pos`) with `first` (at `first_pos`).
    pub fn clash(
        pos: Pos,
        second: impl Into<String>,
        first: impl Into<String>,
        first_pos: Pos,
        why: impl Into<String>,
    ) -> CompileError {
        CompileError::new(
            pos,
            ErrorKind::Clash {
                first: first.into(),
                first_pos,
                second: second.into(),
                why: why.into(),
            },
        )
    }

    /// An exceeded fixed limit at `pos`.
    pub fn limit(pos: Pos, msg: impl Into<String>) -> CompileError {
        CompileError::new(
            pos,
            ErrorKind::Limit {
                message: msg.into(),
                limit: None,
            },
        )
    }

    /// An exceeded configured limit, `limit`, at `pos`.
    pub fn limit_of(pos: Pos, msg: impl Into<String>, limit: LimitName) -> CompileError {
        CompileError::new(
            pos,
            ErrorKind::Limit {
                message: msg.into(),
                limit: Some(limit),
            },
        )
    }

    /// An I/O failure while doing `what` (no source position).
    pub fn io(what: impl Into<String>, source: std::io::Error) -> CompileError {
        CompileError::new(
            Pos::default(),
            ErrorKind::Io {
                what: what.into(),
                source,
            },
        )
    }

    /// The same error, naming the file it is in.
    pub fn with_file(mut self, file: impl AsRef<Path>) -> CompileError {
        self.file = Some(file.as_ref().to_path_buf());
        self
    }

    /// Where in the source: 1-based line and column (in characters);
    /// `0:0` for an error that is not at a place in the source.
    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// What was wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file, if the error was given one ([`CompileError::with_file`]).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The message without the position.
    pub fn message(&self) -> String {
        self.kind.to_string()
    }

    /// The error as [`Display`](fmt::Display) shows it, then the source
    /// line it points into and a caret under its column (tabs kept, so
    /// the caret lines up; a leading byte-order mark, which takes no
    /// column, left out). Without a position, or when `src` has no such
    /// line, just the error.
    pub fn render(&self, src: &str) -> String {
        let mut out = format!("{self}\n");
        if self.pos.line == 0 {
            return out;
        }
        let Some(line) = src.split('\n').nth(self.pos.line as usize - 1) else {
            return out;
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        let line = match self.pos.line {
            1 => line.strip_prefix(crate::lexer::BOM).unwrap_or(line),
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
        for c in line.chars().take(self.pos.col.saturating_sub(1) as usize) {
            out.push(if c == '\t' { '\t' } else { ' ' });
        }
        out.push_str("^\n");
        out
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}:", file.display())?;
            if self.pos.line == 0 {
                f.write_str(" ")?;
            }
        }
        if self.pos.line != 0 {
            write!(f, "{}: ", self.pos)?;
        }
        write!(f, "{}", self.kind)
    }
}

impl std::error::Error for CompileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
