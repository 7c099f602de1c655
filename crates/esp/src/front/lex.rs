//! The lexer shared by programs ([`crate::parse`]) and fast-path
//! specifications ([`crate::spec::parse`]).
//!
//! Tokens: identifiers (letters, digits, `_`, not starting with a digit),
//! integer literals (decimal, `0x` hexadecimal, `'c'` characters with the
//! escapes `\n \t \r \0 \\ \' \" \xHH`), `#N` labels, and the operators and
//! punctuation of the language and of specifications (`<=>`, `?`, ...).
//! `//` line comments and `/* */` block comments are skipped. Positions are
//! 1-based lines and columns counted in characters.
//!
//! Decimal literals go up to 2^63 (which is `i64::MIN`, so that
//! `-9223372036854775808` can be written); hexadecimal literals up to
//! 2^64 - 1, taken as two's complement (`0xFFFFFFFFFFFFFFFF` is -1).
//! Keywords are identifiers; the parsers decide which are reserved.

use crate::error::{Error, Result};
use crate::ir::Pos;

/// One token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// An integer or character literal.
    Int(i64),
    /// A `#N` label.
    Label(u32),
    /// An operator or punctuation mark.
    Sym(&'static str),
    /// The end of the input.
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Int(v) => write!(f, "number {v}"),
            Tok::Label(n) => write!(f, "label `#{n}`"),
            Tok::Sym(s) => write!(f, "`{s}`"),
            Tok::Eof => write!(f, "end of input"),
        }
    }
}

/// A token and where it begins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Where it begins.
    pub pos: Pos,
}

/// Operators and punctuation, longest first so that the first match is the
/// longest.
const SYMS: &[&str] = &[
    "<=>", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "=",
    "!", "~", "&", "|", "^", "(", ")", "{", "}", ",", ";", "?",
];

/// Splits `src` into tokens; the last one is [`Tok::Eof`].
pub fn lex(src: &str) -> Result<Vec<Token>> {
    Lexer {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
    }
    .run()
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
}

