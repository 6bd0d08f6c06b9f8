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
            message: bounded(message.into()),
            span,
            label: String::new(),
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = bounded(label.into());
        self
    }

    pub fn with(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.secondary.push((span, bounded(text.into())));
        self
    }

    pub fn help(mut self, text: impl Into<String>) -> Diagnostic {
        self.notes.push(bounded(format!("help: {}", text.into())));
        self
    }

    pub fn note(mut self, text: impl Into<String>) -> Diagnostic {
        self.notes.push(bounded(format!("note: {}", text.into())));
        self
    }

    /// `(line, column)`, both 1-based, of the primary span in `source`.
    pub fn line_col(&self, source: &str) -> (usize, usize) {
        line_col(source, self.span.start as usize)
    }
}

/// The most characters of a name (or of anything between backticks) a diagnostic echoes: a
/// 300 KB identifier would otherwise be repeated in its message, its label and its notes.
pub const MAX_NAME_CHARS: usize = 64;

/// The most names a list in a diagnostic shows before saying how many more there are.
pub const MAX_LISTED: usize = 20;

/// The most characters of one message, label or note, whatever it quotes (a `print` message or
/// a string the user wrote has no backticks to find).
pub const MAX_TEXT_CHARS: usize = 4096;

/// Source lines longer than this many bytes are shown as a window around their labels: a 2 MB
/// line would otherwise be echoed whole by every diagnostic on it.
pub const MAX_LINE_BYTES: usize = 200;

/// `name` as a diagnostic shows it: its first [`MAX_NAME_CHARS`] characters, then `…`.
pub fn short(name: &str) -> std::borrow::Cow<'_, str> {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        Some((cut, _)) => format!("{}…", &name[..cut]).into(),
        None => name.into(),
    }
}

/// Names as a diagnostic lists them (`a, b, c`): each [`short`], the first [`MAX_LISTED`], then
/// how many more there are.
pub fn list<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    capped(names.into_iter().map(|n| short(n.as_ref()).into_owned()))
}

/// [`list`] with each name between backticks.
pub fn quoted_list<S: AsRef<str>>(names: impl IntoIterator<Item = S>) -> String {
    capped(names.into_iter().map(|n| format!("`{}`", short(n.as_ref()))))
}

fn capped(items: impl Iterator<Item = String>) -> String {
    let mut shown: Vec<String> = Vec::new();
    let mut more = 0usize;
    for item in items {
        if shown.len() < MAX_LISTED {
            shown.push(item);
        } else {
            more += 1;
        }
    }
    if more > 0 {
        shown.push(format!("and {more} more"));
    }
    shown.join(", ")
}

/// `text` with every run between backticks cut to [`MAX_NAME_CHARS`] and at most
/// [`MAX_TEXT_CHARS`] in all; text within both limits is returned as it is.
fn bounded(text: String) -> String {
    let long_quote = text.split('`').skip(1).step_by(2).any(|q| q.len() > MAX_NAME_CHARS);
    let mut text = if long_quote {
        let mut out = String::new();
        for (i, part) in text.split('`').enumerate() {
            if i > 0 {
                out.push('`');
            }
            out.push_str(if i % 2 == 1 { short(part) } else { part.into() }.as_ref());
        }
        out
    } else {
        text
    };
    if text.len() > MAX_TEXT_CHARS
        && let Some((cut, _)) = text.char_indices().nth(MAX_TEXT_CHARS)
    {
        text.truncate(cut);
        text.push('…');
    }
    text
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
    // Only a file with a long line needs windows (and its line index).
    let long_lines = source.split('\n').any(|l| l.len() > MAX_LINE_BYTES);
    let lines = long_lines.then(|| LineIndex::new(source));
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
        let mut ranges = vec![clamp(d.span)];
        ranges.extend(d.secondary.iter().map(|(s, _)| clamp(*s)));
        let windowed = lines
            .as_ref()
            .map(|lines| Windowed::new(file_name, source, lines, &ranges));
        let at = |r: std::ops::Range<usize>| match &windowed {
            Some(w) => w.to_view(r.start)..w.to_view(r.end),
            None => r,
        };
        let mut labels = vec![Label::primary((), at(ranges[0].clone())).with_message(bounded(d.label.clone()))];
        for ((_, t), r) in d.secondary.iter().zip(&ranges[1..]) {
            labels.push(Label::secondary((), at(r.clone())).with_message(bounded(t.clone())));
        }
        let cs = match d.severity {
            Severity::Error => CsDiagnostic::error(),
            Severity::Warning => CsDiagnostic::warning(),
        }
        .with_message(bounded(d.message.clone()))
        .with_labels(labels)
        .with_notes(d.notes.iter().map(|n| bounded(n.clone())).collect());
        // Writing to an in-memory buffer or stderr; a failed write has nowhere better to go.
        let _ = match &windowed {
            Some(w) => term::emit(out, &config, w, &cs),
            None => term::emit(out, &config, &file, &cs),
        };
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

/// Of a long line, about how many bytes a window shows before and after the first label on it.
const WINDOW_BEFORE: usize = 60;
const WINDOW_AFTER: usize = 100;

/// The source as one diagnostic shows it: each line longer than [`MAX_LINE_BYTES`] cut to a
/// window around the first label that starts or ends on it (or its beginning), marked with `…`
/// where it was cut. Lines keep their numbers and columns are the original's.
struct Windowed<'s> {
    name: &'s str,
    source: &'s str,
    lines: &'s LineIndex,
    view: String,
    view_starts: Vec<usize>,
    cuts: Vec<Cut>,
}

