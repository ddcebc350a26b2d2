//! How the CPU profile sees the frames of a sample: user functions by name and file, and
//! the kernel part of a stack collapsed into what the thread was doing there (a system
//! call, a page fault, an interrupt), never a kernel function: on a machine without a
//! PMU the CPU-clock samples land where interrupts come back on (`finish_task_switch`,
//! `_raw_spin_unlock_irqrestore`), not where the time went. Each frame also says whether
//! it is generic (a program's or a thread's entry, an event loop, an interpreter's loop:
//! never a cause) or the allocator's.

use std::collections::HashMap;
use std::rc::Rc;

use coldstart_trace::StackIndex;

use crate::offcpu::syscall_of;

/// Functions that every start passes through and that never are the cause of its CPU
/// time: entries of programs and threads, event loops and dispatchers, interpreter loops.
/// `x*` matches a prefix, anything else the whole name.
const GENERIC: &[&str] = &[
    "_start",
    "__libc_start_main*",
    "__libc_start_call_main",
    "main",
    "clone",
    "clone3",
    "__clone*",
    "start_thread",
    "_dl_start_user",
    "_dl_init",
    "call_init*",
    "g_thread_proxy",
    "g_thread_pool_thread_proxy",
    "g_task_thread_pool_thread",
    "g_main_loop_run",
    "g_main_context_iteration",
    "g_main_context_dispatch*",
    "g_main_dispatch",
    "g_application_run",
    "g_idle_dispatch",
    "g_timeout_dispatch",
    "g_closure_invoke",
    "_g_closure_invoke_va",
    "g_signal_emit*",
    "signal_emit_unlocked_R*",
    "g_cclosure_marshal_*",
    "g_task_return_now",
    "complete_in_idle_cb",
    "ffi_call*",
    "gtk_main",
    "gtk_main_do_event",
    "QCoreApplication::exec*",
    "QEventLoop::exec*",
    "QEventLoop::processEvents*",
    "QCoreApplication::notifyInternal2*",
    "_PyEval_EvalFrame*",
    "_PyEval_Vector",
    "PyEval_EvalCode*",
    "_PyFunction_Vectorcall",
    "PyObject_Vectorcall*",
    "_PyObject_Vectorcall*",
    "_PyObject_Call*",
    "PyObject_Call*",
    "cfunction_vectorcall*",
    "method_vectorcall*",
    "run_mod",
    "run_eval_code_obj",
    "pyrun_file",
    "_PyRun_*",
    "PyRun_*",
    "pymain_*",
    "Py_RunMain",
    "Py_BytesMain",
    "luaV_execute",
    "luaD_call*",
    "luaD_rawrunprotected",
    "lua_pcall*",
    "std::rt::lang_start*",
    "std::sys::backtrace::__rust_begin_short_backtrace*",
    "core::ops::function::FnOnce::call_once*",
];

/// The allocator's entry points and internals: C's, GLib's, C++'s, Python's and Rust's,
/// and the common replacement allocators'.
const ALLOCATOR: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "reallocarray",
    "cfree",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__malloc_*",
    "_int_malloc",
    "_int_free*",
    "_int_realloc",
    "_int_memalign",
    "malloc_consolidate",
    "sysmalloc",
    "unlink_chunk*",
    "tcache_*",
    "g_malloc*",
    "g_try_malloc*",
    "g_realloc*",
    "g_try_realloc*",
    "g_free",
    "g_free_sized",
    "g_slice_*",
    "g_aligned_alloc*",
    "g_aligned_free*",
    "operator new*",
    "operator delete*",
    "je_malloc*",
    "je_free*",
    "je_calloc*",
    "je_realloc*",
    "mallocx",
    "rallocx",
    "sdallocx",
    "tc_malloc*",
    "tc_free*",
    "tc_new*",
    "tc_delete*",
    "mi_malloc*",
    "mi_free*",
    "mi_realloc*",
    "mi_calloc*",
    "PyObject_Malloc",
    "PyObject_Free",
    "PyObject_Realloc",
    "PyMem_*",
    "_PyObject_Malloc",
    "_PyObject_Free",
    "pymalloc_*",
    "__rust_alloc*",
    "__rust_dealloc",
    "__rust_realloc",
    "__rdl_*",
    "__rg_*",
];

