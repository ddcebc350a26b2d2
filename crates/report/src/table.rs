//! Plain-text tables: columns sized to their widest cell, numbers right-aligned,
//! the last column (usually a path) left as long as it is.

use std::io;

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table { columns: columns.iter().map(|(h, a)| ((*h).to_owned(), *a)).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes the header and rows, each line starting with `indent`.
    pub fn write(&self, out: &mut dyn io::Write, indent: &str) -> io::Result<()> {
        let width = |i: usize| {
            let cells = self.rows.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count()));
            cells.chain([self.columns[i].0.chars().count()]).max().unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.columns.len()).map(width).collect();
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut text = String::from(indent);
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    text.push_str("  ");
                }
                let last = i + 1 == self.columns.len();
                let pad = widths[i].saturating_sub(cell.chars().count());
                match self.columns[i].1 {
                    Align::Right => {
                        text.extend(std::iter::repeat_n(' ', pad));
                        text.push_str(cell);
                    }
                    Align::Left => {
                        text.push_str(cell);
                        if !last {
                            text.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
            }
            text.truncate(text.trim_end().len());
            text
        };
        writeln!(out, "{}", line(&mut self.columns.iter().map(|c| c.0.as_str())))?;
        for row in &self.rows {
            writeln!(out, "{}", line(&mut row.iter().map(String::as_str)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_the_last_is_not_padded() {
        let mut t = Table::new(&[("reads", Align::Right), ("file", Align::Left)]);
        t.row(vec!["3".into(), "/usr/lib/libfoo.so".into()]);
        t.row(vec!["120".into(), "/a".into()]);
        let mut out = Vec::new();
        t.write(&mut out, "  ").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "  reads  file\n      3  /usr/lib/libfoo.so\n    120  /a\n"
        );
    }
}
