//! One benchmark report, two renderings: the tables a person reads and the
//! `--json` object a script reads, both from the same [`Report`], so that
//! they cannot disagree.
//!
//! A suite measures, turns its samples into [`Figure`]s (see
//! [`crate::bench_figures`]: a figure that would be impossible is `n/a`
//! with its reason), and fills a [`Report`]: sections of rows, each row a
//! name and one [`Cell`] per [`Column`]; then the targets it judges.
//!
//! ```text
//! Report ──text()──▶ "# title", "## section", Markdown tables, n/a[i] footnotes
//!        └─serde──▶ { "suite", "quick", "notes", "sections": { key: {
//!                       "about", "samples", "rows": [ { "name", column key: cell } ] } },
//!                     "targets": [ { "target", "verdict", "detail" } ] }
//! ```
//!
//! In JSON a figure is `{"value", "spread"}` or `{"value": null, "reason"}`;
//! a column's key carries its unit (`dpf_ns_per_pkt`, `ilp_mb_per_s`,
//! `ilp_over_separate`); a verdict is `"PASS"`, `"MISS"` or `null` (not
//! judged).

use std::fmt::Write;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::bench_figures::{Figure, times};

/// How a column prints its figures in the tables (JSON has the full value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fmt {
    /// Fixed point with this many decimals.
    Dec(usize),
    /// A ratio: "1.23x" (see [`times`]).
    Times,
    /// A value already in percent, with this many decimals and a "%".
    Percent(usize),
}

impl Fmt {
    fn show(self, v: f64) -> String {
        match self {
            Fmt::Dec(d) => format!("{v:.d$}"),
            Fmt::Times => times(v),
            Fmt::Percent(d) => format!("{v:.d$}%"),
        }
    }
}

/// A column: its JSON key (with the unit in it), its table header and how
/// its figures print.
#[derive(Debug, Clone)]
pub struct Column {
    pub key: String,
    pub header: String,
    pub fmt: Fmt,
}

/// `Column { key, header, fmt }`.
pub fn col(key: &str, header: &str, fmt: Fmt) -> Column {
    Column {
        key: key.into(),
        header: header.into(),
        fmt,
    }
}

/// One cell of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A measured figure, or n/a with the reason.
    Fig(Figure),
    /// An exact count (instructions, bytes, frees).
    Int(i64),
    /// Exact counts of the two directions of a call, client to server and
    /// back: "a / b = a+b"; in JSON `{"client_to_server", "server_to_client",
    /// "total"}`.
    Split(i64, i64),
    /// A label (e.g. where the data is).
    Text(String),
    /// PASS, MISS, or not judged (its figure is not a value).
    Verdict(Option<bool>),
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Fig(f) => f.serialize(s),
            Cell::Int(n) => s.serialize_i64(*n),
            Cell::Split(a, b) => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("client_to_server", a)?;
                m.serialize_entry("server_to_client", b)?;
                m.serialize_entry("total", &(a + b))?;
                m.end()
            }
            Cell::Text(t) => s.serialize_str(t),
            Cell::Verdict(v) => verdict_word(*v).serialize(s),
        }
    }
}

/// "PASS", "MISS", or `None` when not judged.
pub fn verdict_word(v: Option<bool>) -> Option<&'static str> {
    v.map(|p| if p { "PASS" } else { "MISS" })
}

/// The verdict on `f` against a target: none when it is not a value.
pub fn verdict(f: &Figure, pass: impl Fn(f64) -> bool) -> Option<bool> {
    f.value().map(pass)
}

/// A row: its name and one cell per column of its section.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub cells: Vec<Cell>,
}

/// One table of a report.
#[derive(Debug, Clone)]
pub struct Section {
    /// The key of the section in JSON (`sections.<key>`).
    pub key: String,
    /// The heading in the text.
    pub title: String,
    /// What the rows measure, their units and how (printed above the table).
    pub about: String,
    /// Samples (rounds) each figure is the median or best of, if timed.
    pub samples: Option<usize>,
    /// The header of the name column.
    pub name_header: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// Lines after the table (context, per-row details).
    pub lines: Vec<String>,
}

impl Section {
    /// An empty section.
    pub fn new(key: &str, title: &str, name_header: &str, columns: Vec<Column>) -> Section {
        Section {
            key: key.into(),
            title: title.into(),
            about: String::new(),
            samples: None,
            name_header: name_header.into(),
            columns,
            rows: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// Adds a row; it must have one cell per column.
    pub fn row(&mut self, name: impl Into<String>, cells: Vec<Cell>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "cells of a row");
        self.rows.push(Row {
            name: name.into(),
            cells,
        });
    }

    /// The cell of `row` under the column keyed `key`.
    #[cfg(test)]
    pub fn cell(&self, row: &str, key: &str) -> Option<&Cell> {
        let c = self.columns.iter().position(|c| c.key == key)?;
        self.rows.iter().find(|r| r.name == row)?.cells.get(c)
    }
}

/// A row object in JSON: `{"name": ..., <column key>: <cell>, ...}`.
struct RowJson<'a>(&'a Section, &'a Row);

impl Serialize for RowJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1 + self.1.cells.len()))?;
        m.serialize_entry("name", &self.1.name)?;
        for (c, cell) in self.0.columns.iter().zip(&self.1.cells) {
            m.serialize_entry(&c.key, cell)?;
        }
        m.end()
    }
}