/// The outermost kernel frames of an interrupt taken while the thread ran.
const INTERRUPT: &[&str] =
    &["asm_sysvec_*", "asm_common_interrupt", "asm_spurious_interrupt", "sysvec_*", "common_interrupt"];

/// The outermost kernel frames of a system call.
const SYSCALL_ENTRY: &[&str] =
    &["entry_SYSCALL*", "do_syscall_64", "x64_sys_call", "do_fast_syscall_32", "el0*"];

/// What a thread returning from a system call does when it is preempted there.
const SYSCALL_EXIT: &[&str] = &["exit_to_user_mode*", "syscall_exit_to_user_mode*"];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// Whether `name` matches one of `patterns`, also without a compiler's clone suffix
/// (`.isra.0`) and glibc's internal alias prefix (`__GI___libc_malloc` is `__libc_malloc`).
fn any_match(patterns: &[&str], name: &str) -> bool {
    let name = name.strip_prefix("__GI_").unwrap_or(name);
    let base = name.split('.').next().unwrap_or(name);
    patterns.iter().any(|p| matches(p, base) || matches(p, name))
}

/// Whether a function is one every start passes through (never a cause).
pub fn is_generic(name: &str) -> bool {
    any_match(GENERIC, name)
}

/// Whether a function belongs to an allocator.
pub fn is_allocator(name: &str) -> bool {
    any_match(ALLOCATOR, name)
}

/// What a thread was doing in the kernel, from its kernel frames (innermost first): the
/// system call its stack entered by (`openat (system call)`), `page fault`, `interrupt`,
/// `thread start` (a new thread's first switch), or `kernel`.
pub fn kernel_activity(frames: &[&str]) -> String {
    let outermost = frames.last().map(|f| f.split('.').next().unwrap_or(f)).unwrap_or("");
    if any_match(INTERRUPT, outermost) {
        return "interrupt".to_owned();
    }
    if outermost.starts_with("ret_from_fork") {
        return "thread start".to_owned();
    }
    if let Some(call) = syscall_of(frames) {
        return if call == "page fault" { call } else { format!("{call} (system call)") };
    }
    if any_match(SYSCALL_ENTRY, outermost) {
        let inner = frames
            .iter()
            .rev()
            .map(|f| f.split('.').next().unwrap_or(f))
            .find(|f| !any_match(SYSCALL_ENTRY, f));
        return match inner {
            Some(f) if any_match(SYSCALL_EXIT, f) => "system call return".to_owned(),
            Some(f) => format!("system call ({})", f.trim_start_matches('_')),
            None => "system call".to_owned(),
        };
    }
    "kernel".to_owned()
}

/// One frame as the profile counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// The function (`name`), `file+0xOFFSET` without a symbol, or the kernel activity.
    pub name: String,
    /// The file's base name, `[kernel]` or `[unknown]`.
    pub library: String,
    /// The kernel part of a stack, collapsed.
    pub kernel: bool,
    pub generic: bool,
    pub allocator: bool,
    /// A symbol named it (false for `file+0xOFFSET` and `[unknown]+0x…`).
    pub named: bool,
}

impl FrameInfo {
    /// A frame the cause of a subtree can be: user code, neither generic nor the allocator's.
    pub fn can_be_cause(&self) -> bool {
        !self.kernel && !self.generic && !self.allocator
    }
}

/// The profile's frames, each once, and each stack's frames as their indices, innermost
/// first, with its kernel part as one frame.
#[derive(Default)]
pub struct FrameTable {
    pub frames: Vec<FrameInfo>,
    ids: HashMap<(String, String), u32>,
    stacks: HashMap<Option<u32>, Rc<[u32]>>,
}

impl FrameTable {
    fn intern(&mut self, info: FrameInfo) -> u32 {
        let key = (info.name.clone(), info.library.clone());
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(info);
        self.ids.insert(key, id);
        id
    }

