//! Importers: other tools' logs turned into coldstart traces, so every report,
//! chart and analysis works on them.
//!
//! Each importer is pure: it reads the files it is given (a folder or an archive)
//! and never looks at the live system. Today there is one, [`bootchart2`].

#![forbid(unsafe_code)]

pub mod bootchart2;
mod error;

pub use error::{ImportError, Result};
