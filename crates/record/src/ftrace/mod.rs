//! Reading the kernel's function tracer ring buffers: format descriptions, raw
//! pages and the typed events the recorder uses.

pub mod events;
pub mod format;
pub mod page;
