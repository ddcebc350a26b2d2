//! A thin SVG writer over `quick_xml`: shapes and text with fixed number formatting,
//! every attribute value and text node escaped by quick_xml, and characters XML 1.0
//! cannot carry (control characters in process or file names) replaced.

use std::borrow::Cow;
use std::io::{self, Write};

use quick_xml::Writer;
use quick_xml::events::{BytesCData, BytesDecl, BytesEnd, BytesStart, BytesText, Event};

/// A coordinate or length with at most one decimal, without a trailing `.0` and never `-0`.
pub fn num(v: f64) -> String {
    let v = if v.is_finite() { (v * 10.0).round() / 10.0 } else { 0.0 };
    let v = if v == 0.0 { 0.0 } else { v };
    let s = format!("{v:.1}");
    match s.strip_suffix(".0") {
        Some(whole) => whole.to_owned(),
        None => s,
    }
}

/// `text` without the characters XML 1.0 forbids even when escaped (C0 controls other
/// than tab, newline and carriage return, and U+FFFE/U+FFFF), each replaced by U+FFFD.
pub fn xml_safe(text: &str) -> Cow<'_, str> {
    let bad = |c: char| (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}');
    if text.chars().any(bad) {
        Cow::Owned(text.chars().map(|c| if bad(c) { '\u{FFFD}' } else { c }).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// Attributes of one element, in the order given.
pub type Attrs<'a> = &'a [(&'a str, &'a str)];

/// Writes SVG elements, one per line.
pub struct Svg<W: Write> {
    w: Writer<W>,
}

impl<W: Write> Svg<W> {
    /// Starts the document: XML declaration and the `<svg>` root of the given size.
    pub fn begin(out: W, width: f64, height: f64) -> io::Result<Svg<W>> {
        let mut w = Writer::new_with_indent(out, b' ', 0);
        w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
        let (width, height) = (num(width), num(height));
        let view_box = format!("0 0 {width} {height}");
        let root = BytesStart::new("svg").with_attributes([
            ("xmlns", "http://www.w3.org/2000/svg"),
            ("version", "1.1"),
            ("width", width.as_str()),
            ("height", height.as_str()),
            ("viewBox", view_box.as_str()),
        ]);
        w.write_event(Event::Start(root))?;
        Ok(Svg { w })
    }

    /// Closes the root element and returns the output.
    pub fn end(mut self) -> io::Result<W> {
        self.w.write_event(Event::End(BytesEnd::new("svg")))?;
        let mut out = self.w.into_inner();
        out.write_all(b"\n")?;
        Ok(out)
    }

    /// A comment (its text must not hold `--`; it is replaced).
    pub fn comment(&mut self, text: &str) -> io::Result<()> {
        let text = xml_safe(text).replace("--", "- -");
        self.w.write_event(Event::Comment(BytesText::from_escaped(format!(" {text} "))))
    }

    /// A `<style>` element holding `css` as character data.
    pub fn style(&mut self, css: &str) -> io::Result<()> {
        self.w.create_element("style").write_cdata_content(BytesCData::new(css))?;
        Ok(())
    }

    /// Opens an element that later gets [`Svg::close`].
    pub fn open(&mut self, name: &str, attrs: Attrs) -> io::Result<()> {
        self.w.write_event(Event::Start(BytesStart::new(name).with_attributes(attrs.iter().copied())))
    }

    pub fn close(&mut self, name: &str) -> io::Result<()> {
        self.w.write_event(Event::End(BytesEnd::new(name)))
    }

    /// An empty element, e.g. a `rect` or a `line`.
    pub fn empty(&mut self, name: &str, attrs: Attrs) -> io::Result<()> {
        self.w.write_event(Event::Empty(BytesStart::new(name).with_attributes(attrs.iter().copied())))
    }

    /// An element holding only text (escaped).
    pub fn text_element(&mut self, name: &str, attrs: Attrs, text: &str) -> io::Result<()> {
        self.w
            .create_element(name)
            .with_attributes(attrs.iter().copied())
            .write_text_content(BytesText::new(&xml_safe(text)))?;
        Ok(())
    }

    /// A rectangle; zero or negative sizes are skipped.
    pub fn rect(&mut self, x: f64, y: f64, width: f64, height: f64, class: &str) -> io::Result<()> {
        if width <= 0.0 || height <= 0.0 {
            return Ok(());
        }
        let (x, y, width, height) = (num(x), num(y), num(width), num(height));
        self.empty("rect", &[("x", &x), ("y", &y), ("width", &width), ("height", &height), ("class", class)])
    }

    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, class: &str) -> io::Result<()> {
        let (x1, y1, x2, y2) = (num(x1), num(y1), num(x2), num(y2));
        self.empty("line", &[("x1", &x1), ("y1", &y1), ("x2", &x2), ("y2", &y2), ("class", class)])
    }

    /// Text at (x, y) (the baseline), anchored `start`, `middle` or `end`.
    pub fn text(&mut self, x: f64, y: f64, class: &str, anchor: &str, text: &str) -> io::Result<()> {
        let (x, y) = (num(x), num(y));
        let mut attrs = vec![("x", x.as_str()), ("y", y.as_str()), ("class", class)];
        if anchor != "start" {
            attrs.push(("text-anchor", anchor));
        }
        self.text_element("text", &attrs, text)
    }

    /// A path with the given `d`, skipped when empty.
    pub fn path(&mut self, d: &str, class: &str) -> io::Result<()> {
        if d.is_empty() {
            return Ok(());
        }
        self.empty("path", &[("d", d), ("class", class)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_one_decimal_at_most_and_no_negative_zero() {
        assert_eq!(num(1.0), "1");
        assert_eq!(num(1.25), "1.3");
        assert_eq!(num(-0.01), "0");
        assert_eq!(num(-2.46), "-2.5");
        assert_eq!(num(f64::NAN), "0");
    }

    #[test]
    fn control_characters_are_replaced() {
        assert_eq!(xml_safe("a\u{1}b\tc"), "a\u{FFFD}b\tc");
        assert!(matches!(xml_safe("plain"), Cow::Borrowed(_)));
    }
}
