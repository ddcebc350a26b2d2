//! Every SQL example in docs/trace-format.md runs against a real trace file, so the
//! document cannot drift from the schema.

use common::full_trace;

mod common;

#[test]
fn the_documented_queries_run() {
    let doc = include_str!("../../../docs/trace-format.md");
    let mut queries = Vec::new();
    let mut in_sql = false;
    let mut current = String::new();
    for line in doc.lines() {
        match line.trim() {
            "```sql" => in_sql = true,
            "```" if in_sql => in_sql = false,
            text if in_sql && !text.starts_with("--") => {
                current.push_str(line);
                current.push('\n');
                if text.ends_with(';') {
                    queries.push(std::mem::take(&mut current));
                }
            }
            _ => {}
        }
    }
    assert!(queries.len() >= 4, "found {} queries", queries.len());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    for query in &queries {
        let mut stmt = conn.prepare(query).unwrap_or_else(|e| panic!("{e}\n{query}"));
        let rows = stmt.query_map([], |_| Ok(())).unwrap().count();
        assert!(rows > 0, "no rows from\n{query}");
    }
}
