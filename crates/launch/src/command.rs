//! What to start: the argument vector, extra environment, working directory, the
//! user to run as, and what to do with the command's standard streams.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::error::{LaunchError, Result};
use crate::sys::{self, Passwd};

/// Whose credentials the command runs with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RunAs {
    /// The user who invoked us: when we run as root under `sudo` (`SUDO_UID`,
    /// `SUDO_GID` and `SUDO_USER` set), that user, with their supplementary groups
    /// and `HOME`, `USER` and `LOGNAME` set for them; otherwise our own user.
    /// Measuring a program as root would measure something users never run.
    #[default]
    Invoker,
    /// Our own credentials, root included (`--as-root`).
    Current,
    /// A given user by name: their uid, primary group, supplementary groups and
    /// `HOME`, `USER`, `LOGNAME`. Needs root.
    User(String),
}

/// The command's standard input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Input {
    /// Ours (the terminal, usually).
    #[default]
    Inherit,
    /// `/dev/null`, so a benchmarked command never waits for the keyboard.
    Null,
}

/// Where the command's stdout or stderr goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Output {
    /// Straight to ours.
    #[default]
    Inherit,
    /// `/dev/null`.
    Null,
    /// Through a pipe to the launcher, which reads it line by line (so `output:REGEX`
    /// readiness can watch it) and, with `echo`, copies each line to our own stream.
    Watch { echo: bool },
}

/// A command to start: argv, extra environment, working directory, credentials, stdio.
#[derive(Clone, Debug, Default)]
pub struct Command {
    pub argv: Vec<OsString>,
    /// Variables added to (or replacing those of) our environment.
    pub env: Vec<(OsString, OsString)>,
    pub cwd: Option<PathBuf>,
    pub run_as: RunAs,
    pub stdin: Input,
    pub stdout: Output,
    pub stderr: Output,
}

impl Command {
    pub fn new<I, S>(argv: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Command { argv: argv.into_iter().map(Into::into).collect(), ..Command::default() }
    }

    pub fn env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> &mut Command {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn cwd(&mut self, dir: impl Into<PathBuf>) -> &mut Command {
        self.cwd = Some(dir.into());
        self
    }

    pub fn run_as(&mut self, run_as: RunAs) -> &mut Command {
        self.run_as = run_as;
        self
    }

    pub fn stdin(&mut self, input: Input) -> &mut Command {
        self.stdin = input;
        self
    }

    pub fn stdout(&mut self, output: Output) -> &mut Command {
        self.stdout = output;
        self
    }

    pub fn stderr(&mut self, output: Output) -> &mut Command {
        self.stderr = output;
        self
    }

    /// The program as typed, for messages.
    pub fn program(&self) -> String {
        self.argv.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// The command line as one string, for messages and traces.
    pub fn display(&self) -> String {
        self.argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }
}

/// Credentials to switch to in the child before exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub name: String,
    pub home: PathBuf,
}

/// The user who ran us through `sudo`, from `SUDO_UID`, `SUDO_GID` and `SUDO_USER`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SudoInvoker {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
}

impl SudoInvoker {
    /// Who ran us through sudo: `Ok(None)` when a variable is unset or empty, or names
    /// root; an error when `SUDO_UID` or `SUDO_GID` is not a number.
    pub fn from_env() -> Result<Option<SudoInvoker>> {
        let var = |key| std::env::var(key).ok();
        SudoInvoker::from_vars(var("SUDO_UID"), var("SUDO_GID"), var("SUDO_USER"))
    }

    /// The uid and gid that should own what a run as root under sudo writes for its
    /// user (traces, reports); `None` without a sudo invoker, or when the variables are garbled.
    pub fn owner() -> Option<(u32, u32)> {
        SudoInvoker::from_env().ok().flatten().map(|invoker| (invoker.uid, invoker.gid))
    }

    fn from_vars(
        uid: Option<String>,
        gid: Option<String>,
        name: Option<String>,
    ) -> Result<Option<SudoInvoker>> {
        let set = |v: Option<String>| v.filter(|v| !v.is_empty());
        let (Some(uid), Some(gid), Some(name)) = (set(uid), set(gid), set(name)) else {
            return Ok(None);
        };
        let number = |v: &str| {
            v.parse::<u32>().map_err(|_| LaunchError::User {
                user: name.clone(),
                reason: format!("bad SUDO_UID/SUDO_GID {v:?}"),
            })
        };
        let (uid, gid) = (number(&uid)?, number(&gid)?);
        Ok((uid != 0).then_some(SudoInvoker { uid, gid, name }))
    }
}

