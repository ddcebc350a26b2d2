//! Making a trace shareable: user names (home directories and the recorded user)
//! and the host name are replaced everywhere they appear as text, so a trace can be
//! attached to a bug report or committed as a test fixture.
//!
//! Times, sizes, page indexes, sectors and the shape of every path are kept, so an
//! anonymised trace analyses exactly like the original.

use std::collections::BTreeSet;

use crate::model::Trace;

/// What [`anonymize`] replaced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Anonymized {
    /// The user names found and replaced, sorted.
    pub users: Vec<String>,
    /// Whether a host name was replaced.
    pub host: bool,
    /// How many text values changed.
    pub values_changed: usize,
}

/// The name every user name becomes.
pub const ANONYMOUS_USER: &str = "user";
/// The name the host name becomes.
pub const ANONYMOUS_HOST: &str = "host";

/// Replaces, in every text of the trace, the names of users (found as `/home/NAME`
/// in any path or argument, and `meta.user`) with [`ANONYMOUS_USER`] and the host
/// name with [`ANONYMOUS_HOST`].
pub fn anonymize(trace: &mut Trace) -> Anonymized {
    let users = user_names(trace);
    let host = (!trace.meta.host.is_empty()).then(|| trace.meta.host.clone());
    let rewriter = Rewriter { users: &users, host: host.as_deref() };
    let mut changed = 0;
    let mut fix = |text: &mut String| {
        if let Some(new) = rewriter.rewrite(text) {
            *text = new;
            changed += 1;
        }
    };

    let meta = &mut trace.meta;
    meta.command.iter_mut().for_each(&mut fix);
    meta.cwd.iter_mut().for_each(&mut fix);
    meta.user.iter_mut().for_each(&mut fix);
    fix(&mut meta.host);
    fix(&mut meta.kernel);
    for note in &mut trace.notes {
        fix(&mut note.text);
    }
    for p in &mut trace.processes {
        fix(&mut p.comm);
        p.exe.iter_mut().for_each(&mut fix);
        p.argv.iter_mut().for_each(&mut fix);
    }
    for e in &mut trace.execs {
        fix(&mut e.path);
        e.argv.iter_mut().for_each(&mut fix);
    }
    for t in &mut trace.threads {
        fix(&mut t.comm);
    }
    for f in &mut trace.files {
        f.path.iter_mut().for_each(&mut fix);
    }
    for b in &mut trace.block_ios {
        fix(&mut b.comm);
    }
    for m in &mut trace.marks {
        fix(&mut m.name);
    }
    for m in &mut trace.mappings {
        fix(&mut m.path);
    }
    for c in &mut trace.syscalls {
        c.path.iter_mut().for_each(&mut fix);
    }
    for m in &mut trace.mounts {
        fix(&mut m.point);
    }
    Anonymized { users: users.into_iter().collect(), host: host.is_some(), values_changed: changed }
}

/// Where a path to a home directory may begin: at the start of a text or after a
/// separator of arguments (`--config=/home/…`, `PATH=/a:/home/…`, quoted words).
fn starts_a_path(before: Option<char>) -> bool {
    before.is_none_or(|c| matches!(c, ' ' | '=' | ':' | '\'' | '"' | ','))
}

