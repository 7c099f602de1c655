//! The filter table file: one filter a line, for loading a whole
//! [`Table`](crate::Table) from text.
//!
//! ```text
//! # web traffic to the front end goes to owner 1
//! 1     tcp dst port 80 and dst host 10.0.0.1
//! 2     tcp dst port 443      # TLS
//! 3/-1  ip                    # everything else that is IP, ranked last
//! ```
//!
//! Each line is `OWNER[/PRIORITY] FILTER`:
//!
//! - `OWNER` is a whole number from 0 to 4294967295 (a `u32`): what the
//!   classifier returns for a packet the filter matches;
//! - `PRIORITY`, optional, is a whole number from -2147483648 to
//!   2147483647 (an `i32`, default 0): of the filters that match a packet,
//!   the highest priority wins, and among equal priorities the earlier
//!   line;
//! - `FILTER` is the rest of the line, in dpf's pcap-filter(7) subset.
//!
//! A `#` starts a comment that runs to the end of the line, on a line of
//! its own or after a filter (pcap-filter syntax has no `#`). Blank lines
//! are ignored. Errors name the line and the column (1-based, counted in
//! characters), including for bytes that are not UTF-8.

use thiserror::Error;

/// One filter of a table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Its line number (1-based).
    pub line: usize,
    /// The column its filter text starts at (1-based, in characters).
    pub column: usize,
    /// Its owner.
    pub owner: u32,
    /// Its priority.
    pub priority: i32,
    /// Its filter text, without the comment and surrounding blanks.
    pub filter: String,
}

/// A table file that could not be read, with where.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("line {line}, column {column}: {message}")]
pub struct TableFileError {
    /// The line (1-based).
    pub line: usize,
    /// The column (1-based, in characters).
    pub column: usize,
    /// What is wrong and what was expected.
    pub message: String,
}

/// What an owner must be, for messages and `--help`.
pub const OWNER_RULE: &str = "an owner is a whole number from 0 to 4294967295";
/// What a priority must be, for messages and `--help`.
pub const PRIORITY_RULE: &str =
    "a priority is a whole number from -2147483648 to 2147483647 (higher wins; default 0)";

/// Reads a table file's bytes (which must be UTF-8).
pub fn parse_bytes(bytes: &[u8]) -> Result<Vec<Line>, TableFileError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            // `good` is valid UTF-8 by `valid_up_to`'s contract.
            let good = std::str::from_utf8(good).unwrap_or_default();
            let line = good.matches('\n').count() + 1;
            let column = good.rsplit('\n').next().unwrap_or("").chars().count() + 1;
            Err(TableFileError {
                line,
                column,
                message: format!(
                    "byte {:#04x} (byte {} of the file) is not UTF-8: expected text",
                    bytes[e.valid_up_to()],
                    e.valid_up_to()
                ),
            })
        }
    }
}

/// Reads a table file's text.
pub fn parse(text: &str) -> Result<Vec<Line>, TableFileError> {
    // A byte-order mark some editors write first is not text: columns
    // count from after it, as those editors show them.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let code = raw.split_once('#').map_or(raw, |(code, _)| code);
        let err = |byte: usize, message: String| TableFileError {
            line,
            column: raw[..byte].chars().count() + 1,
            message,
        };
        let Some(head_at) = code.find(|c: char| !c.is_whitespace()) else {
            continue; // blank, or only a comment
        };
        let rest = &code[head_at..];
        let head_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let head = &rest[..head_len];
        let filter_at = rest[head_len..]
            .find(|c: char| !c.is_whitespace())
            .map(|k| head_at + head_len + k);
        let (owner_text, prio) = match head.split_once('/') {
            Some((o, p)) => (o, Some((p, head_at + o.len() + 1))),
            None => (head, None),
        };
        let owner: u32 = number(owner_text, "owner", OWNER_RULE).map_err(|m| err(head_at, m))?;
        let priority: i32 = match prio {
            None => 0,
            Some((p, at)) => number(p, "priority", PRIORITY_RULE).map_err(|m| err(at, m))?,
        };
        let Some(filter_at) = filter_at else {
            return Err(err(
                head_at + head_len,
                format!("expected a filter after `{head}` (a line is `OWNER[/PRIORITY] FILTER`)"),
            ));
        };
        lines.push(Line {
            line,
            column: raw[..filter_at].chars().count() + 1,
            owner,
            priority,
            filter: code[filter_at..].trim_end().to_string(),
        });
    }
    Ok(lines)
}

