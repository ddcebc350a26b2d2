//! `--export-markdown`: a table like hyperfine's, with the cache state, the median,
//! bytes read (MiB) and major faults added.

use std::fmt::Write;

use coldstart_trace::TextEnum;

use super::Exporter;
use crate::error::Result;
use crate::result::BenchResults;

pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn serialize(&self, results: &BenchResults) -> Result<Vec<u8>> {
        let fastest = results.results.iter().map(|r| r.mean).fold(f64::INFINITY, f64::min);
        let mut out = String::from(
            "| Command | Cache | Mean [s] | Median [s] | Min [s] | Max [s] | Read [MiB] | Major faults | Relative |\n\
             |:---|:---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for r in &results.results {
            let cache = match r.evict {
                Some(e) => format!("cold ({})", e.name()),
                None => r.cache.as_str().to_owned(),
            };
            let read =
                r.median_read_bytes.map_or("–".into(), |b| format!("{:.1}", b / f64::from(1u32 << 20)));
            let faults = r.median_major_faults.map_or("–".into(), |f| format!("{f:.0}"));
            let _ = writeln!(
                out,
                "| `{}` | {} | {:.3} ± {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {:.2} |",
                r.command.replace('|', "\\|"),
                cache,
                r.mean,
                r.stddev.unwrap_or(0.0),
                r.median,
                r.min,
                r.max,
                read,
                faults,
                r.mean / fastest
            );
        }
        Ok(out.into_bytes())
    }
}
