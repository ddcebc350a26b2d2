//! The coldstart recorder: records a command's start (or the whole system) from
//! the kernel's tracing buffers, fanotify, the proc connector and /proc, and turns
//! what it recorded into a [`coldstart_trace::Trace`].
//!
//! How it works, for ARCHITECTURE.md:
//! - Two private tracefs instances per recording ([`tracefs`]): `scope` (page-cache
//!   fills, page accesses — reads, faults, fault-around, on cache hits too — and
//!   readahead decisions where the kernel has those events, scheduler and process
//!   events, `trace_marker`), filtered to the command's tree with `set_event_pid` +
//!   `event-fork` (or unfiltered with `--system`), and
//!   `block` (block request issue and completion), always unfiltered because
//!   completions run in interrupt context and issues often in kworkers.
//! - While the command runs, [`capture`] threads only copy: raw ring-buffer pages
//!   from `trace_pipe_raw`, fanotify opens, proc-connector process events and
//!   /proc samples go to a spool directory ([`spool`]). A double-forked guardian
//!   ([`guardian`]) removes the instances if the recorder is killed.
//! - Afterwards, [`assemble`] decodes the spool into a trace. `coldstart recover` runs
//!   the same code on the spool of a killed recorder, so recovery is tested by
//!   every recording. The assembly also merges page accesses into ranges and decides
//!   why each page entered the cache (fault, read, readahead) from the order of
//!   each thread's events (the rule is in `assemble/pages.rs`).
//! - Raw pages are parsed by hand ([`ftrace`]) from the kernel's own format
//!   descriptions: no crate parses ftrace ring-buffer pages well.

pub mod also;
pub mod assemble;
pub mod boot;
pub mod capture;
pub mod error;
pub mod frame_pointers;
pub mod ftrace;
pub mod guardian;
pub mod parts;
mod session;
pub mod spool;
pub mod sys;
pub mod syscall_table;
pub mod system;
pub mod tracefs;

pub use assemble::{CrossCheck, Summary};
pub use error::{RecordError, Result};
pub use session::{
    RecordConfig, Recorded, Recovery, TRACE_MARKER_ENV, preflight, record, recover, recover_leftovers,
    unique_output, write_trace,
};
pub use spool::{DEFAULT_SPOOL_ROOT, Distrust, Spool, SpoolRoot};