/// One long line of [`Windowed`]: its range in the source, the part kept, where its text starts
/// in the view, and the bytes of the `…` put before the part kept.
struct Cut {
    line: std::ops::Range<usize>,
    keep: std::ops::Range<usize>,
    view_start: usize,
    lead: usize,
}

impl Cut {
    fn view_len(&self) -> usize {
        let trail = if self.keep.end < self.line.end {
            ELLIPSIS.len()
        } else {
            0
        };
        self.lead + self.keep.len() + trail
    }
}

const ELLIPSIS: &str = "…";

impl<'s> Windowed<'s> {
    /// The view for labels over `ranges` (the primary first): each long line's window is
    /// around the first label end on it.
    fn new(name: &'s str, source: &'s str, lines: &'s LineIndex, ranges: &[std::ops::Range<usize>]) -> Windowed<'s> {
        let mut view = String::new();
        let mut cuts = Vec::new();
        let mut at = 0;
        for line in source.split_inclusive('\n') {
            let text = line.strip_suffix('\n').unwrap_or(line);
            let range = at..at + text.len();
            if text.len() > MAX_LINE_BYTES {
                let focus = ranges
                    .iter()
                    .flat_map(|r| [r.start, r.end])
                    .find(|p| range.contains(p) || *p == range.end)
                    .unwrap_or(range.start);
                let start = floor_char_boundary(source, focus.saturating_sub(WINDOW_BEFORE).max(range.start));
                let end = floor_char_boundary(source, (focus + WINDOW_AFTER).min(range.end));
                let lead = if start > range.start { ELLIPSIS.len() } else { 0 };
                let cut = Cut {
                    line: range.clone(),
                    keep: start..end,
                    view_start: view.len(),
                    lead,
                };
                if lead > 0 {
                    view.push_str(ELLIPSIS);
                }
                view.push_str(&source[start..end]);
                if end < range.end {
                    view.push_str(ELLIPSIS);
                }
                view.push_str(&line[text.len()..]);
                cuts.push(cut);
            } else {
                view.push_str(line);
            }
            at += line.len();
        }
        let view_starts = std::iter::once(0)
            .chain(view.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Windowed {
            name,
            source,
            lines,
            view,
            view_starts,
            cuts,
        }
    }

    /// Where source offset `o` is in the view (in a cut line, clamped to the part kept).
    fn to_view(&self, o: usize) -> usize {
        let i = self.cuts.partition_point(|c| c.line.start <= o);
        let Some(c) = i.checked_sub(1).map(|i| &self.cuts[i]) else {
            return o;
        };
        if o <= c.line.end {
            let o = o.clamp(c.keep.start, c.keep.end);
            return c.view_start + c.lead + (o - c.keep.start);
        }
        c.view_start + c.view_len() + (o - c.line.end)
    }

    /// Where view offset `v` is in the source.
    fn to_source(&self, v: usize) -> usize {
        let i = self.cuts.partition_point(|c| c.view_start <= v);
        let Some(c) = i.checked_sub(1).map(|i| &self.cuts[i]) else {
            return v;
        };
        let end = c.view_start + c.view_len();
        if v <= end {
            let inner = v.saturating_sub(c.view_start + c.lead).min(c.keep.len());
            return c.keep.start + inner;
        }
        c.line.end + (v - end)
    }
}

impl<'s> codespan_reporting::files::Files<'s> for Windowed<'s> {
    type FileId = ();
    type Name = &'s str;
    type Source = &'s str;

    fn name(&'s self, (): ()) -> Result<&'s str, codespan_reporting::files::Error> {
        Ok(self.name)
    }

    fn source(&'s self, (): ()) -> Result<&'s str, codespan_reporting::files::Error> {
        Ok(&self.view)
    }

    fn line_index(&'s self, (): (), byte_index: usize) -> Result<usize, codespan_reporting::files::Error> {
        Ok(self.view_starts.partition_point(|&s| s <= byte_index) - 1)
    }

    fn line_range(
        &'s self,
        (): (),
        line_index: usize,
    ) -> Result<std::ops::Range<usize>, codespan_reporting::files::Error> {
        let start = *self
            .view_starts
            .get(line_index)
            .ok_or(codespan_reporting::files::Error::LineTooLarge {
                given: line_index,
                max: self.view_starts.len() - 1,
            })?;
        let end = self.view_starts.get(line_index + 1).copied().unwrap_or(self.view.len());
        Ok(start..end)
    }

    /// The column in the source, not in the view.
    fn column_number(
        &'s self,
        (): (),
        _line_index: usize,
        byte_index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        Ok(self.lines.line_col(self.source, self.to_source(byte_index)).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `emit` printed before windows: codespan over the whole source.
    fn plain(name: &str, source: &str, d: &Diagnostic) -> String {
        let mut out = codespan_reporting::term::termcolor::NoColor::new(Vec::new());
        let mut labels = vec![Label::primary((), d.span.range()).with_message(d.label.clone())];
        for (s, t) in &d.secondary {
            labels.push(Label::secondary((), s.range()).with_message(t.clone()));
        }
        let cs = CsDiagnostic::error()
            .with_message(d.message.clone())
            .with_labels(labels)
            .with_notes(d.notes.clone());
        term::emit(&mut out, &Config::default(), &SimpleFile::new(name, source), &cs).unwrap();
        String::from_utf8(out.into_inner()).unwrap()
    }

    fn checked(src: &str) -> String {
        let ast = crate::syntax::parse(src).unwrap();
        let (_, diags) = crate::check::check_file(src, &ast, &vec![]);
        assert!(!diags.is_empty());
        render("t.tile", src, &diags)
    }

    /// A huge name is echoed cut short, and a huge line as a window around the label, with the
    /// line and column of the source.
    #[test]
    fn floods_are_cut_short() {
        let long = "a".repeat(300_000);
        let out = checked(&format!("kernel k(x: *mut f32) {{\n    store(x, {long});\n}}\n"));
        assert!(out.len() < 2_000, "{} bytes:\n{}", out.len(), &out[..2_000]);
        assert!(out.contains(&format!("`{}…`", "a".repeat(MAX_NAME_CHARS))), "{out}");
        assert!(out.contains("t.tile:2:14"), "{out}");
        // An error in the middle of an 800 KB line.
        let pad = " ".repeat(400_000);
        let src = format!("kernel k(x: *mut f32) {{{pad}store(x, nope);{pad}}}\n");
        let out = checked(&src);
        assert!(out.len() < 2_000, "{} bytes", out.len());
        assert!(out.contains(&format!("t.tile:1:{}", 23 + 400_000 + 9 + 1)), "{out}");
        // The caret is under the name, in a window cut at both ends.
        let line = out.lines().find(|l| l.contains("store(x, nope)")).unwrap();
        assert!(line.starts_with("1 │ …") && line.trim_end().ends_with('…'), "{out}");
        let caret = out.lines().find(|l| l.contains("^^^^")).unwrap();
        let chars_to = |l: &str, b: Option<usize>| b.map(|b| l[..b].chars().count());
        assert_eq!(
            chars_to(line, line.find("nope")),
            chars_to(caret, caret.find('^')),
            "{out}"
        );
    }

    /// Lists of names stop after MAX_LISTED.
    #[test]
    fn lists_of_names_are_capped() {
        let names: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        let l = list(&names);
        assert!(l.starts_with("k0, k1, ") && l.ends_with("k19, and 80 more"), "{l}");
        assert_eq!(quoted_list(["a", "b"]), "`a`, `b`");
        assert_eq!(short("abc"), "abc");
    }

    /// Short lines and names render as codespan renders them.
    #[test]
    fn ordinary_diagnostics_render_as_before() {
        let src = "kernel k(x: *mut f32) {\n    let y = 1;\n    store(x, yy + 1.0);\n}\n";
        let ast = crate::syntax::parse(src).unwrap();
        let (_, diags) = crate::check::check_file(src, &ast, &vec![]);
        assert_eq!(render("t.tile", src, &diags), plain("t.tile", src, &diags[0]));
        // A long line elsewhere in the file changes nothing of a diagnostic on short lines.
        let src = format!("{src}// {}\n", "x".repeat(500));
        let ast = crate::syntax::parse(&src).unwrap();
        let (_, diags) = crate::check::check_file(&src, &ast, &vec![]);
        assert_eq!(render("t.tile", &src, &diags), plain("t.tile", &src, &diags[0]));
    }

    #[test]
    fn the_line_index_agrees_with_a_scan_at_every_offset() {
        let src = "kernel k() {\n  // café ü\n\n  let x = 1;\n}\n";
        let index = LineIndex::new(src);
        for offset in 0..=src.len() + 3 {
            assert_eq!(index.line_col(src, offset), line_col(src, offset), "offset {offset}");
        }
    }
}