fn syntax(pos: Pos, msg: impl Into<String>) -> Error {
    Error::Syntax {
        pos,
        msg: msg.into(),
    }
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

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.i).copied()?;
        self.i += 1;
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    fn run(mut self) -> Result<Vec<Token>> {
        let mut out = Vec::new();
        loop {
            self.skip_space()?;
            let pos = self.pos();
            let Some(c) = self.peek(0) else {
                out.push(Token { tok: Tok::Eof, pos });
                return Ok(out);
            };
            let tok = if c.is_ascii_alphabetic() || c == '_' {
                let mut s = String::new();
                while let Some(c) = self
                    .peek(0)
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    s.push(c);
                    self.bump();
                }
                Tok::Ident(s)
            } else if c.is_ascii_digit() {
                Tok::Int(self.number(pos)?)
            } else if c == '\'' {
                Tok::Int(self.char_lit(pos)?)
            } else if c == '#' {
                self.bump();
                let mut digits = String::new();
                while let Some(d) = self.peek(0).filter(char::is_ascii_digit) {
                    digits.push(d);
                    self.bump();
                }
                if digits.is_empty() {
                    return Err(syntax(
                        pos,
                        "`#` must be followed by a label number, as in `#1`",
                    ));
                }
                if self
                    .peek(0)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    return Err(syntax(pos, "a label is `#` followed by digits only"));
                }
                let n: u32 = digits
                    .parse()
                    .map_err(|_| syntax(pos, format!("label number #{digits} is too large")))?;
                Tok::Label(n)
            } else {
                let rest = &self.chars[self.i..];
                let sym = SYMS
                    .iter()
                    .find(|s| s.len() <= rest.len() && s.chars().zip(rest).all(|(a, b)| a == *b))
                    .ok_or_else(|| {
                        syntax(pos, format!("unexpected character `{}`", c.escape_debug()))
                    })?;
                for _ in 0..sym.len() {
                    self.bump();
                }
                Tok::Sym(sym)
            };
            out.push(Token { tok, pos });
        }
    }

    fn skip_space(&mut self) -> Result<()> {
        loop {
            match (self.peek(0), self.peek(1)) {
                (Some(c), _) if c.is_whitespace() => {
                    self.bump();
                }
                (Some('/'), Some('/')) => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                (Some('/'), Some('*')) => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match (self.peek(0), self.peek(1)) {
                            (Some('*'), Some('/')) => {
                                self.bump();
                                self.bump();
                                break;
                            }
                            (Some(_), _) => {
                                self.bump();
                            }
                            (None, _) => return Err(syntax(start, "unterminated block comment")),
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn number(&mut self, pos: Pos) -> Result<i64> {
        let hex = self.peek(0) == Some('0') && matches!(self.peek(1), Some('x' | 'X'));
        let mut text = String::new();
        if hex {
            self.bump();
            self.bump();
        }
        while let Some(c) = self
            .peek(0)
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            text.push(c);
            self.bump();
        }
        let bad = || {
            syntax(
                pos,
                format!("invalid number `{}{text}`", if hex { "0x" } else { "" }),
            )
        };
        if hex {
            if text.is_empty() || !text.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            let v = u64::from_str_radix(&text, 16)
                .map_err(|_| syntax(pos, format!("number `0x{text}` does not fit in 64 bits")))?;
            Ok(v as i64)
        } else {
            if !text.chars().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            match text.parse::<u64>() {
                Ok(v) if v <= 1u64 << 63 => Ok(v as i64),
                _ => Err(syntax(
                    pos,
                    format!("number `{text}` does not fit in 64 bits"),
                )),
            }
        }
    }

    fn char_lit(&mut self, pos: Pos) -> Result<i64> {
        self.bump();
        let bad = |msg: &str| syntax(pos, msg.to_string());
        let c = match self.bump() {
            None | Some('\n') => return Err(bad("unterminated character literal")),
            Some('\'') => return Err(bad("empty character literal")),
            Some('\\') => match self.bump() {
                Some('n') => '\n',
                Some('t') => '\t',
                Some('r') => '\r',
                Some('0') => '\0',
                Some('\\') => '\\',
                Some('\'') => '\'',
                Some('"') => '"',
                Some('x') => {
                    let hi = self.bump().and_then(|c| c.to_digit(16));
                    let lo = self.bump().and_then(|c| c.to_digit(16));
                    match (hi, lo) {
                        (Some(h), Some(l)) => char::from(u8::try_from(h * 16 + l).unwrap_or(0)),
                        _ => return Err(bad("`\\x` must be followed by two hexadecimal digits")),
                    }
                }
                Some(c) => {
                    return Err(syntax(
                        pos,
                        format!(
                            "unknown escape `\\{}` in character literal",
                            c.escape_debug()
                        ),
                    ));
                }
                None => return Err(bad("unterminated character literal")),
            },
            Some(c) => c,
        };
        if self.bump() != Some('\'') {
            return Err(bad("character literal must hold exactly one character"));
        }
        Ok(c as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn longest_symbol_wins() {
        assert_eq!(
            toks("a<=>b <= << <"),
            vec![
                Tok::Ident("a".into()),
                Tok::Sym("<=>"),
                Tok::Ident("b".into()),
                Tok::Sym("<="),
                Tok::Sym("<<"),
                Tok::Sym("<"),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn literals() {
        assert_eq!(
            toks("0x7E 'a' '\\n' '\\x41' 9223372036854775808 0xFFFFFFFFFFFFFFFF #12"),
            vec![
                Tok::Int(0x7E),
                Tok::Int(97),
                Tok::Int(10),
                Tok::Int(65),
                Tok::Int(i64::MIN),
                Tok::Int(-1),
                Tok::Label(12),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns_after_comments() {
        let t = lex("/* a\n b */ x // c\n  y").unwrap();
        assert_eq!(t[0].pos, Pos { line: 2, col: 7 });
        assert_eq!(t[1].pos, Pos { line: 3, col: 3 });
    }

    #[test]
    fn errors_say_where() {
        let e = lex("a\n  $").unwrap_err();
        assert_eq!(e.to_string(), "2:3: syntax error: unexpected character `$`");
        assert!(lex("/* open").unwrap_err().to_string().starts_with("1:1:"));
        assert!(lex("12ab").is_err());
        assert!(lex("0x").is_err());
        assert!(lex("18446744073709551616").is_err());
        assert!(lex("9223372036854775809").is_err());
        assert!(lex("''").is_err());
        assert!(lex("'ab'").is_err());
        assert!(lex("#").is_err());
        assert!(lex("#99999999999").is_err());
    }
}
