//! Lines and records the importer had to skip. Nothing is dropped silently: each
//! kind becomes a `loss` row with its count and a note naming the first place
//! (file and line) and the reason.

use coldstart_trace::{Loss, LossSource, Note, NoteSource};

#[derive(Debug, Default)]
pub struct Problems {
    kinds: Vec<Kind>,
}

#[derive(Debug)]
struct Kind {
    what: String,
    count: u64,
    first: String,
}

impl Problems {
    /// Counts one skipped item of kind `what`, remembering where the first one was and why.
    pub fn skip(&mut self, what: &str, location: impl FnOnce() -> String, why: impl FnOnce() -> String) {
        match self.kinds.iter_mut().find(|k| k.what == what) {
            Some(kind) => kind.count += 1,
            None => {
                let first = format!("{}: {}", location(), why());
                self.kinds.push(Kind { what: what.to_owned(), count: 1, first });
            }
        }
    }

    #[cfg(test)]
    pub fn count(&self, what: &str) -> u64 {
        self.kinds.iter().find(|k| k.what == what).map_or(0, |k| k.count)
    }

    pub fn into_rows(self) -> (Vec<Loss>, Vec<Note>) {
        let mut losses = Vec::new();
        let mut notes = Vec::new();
        for kind in self.kinds {
            notes.push(Note {
                source: NoteSource::Bootchart2,
                text: format!("skipped {} {}; the first: {}", kind.count, kind.what, kind.first),
            });
            losses.push(Loss { source: LossSource::Bootchart2, what: kind.what, count: kind.count });
        }
        (losses, notes)
    }
}
