//! What the commands print: JSON, tables sized to their content
//! (comfy-table), and progress on a terminal only (indicatif; never on a
//! pipe or with `--json`).

use std::io::IsTerminal;

use comfy_table::presets::NOTHING;
use comfy_table::{CellAlignment, Table};
use indicatif::{ProgressBar, ProgressStyle};

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), crate::error::Error> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A plain table with `header`; columns `right` (by index) aligned right.
pub(crate) fn table(header: &[&str], right: &[usize]) -> Table {
    let mut table = Table::new();
    table.load_preset(NOTHING).set_header(header.to_vec());
    for index in right {
        if let Some(column) = table.column_mut(*index) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// Progress of a long operation on stderr, shown only when a person
/// watches (stdout is a terminal) and the output is not JSON.
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar of `len` steps (a spinner when the length is unknown).
    pub(crate) fn new(json: bool, len: Option<u64>, message: &str) -> Self {
        if json || !std::io::stdout().is_terminal() {
            return Self(None);
        }
        let bar = match len {
            Some(len) => ProgressBar::new(len).with_style(
                ProgressStyle::with_template("{msg} {bar:30} {pos}/{len}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
            None => ProgressBar::new_spinner(),
        };
        bar.set_message(message.to_owned());
        Self(Some(bar))
    }

    /// One step done.
    pub(crate) fn inc(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// A new message.
    pub(crate) fn say(&self, message: String) {
        if let Some(bar) = &self.0 {
            bar.set_message(message);
            bar.tick();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
