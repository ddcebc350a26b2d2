//! The analysis as JSON: plain serde of [`Analysis`], pretty-printed, with its
//! `schema` and `version` fields first. The fields and their units are documented
//! in docs/report-json.md; any incompatible change raises
//! [`coldstart_analyze::SCHEMA_VERSION`].

use std::io;

use coldstart_analyze::Analysis;

/// Writes `analysis` as pretty-printed JSON followed by a newline.
pub fn write(analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
    let mut buffered = io::BufWriter::new(out);
    serde_json::to_writer_pretty(&mut buffered, analysis).map_err(io::Error::from)?;
    io::Write::write_all(&mut buffered, b"\n")?;
    io::Write::flush(&mut buffered)
}

/// Writes `analysis` as [`write`] does, with `diagnosis` as one more top-level field,
/// `doctor` (docs/report-json.md), after the analysis's own fields.
pub fn write_with_doctor(
    analysis: &Analysis,
    diagnosis: &coldstart_analyze::doctor::Diagnosis,
    out: &mut dyn io::Write,
) -> io::Result<()> {
    let mut text = serde_json::to_vec_pretty(analysis).map_err(io::Error::from)?;
    // The analysis is an object: reopen it, add the field, close it. Pretty JSON has no raw
    // newline inside strings, so indenting the diagnosis line by line is exact.
    while text.last().is_some_and(|b| b.is_ascii_whitespace()) {
        text.pop();
    }
    if text.pop() != Some(b'}') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the analysis did not serialize as an object",
        ));
    }
    while text.last().is_some_and(|b| b.is_ascii_whitespace()) {
        text.pop();
    }
    text.extend_from_slice(b",\n  \"doctor\": ");
    let doctor = serde_json::to_vec_pretty(diagnosis).map_err(io::Error::from)?;
    for (i, line) in doctor.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            text.extend_from_slice(b"\n  ");
        }
        text.extend_from_slice(line);
    }
    text.extend_from_slice(b"\n}\n");
    out.write_all(&text)
}

/// Reads an analysis written by [`write`] (or any producer of the same schema version).
pub fn read(input: &mut dyn io::Read) -> io::Result<Analysis> {
    let analysis: Analysis = serde_json::from_reader(io::BufReader::new(input)).map_err(io::Error::from)?;
    if analysis.schema != coldstart_analyze::SCHEMA_NAME
        || analysis.version > coldstart_analyze::SCHEMA_VERSION
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not a coldstart analysis this version understands (schema {:?}, version {}; expected {:?} up to version {})",
                analysis.schema,
                analysis.version,
                coldstart_analyze::SCHEMA_NAME,
                coldstart_analyze::SCHEMA_VERSION
            ),
        ));
    }
    Ok(analysis)
}
