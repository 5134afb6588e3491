//! What every command prints: aligned lines for a person, or one JSON document with `--json`.
//! Times are RFC 3339 in UTC, to the second.

use chrono::{DateTime, SecondsFormat, Utc};
use prost_types::Timestamp;
use serde_json::Value;
use tonic::Status;

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Lines for a person.
    Human,
    /// One JSON document on stdout, for scripts.
    Json,
}

/// A protobuf time as RFC 3339; `None` when unset (or out of chrono's range).
pub(crate) fn time(timestamp: Option<&Timestamp>) -> Option<String> {
    let timestamp = timestamp?;
    let nanos = u32::try_from(timestamp.nanos).unwrap_or(0);
    DateTime::<Utc>::from_timestamp(timestamp.seconds, nanos)
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// A protobuf time for a table cell: RFC 3339, or `unset` in its place.
pub(crate) fn time_or(timestamp: Option<&Timestamp>, unset: &str) -> String {
    time(timestamp).unwrap_or_else(|| unset.to_owned())
}

/// US micro-dollars as dollars with six decimals: `1250` is `0.001250`.
pub(crate) fn dollars(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
}

pub(crate) fn json_line(value: &Value) -> String {
    format!("{value}\n")
}

/// A gRPC failure on one line: the code and the server's message.
pub(crate) fn status_line(status: &Status) -> String {
    let message = status.message().replace('\n', " ");
    if message.is_empty() {
        format!("{:?}", status.code())
    } else {
        format!("{:?}: {message}", status.code())
    }
}

/// Rows under a header, each column padded to its width and two spaces apart; the last
/// column is not padded, so no line ends in blanks.
pub(crate) struct Table {
    widths: Vec<usize>,
    out: String,
}

impl Table {
    /// A table whose header is the columns' names; the last column's width is not used.
    pub(crate) fn new(columns: &[(&str, usize)]) -> Table {
        let mut table = Table {
            widths: columns.iter().map(|(_, width)| *width).collect(),
            out: String::new(),
        };
        let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
        table.row(&names);
        table
    }

    pub(crate) fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            let cell = cell.as_ref();
            if i == last {
                self.out.push_str(cell);
            } else {
                let width = self.widths.get(i).copied().unwrap_or(0);
                self.out.push_str(&format!("{cell:<width$}  "));
            }
        }
        self.out.push('\n');
    }

    /// The lines, and where to go on from when more pages remain.
    pub(crate) fn finish(mut self, next: Option<&str>) -> String {
        if let Some(next) = next {
            self.out
                .push_str(&format!("next page: --page-token {next}\n"));
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_every_column_but_the_last() {
        let mut table = Table::new(&[("ID", 4), ("NAME", 6), ("NOTE", 0)]);
        table.row(&["1", "ab", "x"]);
        assert_eq!(
            table.finish(Some("c1")),
            "ID    NAME    NOTE\n1     ab      x\nnext page: --page-token c1\n"
        );
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = Timestamp {
            seconds: 86_400,
            nanos: 5,
        };
        assert_eq!(time(Some(&at)).as_deref(), Some("1970-01-02T00:00:00Z"));
        assert_eq!(time_or(None, "never"), "never");
    }
}
