//! Prefetch plans: what a start read, replayed before or alongside the next start.
//!
//! - [`build`] makes a [`Plan`] from a trace (pure): per file, the pages the start
//!   really used (page accesses; page fills when the trace has none) merged into
//!   ranges, each with the time it was first needed and its position on the disk;
//!   filesystem metadata as block-device ranges; the directories to warm; the
//!   replay order ([`order`]: first need, disk position, or a blend).
//! - [`fleet`] makes a plan from many traces (a dataset): the pages a share of them
//!   used, checked against this machine's files.
//! - [`plan`] is the file format (versioned JSON, docs/plan-format.md) and
//!   [`show`] its readable dump.
//! - [`blocks`] makes, shows and replays block plans: a device's ranges, tied to its
//!   image, read with direct I/O (for a lazily fetched volume).
//! - [`replay`] reads a plan into the page cache with bounded parallelism, checking
//!   each file's identity first (a changed file is skipped and reported), skipping
//!   what is resident, within a memory budget, at a chosen I/O priority.

pub mod blocks;
pub mod build;
pub mod error;
pub mod fleet;
pub mod order;
pub mod pages;
pub mod plan;
pub mod replay;
pub mod show;
pub mod summary;

pub use build::build_plan;
pub use error::{PrefetchError, Result};
pub use plan::{Order, Plan, PlanSettings};
pub use replay::{IoPriority, Method, Replay, ReplayOptions, ReplayReport, replay};
