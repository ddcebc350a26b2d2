//! The system calls the recorder traces: their numbers on this architecture, what
//! their arguments are, and how the assembly treats them. One table, read by the
//! tracefs filter, the eBPF path program and the assembly.

/// How a traced call is kept and which of its arguments matter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Opens a path (argument `path` is the name, `dirfd` the directory it is relative
    /// to, if any); the result is an fd.
    Open { path: u8, dirfd: Option<u8> },
    /// Names a path without opening it (stat family, access, readlink, exec, connect's
    /// address is not a path and is `OnFd`).
    Path { path: u8, dirfd: Option<u8> },
    /// Acts on the fd in argument 0.
    OnFd,
    /// A read of the fd in argument 0: kept for the first reads of each opened file.
    Read,
    /// `mmap`: kept when it maps a file (fd in argument 4, not anonymous).
    Mmap,
    /// A wait: kept when it lasted longer than [`LONG_WAIT_NS`].
    Wait,
    /// `close`: ends an fd's life; used by the assembly, not kept.
    Close,
}

/// A wait shorter than this is not kept.
pub const LONG_WAIT_NS: i64 = 1_000_000;

/// Reads of one opened file kept, from its first.
pub const FIRST_READS: usize = 4;

/// One traced call.
#[derive(Clone, Copy, Debug)]
pub struct Traced {
    pub nr: u32,
    pub name: &'static str,
    pub shape: Shape,
}

const fn t(nr: u32, name: &'static str, shape: Shape) -> Traced {
    Traced { nr, name, shape }
}

const fn open(path: u8, dirfd: Option<u8>) -> Shape {
    Shape::Open { path, dirfd }
}

const fn path(path: u8, dirfd: Option<u8>) -> Shape {
    Shape::Path { path, dirfd }
}

/// The x86-64 numbers (arch/x86/entry/syscalls/syscall_64.tbl).
#[cfg(target_arch = "x86_64")]
pub const TRACED: &[Traced] = &[
    t(0, "read", Shape::Read),
    t(3, "close", Shape::Close),
    t(17, "pread64", Shape::Read),
    t(2, "open", open(0, None)),
    t(85, "creat", open(0, None)),
    t(257, "openat", open(1, Some(0))),
    t(437, "openat2", open(1, Some(0))),
    t(4, "stat", path(0, None)),
    t(6, "lstat", path(0, None)),
    t(5, "fstat", Shape::OnFd),
    t(262, "newfstatat", path(1, Some(0))),
    t(332, "statx", path(1, Some(0))),
    t(21, "access", path(0, None)),
    t(269, "faccessat", path(1, Some(0))),
    t(439, "faccessat2", path(1, Some(0))),
    t(89, "readlink", path(0, None)),
    t(267, "readlinkat", path(1, Some(0))),
    t(59, "execve", path(0, None)),
    t(80, "chdir", path(0, None)),
    t(322, "execveat", path(1, Some(0))),
    t(217, "getdents64", Shape::OnFd),
    t(9, "mmap", Shape::Mmap),
    t(42, "connect", Shape::OnFd),
    t(202, "futex", Shape::Wait),
    t(7, "poll", Shape::Wait),
    t(271, "ppoll", Shape::Wait),
    t(23, "select", Shape::Wait),
    t(270, "pselect6", Shape::Wait),
    t(232, "epoll_wait", Shape::Wait),
    t(281, "epoll_pwait", Shape::Wait),
    t(441, "epoll_pwait2", Shape::Wait),
    t(35, "nanosleep", Shape::Wait),
    t(230, "clock_nanosleep", Shape::Wait),
    t(61, "wait4", Shape::Wait),
];

/// Another architecture: no calls are traced (their numbers differ and are not listed yet).
#[cfg(not(target_arch = "x86_64"))]
pub const TRACED: &[Traced] = &[];

/// The traced call with this number.
pub fn by_nr(nr: i64) -> Option<&'static Traced> {
    TRACED.iter().find(|c| i64::from(c.nr) == nr)
}

/// The traced call with this name.
pub fn by_name(name: &str) -> Option<&'static Traced> {
    TRACED.iter().find(|c| c.name == name)
}

/// The calls whose path argument the eBPF program copies: (number, argument index).
pub fn path_arguments() -> Vec<(u32, u8)> {
    TRACED
        .iter()
        .filter_map(|c| match c.shape {
            Shape::Open { path, .. } | Shape::Path { path, .. } => Some((c.nr, path)),
            _ => None,
        })
        .collect()
}

/// The tracefs filter of `raw_syscalls:sys_enter`/`sys_exit` that keeps the traced calls.
pub fn tracefs_filter() -> Option<String> {
    if TRACED.is_empty() {
        return None;
    }
    Some(TRACED.iter().map(|c| format!("id == {}", c.nr)).collect::<Vec<_>>().join(" || "))
}

/// `AT_FDCWD` as the kernel sees it in a syscall argument (an int, sign-extended or not).
pub fn is_at_fdcwd(arg: u64) -> bool {
    arg as i32 == -100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_the_filter_names_each_once() {
        let mut nrs: Vec<u32> = TRACED.iter().map(|c| c.nr).collect();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), TRACED.len());
        let filter = tracefs_filter().unwrap_or_default();
        for c in TRACED {
            assert_eq!(
                filter.matches(&format!("id == {} ", c.nr)).count()
                    + usize::from(filter.ends_with(&format!("id == {}", c.nr))),
                1,
                "{}",
                c.name
            );
            assert_eq!(by_name(c.name).map(|x| x.nr), Some(c.nr));
        }
        assert!(path_arguments().contains(&(257, 1)));
        assert!(is_at_fdcwd(0xffff_ff9c) && is_at_fdcwd(u64::MAX - 99) && !is_at_fdcwd(3));
    }
}