    pub fn get(&self, id: u32) -> &FrameInfo {
        &self.frames[id as usize]
    }

    /// The frames of a stack, innermost first: what the kernel was doing (one frame), then
    /// the user functions.
    pub fn stack(&mut self, index: &StackIndex, stack_id: Option<u32>) -> Rc<[u32]> {
        if let Some(frames) = self.stacks.get(&stack_id) {
            return frames.clone();
        }
        let raw = index.frames(stack_id);
        let kernel_depth = raw.iter().take_while(|f| f.kernel).count();
        let mut out = Vec::with_capacity(raw.len() - kernel_depth + 1);
        if kernel_depth > 0 {
            let names: Vec<&str> =
                raw[..kernel_depth].iter().map(|f| f.symbol.as_deref().unwrap_or("")).collect();
            out.push(self.intern(FrameInfo {
                name: kernel_activity(&names),
                library: "[kernel]".to_owned(),
                kernel: true,
                generic: false,
                allocator: false,
                named: true,
            }));
        }
        for f in &raw[kernel_depth..] {
            let name = index.name(f);
            let named = f.symbol.is_some();
            out.push(self.intern(FrameInfo {
                generic: named && is_generic(&name),
                allocator: named && is_allocator(&name),
                library: index.library(f),
                kernel: f.kernel,
                named,
                name,
            }));
        }
        let frames: Rc<[u32]> = out.into();
        self.stacks.insert(stack_id, frames.clone());
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity(stack: &str) -> String {
        let frames: Vec<&str> = stack.split(" < ").collect();
        kernel_activity(&frames)
    }

    // Kernel stacks of CPU samples recorded on this machine (Linux 6.18), innermost first.
    #[test]
    fn kernel_samples_are_charged_to_what_the_thread_was_doing() {
        assert_eq!(
            activity(
                "_raw_spin_unlock_irqrestore < __wake_up_common_lock < pipe_write < vfs_write < ksys_write < \
                 do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            "write (system call)"
        );
        assert_eq!(
            activity(
                "clear_page_erms < get_page_from_freelist < __alloc_frozen_pages_noprof < alloc_pages_mpol < \
                 vma_alloc_folio_noprof < do_anonymous_page < __handle_mm_fault < handle_mm_fault < \
                 exc_page_fault < asm_exc_page_fault"
            ),
            "page fault"
        );
        assert_eq!(
            activity(
                "finish_task_switch.isra.0 < __schedule < schedule < irqentry_exit_to_user_mode < \
                 asm_sysvec_apic_timer_interrupt"
            ),
            "interrupt"
        );
        assert_eq!(
            activity("finish_task_switch.isra.0 < schedule_tail < ret_from_fork < ret_from_fork_asm"),
            "thread start"
        );
        assert_eq!(
            activity(
                "finish_task_switch.isra.0 < __schedule < schedule < exit_to_user_mode_loop < do_syscall_64 < \
                 entry_SYSCALL_64_after_hwframe"
            ),
            "system call return"
        );
        assert_eq!(
            activity("copy_page_from_iter < do_writev < do_syscall_64 < entry_SYSCALL_64_after_hwframe"),
            "system call (do_writev)"
        );
        assert_eq!(activity("native_safe_halt < default_idle"), "kernel");
    }

    #[test]
    fn entries_loops_and_the_allocator_are_told_apart_from_code() {
        for generic in
            ["main", "__GI___clone3", "g_main_context_dispatch_unlocked", "_PyEval_EvalFrameDefault"]
        {
            assert!(is_generic(generic), "{generic}");
        }
        for allocator in [
            "malloc",
            "_int_free_merge_chunk",
            "g_slice_alloc0",
            "operator new(unsigned long)",
            "__GI___libc_malloc",
        ] {
            assert!(is_allocator(allocator), "{allocator}");
        }
        for code in ["xb_builder_compile", "yaml_parser_update_buffer", "mainloop_helper", "freetype_render"]
        {
            assert!(!is_generic(code) && !is_allocator(code), "{code}");
        }
    }
}
