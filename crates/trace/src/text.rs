//! The text forms of the model's enums, as stored in the trace file and shown in reports.

use std::fmt;
use std::str::FromStr;

use crate::model::{
    AccessKind, BlockOp, CacheState, FileKind, LossSource, MarkSource, NoteSource, PageOrigin, ReadyReason,
    Scope, Source, ThreadState,
};

/// An enum stored as one of a fixed set of words. Implemented only through
/// `text_enum!`, whose exhaustive `match` makes a variant without a word a compile
/// error, and which builds [`TextEnum::WORDS`] from the same list.
pub trait TextEnum: Sized + Copy + PartialEq + 'static {
    /// Every value with its word, in declaration order.
    const WORDS: &'static [(Self, &'static str)];

    fn as_str(self) -> &'static str;

    fn from_word(word: &str) -> Option<Self> {
        Self::WORDS.iter().find(|(_, w)| *w == word).map(|(value, _)| *value)
    }
}

/// A [`TextEnum`] whose words other versions or programs may extend: a word it does
/// not know is read as [`OpenTextEnum::UNKNOWN`] instead of failing the read.
pub trait OpenTextEnum: TextEnum {
    const UNKNOWN: Self;

    fn from_any_word(word: &str) -> Self {
        Self::from_word(word).unwrap_or(Self::UNKNOWN)
    }
}

macro_rules! text_enum {
    ($($type:ident { $($variant:ident => $word:literal),+ $(,)? })+) => {$(
        impl TextEnum for $type {
            const WORDS: &'static [(Self, &'static str)] = &[$(($type::$variant, $word)),+];

            fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $word),+
                }
            }
        }
    )+};
}

text_enum! {
    Source { Record => "record", Bootchart2 => "bootchart2", Synthetic => "synthetic" }
    Scope { Tree => "tree", System => "system" }
    CacheState { Cold => "cold", Warm => "warm", Unknown => "unknown" }
    FileKind { Regular => "regular", Directory => "directory", DeviceMetadata => "device_metadata", Other => "other" }
    PageOrigin { Fault => "fault", Read => "read", Readahead => "readahead" }
    AccessKind { Read => "read", Fault => "fault", MapAround => "map_around" }
    BlockOp { Read => "read", Write => "write", Flush => "flush", Discard => "discard", Other => "other" }
    ThreadState {
        Running => "running",
        Runnable => "runnable",
        IoWait => "io_wait",
        Sleeping => "sleeping",
        Stopped => "stopped",
    }
    MarkSource {
        Command => "command",
        MarksFile => "marks_file",
        TraceMarker => "trace_marker",
        Output => "output",
        Import => "import",
        Until => "until",
    }
    LossSource {
        Tracefs => "tracefs",
        Fanotify => "fanotify",
        ProcConnector => "proc connector",
        Perf => "perf",
        Files => "files",
        Spool => "spool",
        Bootchart2 => "bootchart2",
        Bpf => "bpf",
        Other => "other",
    }
    NoteSource { Record => "record", Recover => "recover", Files => "files", Bootchart2 => "bootchart2", Other => "other" }
}

macro_rules! open_text_enum {
    ($type:ty, $unknown:expr) => {
        impl OpenTextEnum for $type {
            const UNKNOWN: Self = $unknown;
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<$type> for &'static str {
            fn from(value: $type) -> &'static str {
                value.as_str()
            }
        }

        impl From<String> for $type {
            fn from(word: String) -> $type {
                <$type>::from_any_word(&word)
            }
        }
    };
}

open_text_enum!(LossSource, LossSource::Other);
open_text_enum!(NoteSource, NoteSource::Other);

impl fmt::Display for ReadyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadyReason::Exit => f.write_str("exit"),
            ReadyReason::Mark(name) => write!(f, "mark:{name}"),
            ReadyReason::Output(regex) => write!(f, "output:{regex}"),
            ReadyReason::Idle(ms) => write!(f, "idle:{ms}"),
            ReadyReason::Window => f.write_str("window"),
            ReadyReason::WindowClass(pattern) => write!(f, "window:{pattern}"),
            ReadyReason::WindowName(pattern) => write!(f, "window-name:{pattern}"),
            ReadyReason::WindowManager => f.write_str("wm"),
            ReadyReason::Unit(unit) => write!(f, "unit:{unit}"),
            ReadyReason::Timeout => f.write_str("timeout"),
            ReadyReason::Interrupted => f.write_str("interrupted"),
            ReadyReason::Bootchart2End => f.write_str("bootchart2:end"),
        }
    }
}

