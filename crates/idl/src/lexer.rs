//! The lexer: IDL text to tokens with their positions.
//!
//! Tokens are identifiers (letters, digits and `_`, not starting with a
//! digit; keywords are identifiers, the parser decides), integer literals
//! (decimal, `0x` hexadecimal, `0` octal as in C and CORBA, at most
//! 2^64 - 1) and the punctuation of the language. `//` and `/* */`
//! comments and white space are skipped. Positions are 1-based lines and
//! columns counted in characters. A UTF-8 byte-order mark (U+FEFF) at the
//! very start of the text is skipped and counts for no column, as editors
//! that write one show the file; anywhere else it is an unexpected
//! character.
//!
//! `<<` and `>>` are not tokens: `sequence<sequence<long>>` closes two
//! sequences, and the constant-expression parser reads a shift as two
//! adjacent `<` or `>`.
//!
//! Rejected here, each with its position: preprocessor directives (`#`),
//! string and character literals, floating-point literals, and any other
//! character.

use crate::error::CompileError;
use crate::model::Pos;

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer literal (0 ..= 2^64 - 1).
    Int(u64),
    /// Punctuation.
    Sym(&'static str),
    /// The end of the input.
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Int(v) => write!(f, "`{v}`"),
            Tok::Sym(s) => write!(f, "`{s}`"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

/// A token and where it begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    /// The token.
    pub tok: Tok,
    /// Where it begins.
    pub pos: Pos,
}

/// Punctuation, longest first.
const SYMS: &[&str] = &[
    "::", "{", "}", "(", ")", "[", "]", "<", ">", ";", ",", ":", "*", "=", "+", "-", "/", "%", "~",
    "&", "|", "^",
];

/// The byte-order mark, as a character.
pub(crate) const BOM: char = '\u{feff}';

/// Splits `src` into tokens, the last one [`Tok::Eof`]; a leading
/// byte-order mark is no token and takes no column.
pub(crate) fn lex(src: &str) -> Result<Vec<Token>, CompileError> {
    let src = src.strip_prefix(BOM).unwrap_or(src);
    let mut lx = Lexer {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
    };
    let mut out = Vec::new();
    loop {
        lx.skip_blank()?;
        let pos = lx.pos();
        let Some(c) = lx.peek(0) else {
            out.push(Token { tok: Tok::Eof, pos });
            return Ok(out);
        };
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            let mut s = String::new();
            while let Some(c) = lx
                .peek(0)
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                s.push(c);
                lx.bump();
            }
            Tok::Ident(s)
        } else if c.is_ascii_digit() {
            Tok::Int(lx.number(pos)?)
        } else if let Some(s) = SYMS.iter().find(|s| lx.starts_with(s)) {
            for _ in 0..s.len() {
                lx.bump();
            }
            Tok::Sym(s)
        } else {
            return Err(match c {
                '#' => CompileError::unsupported(
                    pos,
                    "a preprocessor directive (`#`)",
                    "an IDL file here is self-contained: no #include, #define or #pragma",
                ),
                '"' => CompileError::unsupported(
                    pos,
                    "a string literal",
                    "constants are integers; there is no #include or import",
                ),
                '\'' => CompileError::unsupported(
                    pos,
                    "a character literal",
                    "constants are integers: write the character's code",
                ),
                BOM => CompileError::syntax(
                    pos,
                    "unexpected byte-order mark U+FEFF (one is allowed only at the start of the file)",
                ),
                c if c.is_control() => {
                    CompileError::syntax(pos, format!("unexpected character U+{:04X}", c as u32))
                }
                c => CompileError::syntax(pos, format!("unexpected character `{c}`")),
            });
        };
        out.push(Token { tok, pos });
    }
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
}