impl Serialize for Section {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("title", &self.title)?;
        m.serialize_entry("about", &self.about)?;
        m.serialize_entry("samples", &self.samples)?;
        let rows: Vec<RowJson<'_>> = self.rows.iter().map(|r| RowJson(self, r)).collect();
        m.serialize_entry("rows", &rows)?;
        m.serialize_entry("lines", &self.lines)?;
        m.end()
    }
}

/// One of the paper's targets, judged over a suite's rows.
#[derive(Debug, Clone)]
pub struct Target {
    pub what: String,
    /// PASS, MISS, or not judged (some figure it needs is not a value, or
    /// its peer did not run).
    pub verdict: Option<bool>,
    pub detail: String,
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("target", &self.what)?;
        m.serialize_entry("verdict", &verdict_word(self.verdict))?;
        m.serialize_entry("detail", &self.detail)?;
        m.end()
    }
}

/// A target judged over `rows` (name, verdict): MISS if a judged row
/// misses, PASS if every row was judged and passed, not judged otherwise.
pub fn judge(what: String, rows: &[(String, Option<bool>)], extreme: String) -> Target {
    let missed: Vec<&str> = rows
        .iter()
        .filter(|(_, v)| *v == Some(false))
        .map(|(n, _)| n.as_str())
        .collect();
    let unjudged: Vec<&str> = rows
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| n.as_str())
        .collect();
    let with = |what: String| {
        if extreme.is_empty() {
            what
        } else {
            format!("{what}; {extreme}")
        }
    };
    let (verdict, detail) = if !missed.is_empty() {
        (
            Some(false),
            with(format!("missed on {}", missed.join(", "))),
        )
    } else if !unjudged.is_empty() {
        (
            None,
            with(format!("not measurable on {}", unjudged.join(", "))),
        )
    } else {
        (Some(true), extreme)
    };
    Target {
        what,
        verdict,
        detail,
    }
}

/// A whole suite's report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub suite: &'static str,
    /// A `--quick` run: a smoke test, not figures to quote.
    pub quick: bool,
    #[serde(skip)]
    pub title: String,
    /// Context printed under the title (machine, peers' versions, peers
    /// that did not run and why).
    pub notes: Vec<String>,
    #[serde(serialize_with = "sections_by_key")]
    pub sections: Vec<Section>,
    pub targets: Vec<Target>,
}

fn sections_by_key<S: Serializer>(v: &[Section], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(v.len()))?;
    for sec in v {
        m.serialize_entry(&sec.key, sec)?;
    }
    m.end()
}

impl Report {
    /// A report with no sections yet.
    pub fn new(suite: &'static str, quick: bool, title: impl Into<String>) -> Report {
        let mut notes = vec![format!("machine: {}", fastpath_bench::machine())];
        if cfg!(debug_assertions) {
            notes.push(
                "WARNING: built without optimizations; the figures are meaningless. Use --release."
                    .into(),
            );
        }
        if quick {
            notes.push("--quick: a short smoke run, not figures to quote".into());
        }
        Report {
            suite,
            quick,
            title: title.into(),
            notes,
            sections: Vec::new(),
            targets: Vec::new(),
        }
    }

