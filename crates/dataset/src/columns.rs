//! A table's rows held column by column, as Parquet stores them: each column's values
//! with its nulls left out, and for a nullable column one definition level per row
//! (1: a value, 0: null). What the writer writes, the reader reads and compaction copies.
//!
//! The dataset has five column types, each one Parquet physical type: `INT32`, `INT64`,
//! `DOUBLE`, `BOOLEAN`, and text as `BYTE_ARRAY` with the `String` logical type.

use std::sync::Arc;

use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
use parquet::data_type::ByteArray;
use parquet::schema::types::{Type, TypePtr};

/// The values of one column (nulls not included).
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    Bool(Vec<bool>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    Str(Vec<ByteArray>),
}

impl Values {
    /// An empty list of the same type.
    pub fn empty_like(&self) -> Values {
        match self {
            Values::Bool(_) => Values::Bool(Vec::new()),
            Values::I32(_) => Values::I32(Vec::new()),
            Values::I64(_) => Values::I64(Vec::new()),
            Values::F64(_) => Values::F64(Vec::new()),
            Values::Str(_) => Values::Str(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Values::Bool(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::F64(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Parquet physical type the values are stored as.
    pub fn physical_type(&self) -> PhysicalType {
        match self {
            Values::Bool(_) => PhysicalType::BOOLEAN,
            Values::I32(_) => PhysicalType::INT32,
            Values::I64(_) => PhysicalType::INT64,
            Values::F64(_) => PhysicalType::DOUBLE,
            Values::Str(_) => PhysicalType::BYTE_ARRAY,
        }
    }

    /// Appends `other`'s values; false when the types differ (nothing appended).
    fn append(&mut self, other: &Values) -> bool {
        match (self, other) {
            (Values::Bool(a), Values::Bool(b)) => a.extend_from_slice(b),
            (Values::I32(a), Values::I32(b)) => a.extend_from_slice(b),
            (Values::I64(a), Values::I64(b)) => a.extend_from_slice(b),
            (Values::F64(a), Values::F64(b)) => a.extend_from_slice(b),
            (Values::Str(a), Values::Str(b)) => a.extend_from_slice(b),
            _ => return false,
        }
        true
    }
}

/// One column: its name, whether it may hold nulls, its values and definition levels.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub nullable: bool,
    /// The non-null values, in row order.
    pub values: Values,
    /// One per row when `nullable` (1: the row has the next value, 0: null); else empty.
    pub levels: Vec<i16>,
}

impl Column {
    /// The Parquet schema field of this column.
    pub fn field(&self) -> TypePtr {
        let repetition = if self.nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED };
        let physical = self.values.physical_type();
        let logical = (physical == PhysicalType::BYTE_ARRAY).then_some(LogicalType::String);
        let field = Type::primitive_type_builder(&self.name, physical)
            .with_repetition(repetition)
            .with_logical_type(logical)
            .build()
            .expect(
                "a primitive field with a name, a physical type and at most the String logical type is valid",
            );
        Arc::new(field)
    }

    /// Each row's index into `values`, or `None` for a null.
    pub fn value_indexes(&self) -> impl Iterator<Item = Option<usize>> + '_ {
        let mut next = 0usize;
        let rows = if self.nullable { self.levels.len() } else { self.values.len() };
        (0..rows).map(move |row| {
            if self.nullable && self.levels[row] == 0 {
                None
            } else {
                next += 1;
                Some(next - 1)
            }
        })
    }
}

/// Rows of one table, column by column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: usize,
}

impl Table {
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The Parquet schema of these columns (the root is named `schema`).
    pub fn schema(&self) -> TypePtr {
        let fields = self.columns.iter().map(Column::field).collect();
        Arc::new(
            Type::group_type_builder("schema")
                .with_fields(fields)
                .build()
                .expect("a root group of primitive fields is a valid schema"),
        )
    }

    /// True when `other` has the same column names, types and nullability.
    pub fn same_schema(&self, other: &Table) -> bool {
        self.columns.len() == other.columns.len()
            && self.columns.iter().zip(&other.columns).all(|(a, b)| {
                a.name == b.name
                    && a.nullable == b.nullable
                    && a.values.physical_type() == b.values.physical_type()
            })
    }

    /// An empty table of the same columns.
    pub fn empty_like(&self) -> Table {
        let columns = self
            .columns
            .iter()
            .map(|c| Column {
                name: c.name.clone(),
                nullable: c.nullable,
                values: c.values.empty_like(),
                levels: Vec::new(),
            })
            .collect();
        Table { columns, rows: 0 }
    }

    /// Appends `other`'s rows; false when its schema differs (nothing appended).
    pub fn append(&mut self, other: &Table) -> bool {
        if !self.same_schema(other) {
            return false;
        }
        for (a, b) in self.columns.iter_mut().zip(&other.columns) {
            a.values.append(&b.values);
            a.levels.extend_from_slice(&b.levels);
        }
        self.rows += other.rows;
        true
    }
}

/// A table cut into consecutive runs of rows, front to back (a row group handed out trace
/// by trace).
pub struct Front {
    table: Table,
    row: usize,
    /// Per column, the index of the value of the first row not handed out yet.
    values: Vec<usize>,
}

impl Front {
    pub fn new(table: Table) -> Front {
        let values = vec![0; table.columns.len()];
        Front { table, row: 0, values }
    }

    /// The whole table.
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// Rows not handed out yet.
    pub fn remaining(&self) -> usize {
        self.table.rows - self.row
    }

    /// The column at `index`, for looking at rows not handed out yet (from [`Self::row`]).
    pub fn column(&self, index: usize) -> &Column {
        &self.table.columns[index]
    }

    /// The index of the first row not handed out yet.
    pub fn row(&self) -> usize {
        self.row
    }

    /// The next `n` rows (at most those remaining), as a table.
    pub fn take(&mut self, n: usize) -> Table {
        let n = n.min(self.remaining());
        let (start, end) = (self.row, self.row + n);
        let mut columns = Vec::with_capacity(self.table.columns.len());
        for (column, first) in self.table.columns.iter().zip(self.values.iter_mut()) {
            let (levels, count) = if column.nullable {
                let levels = column.levels[start..end].to_vec();
                let count = levels.iter().filter(|&&l| l > 0).count();
                (levels, count)
            } else {
                (Vec::new(), n)
            };
            let values = column.values.slice(*first, *first + count);
            *first += count;
            columns.push(Column { name: column.name.clone(), nullable: column.nullable, values, levels });
        }
        self.row = end;
        Table { columns, rows: n }
    }
}

impl Values {
    /// The values `start..end`, copied.
    pub fn slice(&self, start: usize, end: usize) -> Values {
        match self {
            Values::Bool(v) => Values::Bool(v[start..end].to_vec()),
            Values::I32(v) => Values::I32(v[start..end].to_vec()),
            Values::I64(v) => Values::I64(v[start..end].to_vec()),
            Values::F64(v) => Values::F64(v[start..end].to_vec()),
            Values::Str(v) => Values::Str(v[start..end].to_vec()),
        }
    }
}
