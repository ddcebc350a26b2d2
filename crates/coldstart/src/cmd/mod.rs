//! One module per subcommand: its arguments (clap derive) and the glue that turns
//! them into calls of the library crates.

pub mod anonymize;
pub mod bench;
pub mod demo;
pub mod doctor;
pub mod export;
pub mod import;
pub mod info;
pub mod mark;
pub mod prefetch;
pub mod reads;
pub mod record;
pub mod recover;
pub mod report;
pub mod run;
pub mod storage;
