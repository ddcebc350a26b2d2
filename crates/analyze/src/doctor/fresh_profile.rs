//! The fresh-profile pattern of `verify` lines. A start that names its profile (or
//! user-data) directory on its command line left that directory used: pasting the
//! recorded command into `coldstart bench` would time another start, one with a
//! profile it made itself, and a different one each run. So the `verify` line runs it
//! on `DIR.fresh`, copied before every run from `DIR.seed` (`--prepare`), which it
//! creates empty when it is missing: every run is then a first start, or the start of
//! whatever profile the user put in the seed. The recorded directory is never touched.

use crate::doctor::facts::{shell_join, shell_quote};

/// Options whose value is a directory: `--option DIR` or `--option=DIR`.
const DIRECTORY_OPTIONS: [&str; 1] = ["--user-data-dir"];

/// Options whose value is a directory when it is a path (Firefox's and Thunderbird's;
/// elsewhere `--profile` often names a configuration: `cargo --profile release`).
const PATH_OPTIONS: [&str; 2] = ["--profile", "-profile"];

/// LibreOffice's option, whose value is a `file://` URL.
const USER_INSTALLATION: &str = "-env:UserInstallation=file://";

/// Where an argument names the profile directory: the argument's index, the text before
/// the directory in it, and the directory (without trailing slashes).
struct ProfileArgument {
    index: usize,
    prefix: String,
    dir: String,
}

/// How a `verify` line starts the traced command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyStart {
    /// What runs before `coldstart bench` (`mkdir -p DIR.seed && `), or nothing.
    pub setup: String,
    /// The bench options it needs (` --prepare '…'`), or nothing.
    pub options: String,
    /// The command, quoted for a shell, on `DIR.fresh` where it named a profile.
    pub command: String,
}

impl VerifyStart {
    /// `coldstart bench OPTIONS … -- COMMAND`, with what the fresh profile needs.
    pub fn bench(&self, options: &str) -> String {
        let space = if options.is_empty() { "" } else { " " };
        format!("{}coldstart bench{space}{options}{} -- {}", self.setup, self.options, self.command)
    }
}

/// The `verify` start of `argv`: on a fresh copy of a seed profile when `argv` names a
/// profile directory, else `argv` as it is.
pub fn verify_start(argv: &[String]) -> VerifyStart {
    let plain = VerifyStart { setup: String::new(), options: String::new(), command: shell_join(argv) };
    let Some(ProfileArgument { index, prefix, dir }) = profile_argument(argv) else { return plain };
    let fresh = format!("{dir}.fresh");
    let seed = format!("{dir}.seed");
    let mut rewritten = argv.to_vec();
    let rest = &argv[index][prefix.len() + dir.len()..];
    rewritten[index] = format!("{prefix}{fresh}{rest}");
    let prepare = format!(
        "rm -rf {fresh} && cp -a {seed} {fresh}",
        fresh = shell_quote(&fresh),
        seed = shell_quote(&seed)
    );
    VerifyStart {
        setup: format!("mkdir -p {} && ", shell_quote(&seed)),
        options: format!(" --prepare {}", shell_quote(&prepare)),
        command: shell_join(&rewritten),
    }
}

/// The first argument that names a profile directory a shell command may safely copy to.
fn profile_argument(argv: &[String]) -> Option<ProfileArgument> {
    for (i, arg) in argv.iter().enumerate().skip(1) {
        let (index, prefix, value, needs_slash) = if let Some(url) = arg.strip_prefix(USER_INSTALLATION) {
            (i, USER_INSTALLATION, url, false)
        } else if let Some(option) = option_of(arg, &DIRECTORY_OPTIONS, &PATH_OPTIONS) {
            match arg.strip_prefix(option).and_then(|rest| rest.strip_prefix('=')) {
                Some(value) => (i, &arg[..=option.len()], value, PATH_OPTIONS.contains(&option)),
                None => match argv.get(i + 1) {
                    Some(next) => (i + 1, "", next.as_str(), PATH_OPTIONS.contains(&option)),
                    None => continue,
                },
            }
        } else {
            continue;
        };
        if needs_slash && !value.contains('/') {
            continue;
        }
        if let Some(dir) = usable_directory(value) {
            return Some(ProfileArgument { index, prefix: prefix.to_owned(), dir });
        }
    }
    None
}

/// The option of `arg` (`--profile` of `--profile` or `--profile=DIR`), when it is one of these.
fn option_of<'a>(arg: &str, directories: &[&'a str], paths: &[&'a str]) -> Option<&'a str> {
    let name = arg.split_once('=').map_or(arg, |(name, _)| name);
    directories.iter().chain(paths).copied().find(|&option| option == name)
}

/// `value` as a directory to copy a profile next to: not empty, not the root, no `~` or
/// `%` (a shell or URL would read them otherwise), no `..`, not an option.
fn usable_directory(value: &str) -> Option<String> {
    let dir = value.trim_end_matches('/');
    let refused = dir.is_empty()
        || dir.starts_with('-')
        || dir.starts_with('~')
        || dir.contains('%')
        || dir.split('/').any(|part| part == "..")
        || dir == ".";
    (!refused).then(|| dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(args: &[&str]) -> VerifyStart {
        verify_start(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_libreoffice_user_installation_runs_on_a_fresh_copy_of_a_seed() {
        let v = start(&["soffice", "-env:UserInstallation=file:///tmp/lo/profile/", "--headless", "doc.txt"]);
        assert_eq!(
            v.bench("--cold --runs 10"),
            "mkdir -p /tmp/lo/profile.seed && coldstart bench --cold --runs 10 \
             --prepare 'rm -rf /tmp/lo/profile.fresh && cp -a /tmp/lo/profile.seed /tmp/lo/profile.fresh' \
             -- soffice '-env:UserInstallation=file:///tmp/lo/profile.fresh/' --headless doc.txt"
        );
    }

    #[test]
    fn profile_and_user_data_options_take_their_value_in_either_form() {
        let v = start(&["firefox", "--headless", "--profile", "/home/u/my profile", "about:blank"]);
        assert_eq!(v.setup, "mkdir -p '/home/u/my profile.seed' && ");
        assert_eq!(
            v.options,
            r#" --prepare "rm -rf '/home/u/my profile.fresh' && cp -a '/home/u/my profile.seed' '/home/u/my profile.fresh'""#
        );
        assert_eq!(v.command, "firefox --headless --profile '/home/u/my profile.fresh' about:blank");
        let v = start(&["chromium", "--user-data-dir=data", "--headless"]);
        assert_eq!(v.command, "chromium '--user-data-dir=data.fresh' --headless");
        assert_eq!(v.setup, "mkdir -p data.seed && ");
        let v = start(&["thunderbird", "-profile", "./tb"]);
        assert_eq!(v.command, "thunderbird -profile ./tb.fresh");
    }

    #[test]
    fn a_command_without_a_usable_profile_directory_is_verified_as_recorded() {
        for args in [
            &["app", "--start"][..],
            &["app", "--profile"],
            &["app", "--profile", "/"],
            &["app", "--profile=~/p"],
            &["app", "--profile", "../p"],
            &["app", "-env:UserInstallation=file:///tmp/my%20profile"],
            &["--profile", "/tmp/p"],
            &["cargo", "build", "--profile", "release"],
            &["app", "--profile=dev"],
        ] {
            let v = start(args);
            assert_eq!((v.setup.as_str(), v.options.as_str()), ("", ""), "{args:?}");
            assert_eq!(v.command, shell_join(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()));
        }
    }
}