/// Text that is not a ready reason's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a ready reason: {0:?} (expected exit, mark:NAME, output:REGEX, idle:MS, window, window:CLASS, \
     window-name:NAME, wm, unit:NAME, timeout, interrupted or bootchart2:end)"
)]
pub struct ParseReadyReasonError(String);

impl FromStr for ReadyReason {
    type Err = ParseReadyReasonError;

    /// The inverse of `Display`: a kind, then for the kinds that carry one, `:` and a
    /// non-empty value (which may itself hold colons).
    fn from_str(text: &str) -> Result<ReadyReason, ParseReadyReasonError> {
        let (kind, value) = match text.split_once(':') {
            Some((kind, value)) => (kind, Some(value).filter(|v| !v.is_empty())),
            None => (text, None),
        };
        let reason = match (kind, value) {
            ("exit", None) if kind == text => ReadyReason::Exit,
            ("window", None) if kind == text => ReadyReason::Window,
            ("wm", None) if kind == text => ReadyReason::WindowManager,
            ("timeout", None) if kind == text => ReadyReason::Timeout,
            ("interrupted", None) if kind == text => ReadyReason::Interrupted,
            ("mark", Some(name)) => ReadyReason::Mark(name.to_owned()),
            ("output", Some(regex)) => ReadyReason::Output(regex.to_owned()),
            ("window", Some(pattern)) => ReadyReason::WindowClass(pattern.to_owned()),
            ("window-name", Some(pattern)) => ReadyReason::WindowName(pattern.to_owned()),
            ("unit", Some(unit)) => ReadyReason::Unit(unit.to_owned()),
            ("idle", Some(ms)) => match ms.parse() {
                Ok(ms) => ReadyReason::Idle(ms),
                Err(_) => return Err(ParseReadyReasonError(text.to_owned())),
            },
            ("bootchart2", Some("end")) => ReadyReason::Bootchart2End,
            _ => return Err(ParseReadyReasonError(text.to_owned())),
        };
        Ok(reason)
    }
}

impl From<ReadyReason> for String {
    fn from(reason: ReadyReason) -> String {
        reason.to_string()
    }
}

impl TryFrom<String> for ReadyReason {
    type Error = ParseReadyReasonError;

    fn try_from(text: String) -> Result<ReadyReason, ParseReadyReasonError> {
        text.parse()
    }
}

