//! Readiness conditions (`--until`) and the reasons a wait ends, with their text
//! forms, listed once in [`Until::FORMS`] for help texts and errors.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use regex::Regex;

use crate::error::{LaunchError, regex_error};
use crate::systemd::UnitSpec;
use crate::window::WindowPattern;

/// Default quiet period of `idle`.
pub const DEFAULT_IDLE_MS: u64 = 500;

/// When a started command counts as ready.
#[derive(Clone, Debug, Default)]
pub enum Until {
    /// The command itself (the process that was started, not its descendants) exits.
    #[default]
    Exit,
    /// A mark with this name appears in the marks file (`coldstart mark NAME`).
    Mark(String),
    /// A line of the command's stdout or stderr matches (the command's output must
    /// be [`crate::Output::Watch`]ed).
    Output(Regex),
    /// The machine is quiet for this long after the command started: no disk reads
    /// and little CPU (see [`crate::idle`] for the thresholds).
    Idle(Duration),
    /// A process of the command's tree maps its first top-level X11 window.
    Window,
    /// A window whose WM_CLASS instance or class matches becomes visible, whichever
    /// process maps it.
    WindowClass(WindowPattern),
    /// A window whose title (`_NET_WM_NAME` or `WM_NAME`) matches becomes visible,
    /// whichever process maps it.
    WindowName(WindowPattern),
    /// A window manager takes the X screen: it sets EWMH's `_NET_SUPPORTING_WM_CHECK`
    /// on the root window, naming a window of its own, whose process is credited.
    WindowManager,
    /// A systemd unit becomes active (enters `active` after the command started), on
    /// the manager [`UnitSpec`] names: see [`crate::systemd`] for which one `unit:NAME` picks.
    Unit(UnitSpec),
}

impl Until {
    /// Every text form with what it waits for: the one list that help texts and parse
    /// errors show, so that a new kind is added here and in the parser only.
    pub const FORMS: [(&str, &str); 9] = [
        ("exit", "the command itself exits (not its descendants)"),
        ("mark:NAME", "the program runs `coldstart mark NAME`"),
        ("output:REGEX", "a line of its stdout or stderr matches"),
        ("idle[:MS]", "no disk reads and CPUs under 10% busy for MS milliseconds (default 500)"),
        ("window", "a process of its tree maps its first top-level X11 window"),
        (
            "window:CLASS",
            "a window of WM_CLASS instance or class CLASS becomes visible, mapped by any process (X11)",
        ),
        ("window-name:NAME", "a window titled NAME becomes visible, mapped by any process (X11)"),
        ("wm", "a window manager takes the screen (sets _NET_SUPPORTING_WM_CHECK; X11)"),
        (
            "unit:NAME",
            "a systemd unit becomes active: in a container the command boots, else on the host's \
             system manager or the user's (unit:system/NAME, unit:user/NAME name one)",
        ),
    ];

    /// How the window forms take a regular expression, and where they do not work:
    /// the note help texts print after [`Until::FORMS`].
    pub const WINDOW_NOTE: &str = "CLASS and NAME are exact, or /REGEX/ (unanchored: /^mate-/). Window \
        conditions need X11: under Wayland a client cannot see other clients' windows, so there \
        readiness comes from a mark (mark:NAME) or the session's systemd user units.";

    /// The forms as a list: `exit, mark:NAME, … or window`.
    pub fn forms_list() -> String {
        let forms: Vec<&str> = Until::FORMS.iter().map(|(form, _)| *form).collect();
        match forms.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => forms.concat(),
        }
    }

    /// True when readiness is read from the command's output, which must then be
    /// [`crate::Output::Watch`]ed.
    pub fn watches_output(&self) -> bool {
        matches!(self, Until::Output(_))
    }

    /// True for the conditions read from the X server.
    pub(crate) fn watches_windows(&self) -> bool {
        matches!(self, Until::Window | Until::WindowClass(_) | Until::WindowName(_) | Until::WindowManager)
    }

    /// Several conditions as one text (bench's exports): `wm and window:mate-panel`.
    pub fn describe_all(conditions: &[Until]) -> String {
        let texts: Vec<String> = conditions.iter().map(Until::to_string).collect();
        texts.join(" and ")
    }
}