    /// The section keyed `key`.
    #[cfg(test)]
    pub fn section(&self, key: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.key == key)
    }

    /// The tables, as Markdown with `n/a[i]` cells footnoted under each table.
    pub fn text(&self) -> String {
        let mut out = format!("# {}\n\n", self.title);
        for n in &self.notes {
            let _ = writeln!(out, "{n}");
        }
        for s in &self.sections {
            let _ = write!(out, "\n## {}\n\n", s.title);
            if !s.about.is_empty() {
                let _ = writeln!(out, "{}\n", s.about);
            }
            // A section that measured nothing says why in its lines.
            if !s.rows.is_empty() {
                let mut head = format!("| {} |", s.name_header);
                let mut rule = String::from("|---|");
                for c in &s.columns {
                    let _ = write!(head, " {} |", c.header);
                    rule += "---:|";
                }
                let _ = writeln!(out, "{head}\n{rule}");
                let mut notes = Vec::new();
                for r in &s.rows {
                    let mut line = format!("| {} |", r.name);
                    for (c, cell) in s.columns.iter().zip(&r.cells) {
                        let shown = match cell {
                            Cell::Fig(Figure::Value { value, .. }) => c.fmt.show(*value),
                            Cell::Fig(Figure::NotMeasured(why)) => {
                                notes.push(format!("{} {}: {why}", r.name, c.header));
                                format!("n/a[{}]", notes.len())
                            }
                            Cell::Int(n) => n.to_string(),
                            Cell::Split(a, b) => format!("{a} / {b} = {}", a + b),
                            Cell::Text(t) => t.clone(),
                            Cell::Verdict(v) => verdict_word(*v).unwrap_or("n/a").into(),
                        };
                        let _ = write!(line, " {shown} |");
                    }
                    let _ = writeln!(out, "{line}");
                }
                for (i, n) in notes.iter().enumerate() {
                    let _ = writeln!(out, "  [{}] {n}", i + 1);
                }
            }
            if !s.lines.is_empty() {
                if !s.rows.is_empty() {
                    out.push('\n');
                }
                for l in &s.lines {
                    let _ = writeln!(out, "{l}");
                }
            }
        }
        if !self.targets.is_empty() {
            out += "\ntargets:\n";
            for t in &self.targets {
                let v = verdict_word(t.verdict).unwrap_or("n/a");
                if t.detail.is_empty() {
                    let _ = writeln!(out, "  {v:<4} {}", t.what);
                } else {
                    let _ = writeln!(out, "  {v:<4} {} ({})", t.what, t.detail);
                }
            }
        }
        out
    }

    /// The JSON object (pretty-printed).
    pub fn json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(self).map_err(|e| format!("writing the JSON report: {e}"))
    }

    /// Prints the report on stdout, JSON or the tables; an error says why
    /// nothing was printed.
    pub fn print(&self, json: bool) -> Result<(), String> {
        if json {
            println!("{}", self.json()?);
        } else {
            print!("{}", self.text());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_figures::NotMeasured;

    fn sample() -> Report {
        let mut r = Report::new("demo", true, "a suite");
        let mut s = Section::new(
            "times",
            "Times",
            "N",
            vec![
                col("a_ns", "a ns", Fmt::Dec(2)),
                col("b_over_a", "b / a", Fmt::Times),
                col("share_percent", "share", Fmt::Percent(1)),
                col("count", "count", Fmt::Dec(0)),
                col("calls", "calls", Fmt::Dec(0)),
                col("verdict", "verdict", Fmt::Dec(0)),
            ],
        );
        s.samples = Some(5);
        s.row(
            "10",
            vec![
                Cell::Fig(Figure::Value {
                    value: 1.5,
                    spread: 0.1,
                }),
                Cell::Fig(Figure::NotMeasured(NotMeasured::TooFewSamples {
                    got: 2,
                    want: 5,
                })),
                Cell::Fig(Figure::Value {
                    value: 12.25,
                    spread: 0.0,
                }),
                Cell::Int(7),
                Cell::Split(3, 4),
                Cell::Verdict(None),
            ],
        );
        r.sections.push(s);
        r.targets.push(judge(
            "b at least a".into(),
            &[("10".into(), None)],
            "no row measured".into(),
        ));
        r
    }

    #[test]
    fn the_table_and_the_json_show_the_same_cells() {
        let r = sample();
        let text = r.text();
        assert!(
            text.contains("| N | a ns | b / a | share | count | calls | verdict |"),
            "{text}"
        );
        assert!(
            text.contains("| 10 | 1.50 | n/a[1] | 12.2% | 7 | 3 / 4 = 7 | n/a |"),
            "{text}"
        );
        assert!(
            text.contains("  [1] 10 b / a: 2 valid samples of the 5 the median needs"),
            "{text}"
        );
        assert!(
            text.contains("n/a  b at least a (not measurable on 10; no row measured)"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        assert_eq!(v["suite"], "demo");
        assert_eq!(v["quick"], true);
        let s = &v["sections"]["times"];
        assert_eq!(s["samples"], 5);
        assert_eq!(
            s["rows"][0],
            serde_json::json!({
                "name": "10",
                "a_ns": { "value": 1.5, "spread": 0.1 },
                "b_over_a": {
                    "value": null,
                    "reason": "2 valid samples of the 5 the median needs"
                },
                "share_percent": { "value": 12.25, "spread": 0.0 },
                "count": 7,
                "calls": { "client_to_server": 3, "server_to_client": 4, "total": 7 },
                "verdict": null,
            })
        );
        assert_eq!(v["targets"][0]["verdict"], serde_json::Value::Null);
    }

    #[test]
    fn a_target_misses_if_any_row_misses_and_passes_only_if_all_pass() {
        let rows = |v: &[Option<bool>]| -> Vec<(String, Option<bool>)> {
            v.iter()
                .enumerate()
                .map(|(i, x)| (format!("r{i}"), *x))
                .collect()
        };
        let t = |v: &[Option<bool>]| judge("t".into(), &rows(v), String::new()).verdict;
        assert_eq!(t(&[Some(true), Some(true)]), Some(true));
        assert_eq!(t(&[Some(true), None]), None);
        assert_eq!(t(&[Some(false), None]), Some(false));
    }
}