impl BlockOp {
    /// The operation named by a kernel `rwbs` string: an optional leading `F`
    /// (preflush) then `R`, `W`, `D`, `E` or `N`; a bare `F` is a flush.
    pub fn from_rwbs(rwbs: &str) -> BlockOp {
        let bytes = rwbs.as_bytes();
        let has_preflush = bytes.len() > 1 && bytes[0] == b'F' && b"RWDFN".contains(&bytes[1]);
        let op = if has_preflush { bytes[1] } else { bytes.first().copied().unwrap_or(b'?') };
        match op {
            b'R' => BlockOp::Read,
            b'W' => BlockOp::Write,
            b'D' => BlockOp::Discard,
            b'F' => BlockOp::Flush,
            // Older kernels showed an empty flush with preflush as "FN".
            b'N' if has_preflush => BlockOp::Flush,
            _ => BlockOp::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_is_the_serde_name() {
        fn check<T: TextEnum + std::fmt::Debug + serde::Serialize>() {
            for (value, word) in T::WORDS {
                assert_eq!(value.as_str(), *word);
                assert_eq!(T::from_word(word), Some(*value));
                assert_eq!(serde_json::to_value(value).unwrap(), *word, "{value:?}");
            }
            let distinct: std::collections::HashSet<&str> = T::WORDS.iter().map(|(_, w)| *w).collect();
            assert_eq!(
                distinct.len(),
                T::WORDS.len(),
                "two values of {} share a word",
                std::any::type_name::<T>()
            );
            assert_eq!(T::from_word("no such word"), None);
        }
        check::<Source>();
        check::<Scope>();
        check::<CacheState>();
        check::<FileKind>();
        check::<PageOrigin>();
        check::<BlockOp>();
        check::<AccessKind>();
        check::<ThreadState>();
        check::<MarkSource>();
        check::<LossSource>();
        check::<NoteSource>();
    }

    #[test]
    fn unknown_loss_and_note_sources_read_as_other() {
        assert_eq!(LossSource::from_any_word("proc connector"), LossSource::ProcConnector);
        assert_eq!(LossSource::from_any_word("sampler"), LossSource::Other);
        assert_eq!(NoteSource::from_any_word("recover"), NoteSource::Recover);
        assert_eq!(NoteSource::from_any_word("Record"), NoteSource::Other);
    }

    #[test]
    fn loss_and_note_sources_serialize_as_their_words() {
        let loss = crate::Loss { source: LossSource::ProcConnector, what: "x".into(), count: 1 };
        let json = serde_json::to_string(&loss).unwrap();
        assert_eq!(json, r#"{"source":"proc connector","what":"x","count":1}"#);
        let note: crate::Note = serde_json::from_str(r#"{"source":"someone else","text":"t"}"#).unwrap();
        assert_eq!(note.source, NoteSource::Other);
    }

    #[test]
    fn every_ready_reason_round_trips_through_its_words() {
        let every_kind = [
            (ReadyReason::Exit, "exit"),
            (ReadyReason::Mark("first paint".into()), "mark:first paint"),
            (ReadyReason::Mark("a:b".into()), "mark:a:b"),
            (ReadyReason::Output("^Listening on \\d+".into()), "output:^Listening on \\d+"),
            (ReadyReason::Idle(500), "idle:500"),
            (ReadyReason::Window, "window"),
            (ReadyReason::WindowClass("mate-panel".into()), "window:mate-panel"),
            (ReadyReason::WindowClass("/^mate-.*$/".into()), "window:/^mate-.*$/"),
            (ReadyReason::WindowName("Home: a folder".into()), "window-name:Home: a folder"),
            (ReadyReason::WindowManager, "wm"),
            (ReadyReason::Unit("multi-user.target".into()), "unit:multi-user.target"),
            (ReadyReason::Unit("user/graphical-session.target".into()), "unit:user/graphical-session.target"),
            (ReadyReason::Timeout, "timeout"),
            (ReadyReason::Interrupted, "interrupted"),
            (ReadyReason::Bootchart2End, "bootchart2:end"),
        ];
        // Adding a variant breaks this exhaustive match; its new index then fails the
        // assertion below until the variant's words are added to the list above.
        let kind_index = |reason: &ReadyReason| match reason {
            ReadyReason::Exit => 0,
            ReadyReason::Mark(_) => 1,
            ReadyReason::Output(_) => 2,
            ReadyReason::Idle(_) => 3,
            ReadyReason::Window => 4,
            ReadyReason::WindowClass(_) => 5,
            ReadyReason::WindowName(_) => 6,
            ReadyReason::Timeout => 7,
            ReadyReason::Interrupted => 8,
            ReadyReason::Bootchart2End => 9,
            ReadyReason::WindowManager => 10,
            ReadyReason::Unit(_) => 11,
        };
        let covered: std::collections::BTreeSet<usize> =
            every_kind.iter().map(|(r, _)| kind_index(r)).collect();
        assert_eq!(covered, (0..=11).collect());
        for (reason, words) in every_kind {
            assert_eq!(reason.to_string(), words);
            assert_eq!(words.parse::<ReadyReason>(), Ok(reason.clone()));
            assert_eq!(serde_json::to_value(&reason).unwrap(), words);
            assert_eq!(serde_json::from_value::<ReadyReason>(words.into()).unwrap(), reason);
        }
    }

    #[test]
    fn malformed_ready_reasons_are_refused() {
        for text in [
            "",
            "exit:1",
            "window:",
            "window-name:",
            "window-name",
            "mark",
            "mark:",
            "output:",
            "idle",
            "idle:",
            "idle:-1",
            "idle:5ms",
            "ready",
            "bootchart2:x",
            "EXIT",
        ] {
            assert!(text.parse::<ReadyReason>().is_err(), "{text:?} was accepted");
        }
    }

    #[test]
    fn rwbs_strings_of_real_requests() {
        assert_eq!(BlockOp::from_rwbs("R"), BlockOp::Read);
        assert_eq!(BlockOp::from_rwbs("RA"), BlockOp::Read);
        assert_eq!(BlockOp::from_rwbs("RM"), BlockOp::Read);
        assert_eq!(BlockOp::from_rwbs("WS"), BlockOp::Write);
        assert_eq!(BlockOp::from_rwbs("FWFS"), BlockOp::Write);
        assert_eq!(BlockOp::from_rwbs("FF"), BlockOp::Flush);
        assert_eq!(BlockOp::from_rwbs("F"), BlockOp::Flush);
        assert_eq!(BlockOp::from_rwbs("FN"), BlockOp::Flush);
        assert_eq!(BlockOp::from_rwbs("D"), BlockOp::Discard);
        assert_eq!(BlockOp::from_rwbs("N"), BlockOp::Other);
        assert_eq!(BlockOp::from_rwbs("FS"), BlockOp::Flush);
        assert_eq!(BlockOp::from_rwbs(""), BlockOp::Other);
    }
}