impl PartialEq for Until {
    fn eq(&self, other: &Until) -> bool {
        self.to_string() == other.to_string()
    }
}

impl fmt::Display for Until {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Until::Exit => f.write_str("exit"),
            Until::Mark(name) => write!(f, "mark:{name}"),
            Until::Output(re) => write!(f, "output:{}", re.as_str()),
            Until::Idle(quiet) => write!(f, "idle:{}", quiet.as_millis()),
            Until::Window => f.write_str("window"),
            Until::WindowClass(pattern) => write!(f, "window:{pattern}"),
            Until::WindowName(pattern) => write!(f, "window-name:{pattern}"),
            Until::WindowManager => f.write_str("wm"),
            Until::Unit(spec) => write!(f, "unit:{spec}"),
        }
    }
}

impl FromStr for Until {
    type Err = LaunchError;

    /// Parses one of [`Until::FORMS`].
    fn from_str(text: &str) -> Result<Until, LaunchError> {
        let bad = |reason: &str| LaunchError::BadUntil { text: text.to_owned(), reason: reason.to_owned() };
        let (kind, arg) = match text.split_once(':') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (text, None),
        };
        match (kind, arg) {
            ("exit", None) => Ok(Until::Exit),
            ("window", None) => Ok(Until::Window),
            ("wm", None) => Ok(Until::WindowManager),
            ("idle", None) => Ok(Until::Idle(Duration::from_millis(DEFAULT_IDLE_MS))),
            ("idle", Some(ms)) => match ms.parse::<u64>() {
                Ok(ms) if ms > 0 => Ok(Until::Idle(Duration::from_millis(ms))),
                _ => Err(bad("idle:MS takes a positive number of milliseconds")),
            },
            ("mark", Some(name)) => {
                crate::marks::check_name(name)
                    .map_err(|_| bad("a mark name is non-empty, without tabs or newlines"))?;
                Ok(Until::Mark(name.to_owned()))
            }
            ("output", Some(re)) if !re.is_empty() => {
                Regex::new(re).map(Until::Output).map_err(|e| bad(&regex_error(&e)))
            }
            ("window", Some(class)) => {
                WindowPattern::parse(class).map(Until::WindowClass).map_err(|e| bad(&e))
            }
            ("window-name", Some(name)) => {
                WindowPattern::parse(name).map(Until::WindowName).map_err(|e| bad(&e))
            }
            ("unit", Some(spec)) => spec.parse::<UnitSpec>().map(Until::Unit).map_err(|e| bad(&e)),
            ("exit" | "wm", Some(_)) => Err(bad("takes no argument")),
            ("mark" | "output", _) => Err(bad(&format!("write it as {kind}:{}", kind.to_uppercase()))),
            ("unit", None) => Err(bad("write it as unit:NAME, e.g. unit:multi-user.target")),
            ("window-name", None) => Err(bad("write it as window-name:NAME")),
            _ => Err(bad(&format!("expected {}", Until::forms_list()))),
        }
    }
}

/// Why a wait ended: the trace's own type, so that what launch reports is what a
/// trace stores and an export prints, in the same words.
pub use coldstart_trace::ReadyReason as Reason;

