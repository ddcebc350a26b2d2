//! Walking the stack samples' prefix tree and naming their frames, the one way every
//! report and export does it.

use std::collections::HashMap;

use crate::model::{Frame, Mapping, Trace};

/// No real stack is deeper; a walk stops there whatever the file says.
const MAX_DEPTH: usize = 4096;

/// Stacks, frames and mappings of a trace by id.
pub struct StackIndex<'a> {
    stacks: HashMap<u32, (Option<u32>, u32)>,
    frames: HashMap<u32, &'a Frame>,
    mappings: HashMap<u32, &'a Mapping>,
}

impl<'a> StackIndex<'a> {
    pub fn new(trace: &'a Trace) -> StackIndex<'a> {
        StackIndex {
            stacks: trace.stacks.iter().map(|s| (s.id, (s.parent_id, s.frame_id))).collect(),
            frames: trace.frames.iter().map(|f| (f.id, f)).collect(),
            mappings: trace.mappings.iter().map(|m| (m.id, m)).collect(),
        }
    }

    /// The frames of a stack, innermost first (the sampled instruction, then its callers).
    pub fn frames(&self, stack_id: Option<u32>) -> Vec<&'a Frame> {
        let mut out = Vec::new();
        let mut next = stack_id;
        while let Some(id) = next {
            let Some(&(parent, frame)) = self.stacks.get(&id) else { break };
            if let Some(f) = self.frames.get(&frame) {
                out.push(*f);
            }
            if out.len() >= MAX_DEPTH || parent.is_some_and(|p| p >= id) {
                break;
            }
            next = parent;
        }
        out
    }

    pub fn mapping(&self, frame: &Frame) -> Option<&'a Mapping> {
        frame.mapping_id.and_then(|id| self.mappings.get(&id).copied())
    }

    /// The file (base name) a frame's code belongs to: `[kernel]`, or `[unknown]` outside any mapping.
    pub fn library(&self, frame: &Frame) -> String {
        if frame.kernel {
            return "[kernel]".into();
        }
        match self.mapping(frame) {
            Some(m) => m.path.rsplit('/').next().unwrap_or(&m.path).to_owned(),
            None => "[unknown]".into(),
        }
    }

    /// A frame's function, or where it lies (`libfoo.so+0x1a2b`) when no symbol named it.
    pub fn name(&self, frame: &Frame) -> String {
        if let Some(symbol) = &frame.symbol {
            return symbol.clone();
        }
        match self.mapping(frame) {
            Some(m) => {
                let offset = frame.address.wrapping_sub(m.start).wrapping_add(m.file_offset);
                format!("{}+{offset:#x}", self.library(frame))
            }
            None => format!("{}+{:#x}", self.library(frame), frame.address),
        }
    }
}
