//! Figures a person reads, and the tables that hold them, rendered once as
//! aligned text and once as JSON from the same [`Table`], so that the two
//! cannot disagree.
//!
//! A [`Figure`] is a measured value or the reason there is none: a
//! measurement that came out impossible (negative, a ratio against a peer
//! that was measured wrongly, a median over fewer samples than claimed) is
//! never printed as a result; the table says `n/a (reason)` instead (a
//! long reason numbered, `n/a [1]`, and printed under the table), and the
//! JSON has `null` and the reason. Values are printed with three
//! significant digits ([`sig`]), so that a real small figure never reads
//! `0.00`.

use serde_json::{Value, json};

/// A measured value, or why there is none.
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    /// The value, with a remark that qualifies it (e.g. messages lost).
    Value {
        /// The value, in the column's unit.
        v: f64,
        /// A remark printed after it in parentheses (under the table,
        /// numbered, when long).
        note: Option<String>,
    },
    /// No value, and why.
    Missing(String),
}

impl Figure {
    /// A plain value.
    pub fn value(v: f64) -> Figure {
        Figure::Value { v, note: None }
    }

    /// No value, because `why`.
    pub fn missing(why: impl Into<String>) -> Figure {
        Figure::Missing(why.into())
    }

    /// The value, if there is one.
    pub fn get(&self) -> Option<f64> {
        match self {
            Figure::Value { v, .. } => Some(*v),
            Figure::Missing(_) => None,
        }
    }

    /// The same figure with a remark.
    pub fn with_note(self, note: impl Into<String>) -> Figure {
        match self {
            Figure::Value { v, .. } => Figure::Value {
                v,
                note: Some(note.into()),
            },
            m => m,
        }
    }

    /// `a / b`, or missing (with the reason) when either is, or when `b`
    /// is not positive.
    pub fn ratio(a: &Figure, b: &Figure, a_name: &str, b_name: &str) -> Figure {
        match (a, b) {
            (Figure::Missing(_), _) => Figure::missing(format!("{a_name} n/a")),
            (_, Figure::Missing(_)) => Figure::missing(format!("{b_name} n/a")),
            (Figure::Value { v: x, .. }, Figure::Value { v: y, .. }) if *y > 0.0 => {
                Figure::value(x / y)
            }
            _ => Figure::missing(format!("{b_name} is zero")),
        }
    }

    /// The cell's text, and its remark (the reason it is missing, or its
    /// value's note) when that is too long for the cell: the text table
    /// then prints it under the table with a mark (`n/a [1]`).
    fn render(&self, format: Format) -> (String, Option<&str>) {
        let (head, remark) = match self {
            Figure::Missing(why) => ("n/a".to_string(), Some(why.as_str())),
            Figure::Value { v, note } => {
                let v = match format {
                    Format::Sig => sig(*v),
                    Format::Ratio => format!("{}x", sig(*v)),
                    Format::Percent => format!("{}%", sig(*v * 100.0)),
                };
                (v, note.as_deref())
            }
        };
        match remark {
            Some(r) if r.chars().count() > INLINE_REMARK => (head, Some(r)),
            Some(r) => (format!("{head} ({r})"), None),
            None => (head, None),
        }
    }

    fn to_json(&self, format: Format) -> Value {
        let scale = if format == Format::Percent {
            100.0
        } else {
            1.0
        };
        match self {
            Figure::Missing(why) => json!({ "value": null, "reason": why }),
            Figure::Value { v, note: None } => json!({ "value": v * scale }),
            Figure::Value { v, note: Some(n) } => json!({ "value": v * scale, "note": n }),
        }
    }
}

/// The longest remark (a missing figure's reason, a value's note) the
/// text table prints in its cell; a longer one goes under the table,
/// numbered, so that one long reason does not widen its column for every
/// row.
const INLINE_REMARK: usize = 16;

/// `x` with three significant digits (at least), in plain notation:
/// `0.00421`, `4.21`, `42.1`, `421`, `4213`.
pub fn sig(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 9) as usize;
    let s = format!("{x:.decimals$}");
    // Rounding may carry into a new digit (9.996 -> "10.00"); one digit
    // fewer then says the same with three significant digits.
    let carried = s
        .parse::<f64>()
        .is_ok_and(|r| r.abs().log10().floor() as i32 > magnitude);
    if decimals > 0 && carried {
        format!("{x:.prec$}", prec = decimals - 1)
    } else {
        s
    }
}

