//! The table view-model: [`Section`], [`Column`], [`Value`].

use serde::{Deserialize, Serialize};

/// One titled table of a kind's results (a curve as rows, a pairwise grid, a series summary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// Stable id within the kind (`curve`, `tolerated`, `pairs`), for `--section` and CSV.
    pub id: String,
    /// Title shown above the table.
    pub title: String,
    /// Columns, left to right.
    pub columns: Vec<Column>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<Value>>,
    /// Lines shown under the table (what a flag means, how a figure was computed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the rows hold as a figure (a curve over a setting, bars per row, a time series),
    /// for renderers that draw charts; the table alone says everything without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plot: Option<Plot>,
    /// For a [`Plot::Heat`], the median of its value column's numbers, which the map colours
    /// its cells by (% above or below it); kept current as rows are added. `None` for other
    /// plots, for a map without numbers, and in documents written before it was carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heat_median: Option<f64>,
}

impl Section {
    /// An empty section with these columns.
    pub fn new(id: &str, title: impl Into<String>, columns: Vec<Column>) -> Section {
        Section {
            id: id.to_string(),
            title: title.into(),
            columns,
            rows: Vec::new(),
            notes: Vec::new(),
            plot: None,
            heat_median: None,
        }
    }

    /// This section with a plot of its rows.
    pub fn with_plot(mut self, plot: Plot) -> Section {
        self.plot = Some(plot);
        self.update_heat_median();
        self
    }

    /// Index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// Adds a row; it must have one value per column.
    pub fn push(&mut self, row: Vec<Value>) {
        debug_assert_eq!(row.len(), self.columns.len(), "section {}", self.id);
        self.rows.push(row);
        self.update_heat_median();
    }

    /// Recomputes [`Section::heat_median`] from the rows (linear time: a heat map has a few
    /// thousand cells at most).
    fn update_heat_median(&mut self) {
        let Some(Plot::Heat { value, .. }) = self.plot else {
            self.heat_median = None;
            return;
        };
        let mut values: Vec<f64> = self
            .rows
            .iter()
            .filter_map(|r| r.get(value).and_then(Value::as_f64))
            .collect();
        self.heat_median =
            (!values.is_empty()).then(|| isobench_common::median_in_place(&mut values));
    }

    /// Column headers as text: the name, with the unit in brackets when it has one.
    pub fn headers(&self) -> Vec<String> {
        self.columns.iter().map(Column::header).collect()
    }

    /// Every row as text, one cell per column ([`Value::text`]).
    pub fn text_rows(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| r.iter().map(Value::text).collect())
            .collect()
    }
}

/// What a [`Section`]'s rows hold as a figure; columns are given by index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Plot {
    /// Each `y` column against the setting in column `x` (a number, or text that reads as
    /// one), a line per `y` column and per distinct text of the `by` columns; estimates with
    /// their interval as a band.
    Curve {
        /// The setting.
        x: usize,
        /// The values.
        y: Vec<usize>,
        /// Columns whose text tells the rows of different lines apart.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        by: Vec<usize>,
        /// A limit the values are judged by, drawn as a horizontal line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<Guide>,
        /// Settings to mark with a vertical line (a tolerated pressure).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        marks: Vec<Guide>,
        /// Values of another unit drawn in a second panel under the first, against the same
        /// setting and marks (the aggressor's throughput under the victim's figure), a line
        /// per column and per distinct text of the `by` columns. Empty: one panel.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        y2: Vec<usize>,
    },
    /// A group of bars per row, labelled by the `label` columns, a bar per `y` column;
    /// estimates with their interval as whiskers.
    Bars {
        /// The label columns.
        label: Vec<usize>,
        /// The values.
        y: Vec<usize>,
        /// The value that means "no effect" (0 for a degradation, 1 for a ratio).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reference: Option<f64>,
    },
    /// A time series: each `y` column against the time in column `x`, one panel per unit,
    /// with the `spans` (what ran when) shaded behind.
    Series {
        /// Time column.
        x: usize,
        /// The values.
        y: Vec<usize>,
        /// Intervals of time, labelled.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        spans: Vec<Span>,
    },
    /// A grid: a cell per row, at the text of column `row` and of column `col`, coloured by
    /// column `value`.
    Heat {
        /// Row column.
        row: usize,
        /// Column column.
        col: usize,
        /// Value column.
        value: usize,
    },
}

/// A labelled value on an axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Guide {
    /// Where.
    pub at: f64,
    /// What it is.
    pub label: String,
}

/// A labelled interval of time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// Start.
    pub from: f64,
    /// End.
    pub to: f64,
    /// What ran.
    pub label: String,
}

/// A column of a [`Section`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// Name.
    pub name: String,
    /// Unit of the numbers in it, when they share one (`%`, `ns`, `GB/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

impl Column {
    /// A column without a unit.
    pub fn text(name: &str) -> Column {
        Column {
            name: name.to_string(),
            unit: None,
        }
    }

    /// A column of numbers in `unit`.
    pub fn unit(name: &str, unit: &str) -> Column {
        Column {
            name: name.to_string(),
            unit: Some(unit.to_string()),
        }
    }

    /// `name [unit]`, or the name alone.
    pub fn header(&self) -> String {
        match &self.unit {
            Some(u) if !u.is_empty() => format!("{} [{u}]", self.name),
            _ => self.name.clone(),
        }
    }
}

