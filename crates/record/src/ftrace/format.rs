//! The `events/*/format` and `events/header_page` descriptions of tracefs, parsed so
//! that records are decoded by the offsets the running kernel states, never by
//! offsets written into this code.

use std::collections::HashMap;

use crate::error::{RecordError, Result};

/// One field of an event record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as the format file spells it, e.g. `unsigned long`, `__data_loc char[]`.
    pub c_type: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

impl Field {
    /// Dynamic strings (`__data_loc`: offset and length from the record start;
    /// `__rel_loc`: from the end of the field).
    pub fn dynamic(&self) -> Option<DynamicKind> {
        if self.c_type.starts_with("__data_loc") {
            Some(DynamicKind::DataLoc)
        } else if self.c_type.starts_with("__rel_loc") {
            Some(DynamicKind::RelLoc)
        } else {
            None
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DynamicKind {
    DataLoc,
    RelLoc,
}

/// The description of one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub system: String,
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl EventFormat {
    /// Parses the text of `events/SYSTEM/NAME/format`.
    pub fn parse(system: &str, text: &str) -> Result<EventFormat> {
        let bad = |why: &str| RecordError::Format(format!("{system}: {why}"));
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        let mut print_fmt = String::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                id = Some(rest.trim().parse::<u16>().map_err(|_| bad("bad ID"))?);
            } else if let Some(rest) = line.strip_prefix("print fmt:") {
                print_fmt = rest.trim().to_owned();
            } else if line.starts_with("field:") {
                fields.push(parse_field(line).ok_or_else(|| bad(&format!("bad field line {line:?}")))?);
            }
        }
        Ok(EventFormat {
            system: system.to_owned(),
            name: name.ok_or_else(|| bad("no name"))?,
            id: id.ok_or_else(|| bad("no ID"))?,
            fields,
            print_fmt,
        })
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// A field the recorder cannot work without.
    pub fn require(&self, name: &str) -> Result<&Field> {
        self.field(name)
            .ok_or_else(|| RecordError::Format(format!("{}:{} has no field {name}", self.system, self.name)))
    }

    /// The `{ value, "letter" }` pairs of a `__print_flags` in the print format
    /// (sched_switch states), as (bit value, text).
    pub fn print_flag_pairs(&self) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        let mut rest = self.print_fmt.as_str();
        while let Some(open) = rest.find("{ 0x") {
            rest = &rest[open + 2..];
            let Some(comma) = rest.find(',') else { break };
            let value = u64::from_str_radix(rest[2..comma].trim(), 16);
            let after = &rest[comma + 1..];
            let (Some(q1), Ok(value)) = (after.find('"'), value) else { continue };
            let Some(q2) = after[q1 + 1..].find('"') else { break };
            out.push((value, after[q1 + 1..q1 + 1 + q2].to_owned()));
            rest = &after[q1 + 1 + q2..];
        }
        out
    }
}

/// Parses `field:TYPE NAME[N];\toffset:N;\tsize:N;\tsigned:N;`.
fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let decl = decl?;
    let split = decl.rfind([' ', '\t'])?;
    let (c_type, mut name) = (decl[..split].trim(), decl[split + 1..].trim());
    let mut c_type = c_type.to_owned();
    if let Some(bracket) = name.find('[') {
        c_type.push_str(&name[bracket..]);
        name = &name[..bracket];
    }
    Some(Field { name: name.to_owned(), c_type, offset: offset?, size: size?, signed })
}

/// The layout of a ring-buffer page (`events/header_page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub timestamp_offset: usize,
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
}

impl PageHeader {
    pub fn parse(text: &str) -> Result<PageHeader> {
        let fields: HashMap<String, Field> =
            text.lines().filter_map(|l| parse_field(l.trim())).map(|f| (f.name.clone(), f)).collect();
        let get = |name: &str| {
            fields.get(name).ok_or_else(|| RecordError::Format(format!("header_page has no field {name}")))
        };
        let (ts, commit, data) = (get("timestamp")?, get("commit")?, get("data")?);
        Ok(PageHeader {
            timestamp_offset: ts.offset,
            commit_offset: commit.offset,
            commit_size: commit.size,
            data_offset: data.offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORK: &str = "name: sched_process_fork\nID: 366\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:char comm[16];\toffset:16;\tsize:16;\tsigned:0;\n\n\
print fmt: \"comm=%s pid=%d\", __get_str(parent_comm), REC->parent_pid\n";

    #[test]
    fn parses_fields_with_arrays_and_data_loc() {
        let f = EventFormat::parse("sched", FORK).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_process_fork", 366));
        let comm = f.field("parent_comm").unwrap();
        assert_eq!((comm.offset, comm.size, comm.dynamic()), (8, 4, Some(DynamicKind::DataLoc)));
        let pid = f.field("parent_pid").unwrap();
        assert_eq!((pid.offset, pid.signed, pid.c_type.as_str()), (12, true, "pid_t"));
        assert_eq!(f.field("comm").unwrap().c_type, "char[16]");
        assert!(f.require("nope").is_err());
    }

    #[test]
    fn parses_header_page() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        let h = PageHeader::parse(text).unwrap();
        assert_eq!(h, PageHeader { timestamp_offset: 0, commit_offset: 8, commit_size: 8, data_offset: 16 });
    }

    #[test]
    fn reads_print_flags_of_sched_switch() {
        let fmt = EventFormat {
            system: "sched".into(),
            name: "sched_switch".into(),
            id: 1,
            fields: vec![],
            print_fmt: r#""%s", (REC->prev_state & 255) ? __print_flags(REC->prev_state & 255, "|", { 0x00000001, "S" }, { 0x00000002, "D" }, { 0x00000080, "I" }) : "R""#.into(),
        };
        assert_eq!(fmt.print_flag_pairs(), vec![(1, "S".into()), (2, "D".into()), (0x80, "I".into())]);
    }
}

#[cfg(test)]
mod live_tests {
    #[test]
    fn parses_the_running_kernels_header_page() {
        let Ok(text) =
            crate::tracefs::read_text(std::path::Path::new("/sys/kernel/tracing/events/header_page"))
        else {
            return;
        };
        let h = super::PageHeader::parse(&text).unwrap();
        assert_eq!(h.data_offset, 16);
    }
}
