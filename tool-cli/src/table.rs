//! Tables as aligned text: a header, then one line a row, columns two spaces apart.

/// A table being filled row by row.
pub(crate) struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub(crate) fn new(header: &[&'static str]) -> Self {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row: one cell a column, in order. Line breaks and tabs in a cell are shown as
    /// spaces, so every row stays on one line.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|cell| cell.replace(['\n', '\r', '\t'], " "))
            .collect();
        self.rows.push(cells);
    }

    /// The table as text, each line ending in a newline, without trailing spaces.
    pub(crate) fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let header = self.header.iter().map(|h| (*h).to_owned()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, (cell, width)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                let pad = width.saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `value`, or `-` for nothing.
pub(crate) fn or_dash(value: Option<&str>) -> String {
    value.unwrap_or("-").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_to_the_widest_cell() {
        let mut table = Table::new(&["ID", "TOOL", "AMOUNT"]);
        table.row(vec![
            "apr_1".into(),
            "issue_refund".into(),
            "8000.00".into(),
        ]);
        table.row(vec!["apr_22".into(), "x".into(), String::new()]);
        assert_eq!(
            table.render(),
            "ID      TOOL          AMOUNT\n\
             apr_1   issue_refund  8000.00\n\
             apr_22  x\n"
        );
    }

    #[test]
    fn a_cell_stays_on_its_line() {
        let mut table = Table::new(&["REASON"]);
        table.row(vec!["two\nlines\tand a tab".into()]);
        assert_eq!(table.render(), "REASON\ntwo lines and a tab\n");
    }
}
