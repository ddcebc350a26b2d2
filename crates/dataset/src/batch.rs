//! Building one Arrow record batch column by column from a slice of rows.
//!
//! Every table of the dataset is a list of `(name, value of a row)` pairs written with
//! these calls, so a table's schema reads as one expression. Unsigned values of the trace
//! become signed 64-bit columns (Spark has no unsigned types); a value past `i64::MAX`,
//! which no trace holds (the reader refuses it), would saturate.

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

/// The column every table starts with.
pub const TRACE_ID: &str = "trace_id";

/// Columns of one table, for `rows` rows, starting with `trace_id`.
pub struct Batch<'r, R> {
    rows: &'r [R],
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

pub fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl<'r, R> Batch<'r, R> {
    pub fn new(trace_id: &str, rows: &'r [R]) -> Self {
        let ids = StringArray::from_iter_values(std::iter::repeat_n(trace_id, rows.len()));
        Batch { rows, fields: vec![Field::new(TRACE_ID, DataType::Utf8, false)], arrays: vec![Arc::new(ids)] }
    }

    fn push(mut self, name: &str, nullable: bool, array: ArrayRef) -> Self {
        self.fields.push(Field::new(name, array.data_type().clone(), nullable));
        self.arrays.push(array);
        self
    }

    pub fn i64(self, name: &str, value: impl Fn(&'r R) -> i64) -> Self {
        let a = Int64Array::from_iter_values(self.rows.iter().map(value));
        self.push(name, false, Arc::new(a))
    }

    pub fn opt_i64(self, name: &str, value: impl Fn(&'r R) -> Option<i64>) -> Self {
        let a: Int64Array = self.rows.iter().map(value).collect();
        self.push(name, true, Arc::new(a))
    }

    pub fn i32(self, name: &str, value: impl Fn(&'r R) -> i32) -> Self {
        let a = Int32Array::from_iter_values(self.rows.iter().map(value));
        self.push(name, false, Arc::new(a))
    }

    pub fn opt_i32(self, name: &str, value: impl Fn(&'r R) -> Option<i32>) -> Self {
        let a: Int32Array = self.rows.iter().map(value).collect();
        self.push(name, true, Arc::new(a))
    }

    pub fn f64(self, name: &str, value: impl Fn(&'r R) -> f64) -> Self {
        let a = Float64Array::from_iter_values(self.rows.iter().map(value));
        self.push(name, false, Arc::new(a))
    }

    pub fn bool(self, name: &str, value: impl Fn(&'r R) -> bool) -> Self {
        let a: BooleanArray = self.rows.iter().map(|r| Some(value(r))).collect();
        self.push(name, false, Arc::new(a))
    }

    pub fn opt_bool(self, name: &str, value: impl Fn(&'r R) -> Option<bool>) -> Self {
        let a: BooleanArray = self.rows.iter().map(value).collect();
        self.push(name, true, Arc::new(a))
    }

    pub fn str<S: AsRef<str>>(self, name: &str, value: impl Fn(&'r R) -> S) -> Self {
        let a = StringArray::from_iter_values(self.rows.iter().map(value));
        self.push(name, false, Arc::new(a))
    }

    pub fn opt_str<S: AsRef<str>>(self, name: &str, value: impl Fn(&'r R) -> Option<S>) -> Self {
        let a: StringArray = self.rows.iter().map(value).collect();
        self.push(name, true, Arc::new(a))
    }

    pub fn finish(self) -> RecordBatch {
        RecordBatch::try_new(Arc::new(Schema::new(self.fields)), self.arrays)
            .expect("every column has one value per row and the type of its field")
    }
}
