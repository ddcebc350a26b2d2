//! The path under which the recorder's own mount namespace opens a file that a process
//! of another namespace opened (a container's, a private mount's). fanotify's fd names
//! the file as its opener's namespace sees it (`/usr/lib/systemd/systemd` for a
//! container's systemd), which on the host may be another file or none. The fd's mount
//! (`mnt_id` in /proc/self/fdinfo) is looked up in the opener's mountinfo: its root
//! inside the filesystem and where it is mounted there; a mount of the same filesystem
//! in our namespace whose root contains that root then gives the host path. Only a path
//! that opens the same (dev, inode) is kept.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::system::{Mount, parse_mountinfo};

/// Host paths of files opened in other mount namespaces; remembers each foreign mount.
pub struct HostPaths {
    own: Vec<Mount>,
    foreign: HashMap<i32, Option<Mount>>,
}

/// `path` (as a namespace sees it, inside `theirs`) as a path of our namespace, through a
/// mount of ours of the same filesystem whose root contains `theirs`'s root.
pub fn translate(path: &Path, theirs: &Mount, own: &[Mount]) -> Option<PathBuf> {
    let inside = path.strip_prefix(&theirs.mount_point).ok()?;
    own.iter()
        .filter(|m| m.dev == theirs.dev)
        .filter_map(|m| {
            let below = theirs.root.strip_prefix(&m.root).ok()?;
            Some((m.root.components().count(), m.mount_point.join(below).join(inside)))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, host)| host)
}

fn same_file(path: &Path, dev: u64, ino: u64) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// The `mnt_id:` line of /proc/self/fdinfo/FD.
fn mount_id_of(fd: i32) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines().find_map(|l| l.strip_prefix("mnt_id:")).and_then(|v| v.trim().parse().ok())
}

impl HostPaths {
    pub fn new(own: Vec<Mount>) -> HostPaths {
        HostPaths { own, foreign: HashMap::new() }
    }

    /// The host path of `path`, the file open as `fd` by process `pid` with (`dev`, `ino`):
    /// `path` itself when it opens that file here (the common case, one `stat`) or when the
    /// file is on a mount of ours (deleted or replaced since), else its translation through
    /// the opener's mount, else `None` (the name would be another file's).
    pub fn resolve(&mut self, path: PathBuf, fd: i32, pid: i32, dev: u64, ino: u64) -> Option<PathBuf> {
        if same_file(&path, dev, ino) {
            return Some(path);
        }
        let mnt_id = mount_id_of(fd)?;
        if self.own.iter().any(|m| m.mnt_id == mnt_id) {
            // Our own mount: the file was deleted or replaced since; its name is still the best.
            return Some(path);
        }
        let theirs = self
            .foreign
            .entry(mnt_id)
            .or_insert_with(|| {
                let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
                parse_mountinfo(&text).into_iter().find(|m| m.mnt_id == mnt_id)
            })
            .as_ref()?;
        translate(&path, theirs, &self.own).filter(|host| same_file(host, dev, ino))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_trace::Dev;

    fn mount(mnt_id: i32, root: &str, at: &str) -> Mount {
        Mount {
            mnt_id,
            dev: Dev::new(254, 0),
            root: root.into(),
            mount_point: at.into(),
            fstype: "ext4".into(),
            source: "/dev/vda".into(),
        }
    }

    #[test]
    fn a_containers_path_is_found_under_its_root_on_the_host() {
        let own = [mount(1, "/", "/"), mount(2, "/srv", "/mnt/srv")];
        let container_root = mount(900, "/var/cache/rootfs", "/");
        assert_eq!(
            translate(Path::new("/usr/lib/systemd/systemd"), &container_root, &own),
            Some(PathBuf::from("/var/cache/rootfs/usr/lib/systemd/systemd"))
        );
        let bind = mount(901, "/srv/data", "/data");
        assert_eq!(
            translate(Path::new("/data/x/y"), &bind, &own),
            Some(PathBuf::from("/mnt/srv/data/x/y")),
            "through our deepest mount of the same filesystem"
        );
        assert_eq!(translate(Path::new("/elsewhere/x"), &bind, &own), None, "not under its mount point");
        let other_fs = Mount { dev: Dev::new(8, 1), ..mount(902, "/", "/") };
        assert_eq!(translate(Path::new("/x"), &other_fs, &own), None, "a filesystem we do not mount");
    }
}