fn user_names(trace: &Trace) -> BTreeSet<String> {
    let mut users = BTreeSet::new();
    let mut scan = |text: &str| {
        let mut rest = text;
        let mut before = None;
        while let Some(at) = rest.find("/home/") {
            let prefix = rest[..at].chars().next_back().or(if at == 0 { before } else { None });
            let after = &rest[at + "/home/".len()..];
            let name: String = after.chars().take_while(|&c| c != '/' && c != ' ' && c != '\'').collect();
            // `/tmp/x/home/.config` is not a user's home: only a path that starts with
            // /home is, and a user name does not start with a dot.
            if starts_a_path(prefix) && !name.is_empty() && !name.starts_with('.') && name != ANONYMOUS_USER {
                users.insert(name.clone());
            }
            before = name.chars().next_back().or(Some('/'));
            rest = &after[name.len()..];
        }
    };
    trace.files.iter().filter_map(|f| f.path.as_deref()).for_each(&mut scan);
    trace.meta.command.iter().for_each(|a| scan(a));
    trace.meta.cwd.iter().for_each(|c| scan(c));
    for p in &trace.processes {
        p.exe.iter().for_each(|e| scan(e));
        p.argv.iter().for_each(|a| scan(a));
    }
    trace.execs.iter().for_each(|e| scan(&e.path));
    trace.mappings.iter().for_each(|m| scan(&m.path));
    trace.syscalls.iter().filter_map(|c| c.path.as_deref()).for_each(&mut scan);
    trace.mounts.iter().for_each(|m| scan(&m.point));
    if let Some(user) = trace.meta.user.as_deref().filter(|u| !u.is_empty() && *u != "root") {
        users.insert(user.to_owned());
    }
    users
}

struct Rewriter<'a> {
    users: &'a BTreeSet<String>,
    host: Option<&'a str>,
}

impl Rewriter<'_> {
    /// The anonymised text, or `None` when nothing in it changes.
    fn rewrite(&self, text: &str) -> Option<String> {
        let mut out = text.to_owned();
        // Longest first, so a user name that contains another is replaced whole.
        let mut names: Vec<&str> = self.users.iter().map(String::as_str).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        for name in names {
            out = replace_word(&out, name, ANONYMOUS_USER);
        }
        if let Some(host) = self.host.filter(|h| h.len() > 1 && !in_system_tree(text)) {
            out = replace_word(&out, host, ANONYMOUS_HOST);
        }
        (out != text).then_some(out)
    }
}

/// Paths of the distribution and the kernel, whose names never carry the host's:
/// a host called `vm` must not turn `/proc/sys/vm/drop_caches` into `/proc/sys/host/…`.
fn in_system_tree(text: &str) -> bool {
    ["/usr/", "/proc/", "/sys/", "/lib/", "/lib64/", "/bin/", "/sbin/", "/dev/", "/opt/"]
        .iter()
        .any(|tree| text.starts_with(tree))
}