impl Until {
    /// True when `reason` is the one this condition asked for.
    pub fn is_met_by(&self, reason: &Reason) -> bool {
        match (reason, self) {
            (Reason::Exit, Until::Exit)
            | (Reason::Window, Until::Window)
            | (Reason::WindowManager, Until::WindowManager) => true,
            (Reason::Mark(a), Until::Mark(b)) => a == b,
            (Reason::Output(a), Until::Output(b)) => a == b.as_str(),
            (Reason::Idle(a), Until::Idle(b)) => u128::from(*a) == b.as_millis(),
            (Reason::WindowClass(a), Until::WindowClass(b))
            | (Reason::WindowName(a), Until::WindowName(b)) => *a == b.to_string(),
            (Reason::Unit(a), Until::Unit(b)) => *a == b.to_string(),
            _ => false,
        }
    }

    /// The reason a wait for this condition ends when the condition is met.
    pub(crate) fn reason(&self) -> Reason {
        match self {
            Until::Exit => Reason::Exit,
            Until::Mark(name) => Reason::Mark(name.clone()),
            Until::Output(re) => Reason::Output(re.as_str().to_owned()),
            Until::Idle(quiet) => Reason::Idle(quiet.as_millis() as u64),
            Until::Window => Reason::Window,
            Until::WindowClass(pattern) => Reason::WindowClass(pattern.to_string()),
            Until::WindowName(pattern) => Reason::WindowName(pattern.to_string()),
            Until::WindowManager => Reason::WindowManager,
            Until::Unit(spec) => Reason::Unit(spec.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_prints_it_back() {
        for text in [
            "exit",
            "window",
            "idle:500",
            "idle:20",
            "mark:ready",
            "mark:first paint",
            "output:^Listening on \\d+",
            "window:mate-panel",
            "window:/^mate-(panel|desktop)$/",
            "window-name:Home: a folder",
            "window-name:/^Home/",
            "wm",
            "unit:multi-user.target",
            "unit:user/graphical-session.target",
            "unit:system/getty@tty1.service",
        ] {
            let until: Until = text.parse().unwrap();
            assert_eq!(until.to_string(), text);
            assert!(until.is_met_by(&until.reason()));
            assert_eq!(until.reason().to_string(), text);
        }
        assert_eq!("idle".parse::<Until>().unwrap().to_string(), "idle:500");
    }

    #[test]
    fn rejects_malformed_conditions() {
        for text in [
            "",
            "exit:1",
            "wm:marco",
            "idle:0",
            "idle:x",
            "mark",
            "mark:",
            "output:",
            "output:(",
            "window:",
            "window://",
            "window:/[/",
            "window:/mate",
            "window-name",
            "window-name:",
            "window-name:/(/",
            "unit",
            "unit:",
            "unit:user/",
            "unit:multi-user",
            "unit:host/multi-user.target",
            "unit:a b.service",
            "ready",
        ] {
            assert!(text.parse::<Until>().is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn an_unknown_kind_is_told_every_form() {
        let err = "ready".parse::<Until>().unwrap_err().to_string();
        assert!(
            err.ends_with(
                "expected exit, mark:NAME, output:REGEX, idle[:MS], window, window:CLASS, window-name:NAME, wm or unit:NAME"
            ),
            "{err}"
        );
    }

    #[test]
    fn bad_window_values_are_one_line_and_say_what_is_wrong() {
        for (text, says) in [
            ("window:", "empty"),
            ("window://", "empty"),
            ("window:/[/", "unclosed character class"),
            ("window:/mate", "/REGEX/"),
            ("output:(", "unclosed group"),
        ] {
            let err = text.parse::<Until>().unwrap_err().to_string();
            assert!(err.contains(says) && !err.contains('\n'), "{text}: {err}");
        }
    }

    #[test]
    fn other_reasons_do_not_satisfy() {
        let until: Until = "mark:ready".parse().unwrap();
        assert!(!until.is_met_by(&Reason::Mark("other".into())));
        assert!(!until.is_met_by(&Reason::Exit));
        assert!(!Until::Exit.is_met_by(&Reason::Timeout));
        assert!(!Until::Exit.is_met_by(&Reason::Interrupted));
        assert!(!Until::Exit.is_met_by(&Reason::Bootchart2End));
    }
}