/// Parses an owner or a priority: "out of range" for a whole number that
/// does not fit, "not a whole number" for anything else.
fn number<T: std::str::FromStr>(text: &str, what: &str, rule: &str) -> Result<T, String> {
    if let Ok(v) = text.parse() {
        return Ok(v);
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        Err(format!("{what} {text} is out of range: {rule}"))
    } else if text.is_empty() {
        Err(format!("expected a {what}: {rule}"))
    } else {
        Err(format!("{what} `{text}` is not a whole number: {rule}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Line {
        let mut v = parse(text).unwrap();
        assert_eq!(v.len(), 1, "{v:?}");
        v.remove(0)
    }

    #[test]
    fn a_line_is_owner_priority_and_filter() {
        let l = one("  7/-3   tcp dst port 80  ");
        assert_eq!(
            l,
            Line {
                line: 1,
                column: 10,
                owner: 7,
                priority: -3,
                filter: "tcp dst port 80".into()
            }
        );
        assert_eq!(one("4294967295 ip").owner, u32::MAX);
        assert_eq!(one("1/2147483647 ip").priority, i32::MAX);
        assert_eq!(one("1/-2147483648 ip").priority, i32::MIN);
    }

    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_line() {
        let l = one("\u{feff}1 tcp");
        assert_eq!((l.owner, l.column, l.filter.as_str()), (1, 3, "tcp"));
        let v = parse_bytes(b"\xef\xbb\xbf2 udp\n3 ip\n").unwrap();
        assert_eq!((v[0].owner, v[1].owner), (2, 3));
    }

    #[test]
    fn comments_run_to_the_end_of_the_line() {
        let v = parse("# heading\n\n1 tcp # web\n   # indented\n2 udp#dns\n").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].line, v[0].filter.as_str()), (3, "tcp"));
        assert_eq!((v[1].line, v[1].filter.as_str()), (5, "udp"));
    }

    #[test]
    fn an_out_of_range_number_says_so_and_gives_the_rule() {
        let e = parse("1 ip\n4294967296 ip\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1));
        assert!(e.message.contains("out of range"), "{e}");
        assert!(e.message.contains("0 to 4294967295"), "{e}");
        let e = parse("1/2147483648 ip").unwrap_err();
        assert_eq!((e.line, e.column), (1, 3));
        assert!(
            e.message.contains("priority 2147483648 is out of range"),
            "{e}"
        );
        assert!(e.message.contains("-2147483648 to 2147483647"), "{e}");
    }

    #[test]
    fn an_owner_must_be_a_number() {
        let e = parse("web tcp port 80").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        assert!(
            e.message.contains("owner `web` is not a whole number"),
            "{e}"
        );
        let e = parse("1/high tcp").unwrap_err();
        assert!(
            e.message.contains("priority `high` is not a whole number"),
            "{e}"
        );
        let e = parse("1/ tcp").unwrap_err();
        assert!(e.message.contains("expected a priority"), "{e}");
    }

    #[test]
    fn a_line_without_a_filter_is_refused() {
        let e = parse("1/2   # nothing\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 4));
        assert!(e.message.contains("expected a filter"), "{e}");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_placed() {
        let e = parse_bytes(b"1 tcp\n2 ud\xffp\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 5));
        assert!(e.message.contains("0xff"), "{e}");
    }
}
