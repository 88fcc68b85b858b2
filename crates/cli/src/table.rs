//! Plain-text tables: the column layout once, then the header and the rows,
//! so a table's columns cannot drift apart from its header.

use std::fmt::Display;

/// One column: alignment, width, and the precision of its numbers.
struct Column {
    left: bool,
    width: usize,
    precision: Option<usize>,
}

/// A table layout, e.g. `"<7 >4 >9.3"`: `<` left or `>` right aligned, the
/// width, and optionally `.N` digits after the point for floating-point cells.
pub struct Table(Vec<Column>);

impl Table {
    pub fn new(spec: &str) -> Table {
        let columns = spec.split_whitespace().map(|c| {
            let (width, precision) = c[1..].split_once('.').unwrap_or((&c[1..], ""));
            Column {
                left: c.starts_with('<'),
                width: width.parse().unwrap_or(0),
                precision: precision.parse().ok(),
            }
        });
        Table(columns.collect())
    }

    /// The header: column names separated by `|`.
    pub fn header(&self, names: &str) {
        let names: Vec<&str> = names.split('|').collect();
        let cells: Vec<&dyn Display> = names.iter().map(|n| n as &dyn Display).collect();
        self.print(&cells, false);
    }

    /// One row; floating-point cells take their column's precision.
    pub fn row(&self, cells: &[&dyn Display]) {
        self.print(cells, true);
    }

    fn print(&self, cells: &[&dyn Display], numbers: bool) {
        let line: Vec<String> = self
            .0
            .iter()
            .zip(cells)
            .map(|(c, v)| {
                let w = c.width;
                match (c.left, c.precision.filter(|_| numbers)) {
                    (true, Some(p)) => format!("{v:<w$.p$}"),
                    (true, None) => format!("{v:<w$}"),
                    (false, Some(p)) => format!("{v:>w$.p$}"),
                    (false, None) => format!("{v:>w$}"),
                }
            })
            .collect();
        println!("{}", line.join(" "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_parses_alignment_width_and_precision() {
        let t = Table::new("<7 >9.3");
        assert!(t.0[0].left && t.0[0].width == 7 && t.0[0].precision.is_none());
        assert!(!t.0[1].left && t.0[1].width == 9 && t.0[1].precision == Some(3));
    }
}
