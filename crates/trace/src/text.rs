//! The text forms of the model's enums, as stored in the trace file and shown in reports.

use crate::model::{
    AccessKind, BlockOp, CacheState, FileKind, LossSource, MarkSource, NoteSource, PageOrigin, Scope, Source,
    ThreadState,
};

/// An enum stored as one of a fixed set of words.
pub trait TextEnum: Sized + Copy + 'static {
    /// Every value with its word.
    const WORDS: &'static [(Self, &'static str)];

    fn as_str(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::WORDS.iter().find(|(value, _)| *value == self).map(|(_, word)| *word).unwrap_or("?")
    }

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

impl TextEnum for Source {
    const WORDS: &'static [(Self, &'static str)] =
        &[(Source::Record, "record"), (Source::Bootchart2, "bootchart2"), (Source::Synthetic, "synthetic")];
}

impl TextEnum for Scope {
    const WORDS: &'static [(Self, &'static str)] = &[(Scope::Tree, "tree"), (Scope::System, "system")];
}

impl TextEnum for CacheState {
    const WORDS: &'static [(Self, &'static str)] =
        &[(CacheState::Cold, "cold"), (CacheState::Warm, "warm"), (CacheState::Unknown, "unknown")];
}

impl TextEnum for FileKind {
    const WORDS: &'static [(Self, &'static str)] = &[
        (FileKind::Regular, "regular"),
        (FileKind::Directory, "directory"),
        (FileKind::DeviceMetadata, "device_metadata"),
        (FileKind::Other, "other"),
    ];
}

impl TextEnum for PageOrigin {
    const WORDS: &'static [(Self, &'static str)] =
        &[(PageOrigin::Fault, "fault"), (PageOrigin::Read, "read"), (PageOrigin::Readahead, "readahead")];
}

impl TextEnum for AccessKind {
    const WORDS: &'static [(Self, &'static str)] =
        &[(AccessKind::Read, "read"), (AccessKind::Fault, "fault"), (AccessKind::MapAround, "map_around")];
}

impl TextEnum for BlockOp {
    const WORDS: &'static [(Self, &'static str)] = &[
        (BlockOp::Read, "read"),
        (BlockOp::Write, "write"),
        (BlockOp::Flush, "flush"),
        (BlockOp::Discard, "discard"),
        (BlockOp::Other, "other"),
    ];
}

impl TextEnum for ThreadState {
    const WORDS: &'static [(Self, &'static str)] = &[
        (ThreadState::Running, "running"),
        (ThreadState::Runnable, "runnable"),
        (ThreadState::IoWait, "io_wait"),
        (ThreadState::Sleeping, "sleeping"),
        (ThreadState::Stopped, "stopped"),
    ];
}

impl TextEnum for MarkSource {
    const WORDS: &'static [(Self, &'static str)] = &[
        (MarkSource::Command, "command"),
        (MarkSource::MarksFile, "marks_file"),
        (MarkSource::TraceMarker, "trace_marker"),
        (MarkSource::Output, "output"),
        (MarkSource::Import, "import"),
    ];
}

impl TextEnum for LossSource {
    const WORDS: &'static [(Self, &'static str)] = &[
        (LossSource::Tracefs, "tracefs"),
        (LossSource::Fanotify, "fanotify"),
        (LossSource::ProcConnector, "proc connector"),
        (LossSource::Files, "files"),
        (LossSource::Spool, "spool"),
        (LossSource::Bootchart2, "bootchart2"),
        (LossSource::Other, "other"),
    ];
}

impl TextEnum for NoteSource {
    const WORDS: &'static [(Self, &'static str)] = &[
        (NoteSource::Record, "record"),
        (NoteSource::Recover, "recover"),
        (NoteSource::Files, "files"),
        (NoteSource::Bootchart2, "bootchart2"),
        (NoteSource::Other, "other"),
    ];
}

/// Makes a [`TextEnum`] open ([`OpenTextEnum`], unknown words read as `$unknown`),
/// shown as its word (`Display`), and serialized as its word (serde `into`/`from`).
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
    fn every_word_round_trips() {
        fn check<T: TextEnum + PartialEq + std::fmt::Debug>() {
            for (value, word) in T::WORDS {
                assert_eq!(value.as_str(), *word);
                assert_eq!(T::from_word(word), Some(*value));
            }
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