/// Resolves `run_as` from our credentials and environment. `None` means "keep ours".
pub fn resolve_user(run_as: &RunAs) -> Result<Option<Credentials>> {
    let user_error = |user: &str, reason: String| LaunchError::User { user: user.to_owned(), reason };
    let lookup = |name: &str| -> Result<Passwd> {
        sys::user_by_name(name)
            .map_err(|source| LaunchError::UserLookup { user: name.to_owned(), source })?
            .ok_or_else(|| user_error(name, "no such user".into()))
    };
    let user = match run_as {
        RunAs::Current => return Ok(None),
        RunAs::User(name) => lookup(name)?,
        RunAs::Invoker => {
            if !sys::is_root() {
                return Ok(None);
            }
            let Some(invoker) = SudoInvoker::from_env()? else {
                return Ok(None);
            };
            Passwd { uid: invoker.uid, gid: invoker.gid, ..lookup(&invoker.name)? }
        }
    };
    if !sys::is_root() && user.uid != sys::effective_uid() {
        return Err(user_error(&user.name, "switching users needs root".into()));
    }
    let c_name =
        CString::new(user.name.as_bytes()).map_err(|_| user_error(&user.name, "bad user name".into()))?;
    let groups = sys::group_list(&c_name, user.gid)
        .map_err(|source| LaunchError::UserGroups { user: user.name.clone(), source })?;
    Ok(Some(Credentials { uid: user.uid, gid: user.gid, groups, home: user.home, name: user.name }))
}

/// The environment the command gets: ours, then `extra`, then the variables below.
pub(crate) fn child_env(
    extra: &[(OsString, OsString)],
    creds: Option<&Credentials>,
    marks: &Path,
) -> Vec<CString> {
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut set = |key: &str, value: OsString| {
        vars.retain(|(k, _)| k != key);
        vars.push((key.into(), value));
    };
    if let Some(c) = creds {
        set("HOME", c.home.clone().into_os_string());
        set("USER", c.name.clone().into());
        set("LOGNAME", c.name.clone().into());
    }
    for (k, v) in extra {
        set(&k.to_string_lossy(), v.clone());
    }
    set(crate::marks::MARKS_ENV, marks.as_os_str().to_owned());
    vars.into_iter()
        .filter_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            CString::new(kv).ok()
        })
        .collect()
}

/// Finds `program` the way `execvp` would, in the command's own PATH.
pub(crate) fn resolve_program(program: &OsStr, env: &[CString]) -> Result<PathBuf> {
    let not_found = || LaunchError::NotFound { program: program.to_string_lossy().into_owned() };
    if program.is_empty() {
        return Err(LaunchError::EmptyCommand);
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = env
        .iter()
        .find_map(|kv| kv.as_bytes().strip_prefix(b"PATH="))
        .map(|p| OsStr::from_bytes(p).to_owned())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(not_found)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_in_the_commands_path() {
        let env = vec![CString::new("PATH=/nonexistent:/bin:/usr/bin").unwrap()];
        let sh = resolve_program(OsStr::new("sh"), &env).unwrap();
        assert!(sh.ends_with("sh") && sh.is_absolute());
        assert!(matches!(
            resolve_program(OsStr::new("no-such-program-xyz"), &env),
            Err(LaunchError::NotFound { .. })
        ));
        assert_eq!(resolve_program(OsStr::new("./x"), &env).unwrap(), PathBuf::from("./x"));
    }

    #[test]
    fn child_env_sets_marks_and_extra_and_user_vars_once() {
        let creds = Credentials {
            uid: 1,
            gid: 1,
            groups: vec![],
            name: "someone".into(),
            home: "/home/someone".into(),
        };
        let env = child_env(
            &[("HOME".into(), "/override".into()), ("A".into(), "1".into())],
            Some(&creds),
            Path::new("/m"),
        );
        let get = |key: &str| -> Vec<String> {
            env.iter()
                .map(|kv| kv.to_string_lossy().into_owned())
                .filter_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_owned))
                .collect()
        };
        assert_eq!(get("HOME"), ["/override"]);
        assert_eq!(get("USER"), ["someone"]);
        assert_eq!(get("A"), ["1"]);
        assert_eq!(get("COLDSTART_MARKS"), ["/m"]);
    }

    #[test]
    fn the_sudo_invoker_is_someone_other_than_root_named_by_all_three_variables() {
        let vars = |uid: &str, gid: &str, name: &str| {
            let set = |v: &str| Some(v.to_owned()).filter(|v| v != "-");
            SudoInvoker::from_vars(set(uid), set(gid), set(name))
        };
        let alice = SudoInvoker { uid: 1000, gid: 100, name: "alice".into() };
        assert_eq!(vars("1000", "100", "alice").unwrap(), Some(alice));
        assert_eq!(vars("0", "0", "root").unwrap(), None, "sudo from root is root");
        assert_eq!(vars("-", "100", "alice").unwrap(), None);
        assert_eq!(vars("1000", "100", "").unwrap(), None, "an empty variable counts as unset");
        assert!(matches!(vars("10x", "100", "alice"), Err(LaunchError::User { .. })));
        assert!(matches!(vars("1000", "-1", "alice"), Err(LaunchError::User { .. })));
    }

    #[test]
    fn current_user_keeps_our_credentials() {
        assert_eq!(resolve_user(&RunAs::Current).unwrap(), None);
    }
}
