//! The coldstart data model and its trace file.
//!
//! A trace is one SQLite database per recording, with a versioned schema that
//! docs/trace-format.md documents for users of plain `sqlite3`. This crate owns
//! the model ([`Trace`] and one struct per table), the writer (atomic, mode 0600)
//! and the reader. It never touches the live system.

#![forbid(unsafe_code)]

mod anonymize;
mod dev;
mod error;
mod index;
mod model;
mod reader;
pub mod schema;
mod stacks;
mod text;
mod writer;

pub use anonymize::{ANONYMOUS_HOST, ANONYMOUS_USER, Anonymized, anonymize};
pub use dev::{Dev, ParseDevError};
pub use error::{Result, TraceError, error_chain};
pub use index::{FileIndex, ProcessIndex};
pub use model::*;
pub use stacks::StackIndex;
pub use text::{OpenTextEnum, ParseReadyReasonError, TextEnum};
pub use writer::TraceWriter;