/// One cell of a [`Section`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Value {
    /// Nothing to show.
    Empty,
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A number, shown with `digits` decimals.
    Number {
        /// The value.
        value: f64,
        /// Decimals shown.
        digits: u8,
    },
    /// An estimate with its confidence interval, shown as `value [lower, upper]`.
    Estimate {
        /// Point estimate.
        value: f64,
        /// Lower bound of the interval.
        lower: f64,
        /// Upper bound of the interval.
        upper: f64,
        /// Decimals shown.
        digits: u8,
        /// Why a reader should not trust it (wide interval, disturbed trials), when so.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flag: Option<String>,
    },
    /// The workload did not run to completion (the tenant stopped answering).
    Dnr {
        /// Why.
        reason: String,
    },
}

impl Value {
    /// Text.
    pub fn text_of(s: impl Into<String>) -> Value {
        Value::Text { text: s.into() }
    }

    /// A number with `digits` decimals; a value that is not finite is [`Value::Empty`].
    pub fn number(value: f64, digits: u8) -> Value {
        if value.is_finite() {
            Value::Number { value, digits }
        } else {
            Value::Empty
        }
    }

    /// An estimate with its interval; not finite is [`Value::Empty`].
    pub fn estimate(value: f64, lower: f64, upper: f64, digits: u8) -> Value {
        if value.is_finite() {
            Value::Estimate {
                value,
                lower,
                upper,
                digits,
                flag: None,
            }
        } else {
            Value::Empty
        }
    }

    /// This estimate with a flag; other values are returned unchanged.
    pub fn flagged(self, why: impl Into<String>) -> Value {
        match self {
            Value::Estimate {
                value,
                lower,
                upper,
                digits,
                ..
            } => Value::Estimate {
                value,
                lower,
                upper,
                digits,
                flag: Some(why.into()),
            },
            other => other,
        }
    }

    /// The value as plain text: `-` for empty, `12.3 [10.1, 14.6]` for an estimate (with
    /// [`crate::UNTRUSTWORTHY_MARK`] after it when flagged), `DNR` for a workload that did
    /// not run.
    pub fn text(&self) -> String {
        match self {
            Value::Empty => "-".to_string(),
            Value::Text { text } => text.clone(),
            Value::Number { value, digits } => fixed(*value, *digits),
            Value::Estimate {
                value,
                lower,
                upper,
                digits,
                flag,
            } => {
                let mut s = format!(
                    "{} [{}, {}]",
                    fixed(*value, *digits),
                    fixed(*lower, *digits),
                    fixed(*upper, *digits)
                );
                if flag.is_some() {
                    s.push(crate::UNTRUSTWORTHY_MARK);
                }
                s
            }
            Value::Dnr { .. } => "DNR".to_string(),
        }
    }

    /// The number a chart would plot: the value or the estimate.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number { value, .. } | Value::Estimate { value, .. } => Some(*value),
            _ => None,
        }
    }
}

/// `x` with `digits` decimals, `-0.0` written as `0.0`.
fn fixed(x: f64, digits: u8) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let s = format!("{x:.*}", digits as usize);
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_text() {
        assert_eq!(Value::Empty.text(), "-");
        assert_eq!(Value::number(1.234, 1).text(), "1.2");
        assert_eq!(Value::number(-0.01, 1).text(), "0.0");
        assert_eq!(Value::number(f64::NAN, 1), Value::Empty);
        assert_eq!(Value::estimate(5.0, 3.25, 7.5, 1).text(), "5.0 [3.2, 7.5]");
        assert_eq!(
            Value::estimate(5.0, 3.0, 7.0, 0).flagged("wide").text(),
            "5 [3, 7]?"
        );
        assert_eq!(
            Value::Dnr {
                reason: "stopped".into()
            }
            .text(),
            "DNR"
        );
    }

    #[test]
    fn a_section_round_trips_through_json_with_its_types() {
        let mut s = Section::new(
            "curve",
            "cpu-int under cpu",
            vec![Column::unit("intensity", "%"), Column::unit("loss", "%")],
        );
        s.push(vec![
            Value::number(50.0, 0),
            Value::estimate(12.0, 10.0, 14.0, 1),
        ]);
        s.notes.push("a note".into());
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains(r#""type":"estimate""#), "{j}");
        assert_eq!(serde_json::from_str::<Section>(&j).unwrap(), s);
        assert_eq!(s.headers(), vec!["intensity [%]", "loss [%]"]);
        assert_eq!(s.text_rows(), vec![vec!["50", "12.0 [10.0, 14.0]"]]);
    }

    #[test]
    fn a_heat_map_carries_the_median_of_its_values() {
        let mut s = Section::new(
            "surface",
            "run x iteration",
            vec![
                Column::text("run"),
                Column::text("iterations"),
                Column::unit("mean", "us"),
            ],
        );
        assert_eq!(s.heat_median, None);
        s = s.with_plot(Plot::Heat {
            row: 0,
            col: 1,
            value: 2,
        });
        assert_eq!(s.heat_median, None, "no numbers yet");
        for (run, v) in [("1", 4.0), ("2", 1.0)] {
            s.push(vec![
                Value::text_of(run),
                Value::text_of("1-10"),
                Value::number(v, 2),
            ]);
        }
        s.push(vec![
            Value::text_of("3"),
            Value::text_of("1-10"),
            Value::Empty,
        ]);
        assert_eq!(s.heat_median, Some(2.5), "the empty cell is not a value");
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains(r#""heat_median":2.5"#), "{j}");
        assert_eq!(serde_json::from_str::<Section>(&j).unwrap(), s);
        let other = Section::new("t", "t", vec![Column::text("a")]);
        assert!(!serde_json::to_string(&other)
            .unwrap()
            .contains("heat_median"));
    }
}