impl Lexer {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).copied()
    }

    fn starts_with(&self, s: &str) -> bool {
        s.chars().enumerate().all(|(k, c)| self.peek(k) == Some(c))
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek(0) {
            self.i += 1;
            if c == '\n' {
                self.line = self.line.saturating_add(1);
                self.col = 1;
            } else {
                self.col = self.col.saturating_add(1);
            }
        }
    }

    /// Skips white space and comments.
    fn skip_blank(&mut self) -> Result<(), CompileError> {
        loop {
            match self.peek(0) {
                Some(c) if c.is_whitespace() => self.bump(),
                Some('/') if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                Some('/') if self.peek(1) == Some('*') => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        if self.starts_with("*/") {
                            self.bump();
                            self.bump();
                            break;
                        }
                        if self.peek(0).is_none() {
                            return Err(CompileError::syntax(start, "`/*` comment is not closed"));
                        }
                        self.bump();
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// An integer literal starting at `pos`: decimal, `0x` hexadecimal or
    /// `0` octal.
    fn number(&mut self, pos: Pos) -> Result<u64, CompileError> {
        let mut text = String::new();
        while let Some(c) = self
            .peek(0)
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            text.push(c);
            self.bump();
        }
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            return Err(CompileError::unsupported(
                pos,
                "a floating-point literal",
                "the IDL's numbers are integers",
            ));
        }
        let (digits, radix) = if let Some(h) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
            (h, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (&text[1..], 8)
        } else {
            (text.as_str(), 10)
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            let what = match radix {
                16 => "hexadecimal ",
                8 => "octal ",
                _ => "",
            };
            return Err(CompileError::syntax(
                pos,
                format!("invalid {what}integer literal `{text}`"),
            ));
        }
        u64::from_str_radix(digits, radix).map_err(|_| {
            CompileError::syntax(
                pos,
                format!("integer literal `{text}` does not fit 64 bits"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens_and_positions() {
        let t = lex("int x; // c\n /* a\n b */ ::A[0x1F]").unwrap();
        let got: Vec<_> = t
            .iter()
            .map(|t| (t.tok.clone(), t.pos.line, t.pos.col))
            .collect();
        assert_eq!(
            got,
            vec![
                (Tok::Ident("int".into()), 1, 1),
                (Tok::Ident("x".into()), 1, 5),
                (Tok::Sym(";"), 1, 6),
                (Tok::Sym("::"), 3, 7),
                (Tok::Ident("A".into()), 3, 9),
                (Tok::Sym("["), 3, 10),
                (Tok::Int(31), 3, 11),
                (Tok::Sym("]"), 3, 15),
                (Tok::Eof, 3, 16),
            ]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            toks("0 010 18446744073709551615"),
            vec![Tok::Int(0), Tok::Int(8), Tok::Int(u64::MAX), Tok::Eof]
        );
        for (src, msg) in [
            (
                "18446744073709551616",
                "1:1: integer literal `18446744073709551616` does not fit 64 bits",
            ),
            ("09", "1:1: invalid octal integer literal `09`"),
            ("12ab", "1:1: invalid integer literal `12ab`"),
            ("0x", "1:1: invalid hexadecimal integer literal `0x`"),
            (
                " 1.5",
                "1:2: a floating-point literal is not supported (the IDL's numbers are integers)",
            ),
        ] {
            assert_eq!(lex(src).unwrap_err().to_string(), msg);
        }
    }

    #[test]
    fn rejected_characters() {
        assert_eq!(
            lex("a\n  #include").unwrap_err().to_string(),
            "2:3: a preprocessor directive (`#`) is not supported (an IDL file here is self-contained: no #include, #define or #pragma)"
        );
        assert_eq!(
            lex("a @").unwrap_err().to_string(),
            "1:3: unexpected character `@`"
        );
        assert_eq!(
            lex("é").unwrap_err().to_string(),
            "1:1: unexpected character `é`"
        );
        assert_eq!(
            lex("\n /* x").unwrap_err().to_string(),
            "2:2: `/*` comment is not closed"
        );
    }

    /// A leading byte-order mark is skipped and takes no column: positions
    /// are those of the text without it, on its first line and after.
    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let with = lex("\u{feff}int x;\n  long y;").unwrap();
        assert_eq!(with, lex("int x;\n  long y;").unwrap());
        assert_eq!((with[0].pos.line, with[0].pos.col), (1, 1));
        assert_eq!((with[3].pos.line, with[3].pos.col), (2, 3));
        assert_eq!(
            lex("\u{feff}a @").unwrap_err().to_string(),
            "1:3: unexpected character `@`"
        );
        assert_eq!(toks("\u{feff}"), vec![Tok::Eof]);
        // Only at the very start: not after white space, not twice.
        for (src, at) in [
            (" \u{feff}a", "1:2"),
            ("\u{feff}\u{feff}a", "1:1"),
            ("a\u{feff}", "1:2"),
        ] {
            assert_eq!(
                lex(src).unwrap_err().to_string(),
                format!(
                    "{at}: unexpected byte-order mark U+FEFF (one is allowed only at the start of the file)"
                )
            );
        }
    }
}
