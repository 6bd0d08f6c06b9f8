//! Diagnostics: spans, typed errors, and their rendering as `file:line:col` with the source
//! line underlined (codespan-reporting owns the layout).

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};

/// A byte range in one source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end.max(start) as u32,
        }
    }

    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found in a source file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Span,
    /// Text under the primary caret.
    pub label: String,
    /// Other places worth showing, each with its own text.
    pub secondary: Vec<(Span, String)>,
    /// `help:`/`note:` lines under the snippet.
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            label: String::new(),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn with(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.secondary.push((span, text.into()));
        self
    }

    pub fn help(mut self, text: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("help: {}", text.into()));
        self
    }

    pub fn note(mut self, text: impl Into<String>) -> Diagnostic {
        self.notes.push(format!("note: {}", text.into()));
        self
    }

    /// `(line, column)`, both 1-based, of the primary span in `source`.
    pub fn line_col(&self, source: &str) -> (usize, usize) {
        line_col(source, self.span.start as usize)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Where each line of a source starts, so that many offsets turn into line and column without
/// rescanning the text before each (a file of 60k ops after a long comment took a minute).
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(source: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// What [`line_col`] gives, in time proportional to the length of the offset's line.
    pub fn line_col(&self, source: &str, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(source, offset.min(source.len()));
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        (line, source[start..offset].chars().count() + 1)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders diagnostics the way `tilec` prints them, without colour.
pub fn render(file_name: &str, source: &str, diags: &[Diagnostic]) -> String {
    let mut out = codespan_reporting::term::termcolor::NoColor::new(Vec::new());
    emit(&mut out, file_name, source, diags);
    String::from_utf8_lossy(&out.into_inner()).into_owned()
}

/// Renders diagnostics to a terminal writer (with colour when the writer supports it).
pub fn emit(
    out: &mut dyn codespan_reporting::term::termcolor::WriteColor,
    file_name: &str,
    source: &str,
    diags: &[Diagnostic],
) {
    let file = SimpleFile::new(file_name, source);
    let config = Config::default();
    // The same message at the same place is said once (an unrolled loop repeats its body's
    // mistakes), and at most MAX_SHOWN are shown: the first ones are the ones to fix.
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<&Diagnostic> = diags.iter().filter(|d| seen.insert((d.span, &d.message))).collect();
    for d in unique.iter().take(MAX_SHOWN) {
        let clamp = |s: Span| {
            let end = (s.end as usize).min(source.len());
            let start = (s.start as usize).min(end);
            floor_char_boundary(source, start)..floor_char_boundary(source, end)
        };
        let mut labels = vec![Label::primary((), clamp(d.span)).with_message(d.label.clone())];
        for (s, t) in &d.secondary {
            labels.push(Label::secondary((), clamp(*s)).with_message(t.clone()));
        }
        let cs = match d.severity {
            Severity::Error => CsDiagnostic::error(),
            Severity::Warning => CsDiagnostic::warning(),
        }
        .with_message(d.message.clone())
        .with_labels(labels)
        .with_notes(d.notes.clone());
        // Writing to an in-memory buffer or stderr; a failed write has nowhere better to go.
        let _ = term::emit(out, &config, &file, &cs);
    }
    if unique.len() > MAX_SHOWN {
        let _ = writeln!(
            out,
            "note: {} more diagnostics not shown (fix the ones above first)\n",
            unique.len() - MAX_SHOWN
        );
    }
}

/// The most diagnostics [`emit`] prints for one file.
pub const MAX_SHOWN: usize = 50;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_index_agrees_with_a_scan_at_every_offset() {
        let src = "kernel k() {\n  // café ü\n\n  let x = 1;\n}\n";
        let index = LineIndex::new(src);
        for offset in 0..=src.len() + 3 {
            assert_eq!(index.line_col(src, offset), line_col(src, offset), "offset {offset}");
        }
    }
}