/// How a column's values are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Three significant digits, no suffix.
    Sig,
    /// Three significant digits and `x`.
    Ratio,
    /// A fraction, as a percentage with three significant digits.
    Percent,
}

/// A column: its heading, its key in the JSON and its format.
#[derive(Clone, Debug)]
pub struct Column {
    /// The heading of the text table.
    pub heading: String,
    /// Its key in the JSON rows.
    pub key: String,
    /// How its values are written.
    pub format: Format,
}

impl Column {
    /// A column with a heading, a JSON key and a format.
    pub fn new(heading: &str, key: &str, format: Format) -> Column {
        Column {
            heading: heading.into(),
            key: key.into(),
            format,
        }
    }
}

/// A table of figures: rows keyed by a number (a message size), columns
/// in groups separated by `|` in the text.
#[derive(Clone, Debug)]
pub struct Table {
    /// Its key in the JSON document.
    pub key: String,
    /// The line above the text table.
    pub title: String,
    /// The unit of the [`Format::Sig`] columns, for the JSON.
    pub unit: String,
    /// The heading of the rows' key column, and its JSON key.
    pub row_key: String,
    /// The column groups.
    pub groups: Vec<Vec<Column>>,
    /// The rows: the key, then one figure per column of every group, in
    /// order.
    pub rows: Vec<(u64, Vec<Figure>)>,
    /// Lines printed under the text table (and kept in the JSON).
    pub notes: Vec<String>,
}

impl Table {
    fn columns(&self) -> impl Iterator<Item = &Column> {
        self.groups.iter().flatten()
    }

