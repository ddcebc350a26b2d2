//! Building one table's columns from a slice of rows.
//!
//! Every table of the dataset is a list of `(name, value of a row)` pairs written with
//! these calls, so a table's schema reads as one expression. Unsigned values of the trace
//! become signed 64-bit columns (Spark has no unsigned types); a value past `i64::MAX`,
//! which no trace holds (the reader refuses it), would saturate.

use parquet::data_type::ByteArray;

use crate::columns::{Column, Table, Values};

/// The column every table starts with.
pub const TRACE_ID: &str = "trace_id";

/// Columns of one table, for `rows` rows, starting with `trace_id`.
pub struct Batch<'r, R> {
    rows: &'r [R],
    table: Table,
}

pub fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Values and definition levels of an optional column.
fn split<T>(values: impl Iterator<Item = Option<T>>) -> (Vec<T>, Vec<i16>) {
    let mut present = Vec::new();
    let mut levels = Vec::new();
    for v in values {
        levels.push(i16::from(v.is_some()));
        present.extend(v);
    }
    (present, levels)
}

impl<'r, R> Batch<'r, R> {
    pub fn new(trace_id: &str, rows: &'r [R]) -> Self {
        let id = ByteArray::from(trace_id);
        let ids = Values::Str(vec![id; rows.len()]);
        let column = Column { name: TRACE_ID.to_owned(), nullable: false, values: ids, levels: Vec::new() };
        Batch { rows, table: Table { columns: vec![column], rows: rows.len() } }
    }

    fn push(mut self, name: &str, values: Values, levels: Option<Vec<i16>>) -> Self {
        let nullable = levels.is_some();
        let column = Column { name: name.to_owned(), nullable, values, levels: levels.unwrap_or_default() };
        self.table.columns.push(column);
        self
    }

    pub fn i64(self, name: &str, value: impl Fn(&'r R) -> i64) -> Self {
        let v = self.rows.iter().map(value).collect();
        self.push(name, Values::I64(v), None)
    }

    pub fn opt_i64(self, name: &str, value: impl Fn(&'r R) -> Option<i64>) -> Self {
        let (v, levels) = split(self.rows.iter().map(value));
        self.push(name, Values::I64(v), Some(levels))
    }

    pub fn i32(self, name: &str, value: impl Fn(&'r R) -> i32) -> Self {
        let v = self.rows.iter().map(value).collect();
        self.push(name, Values::I32(v), None)
    }

    pub fn opt_i32(self, name: &str, value: impl Fn(&'r R) -> Option<i32>) -> Self {
        let (v, levels) = split(self.rows.iter().map(value));
        self.push(name, Values::I32(v), Some(levels))
    }

    pub fn f64(self, name: &str, value: impl Fn(&'r R) -> f64) -> Self {
        let v = self.rows.iter().map(value).collect();
        self.push(name, Values::F64(v), None)
    }

    pub fn bool(self, name: &str, value: impl Fn(&'r R) -> bool) -> Self {
        let v = self.rows.iter().map(value).collect();
        self.push(name, Values::Bool(v), None)
    }

    pub fn opt_bool(self, name: &str, value: impl Fn(&'r R) -> Option<bool>) -> Self {
        let (v, levels) = split(self.rows.iter().map(value));
        self.push(name, Values::Bool(v), Some(levels))
    }

    pub fn str<S: AsRef<str>>(self, name: &str, value: impl Fn(&'r R) -> S) -> Self {
        let v = self.rows.iter().map(|r| ByteArray::from(value(r).as_ref())).collect();
        self.push(name, Values::Str(v), None)
    }

    pub fn opt_str<S: AsRef<str>>(self, name: &str, value: impl Fn(&'r R) -> Option<S>) -> Self {
        let values = self.rows.iter().map(|r| value(r).map(|s| ByteArray::from(s.as_ref())));
        let (v, levels) = split(values);
        self.push(name, Values::Str(v), Some(levels))
    }

    pub fn finish(self) -> Table {
        self.table
    }
}
