//! The kernel interfaces the emulated disk stands on, through nix: loop devices (the
//! LOOP_* ioctls of `linux/loop.h`) and mounts.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use nix::libc;
use nix::mount::{MntFlags, MsFlags};

const LOOP_CLR_FD: u64 = 0x4C01;
const LOOP_CONFIGURE: u64 = 0x4C0A;
const LOOP_CTL_GET_FREE: u64 = 0x4C82;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_FLAGS_DIRECT_IO: u32 = 16;
const LO_NAME_SIZE: usize = 64;

/// `struct loop_info64`.
#[repr(C)]
struct LoopInfo64 {
    device: u64,
    inode: u64,
    rdevice: u64,
    offset: u64,
    sizelimit: u64,
    number: u32,
    encrypt_type: u32,
    encrypt_key_size: u32,
    flags: u32,
    file_name: [u8; LO_NAME_SIZE],
    crypt_name: [u8; LO_NAME_SIZE],
    encrypt_key: [u8; 32],
    init: [u64; 2],
}

/// `struct loop_config`.
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

nix::ioctl_write_ptr_bad!(loop_configure, LOOP_CONFIGURE, LoopConfig);
nix::ioctl_none_bad!(loop_clr_fd, LOOP_CLR_FD);
nix::ioctl_none_bad!(loop_ctl_get_free, LOOP_CTL_GET_FREE);

/// Attaches `backing` to a free loop device with direct I/O (so every read reaches the
/// backing file) and autoclear (the kernel detaches it when its last user closes it).
/// Returns the device's path, held open until the caller has mounted it.
pub fn attach_loop(backing: &File, backing_path: &Path, block_size: u32) -> io::Result<(PathBuf, File)> {
    let control = File::options().read(true).write(true).open("/dev/loop-control")?;
    for _ in 0..8 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument.
        let number = unsafe { loop_ctl_get_free(control.as_raw_fd()) }.map_err(io::Error::from)?;
        let path = PathBuf::from(format!("/dev/loop{number}"));
        let device = File::options().read(true).write(true).open(&path)?;
        let mut info = LoopInfo64 {
            device: 0,
            inode: 0,
            rdevice: 0,
            offset: 0,
            sizelimit: 0,
            number: 0,
            encrypt_type: 0,
            encrypt_key_size: 0,
            flags: LO_FLAGS_DIRECT_IO | LO_FLAGS_AUTOCLEAR,
            file_name: [0; LO_NAME_SIZE],
            crypt_name: [0; LO_NAME_SIZE],
            encrypt_key: [0; 32],
            init: [0; 2],
        };
        let name = backing_path.as_os_str().as_encoded_bytes();
        let n = name.len().min(LO_NAME_SIZE - 1);
        info.file_name[..n].copy_from_slice(&name[..n]);
        let config = LoopConfig { fd: backing.as_raw_fd() as u32, block_size, info, reserved: [0; 8] };
        // SAFETY: `config` is a valid `struct loop_config` that outlives the call.
        match unsafe { loop_configure(device.as_raw_fd(), &config) } {
            Ok(_) => return Ok((path, device)),
            // Another process took the device between GET_FREE and CONFIGURE.
            Err(nix::errno::Errno::EBUSY) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other("no free loop device after 8 tries"))
}

/// Detaches a loop device (deferred by the kernel until its last user closes it).
pub fn detach_loop(device: &Path) -> io::Result<()> {
    let file = File::options().read(true).open(device)?;
    // SAFETY: LOOP_CLR_FD takes no argument.
    match unsafe { loop_clr_fd(file.as_raw_fd()) } {
        Ok(_) | Err(nix::errno::Errno::ENXIO) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The loop devices attached now, with their backing files.
pub fn loop_devices() -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            name.starts_with("loop")
                .then(|| (PathBuf::from(format!("/dev/{name}")), PathBuf::from(backing.trim_end())))
        })
        .collect()
}

/// Whether `device` still has a backing file.
pub fn loop_attached(device: &Path) -> bool {
    let Some(name) = device.file_name() else { return false };
    Path::new("/sys/block").join(name).join("loop/backing_file").exists()
}

/// Makes the calling thread wake on time: the shortest timer slack and, where allowed, a
/// real-time priority, so a reply is not late because the machine is busy. Best effort.
/// What the thread starts does not inherit the priority (`SCHED_RESET_ON_FORK`).
pub fn make_timely() {
    let _ = nix::sys::prctl::set_timerslack(1);
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: plain syscall on the calling thread with a valid sched_param.
    let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) };
}

/// The scheduling policy of thread `tid` (0: the calling one), e.g. `libc::SCHED_OTHER`.
pub fn scheduling_policy(tid: i32) -> i32 {
    // SAFETY: plain syscall with no pointer.
    unsafe { libc::sched_getscheduler(tid) }
}

/// Sends SIGTERM to process `pid` (the command run on a mounted emulated disk).
pub fn terminate(pid: u32) -> io::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM)
        .map_err(io::Error::from)
}

/// Mounts the ext4 filesystem of `device` at `target`.
pub fn mount_ext4(device: &Path, target: &Path) -> io::Result<()> {
    nix::mount::mount(Some(device), target, Some("ext4"), MsFlags::MS_NOATIME, None::<&str>)
        .map_err(io::Error::from)
}

/// Unmounts `target`; lazily when something still uses it.
pub fn unmount(target: &Path) -> io::Result<()> {
    match nix::mount::umount2(target, MntFlags::empty()) {
        Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => Ok(()),
        Err(nix::errno::Errno::EBUSY) => {
            nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(io::Error::from)
        }
        Err(e) => Err(e.into()),
    }
}

/// The mount points and sources of the mounts now, from /proc/self/mounts.
pub fn mounts() -> Vec<(String, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let source = fields.next()?;
            let target = fields.next()?;
            Some((unescape_octal(source), PathBuf::from(unescape_octal(target))))
        })
        .collect()
}

/// /proc/mounts writes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4).and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Moves the calling thread (and the threads and processes it starts afterwards) into a
/// mount namespace of its own whose mounts no other namespace sees, and which the
/// kernel removes with its last process.
pub fn private_mount_namespace() -> io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).map_err(io::Error::from)?;
    nix::mount::mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(io::Error::from)
}

/// Mounts `source` (a file) over `target` (a file), as `mount --bind` does.
pub fn bind_file(source: &Path, target: &Path) -> io::Result<()> {
    nix::mount::mount(Some(source), target, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_fields_unescape_as_the_kernel_escaped_them() {
        assert_eq!(unescape_octal(r"/run/a\040b\011c"), "/run/a b\tc");
        assert_eq!(unescape_octal(r"/plain"), "/plain");
        assert_eq!(unescape_octal(r"/odd\x"), r"/odd\x");
    }
}