    /// The table as aligned text: each column as wide as its widest cell.
    /// A remark longer than a few words (a missing figure's reason, a
    /// value's note) is numbered in its cell and printed under the table.
    pub fn to_text(&self) -> String {
        let cols: Vec<&Column> = self.columns().collect();
        // Long remarks, each once, in the order they first appear.
        let mut remarks: Vec<&str> = Vec::new();
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|(_, r)| {
                r.iter()
                    .zip(&cols)
                    .map(|(f, c)| match f.render(c.format) {
                        (head, None) => head,
                        (head, Some(remark)) => {
                            let k = match remarks.iter().position(|&x| x == remark) {
                                Some(k) => k,
                                None => {
                                    remarks.push(remark);
                                    remarks.len() - 1
                                }
                            };
                            format!("{head} [{}]", k + 1)
                        }
                    })
                    .collect()
            })
            .collect();
        let key_width = self
            .rows
            .iter()
            .map(|(k, _)| k.to_string().len())
            .chain([self.row_key.len()])
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                cells
                    .iter()
                    .filter_map(|r| r.get(i).map(String::len))
                    .chain([c.heading.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |key: &str, row: &[String]| {
            let mut s = format!("{key:>key_width$} |");
            let mut i = 0;
            for (g, group) in self.groups.iter().enumerate() {
                if g > 0 {
                    s += " |";
                }
                for _ in group {
                    let w = widths[i];
                    s += &format!(" {:>w$}", row.get(i).map_or("", String::as_str));
                    i += 1;
                }
            }
            s + "\n"
        };
        let mut out = format!("{}\n", self.title);
        let headings: Vec<String> = cols.iter().map(|c| c.heading.clone()).collect();
        out += &line(&self.row_key, &headings);
        for ((k, _), r) in self.rows.iter().zip(&cells) {
            out += &line(&k.to_string(), r);
        }
        for (k, r) in remarks.iter().enumerate() {
            out += &format!("[{}] {r}\n", k + 1);
        }
        for n in &self.notes {
            out += n;
            out += "\n";
        }
        out
    }

    /// The table as JSON: its title, unit, notes, and one object per row
    /// with every column's figure (`{"value": v}` or `{"value": null,
    /// "reason": why}`).
    pub fn to_json(&self) -> Value {
        let cols: Vec<&Column> = self.columns().collect();
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|(k, r)| {
                let mut o = serde_json::Map::new();
                o.insert(self.row_key.clone(), json!(k));
                for (f, c) in r.iter().zip(&cols) {
                    o.insert(c.key.clone(), f.to_json(c.format));
                }
                Value::Object(o)
            })
            .collect();
        json!({
            "title": self.title,
            "unit": self.unit,
            "rows": rows,
            "notes": self.notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_figures_keep_three_significant_digits() {
        assert_eq!(sig(0.00421), "0.00421");
        assert_eq!(sig(0.0042), "0.00420");
        assert_eq!(sig(0.28), "0.280");
        assert_eq!(sig(4.567), "4.57");
        assert_eq!(sig(38.42), "38.4");
        assert_eq!(sig(565.4), "565");
        assert_eq!(sig(8080.4), "8080");
        assert_eq!(sig(0.0), "0");
        // A carry into a new digit does not add a fourth digit.
        assert_eq!(sig(9.996), "10.0");
        assert_eq!(sig(0.09996), "0.100");
    }

    #[test]
    fn a_ratio_against_a_missing_or_zero_figure_is_missing_with_the_reason() {
        let two = Figure::value(2.0);
        let gone = Figure::missing("mis-measured");
        assert_eq!(
            Figure::ratio(&two, &Figure::value(4.0), "a", "b"),
            Figure::value(0.5)
        );
        assert_eq!(
            Figure::ratio(&two, &gone, "U-Net", "memcpy"),
            Figure::missing("memcpy n/a")
        );
        assert_eq!(
            Figure::ratio(&gone, &two, "U-Net", "memcpy"),
            Figure::missing("U-Net n/a")
        );
        assert_eq!(
            Figure::ratio(&two, &Figure::value(0.0), "a", "b"),
            Figure::missing("b is zero")
        );
    }

    fn table() -> Table {
        Table {
            key: "t".into(),
            title: "T".into(),
            unit: "us".into(),
            row_key: "bytes".into(),
            groups: vec![
                vec![Column::new("U-Net", "unet", Format::Sig)],
                vec![Column::new("ratio", "ratio", Format::Percent)],
            ],
            rows: vec![
                (0, vec![Figure::value(0.0042), Figure::value(0.5)]),
                (
                    1024,
                    vec![
                        Figure::value(12.0).with_note("3 lost"),
                        Figure::missing("noise"),
                    ],
                ),
                (
                    4096,
                    vec![
                        Figure::value(13.0).with_note("the peer ran 3 times"),
                        Figure::missing("U-Net 0.8x its floor: mis-measured"),
                    ],
                ),
                (
                    8192,
                    vec![
                        Figure::missing("U-Net 0.8x its floor: mis-measured"),
                        Figure::value(0.25),
                    ],
                ),
            ],
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn text_says_n_a_with_the_reason_and_aligns_columns() {
        // Short remarks in their cells; a long one numbered there and
        // printed once under the table, however many cells give it.
        let want = [
            "T",
            "bytes |         U-Net |       ratio",
            "    0 |       0.00420 |       50.0%",
            " 1024 | 12.0 (3 lost) | n/a (noise)",
            " 4096 |      13.0 [1] |     n/a [2]",
            " 8192 |       n/a [2] |       25.0%",
            "[1] the peer ran 3 times",
            "[2] U-Net 0.8x its floor: mis-measured",
            "a note",
        ];
        assert_eq!(table().to_text(), want.join("\n") + "\n");
    }

    #[test]
    fn json_has_every_figure_or_null_with_its_reason() {
        let j = table().to_json();
        assert_eq!(j["rows"][0]["bytes"], 0);
        assert_eq!(j["rows"][0]["unet"]["value"], 0.0042);
        assert_eq!(j["rows"][0]["ratio"]["value"], 50.0);
        assert_eq!(j["rows"][1]["unet"]["note"], "3 lost");
        assert_eq!(j["rows"][1]["ratio"]["value"], Value::Null);
        assert_eq!(j["rows"][1]["ratio"]["reason"], "noise");
        assert_eq!(j["notes"][0], "a note");
    }
}
