//! One Parquet file of the dataset, written and read with the parquet crate's own column
//! writers and readers: a [`Table`]'s columns become a row group, a row group's chosen
//! columns come back as a [`Table`].
//!
//! Every file is zstd-compressed (level 3), its integer columns of mostly distinct values
//! delta-encoded (times and page indexes mostly grow row after row, so their differences
//! take a few bits) and its other columns dictionary-encoded, with page statistics; and it
//! carries coldstart's key-value metadata (docs/dataset-format.md).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::data_type::{BoolType, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::schema::types::ColumnPath;

use crate::DatasetError;
use crate::columns::{Column, Table, Values};

/// Writes a table's rows into one Parquet file, one row group per call of [`write`](Self::write).
pub struct TableWriter {
    writer: SerializedFileWriter<File>,
    path: PathBuf,
}

impl TableWriter {
    /// A writer of `schema`'s columns into `file` (at `path`, named in errors), with the
    /// key-value `metadata` in its footer.
    pub fn new(
        file: File,
        path: &Path,
        schema: &Table,
        metadata: Vec<KeyValue>,
    ) -> Result<Self, DatasetError> {
        let writer = SerializedFileWriter::new(file, schema.schema(), Arc::new(properties(schema, metadata)))
            .map_err(|source| DatasetError::Parquet { path: path.to_owned(), source })?;
        Ok(TableWriter { writer, path: path.to_owned() })
    }

    /// Writes the rows of `parts` (tables of the writer's schema) as one row group.
    pub fn write(&mut self, parts: &[&Table]) -> Result<(), DatasetError> {
        let err = |source| DatasetError::Parquet { path: self.path.clone(), source };
        let mut row_group = self.writer.next_row_group().map_err(err)?;
        let mut index = 0;
        while let Some(mut column) = row_group.next_column().map_err(err)? {
            for part in parts {
                let Some(values) = part.columns.get(index) else {
                    return Err(err(ParquetError::General(format!("a part lacks column {index}"))));
                };
                write_column(&mut column, values).map_err(err)?;
            }
            column.close().map_err(err)?;
            index += 1;
        }
        row_group.close().map_err(err)?;
        Ok(())
    }

    /// Adds key-value metadata to the footer (known once the rows are written).
    pub fn append_metadata(&mut self, metadata: Vec<KeyValue>) {
        for kv in metadata {
            self.writer.append_key_value_metadata(kv);
        }
    }

    /// Writes the footer; returns the file.
    pub fn finish(self) -> Result<File, DatasetError> {
        let path = self.path;
        self.writer.into_inner().map_err(|source| DatasetError::Parquet { path, source })
    }
}

/// Level 3: most of zstd's gain on these files (level 9 saves under 2% more) at a
/// fraction of its time.
const ZSTD_LEVEL: i32 = 3;

/// How `schema`'s columns are encoded and compressed: an integer column whose values in
/// `schema`'s rows (a file's first trace) are mostly distinct (times, sectors) is
/// delta-encoded; one of few values (counts, sizes, file times) keeps its dictionary.
fn properties(schema: &Table, metadata: Vec<KeyValue>) -> WriterProperties {
    let level = ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default();
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .set_key_value_metadata(Some(metadata));
    for column in &schema.columns {
        let mostly_distinct = match &column.values {
            Values::I32(v) => mostly_distinct(v.iter().map(|&x| i64::from(x))),
            Values::I64(v) => mostly_distinct(v.iter().copied()),
            _ => false,
        };
        if mostly_distinct {
            let path = ColumnPath::from(column.name.as_str());
            builder = builder
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
        }
    }
    builder.build()
}

/// True when over a quarter of `values` are distinct: a dictionary would hold most of
/// them, and differences from the value before take fewer bits.
fn mostly_distinct(values: impl ExactSizeIterator<Item = i64>) -> bool {
    let rows = values.len();
    let distinct: std::collections::HashSet<i64> = values.collect();
    rows > 0 && distinct.len() * 4 > rows
}

fn write_column(writer: &mut SerializedColumnWriter<'_>, column: &Column) -> Result<(), ParquetError> {
    let levels = column.nullable.then_some(column.levels.as_slice());
    match &column.values {
        Values::Bool(v) => writer.typed::<BoolType>().write_batch(v, levels, None)?,
        Values::I32(v) => writer.typed::<Int32Type>().write_batch(v, levels, None)?,
        Values::I64(v) => writer.typed::<Int64Type>().write_batch(v, levels, None)?,
        Values::F64(v) => writer.typed::<DoubleType>().write_batch(v, levels, None)?,
        Values::Str(v) => writer.typed::<ByteArrayType>().write_batch(v, levels, None)?,
    };
    Ok(())
}

