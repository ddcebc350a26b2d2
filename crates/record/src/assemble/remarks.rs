//! What a trace says about itself: the losses it counts (every report prints them)
//! and the notes a reader should see, from the recorder, the spool and the assembly.

use coldstart_trace::{Loss, LossSource, Note, NoteSource, OpenTextEnum};

use crate::assemble::FilesAndPages;
use crate::assemble::decode::{Decoded, SpoolData};
use crate::assemble::files::FileTable;
use crate::assemble::procs::ProcTree;
use crate::spool::Spool;

fn loss(source: LossSource, what: impl Into<String>, count: u64) -> Loss {
    Loss { source, what: what.into(), count }
}

fn note(source: NoteSource, text: impl Into<String>) -> Note {
    Note { source, text: text.into() }
}

/// The recorder's own counters first (zero counts kept: they say what was checked),
/// then what the assembly could not decode or resolve.
pub fn losses(data: &SpoolData, files: &FileTable, tree: &ProcTree, fiemap_failed: u64) -> Vec<Loss> {
    let mut losses: Vec<Loss> = match &data.end {
        Some(e) => {
            e.losses.iter().map(|(s, w, c)| loss(LossSource::from_any_word(s), w.clone(), *c)).collect()
        }
        None => Vec::new(),
    };
    for (role, decoded) in [("scope", &data.scope), ("block", &data.block)] {
        losses.extend(ring_buffer_losses(role, decoded));
    }
    losses.push(loss(LossSource::Files, "unresolved inodes", files.unresolved));
    let counted_if_any = [
        (LossSource::ProcConnector, "messages lost (ENOBUFS)", tree.connector_lost),
        (LossSource::ProcConnector, "execs whose argv could not be read", tree.argv_unread),
        (
            LossSource::Files,
            "files read whose extents could not be mapped (deleted, replaced, or no FIEMAP)",
            fiemap_failed,
        ),
        (LossSource::Spool, "torn lines", data.torn_lines as u64),
    ];
    losses.extend(counted_if_any.iter().filter(|x| x.2 > 0).map(|(s, w, c)| loss(*s, *w, *c)));
    losses
}

fn ring_buffer_losses(role: &str, decoded: &Decoded) -> Vec<Loss> {
    let mut losses = Vec::new();
    for (cpu, n) in &decoded.missed {
        if *n > 0 {
            losses.push(loss(LossSource::Tracefs, format!("{role} cpu{cpu} events lost between pages"), *n));
        }
    }
    if decoded.missed_unknown > 0 {
        losses.push(loss(
            LossSource::Tracefs,
            format!("{role} pages after an unknown number of lost events"),
            decoded.missed_unknown,
        ));
    }
    if decoded.corrupt_pages > 0 {
        losses.push(loss(
            LossSource::Tracefs,
            format!("{role} pages that did not parse"),
            decoded.corrupt_pages,
        ));
    }
    losses
}

/// The notes, in the order a reader meets them: the recorder's, then the spool's
/// size, then what the assembly merged, left out or could not place.
pub fn notes(data: &SpoolData, spool: &Spool, fp: &FilesAndPages, requeues: u64) -> Vec<Note> {
    let mut notes: Vec<Note> = data.start.notes.iter().map(|t| note(NoteSource::Record, t.clone())).collect();
    if let Some(e) = &data.end {
        notes.extend(e.notes.iter().map(|t| note(NoteSource::Record, t.clone())));
    }
    if data.end.is_none() {
        notes.push(note(
            NoteSource::Recover,
            "the recorder did not finish (killed or crashed); this trace was rebuilt from its spool and ends at the last data it holds",
        ));
    }
    if fp.deleted > 0 {
        notes.push(note(
            NoteSource::Files,
            format!(
                "{} files read were deleted before their extents could be read (no disk placement for them)",
                fp.deleted
            ),
        ));
    }
    notes.push(note(NoteSource::Record, spool_size(spool)));
    if fp.raw_access_count > 0 || fp.accesses_left_out > 0 {
        notes.push(note(NoteSource::Record, page_accesses(fp)));
    }
    if !fp.page_residents.is_empty() || fp.residency_unknown > 0 {
        notes.push(note(NoteSource::Files, resident_pages(fp)));
    }
    if data.formats.requeue_traced {
        notes.push(note(
            NoteSource::Record,
            format!(
                "{requeues} block requests requeued (the driver handed them back, e.g. its queue was full, and they were issued again); each is one block_io row timed from its first issue"
            ),
        ));
    }
    notes.extend(file_table_notes(&fp.files));
    notes
}

fn spool_size(spool: &Spool) -> String {
    let (raw_bytes, other_bytes) = spool.sizes();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let raw_text: Vec<String> = raw_bytes.iter().map(|(role, b)| format!("{role} {:.1}", mib(*b))).collect();
    let total: u64 = raw_bytes.iter().map(|r| r.1).sum::<u64>() + other_bytes;
    format!(
        "the spool held {:.1} MiB (ring-buffer pages: {} MiB; other files {:.1} MiB)",
        mib(total),
        raw_text.join(", "),
        mib(other_bytes)
    )
}

fn resident_pages(fp: &FilesAndPages) -> String {
    let pages: u64 = fp.page_residents.iter().map(|r| u64::from(r.pages)).sum();
    let files: std::collections::HashSet<u32> = fp.page_residents.iter().map(|r| r.file_id).collect();
    let mut text = format!(
        "{pages} pages of {} files mapped around faults were in the page cache without being read during the \
         recording (held by processes outside it, which eviction cannot drop): table page_resident",
        files.len()
    );
    if fp.residency_unknown > 0 {
        text.push_str(&format!("; {} files could not be asked (replaced or gone)", fp.residency_unknown));
    }
    text
}

fn page_accesses(fp: &FilesAndPages) -> String {
    let mut text = format!(
        "{} page-access events of the scope merged into {} rows",
        fp.raw_access_count,
        fp.page_accesses.len()
    );
    if fp.accesses_left_out > 0 {
        text.push_str(&format!(
            "; {} accesses to files of memory filesystems (tmpfs, memfd) left out",
            fp.accesses_left_out
        ));
    }
    text
}

fn file_table_notes(files: &FileTable) -> Vec<Note> {
    let mut notes = Vec::new();
    if files.fs_internal > 0 {
        notes.push(note(
            NoteSource::Files,
            format!(
                "{} files without a path are a filesystem's own metadata (ext4 reserved inodes, e.g. 1: the block allocator's bitmaps, read when a program writes), kind other",
                files.fs_internal
            ),
        ));
    }
    if files.walked_entries > 0 {
        notes.push(note(
            NoteSource::Files,
            format!("{} directory entries walked to name inodes fanotify did not see", files.walked_entries),
        ));
    }
    for (mount_point, fstype, count) in &files.not_walked {
        notes.push(note(
            NoteSource::Files,
            format!(
                "{count} files on {} ({fstype}) stay without a path: fanotify cannot mark that filesystem, and \
                 coldstart does not walk a FUSE or network filesystem (each entry would be a request to its \
                 daemon or server)",
                mount_point.display()
            ),
        ));
    }
    if files.walk_truncated {
        notes.push(note(
            NoteSource::Files,
            format!("the walk for unresolved inodes stopped after {} entries", files.walked_entries),
        ));
    }
    notes
}
