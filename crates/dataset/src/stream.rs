//! One table's rows of one build, trace by trace in trace id order, read from its exported
//! files and its parts alike.
//!
//! Every file holds its traces sorted by id (an exported file one, a part many, its rows
//! grouped by trace in the order its footer lists them), so the order of all traces is a
//! merge of the files' lists, and each part is read front to back, one row group at a
//! time: memory holds a row group per part, never the table. Compaction reads what it
//! folds this way, and `prefetch plan --dataset` the tables it needs.

use std::path::{Path, PathBuf};

use crate::DatasetError;
use crate::batch::TRACE_ID;
use crate::columns::{Front, Table, Values};
use crate::file::TableReader;
use crate::survey::Held;

/// A part being read front to back.
struct PartCursor {
    reader: TableReader,
    projection: Vec<usize>,
    /// Where `trace_id` is among the projected columns.
    id_column: usize,
    next_group: usize,
    front: Option<Front>,
}

impl PartCursor {
    fn open(path: &Path, columns: Option<&[&str]>) -> Result<PartCursor, DatasetError> {
        let reader = TableReader::open(path)?;
        let projection = projection(&reader, columns)?;
        let id_at = reader.projection(&[TRACE_ID])?[0];
        let id_column = projection.iter().position(|&p| p == id_at).unwrap_or(0);
        Ok(PartCursor { reader, projection, id_column, next_group: 0, front: None })
    }

    /// The rows of trace `id`, which must come next (none when the part holds no rows of it).
    fn take(&mut self, id: &str) -> Result<Table, DatasetError> {
        let mut rows: Option<Table> = None;
        loop {
            if self.front.as_ref().is_none_or(|f| f.remaining() == 0) {
                if self.next_group == self.reader.num_row_groups() {
                    break;
                }
                let group = self.reader.read_row_group(self.next_group, &self.projection)?;
                self.next_group += 1;
                self.front = Some(Front::new(group));
                continue;
            }
            let front = self.front.as_mut().expect("loaded above");
            let n = leading_rows_of(front, self.id_column, id);
            if n == 0 {
                if next_id(front, self.id_column).is_some_and(|next| next < id.as_bytes()) {
                    return Err(DatasetError::Schema {
                        path: self.reader.path().to_owned(),
                        reason: format!(
                            "its rows are not in the order of its list of traces (at trace {id})"
                        ),
                    });
                }
                break;
            }
            let more = front.take(n);
            let whole = front.remaining() > 0;
            match &mut rows {
                None => rows = Some(more),
                Some(r) => {
                    r.append(&more);
                }
            }
            if whole {
                break;
            }
        }
        match (rows, &self.front) {
            (Some(rows), _) => Ok(rows),
            (None, Some(front)) => Ok(front.table().empty_like()),
            (None, None) => self.reader.read_all(&self.projection),
        }
    }
}

/// The trace id of the first row not handed out yet.
fn next_id(front: &Front, id_column: usize) -> Option<&[u8]> {
    let Values::Str(ids) = &front.column(id_column).values else { return None };
    ids.get(front.row()).map(|v| v.data())
}

/// How many of the rows not handed out yet, from the first, belong to trace `id`.
fn leading_rows_of(front: &Front, id_column: usize, id: &str) -> usize {
    let column = front.column(id_column);
    let Values::Str(ids) = &column.values else { return 0 };
    // trace_id is never null, so row and value indexes agree.
    ids[front.row()..].iter().take_while(|v| v.data() == id.as_bytes()).count()
}

/// The positions of `columns` (all of the file's when `None`) among the file's, `trace_id`
/// always among them.
fn projection(reader: &TableReader, columns: Option<&[&str]>) -> Result<Vec<usize>, DatasetError> {
    match columns {
        None => Ok((0..reader.column_names().len()).collect()),
        Some(names) => {
            let mut with_id: Vec<&str> = vec![TRACE_ID];
            with_id.extend(names.iter().filter(|n| **n != TRACE_ID));
            reader.projection(&with_id)
        }
    }
}

enum Source {
    Trace(PathBuf),
    Part(PathBuf, Option<PartCursor>),
}

/// The rows of a table's files, trace by trace in id order.
pub struct TraceStream {
    columns: Option<Vec<String>>,
    sources: Vec<Source>,
    /// (trace id, source), sorted by id.
    order: Vec<(String, usize)>,
    next: usize,
}

impl TraceStream {
    /// The traces of `files` (relative to `dir`), with the columns `columns` (all when
    /// `None`; `trace_id` always first).
    pub fn new(dir: &Path, files: &[Held], columns: Option<&[&str]>) -> TraceStream {
        let mut sources = Vec::new();
        let mut order = Vec::new();
        for held in files {
            let path = dir.join(&held.path);
            order.extend(held.ids.iter().map(|id| (id.clone(), sources.len())));
            sources.push(if held.part { Source::Part(path, None) } else { Source::Trace(path) });
        }
        order.sort();
        let columns = columns.map(|c| c.iter().map(|s| (*s).to_owned()).collect());
        TraceStream { columns, sources, order, next: 0 }
    }

    /// Traces in the stream.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The id of the trace [`next`](Self::next) reads.
    pub fn peek(&self) -> Option<&str> {
        self.order.get(self.next).map(|(id, _)| id.as_str())
    }

    /// The next trace's id and rows.
    pub fn next_trace(&mut self) -> Option<Result<(String, Table), DatasetError>> {
        let (id, source) = self.order.get(self.next)?.clone();
        self.next += 1;
        let names: Option<Vec<&str>> = self.columns.as_ref().map(|c| c.iter().map(String::as_str).collect());
        let rows = match &mut self.sources[source] {
            Source::Trace(path) => read_trace_file(path, names.as_deref()),
            Source::Part(path, cursor) => match cursor {
                Some(c) => c.take(&id),
                None => PartCursor::open(path, names.as_deref()).and_then(|c| cursor.insert(c).take(&id)),
            },
        };
        Some(rows.map(|r| (id, r)))
    }

    /// Passes over the next trace (a part's rows are read, an exported file is not opened).
    pub fn skip(&mut self) -> Result<(), DatasetError> {
        let Some((_, source)) = self.order.get(self.next) else { return Ok(()) };
        if let Source::Trace(_) = self.sources[*source] {
            self.next += 1;
            return Ok(());
        }
        self.next_trace().transpose().map(|_| ())
    }

    /// The rows of trace `id`, passing over the traces before it; `None` when the stream
    /// does not hold it.
    pub fn rows_of(&mut self, id: &str) -> Option<Result<Table, DatasetError>> {
        while let Some(next) = self.peek() {
            if next > id {
                return None;
            }
            if next == id {
                return self.next_trace().map(|r| r.map(|(_, rows)| rows));
            }
            if let Err(e) = self.skip() {
                return Some(Err(e));
            }
        }
        None
    }
}

fn read_trace_file(path: &Path, columns: Option<&[&str]>) -> Result<Table, DatasetError> {
    let reader = TableReader::open(path)?;
    let projection = projection(&reader, columns)?;
    reader.read_all(&projection)
}
