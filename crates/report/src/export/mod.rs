//! The trace in other tools' formats (`coldstart export`), one module per format:
//!
//! - [`chrome`]: Trace Event Format JSON, which the Perfetto UI (ui.perfetto.dev) and
//!   chrome://tracing open: processes and threads as tracks, scheduler states, phases
//!   and the critical path as slices, page fills and marks as instant events, block
//!   requests as slices of their disk, samples as counters;
//! - [`csv`]: page fills, coalesced reads and block requests as CSV tables;
//! - [`folded`]: collapsed stacks of the CPU samples (flamegraph.pl, inferno).
//!
//! Like every renderer, exports read a saved trace and its analysis only, and their
//! output is deterministic.

pub mod chrome;
pub mod csv;
pub mod folded;