/// Replaces `word` where it is not part of a longer name (letters, digits, `_`, `-`
/// on either side), so user `al` does not turn `/usr/lib/alsa` into `/usr/lib/usersa`.
fn replace_word(text: &str, word: &str, by: &str) -> String {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + word.len()..].chars().next();
        let whole = !before.is_some_and(is_name_char) && !after.is_some_and(is_name_char);
        out.push_str(&rest[..at]);
        out.push_str(if whole { by } else { word });
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{File, Meta, Mount, Process, Syscall};

    fn trace() -> Trace {
        Trace {
            meta: Meta {
                host: "alice-laptop".into(),
                user: Some("alice".into()),
                cwd: Some("/home/alice/src/app".into()),
                command: vec!["/home/alice/bin/app".into(), "--config=/home/alice/.apprc".into()],
                kernel: "6.18.44 #1 SMP alice-laptop".into(),
                ..Default::default()
            },
            files: vec![
                File { id: 1, path: Some("/home/alice/.cache/app/index".into()), ..Default::default() },
                File { id: 2, path: Some("/home/bob/shared/data".into()), ..Default::default() },
                File {
                    id: 3,
                    path: Some("/usr/lib/x86_64-linux-gnu/alsa-lib/libasound.so".into()),
                    ..Default::default()
                },
                File { id: 4, path: None, ..Default::default() },
            ],
            processes: vec![Process {
                pid: 1,
                comm: "app".into(),
                exe: Some("/home/alice/bin/app".into()),
                argv: vec!["app".into(), "alice".into(), "malice".into()],
                ..Default::default()
            }],
            syscalls: vec![Syscall {
                name: "statx".into(),
                path: Some("/home/carol/.config/app".into()),
                ..Default::default()
            }],
            mounts: vec![Mount {
                point: "/home/alice/net".into(),
                fstype: "nfs4".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn user_and_host_names_are_replaced_everywhere_and_nothing_else() {
        let mut t = trace();
        let report = anonymize(&mut t);
        assert_eq!(report.users, vec!["alice".to_owned(), "bob".to_owned(), "carol".to_owned()]);
        assert_eq!(t.syscalls[0].path.as_deref(), Some("/home/user/.config/app"));
        assert_eq!(t.mounts[0].point, "/home/user/net");
        assert!(report.host);
        assert_eq!(t.meta.host, "host");
        assert_eq!(t.meta.user.as_deref(), Some("user"));
        assert_eq!(t.meta.cwd.as_deref(), Some("/home/user/src/app"));
        assert_eq!(t.meta.command, vec!["/home/user/bin/app", "--config=/home/user/.apprc"]);
        assert_eq!(t.meta.kernel, "6.18.44 #1 SMP host");
        assert_eq!(t.files[0].path.as_deref(), Some("/home/user/.cache/app/index"));
        assert_eq!(t.files[1].path.as_deref(), Some("/home/user/shared/data"));
        assert_eq!(t.files[2].path.as_deref(), Some("/usr/lib/x86_64-linux-gnu/alsa-lib/libasound.so"));
        assert_eq!(t.files[3].path, None);
        assert_eq!(t.processes[0].argv, vec!["app", "user", "malice"]);
    }

    #[test]
    fn anonymizing_twice_changes_nothing_more() {
        let mut t = trace();
        anonymize(&mut t);
        let once = t.clone();
        let again = anonymize(&mut t);
        assert_eq!(t, once);
        assert_eq!(again.values_changed, 0);
    }

    #[test]
    fn only_paths_that_start_at_home_name_users() {
        let mut t = Trace {
            meta: Meta { host: "vm".into(), cwd: Some("/tmp/fixture/home".into()), ..Default::default() },
            files: vec![
                File { id: 1, path: Some("/tmp/fixture/home/.config/app/rc".into()), ..Default::default() },
                File { id: 2, path: Some("/proc/sys/vm/drop_caches".into()), ..Default::default() },
                File { id: 3, path: Some("/var/tmp/vm/cache".into()), ..Default::default() },
                File { id: 4, path: Some("/home/.hidden/x".into()), ..Default::default() },
            ],
            processes: vec![Process {
                pid: 1,
                argv: vec!["app".into(), "--rc=/home/carol/rc".into(), "PATH=/bin:/home/dave/bin".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let report = anonymize(&mut t);
        assert_eq!(report.users, vec!["carol".to_owned(), "dave".to_owned()]);
        assert_eq!(t.files[0].path.as_deref(), Some("/tmp/fixture/home/.config/app/rc"));
        assert_eq!(
            t.files[1].path.as_deref(),
            Some("/proc/sys/vm/drop_caches"),
            "a system path keeps its names"
        );
        assert_eq!(t.files[2].path.as_deref(), Some("/var/tmp/host/cache"));
        assert_eq!(t.files[3].path.as_deref(), Some("/home/.hidden/x"));
        assert_eq!(t.processes[0].argv, vec!["app", "--rc=/home/user/rc", "PATH=/bin:/home/user/bin"]);
    }

    #[test]
    fn root_is_not_a_user_name_to_hide() {
        let mut t = Trace {
            meta: Meta { user: Some("root".into()), ..Default::default() },
            files: vec![File {
                id: 1,
                path: Some("/root/.pyenv/shims/python3".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let report = anonymize(&mut t);
        assert!(report.users.is_empty());
        assert_eq!(t.files[0].path.as_deref(), Some("/root/.pyenv/shims/python3"));
    }
}
