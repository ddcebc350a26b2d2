//! Mutations shared by the targets: byte-level edits for binary inputs, and
//! line- and number-aware edits for the text formats (a number replaced by one at
//! the edge of its type is what finds overflows and bad casts).

use proptest::prelude::*;

use crate::Bases;

/// Numbers at the edges of the types parsers read them into, and words that look
/// like numbers to a lenient parser.
pub const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1",
    "255",
    "256",
    "4095",
    "4096",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "1e309",
    "-1e309",
    "NaN",
    "inf",
    "-inf",
    "0.000000001",
    "1.5",
    "",
];

/// Little-endian words that are interesting in binary records.
const EDGE_WORDS: &[u64] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0xffff,
    4095,
    4096,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

/// A position in a collection, as a fraction of its length (so that it fits any
/// length, and shrinks towards the start).
#[derive(Clone, Copy, Debug)]
pub struct Pick(pub u32);

impl Pick {
    /// The position in a collection of `len` elements (`len` > 0).
    pub fn index(self, len: usize) -> usize {
        ((len as u64 * u64::from(self.0)) >> 32) as usize
    }
}

pub fn pick() -> impl Strategy<Value = Pick> {
    any::<u32>().prop_map(Pick)
}

/// One edit of a byte string; positions are fractions of its length.
#[derive(Clone, Debug)]
pub enum ByteEdit {
    Set(Pick, u8),
    Word { at: Pick, word: Pick, width: Pick },
    Insert(Pick, Vec<u8>),
    Remove(Pick, usize),
    CopyChunk { from: Pick, to: Pick, len: usize },
    Truncate(Pick),
}

pub fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        4 => (pick(), any::<u8>()).prop_map(|(at, b)| ByteEdit::Set(at, b)),
        3 => (pick(), pick(), pick())
            .prop_map(|(at, word, width)| ByteEdit::Word { at, word, width }),
        2 => (pick(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, b)| ByteEdit::Insert(at, b)),
        2 => (pick(), 1usize..64).prop_map(|(at, n)| ByteEdit::Remove(at, n)),
        1 => (pick(), pick(), 1usize..256)
            .prop_map(|(from, to, len)| ByteEdit::CopyChunk { from, to, len }),
        1 => pick().prop_map(ByteEdit::Truncate),
    ]
}

fn at(index: &Pick, len: usize) -> usize {
    if len == 0 { 0 } else { index.index(len) }
}

pub fn apply_byte_edit(bytes: &mut Vec<u8>, edit: &ByteEdit) {
    let len = bytes.len();
    match edit {
        ByteEdit::Set(i, b) if len > 0 => bytes[at(i, len)] = *b,
        ByteEdit::Word { at: i, word, width } if len > 0 => {
            let value = EDGE_WORDS[word.index(EDGE_WORDS.len())].to_le_bytes();
            let width = [1, 2, 4, 8][width.index(4)];
            let start = at(i, len);
            let end = (start + width).min(len);
            bytes[start..end].copy_from_slice(&value[..end - start]);
        }
        ByteEdit::Insert(i, b) => {
            let start = at(i, len + 1);
            bytes.splice(start..start, b.iter().copied());
        }
        ByteEdit::Remove(i, n) if len > 0 => {
            let start = at(i, len);
            bytes.drain(start..(start + n).min(len));
        }
        ByteEdit::CopyChunk { from, to, len: n } if len > 0 => {
            let start = at(from, len);
            let chunk = bytes[start..(start + n).min(len)].to_vec();
            let to = at(to, len);
            let end = (to + chunk.len()).min(len);
            bytes[to..end].copy_from_slice(&chunk[..end - to]);
        }
        ByteEdit::Truncate(i) => bytes.truncate(at(i, len + 1)),
        _ => {}
    }
}

/// One edit of a text, by lines and number tokens.
#[derive(Clone, Debug)]
pub enum TextEdit {
    /// Replaces one number of the text (any run of digits, with its sign and decimals).
    Number(Pick, Pick),
    DeleteLine(Pick),
    DuplicateLine(Pick),
    SwapLines(Pick, Pick),
    InsertLine(Pick, String),
    TruncateLine(Pick, Pick),
    /// Replaces one field (a run of non-blank characters) of a line with junk.
    Field(Pick, String),
    Bytes(ByteEdit),
}

pub fn text_edit() -> impl Strategy<Value = TextEdit> {
    let junk = "[ -~\t]{0,40}";
    prop_oneof![
        6 => (pick(), pick()).prop_map(|(n, v)| TextEdit::Number(n, v)),
        2 => pick().prop_map(TextEdit::DeleteLine),
        1 => pick().prop_map(TextEdit::DuplicateLine),
        1 => (pick(), pick()).prop_map(|(a, b)| TextEdit::SwapLines(a, b)),
        2 => (pick(), junk).prop_map(|(at, line)| TextEdit::InsertLine(at, line)),
        2 => (pick(), pick()).prop_map(|(l, at)| TextEdit::TruncateLine(l, at)),
        2 => (pick(), "[!-~]{0,12}").prop_map(|(at, field)| TextEdit::Field(at, field)),
        1 => byte_edit().prop_map(TextEdit::Bytes),
    ]
}