/// A Parquet file opened for reading its footer and row groups.
pub struct TableReader {
    reader: SerializedFileReader<File>,
    path: PathBuf,
}

impl TableReader {
    pub fn open(path: &Path) -> Result<Self, DatasetError> {
        let file = File::open(path).map_err(|source| DatasetError::Io { path: path.to_owned(), source })?;
        let reader = SerializedFileReader::new(file)
            .map_err(|source| DatasetError::Read { path: path.to_owned(), source })?;
        Ok(TableReader { reader, path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value of footer key `key`.
    pub fn metadata(&self, key: &str) -> Option<String> {
        let meta = self.reader.metadata().file_metadata();
        meta.key_value_metadata()?.iter().find(|k| k.key == key)?.value.clone()
    }

    /// Rows in the file, from the footer.
    pub fn num_rows(&self) -> u64 {
        u64::try_from(self.reader.metadata().file_metadata().num_rows()).unwrap_or(0)
    }

    pub fn num_row_groups(&self) -> usize {
        self.reader.num_row_groups()
    }

    /// Rows of row group `index`, from the footer.
    pub fn row_group_rows(&self, index: usize) -> usize {
        usize::try_from(self.reader.metadata().row_group(index).num_rows()).unwrap_or(0)
    }

    /// The file's column names, in order.
    pub fn column_names(&self) -> Vec<String> {
        let schema = self.reader.metadata().file_metadata().schema_descr();
        schema.columns().iter().map(|c| c.name().to_owned()).collect()
    }

    /// The positions of `names` among the file's columns; a missing one is a schema error.
    pub fn projection(&self, names: &[&str]) -> Result<Vec<usize>, DatasetError> {
        let have = self.column_names();
        names
            .iter()
            .map(|name| {
                have.iter().position(|h| h == name).ok_or_else(|| DatasetError::Schema {
                    path: self.path.clone(),
                    reason: format!("its column {name} is missing"),
                })
            })
            .collect()
    }

    /// The columns at `projection` (positions, as [`projection`](Self::projection) gives) of row group `index`.
    pub fn read_row_group(&self, index: usize, projection: &[usize]) -> Result<Table, DatasetError> {
        let err = |source| DatasetError::Read { path: self.path.clone(), source };
        let row_group = self.reader.get_row_group(index).map_err(err)?;
        let rows = usize::try_from(row_group.metadata().num_rows()).unwrap_or(0);
        let schema = self.reader.metadata().file_metadata().schema_descr();
        let mut columns = Vec::with_capacity(projection.len());
        for &i in projection {
            let descr = schema.column(i);
            let nullable = descr.max_def_level() > 0;
            let (values, levels) = read_column(row_group.get_column_reader(i).map_err(err)?, rows, nullable)
                .map_err(err)?
                .ok_or_else(|| DatasetError::Schema {
                    path: self.path.clone(),
                    reason: format!("its column {} is of a type the dataset does not use", descr.name()),
                })?;
            columns.push(Column { name: descr.name().to_owned(), nullable, values, levels });
        }
        Ok(Table { columns, rows })
    }

    /// The columns at `projection` of every row group, as one table.
    pub fn read_all(&self, projection: &[usize]) -> Result<Table, DatasetError> {
        let mut table: Option<Table> = None;
        for index in 0..self.num_row_groups() {
            let group = self.read_row_group(index, projection)?;
            match &mut table {
                None => table = Some(group),
                Some(t) => {
                    t.append(&group);
                }
            }
        }
        match table {
            Some(t) => Ok(t),
            None => self.empty(projection),
        }
    }

    /// No rows, with the columns at `projection` (a file without row groups).
    fn empty(&self, projection: &[usize]) -> Result<Table, DatasetError> {
        let schema = self.reader.metadata().file_metadata().schema_descr();
        let mut columns = Vec::new();
        for &i in projection {
            let descr = schema.column(i);
            let values = match descr.physical_type() {
                parquet::basic::Type::BOOLEAN => Values::Bool(Vec::new()),
                parquet::basic::Type::INT32 => Values::I32(Vec::new()),
                parquet::basic::Type::INT64 => Values::I64(Vec::new()),
                parquet::basic::Type::DOUBLE => Values::F64(Vec::new()),
                parquet::basic::Type::BYTE_ARRAY => Values::Str(Vec::new()),
                _ => {
                    return Err(DatasetError::Schema {
                        path: self.path.clone(),
                        reason: format!("its column {} is of a type the dataset does not use", descr.name()),
                    });
                }
            };
            columns.push(Column {
                name: descr.name().to_owned(),
                nullable: descr.max_def_level() > 0,
                values,
                levels: Vec::new(),
            });
        }
        Ok(Table { columns, rows: 0 })
    }
}

/// A column chunk's values and definition levels; `None` for a type the dataset does not use.
fn read_column(
    reader: ColumnReader,
    rows: usize,
    nullable: bool,
) -> Result<Option<(Values, Vec<i16>)>, ParquetError> {
    let mut levels = Vec::new();
    let values = match reader {
        ColumnReader::BoolColumnReader(r) => Values::Bool(read_records(r, rows, nullable, &mut levels)?),
        ColumnReader::Int32ColumnReader(r) => Values::I32(read_records(r, rows, nullable, &mut levels)?),
        ColumnReader::Int64ColumnReader(r) => Values::I64(read_records(r, rows, nullable, &mut levels)?),
        ColumnReader::DoubleColumnReader(r) => Values::F64(read_records(r, rows, nullable, &mut levels)?),
        ColumnReader::ByteArrayColumnReader(r) => Values::Str(read_records(r, rows, nullable, &mut levels)?),
        _ => return Ok(None),
    };
    Ok(Some((values, levels)))
}

fn read_records<T: DataType>(
    mut reader: ColumnReaderImpl<T>,
    rows: usize,
    nullable: bool,
    levels: &mut Vec<i16>,
) -> Result<Vec<T::T>, ParquetError> {
    let mut values = Vec::with_capacity(rows);
    let mut done = 0;
    while done < rows {
        let def = if nullable { Some(&mut *levels) } else { None };
        let (records, _, _) = reader.read_records(rows - done, def, None, &mut values)?;
        if records == 0 {
            return Err(ParquetError::General(format!(
                "the column chunk ends after {done} of its {rows} rows"
            )));
        }
        done += records;
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::data_type::ByteArray;

    fn column(name: &str, values: Values) -> Column {
        Column { name: name.to_owned(), nullable: false, values, levels: Vec::new() }
    }

    #[test]
    fn distinct_integers_are_delta_encoded_the_rest_dictionary_encoded_all_zstd_and_rows_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let times: Vec<i64> = (0..10_000).map(|i| 1_000_000 + i * 37 + i % 5).collect();
        let pages: Vec<i32> = (0..10_000).map(|i| i / 3).collect();
        let sizes: Vec<i64> = (0..10_000).map(|i| 4096 * (i % 9)).collect();
        let paths: Vec<ByteArray> =
            (0..10_000).map(|i| ByteArray::from(format!("/usr/lib/{}.so", i % 7).as_str())).collect();
        let table = Table {
            columns: vec![
                column("t_ns", Values::I64(times)),
                column("page_index", Values::I32(pages)),
                column("path", Values::Str(paths)),
                column("size", Values::I64(sizes)),
            ],
            rows: 10_000,
        };
        let mut writer = TableWriter::new(File::create(&path).unwrap(), &path, &table, Vec::new()).unwrap();
        writer.write(&[&table]).unwrap();
        writer.finish().unwrap();
        let reader = TableReader::open(&path).unwrap();
        let chunks = reader.reader.metadata().row_group(0).columns().to_vec();
        for chunk in &chunks {
            assert!(matches!(chunk.compression(), Compression::ZSTD(_)), "{chunk:?}");
        }
        for chunk in &chunks[..2] {
            assert!(chunk.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED), "{chunk:?}");
            assert!(!chunk.encodings().any(|e| e == Encoding::RLE_DICTIONARY), "{chunk:?}");
        }
        for chunk in &chunks[2..] {
            assert!(chunk.encodings().any(|e| e == Encoding::RLE_DICTIONARY), "{chunk:?}");
            assert!(!chunk.encodings().any(|e| e == Encoding::DELTA_BINARY_PACKED), "{chunk:?}");
        }
        // Ten thousand growing times in a few bytes each, not eight.
        assert!(chunks[0].compressed_size() < 20_000, "{}", chunks[0].compressed_size());
        assert_eq!(reader.read_all(&[0, 1, 2, 3]).unwrap(), table);
    }
}