/// Byte ranges of the number tokens of `text`.
fn numbers(text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_digit() {
            let start = if i > 0 && text[i - 1] == b'-' { i - 1 } else { i };
            while i < text.len() && (text[i].is_ascii_digit() || text[i] == b'.') {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

/// Byte ranges of the lines of `text`, newline excluded.
fn lines(text: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' {
            out.push((start, i));
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push((start, text.len()));
    }
    out
}

pub fn apply_text_edit(text: &mut Vec<u8>, edit: &TextEdit) {
    let choose =
        |ranges: Vec<(usize, usize)>, i: &Pick| (!ranges.is_empty()).then(|| ranges[i.index(ranges.len())]);
    match edit {
        TextEdit::Number(n, value) => {
            if let Some((start, end)) = choose(numbers(text), n) {
                let value = EDGE_NUMBERS[value.index(EDGE_NUMBERS.len())];
                text.splice(start..end, value.bytes());
            }
        }
        TextEdit::DeleteLine(l) => {
            if let Some((start, end)) = choose(lines(text), l) {
                text.drain(start..(end + 1).min(text.len()));
            }
        }
        TextEdit::DuplicateLine(l) => {
            if let Some((start, end)) = choose(lines(text), l) {
                let mut line = text[start..end].to_vec();
                line.push(b'\n');
                text.splice(start..start, line);
            }
        }
        TextEdit::SwapLines(a, b) => {
            let all = lines(text);
            if let (Some(a), Some(b)) = (choose(all.clone(), a), choose(all, b)) {
                let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
                if first.1 <= second.0 {
                    let (x, y) = (text[first.0..first.1].to_vec(), text[second.0..second.1].to_vec());
                    text.splice(second.0..second.1, x);
                    text.splice(first.0..first.1, y);
                }
            }
        }
        TextEdit::InsertLine(l, line) => {
            let start = choose(lines(text), l).map_or(0, |(start, _)| start);
            text.splice(start..start, line.bytes().chain([b'\n']));
        }
        TextEdit::TruncateLine(l, at) => {
            if let Some((start, end)) = choose(lines(text), l) {
                let cut = start + at.index(end - start + 1);
                text.drain(cut..end);
            }
        }
        TextEdit::Field(f, junk) => {
            let mut fields = Vec::new();
            let mut i = 0;
            while i < text.len() {
                if text[i].is_ascii_whitespace() {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < text.len() && !text[i].is_ascii_whitespace() {
                    i += 1;
                }
                fields.push((start, i));
            }
            if let Some((start, end)) = choose(fields, f) {
                text.splice(start..end, junk.bytes());
            }
        }
        TextEdit::Bytes(edit) => apply_byte_edit(text, edit),
    }
}

/// One of `bases`, chosen by the strategy (so shrinking moves towards the first).
pub fn base(bases: &Bases) -> impl Strategy<Value = Vec<u8>> + use<> {
    let bases = bases.clone();
    pick().prop_map(move |i| bases[i.index(bases.len())].clone())
}

/// A base with 1 to 8 edits of `edit`, applied in order by `apply`.
fn edited<E: Clone + std::fmt::Debug + 'static>(
    bases: &Bases,
    edit: impl Strategy<Value = E> + 'static,
    apply: fn(&mut Vec<u8>, &E),
) -> BoxedStrategy<Vec<u8>> {
    (base(bases), prop::collection::vec(edit, 1..8))
        .prop_map(move |(mut bytes, edits)| {
            edits.iter().for_each(|e| apply(&mut bytes, e));
            bytes
        })
        .boxed()
}

/// A base with 1 to 8 byte edits.
pub fn bytes(bases: &Bases) -> BoxedStrategy<Vec<u8>> {
    edited(bases, byte_edit(), apply_byte_edit)
}

/// A base with 1 to 8 text edits.
pub fn text(bases: &Bases) -> BoxedStrategy<Vec<u8>> {
    edited(bases, text_edit(), apply_text_edit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_numbers_with_sign_and_decimals() {
        let text = b"12.5 ab-3 x7";
        let found: Vec<&[u8]> = numbers(text).into_iter().map(|(s, e)| &text[s..e]).collect();
        assert_eq!(found, [b"12.5".as_slice(), b"-3", b"7"]);
    }

    #[test]
    fn edits_stay_inside_the_text() {
        let mut text = b"a 1\nb 2\n".to_vec();
        apply_text_edit(&mut text, &TextEdit::SwapLines(Pick(0), Pick(u32::MAX)));
        assert_eq!(text, b"b 2\na 1\n");
        apply_text_edit(&mut text, &TextEdit::TruncateLine(Pick(0), Pick(0)));
        assert_eq!(text, b"\na 1\n");
        let mut empty = Vec::new();
        apply_byte_edit(&mut empty, &ByteEdit::Remove(Pick(1 << 31), 10));
        apply_text_edit(&mut empty, &TextEdit::DuplicateLine(Pick(1 << 31)));
        assert!(empty.is_empty());
    }
}
