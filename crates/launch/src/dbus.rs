//! The D-Bus wire format and a peer-to-peer connection that speaks it: what
//! `systemd.rs` needs to call a systemd manager over its private socket and read its
//! signals, and nothing else (no bus daemon, no runtime).
//!
//! Written by hand, after the specification's "Message Protocol" section, because the one
//! pure-Rust encoder (zvariant) compiles syn into the program itself: 35 s of a 2-core
//! first build for a dozen calls. Values are a tree ([`Value`]) read and written against a
//! signature; every read is bounded (lengths, nesting), so a peer's bad message is an
//! error, never a panic.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// What went wrong talking to a peer.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("malformed D-Bus data: {0}")]
    Malformed(String),
    #[error("the manager refused the connection: {0}")]
    Auth(String),
    #[error("{name}: {text}")]
    Remote { name: String, text: String },
    #[error("a D-Bus message of {0} bytes, more than the protocol allows")]
    TooLong(usize),
    #[error("no answer within {} s", .0.as_secs())]
    NoAnswer(Duration),
}

fn malformed(what: impl Into<String>) -> BusError {
    BusError::Malformed(what.into())
}

/// A D-Bus value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Byte(u8),
    Bool(bool),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Double(f64),
    Str(String),
    Path(String),
    Signature(String),
    /// An index into the message's file descriptors (none are passed here).
    Fd(u32),
    Array(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Struct(Vec<Value>),
    Variant(Box<Value>),
}

impl Value {
    /// The value inside any number of variants.
    fn inner(&self) -> &Value {
        match self {
            Value::Variant(v) => v.inner(),
            v => v,
        }
    }

    /// A string, object path or signature.
    pub fn as_str(&self) -> Option<&str> {
        match self.inner() {
            Value::Str(s) | Value::Path(s) | Value::Signature(s) => Some(s),
            _ => None,
        }
    }

    /// An unsigned integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self.inner() {
            Value::Byte(n) => Some(n.into()),
            Value::U16(n) => Some(n.into()),
            Value::U32(n) => Some(n.into()),
            Value::U64(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_u32(&self) -> Option<u32> {
        self.as_u64().and_then(|n| u32::try_from(n).ok())
    }

    /// The elements of an array, or the fields of a structure.
    pub fn items(&self) -> &[Value] {
        match self.inner() {
            Value::Array(items) | Value::Struct(items) => items,
            _ => &[],
        }
    }

    /// The value of a dictionary's string key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self.inner() {
            Value::Dict(entries) => entries.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The strings of an array of strings (others left out).
    pub fn strings(&self) -> Vec<String> {
        self.items().iter().filter_map(Value::as_str).map(str::to_owned).collect()
    }

    /// The value's own signature (an empty array's element type is unknown: `av`).
    fn signature(&self) -> String {
        match self {
            Value::Byte(_) => "y".into(),
            Value::Bool(_) => "b".into(),
            Value::I16(_) => "n".into(),
            Value::U16(_) => "q".into(),
            Value::I32(_) => "i".into(),
            Value::U32(_) => "u".into(),
            Value::I64(_) => "x".into(),
            Value::U64(_) => "t".into(),
            Value::Double(_) => "d".into(),
            Value::Str(_) => "s".into(),
            Value::Path(_) => "o".into(),
            Value::Signature(_) => "g".into(),
            Value::Fd(_) => "h".into(),
            Value::Array(items) => format!("a{}", items.first().map_or("v".into(), Value::signature)),
            Value::Dict(entries) => match entries.first() {
                Some((k, v)) => format!("a{{{}{}}}", k.signature(), v.signature()),
                None => "a{sv}".into(),
            },
            Value::Struct(fields) => format!("({})", fields.iter().map(Value::signature).collect::<String>()),
            Value::Variant(_) => "v".into(),
        }
    }
}

/// One complete type of a signature.
#[derive(Clone, Debug, PartialEq)]
enum Type {
    Basic(u8),
    Array(Box<Type>),
    Dict(Box<Type>, Box<Type>),
    Struct(Vec<Type>),
    Variant,
}

/// The specification's limits: 255 bytes of signature, 32 nested arrays and 32 structures.
const MAX_SIGNATURE: usize = 255;
const MAX_DEPTH: usize = 64;
/// The largest array the specification allows (64 MiB).
const MAX_ARRAY: usize = 1 << 26;

impl Type {
    fn alignment(&self) -> usize {
        match self {
            Type::Basic(b'y' | b'g') | Type::Variant => 1,
            Type::Basic(b'n' | b'q') => 2,
            Type::Basic(b'x' | b't' | b'd') | Type::Struct(_) | Type::Dict(..) => 8,
            _ => 4,
        }
    }
}

/// The complete types of `signature`, in order.
fn parse_signature(signature: &str) -> Result<Vec<Type>, BusError> {
    if signature.len() > MAX_SIGNATURE {
        return Err(malformed(format!("a signature of {} bytes", signature.len())));
    }
    let bytes = signature.as_bytes();
    let mut at = 0;
    let mut types = Vec::new();
    while at < bytes.len() {
        types.push(parse_type(bytes, &mut at, 0)?);
    }
    Ok(types)
}

fn parse_type(bytes: &[u8], at: &mut usize, depth: usize) -> Result<Type, BusError> {
    if depth > MAX_DEPTH {
        return Err(malformed("a signature nested too deeply"));
    }
    let code = *bytes.get(*at).ok_or_else(|| malformed("a signature ends inside a type"))?;
    *at += 1;
    match code {
        b'y' | b'b' | b'n' | b'q' | b'i' | b'u' | b'x' | b't' | b'd' | b's' | b'o' | b'g' | b'h' => {
            Ok(Type::Basic(code))
        }
        b'v' => Ok(Type::Variant),
        b'a' if bytes.get(*at) == Some(&b'{') => {
            *at += 1;
            let key = parse_type(bytes, at, depth + 1)?;
            if !matches!(key, Type::Basic(_)) {
                return Err(malformed("a dictionary key that is not a basic type"));
            }
            let value = parse_type(bytes, at, depth + 1)?;
            if bytes.get(*at) != Some(&b'}') {
                return Err(malformed("a dictionary entry of more than two types"));
            }
            *at += 1;
            Ok(Type::Dict(Box::new(key), Box::new(value)))
        }
        b'a' => Ok(Type::Array(Box::new(parse_type(bytes, at, depth + 1)?))),
        b'(' => {
            let mut fields = Vec::new();
            while bytes.get(*at) != Some(&b')') {
                fields.push(parse_type(bytes, at, depth + 1)?);
            }
            *at += 1;
            if fields.is_empty() {
                return Err(malformed("an empty structure"));
            }
            Ok(Type::Struct(fields))
        }
        other => Err(malformed(format!("type code {:?} in a signature", char::from(other)))),
    }
}

/// Reads values from a message part whose first byte is 8-aligned in the message.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BusError> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| malformed("a message ends inside a value"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn align(&mut self, n: usize) -> Result<(), BusError> {
        let padding = self.at.next_multiple_of(n) - self.at;
        self.take(padding).map(|_| ())
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], BusError> {
        self.align(N)?;
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> Result<u32, BusError> {
        self.fixed::<4>().map(u32::from_le_bytes)
    }

    fn text(&mut self, len: usize) -> Result<String, BusError> {
        let bytes = self.take(len)?;
        if self.take(1)? != [0] {
            return Err(malformed("a string without its NUL"));
        }
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed("a string that is not UTF-8"))
    }

    fn value(&mut self, ty: &Type, depth: usize) -> Result<Value, BusError> {
        if depth > MAX_DEPTH {
            return Err(malformed("values nested too deeply"));
        }
        Ok(match ty {
            Type::Basic(code) => self.basic(*code)?,
            Type::Variant => {
                let len = self.take(1)?[0] as usize;
                let signature = self.text(len)?;
                let mut types = parse_signature(&signature)?;
                if types.len() != 1 {
                    return Err(malformed(format!("a variant of signature {signature:?}")));
                }
                Value::Variant(Box::new(self.value(&types.remove(0), depth + 1)?))
            }
            Type::Array(element) => Value::Array(self.array(element, depth, |r, d| r.value(element, d))?),
            Type::Dict(key, value) => Value::Dict(self.array(ty, depth, |r, d| {
                r.align(8)?;
                Ok((r.value(key, d)?, r.value(value, d)?))
            })?),
            Type::Struct(fields) => {
                self.align(8)?;
                Value::Struct(fields.iter().map(|f| self.value(f, depth + 1)).collect::<Result<_, _>>()?)
            }
        })
    }

    /// An array's elements, read by `element` until its byte length is used up.
    fn array<T>(
        &mut self,
        element_type: &Type,
        depth: usize,
        mut element: impl FnMut(&mut Self, usize) -> Result<T, BusError>,
    ) -> Result<Vec<T>, BusError> {
        let len = self.u32()? as usize;
        if len > MAX_ARRAY {
            return Err(malformed(format!("an array of {len} bytes")));
        }
        self.align(element_type.alignment())?;
        let end = self.at + len;
        if end > self.bytes.len() {
            return Err(malformed("a message ends inside an array"));
        }
        let mut items = Vec::new();
        while self.at < end {
            items.push(element(self, depth + 1)?);
        }
        if self.at != end {
            return Err(malformed("an array's elements overrun its length"));
        }
        Ok(items)
    }

    fn basic(&mut self, code: u8) -> Result<Value, BusError> {
        Ok(match code {
            b'y' => Value::Byte(self.take(1)?[0]),
            b'b' => match self.u32()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                n => return Err(malformed(format!("a boolean of {n}"))),
            },
            b'n' => Value::I16(i16::from_le_bytes(self.fixed()?)),
            b'q' => Value::U16(u16::from_le_bytes(self.fixed()?)),
            b'i' => Value::I32(i32::from_le_bytes(self.fixed()?)),
            b'u' => Value::U32(self.u32()?),
            b'h' => Value::Fd(self.u32()?),
            b'x' => Value::I64(i64::from_le_bytes(self.fixed()?)),
            b't' => Value::U64(u64::from_le_bytes(self.fixed()?)),
            b'd' => Value::Double(f64::from_le_bytes(self.fixed()?)),
            b's' | b'o' => {
                let len = self.u32()? as usize;
                let text = self.text(len)?;
                if code == b's' { Value::Str(text) } else { Value::Path(text) }
            }
            b'g' => {
                let len = self.take(1)?[0] as usize;
                Value::Signature(self.text(len)?)
            }
            other => return Err(malformed(format!("type code {:?}", char::from(other)))),
        })
    }
}

/// The values of `bytes` (a message body, or its header), read as `signature` says.
pub fn decode(signature: &str, bytes: &[u8]) -> Result<Vec<Value>, BusError> {
    let mut reader = Reader { bytes, at: 0 };
    parse_signature(signature)?.iter().map(|ty| reader.value(ty, 0)).collect()
}

/// Writes values after a signature; the first byte is 8-aligned in the message.
#[derive(Default)]
struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    fn align(&mut self, n: usize) {
        self.bytes.resize(self.bytes.len().next_multiple_of(n), 0);
    }

    fn u32(&mut self, n: u32) {
        self.align(4);
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    fn text(&mut self, text: &str) {
        self.bytes.extend_from_slice(text.as_bytes());
        self.bytes.push(0);
    }

    fn value(&mut self, ty: &Type, value: &Value) -> Result<(), BusError> {
        let mismatch = || malformed(format!("{value:?} where the signature says {ty:?}"));
        match (ty, value) {
            (Type::Basic(code), v) => self.basic(*code, v).ok_or_else(mismatch)?,
            (Type::Variant, Value::Variant(inner)) => {
                let signature = inner.signature();
                let [inner_type] =
                    <[Type; 1]>::try_from(parse_signature(&signature)?).map_err(|_| mismatch())?;
                self.bytes.push(signature.len() as u8);
                self.text(&signature);
                self.value(&inner_type, inner)?;
            }
            (Type::Array(element), Value::Array(items)) => {
                self.array(element, |w| items.iter().try_for_each(|item| w.value(element, item)))?
            }
            (Type::Dict(k, v), Value::Dict(entries)) => self.array(ty, |w| {
                entries.iter().try_for_each(|(key, value)| {
                    w.align(8);
                    w.value(k, key)?;
                    w.value(v, value)
                })
            })?,
            (Type::Struct(types), Value::Struct(fields)) if types.len() == fields.len() => {
                self.align(8);
                types.iter().zip(fields).try_for_each(|(t, f)| self.value(t, f))?;
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    fn array(
        &mut self,
        element_type: &Type,
        elements: impl FnOnce(&mut Self) -> Result<(), BusError>,
    ) -> Result<(), BusError> {
        self.u32(0);
        let length_at = self.bytes.len() - 4;
        self.align(element_type.alignment());
        let start = self.bytes.len();
        elements(self)?;
        let len = self.bytes.len() - start;
        let len =
            u32::try_from(len).ok().filter(|&n| n as usize <= MAX_ARRAY).ok_or(BusError::TooLong(len))?;
        self.bytes[length_at..length_at + 4].copy_from_slice(&len.to_le_bytes());
        Ok(())
    }

    /// Writes a basic value of type `code`; `None` when the value is of another type.
    fn basic(&mut self, code: u8, value: &Value) -> Option<()> {
        match (code, value) {
            (b'y', Value::Byte(n)) => self.bytes.push(*n),
            (b'b', Value::Bool(b)) => self.u32(u32::from(*b)),
            (b'n', Value::I16(n)) => self.fixed(&n.to_le_bytes()),
            (b'q', Value::U16(n)) => self.fixed(&n.to_le_bytes()),
            (b'i', Value::I32(n)) => self.fixed(&n.to_le_bytes()),
            (b'u', Value::U32(n)) | (b'h', Value::Fd(n)) => self.u32(*n),
            (b'x', Value::I64(n)) => self.fixed(&n.to_le_bytes()),
            (b't', Value::U64(n)) => self.fixed(&n.to_le_bytes()),
            (b'd', Value::Double(n)) => self.fixed(&n.to_le_bytes()),
            (b's', Value::Str(s)) | (b'o', Value::Path(s)) => {
                self.u32(u32::try_from(s.len()).ok()?);
                self.text(s);
            }
            (b'g', Value::Signature(s)) => {
                self.bytes.push(u8::try_from(s.len()).ok()?);
                self.text(s);
            }
            _ => return None,
        }
        Some(())
    }

    fn fixed(&mut self, bytes: &[u8]) {
        self.align(bytes.len());
        self.bytes.extend_from_slice(bytes);
    }
}

/// `values` written as `signature` says (a message body).
pub fn encode(signature: &str, values: &[Value]) -> Result<Vec<u8>, BusError> {
    let types = parse_signature(signature)?;
    if types.len() != values.len() {
        return Err(malformed(format!("{} values for the signature {signature:?}", values.len())));
    }
    let mut writer = Writer::default();
    types.iter().zip(values).try_for_each(|(ty, value)| writer.value(ty, value))?;
    Ok(writer.bytes)
}

pub const METHOD_CALL: u8 = 1;
pub const METHOD_RETURN: u8 = 2;
pub const ERROR: u8 = 3;
pub const SIGNAL: u8 = 4;
/// The header's fields: path, interface, member, error name, reply serial, destination, signature.
const FIELD_PATH: u8 = 1;
const FIELD_INTERFACE: u8 = 2;
const FIELD_MEMBER: u8 = 3;
const FIELD_ERROR_NAME: u8 = 4;
const FIELD_REPLY_SERIAL: u8 = 5;
const FIELD_DESTINATION: u8 = 6;
const FIELD_SIGNATURE: u8 = 8;
const HEADER_SIGNATURE: &str = "yyyyuua(yv)";
const MAX_MESSAGE: usize = 1 << 27;

/// A whole message: the header with `fields` (code, value), padding, then the body.
pub fn message(
    kind: u8,
    serial: u32,
    mut fields: Vec<(u8, Value)>,
    signature: &str,
    body: &[Value],
) -> Result<Vec<u8>, BusError> {
    let body = encode(signature, body)?;
    if !signature.is_empty() {
        fields.push((FIELD_SIGNATURE, Value::Signature(signature.to_owned())));
    }
    let fields = fields
        .into_iter()
        .map(|(code, v)| Value::Struct(vec![Value::Byte(code), Value::Variant(Box::new(v))]));
    let body_len = u32::try_from(body.len()).map_err(|_| BusError::TooLong(body.len()))?;
    let header = [
        Value::Byte(b'l'),
        Value::Byte(kind),
        Value::Byte(0),
        Value::Byte(1),
        Value::U32(body_len),
        Value::U32(serial),
        Value::Array(fields.collect()),
    ];
    let mut bytes = encode(HEADER_SIGNATURE, &header)?;
    bytes.resize(bytes.len().next_multiple_of(8), 0);
    bytes.extend_from_slice(&body);
    match bytes.len() {
        n if n > MAX_MESSAGE => Err(BusError::TooLong(n)),
        _ => Ok(bytes),
    }
}

/// A message received: its type, the header fields we use, and its body.
pub struct Incoming {
    pub kind: u8,
    pub reply_serial: Option<u32>,
    pub path: Option<String>,
    pub member: Option<String>,
    pub error_name: Option<String>,
    signature: String,
    body: Vec<u8>,
}

impl Incoming {
    /// The body's values.
    pub fn body(&self) -> Result<Vec<Value>, BusError> {
        decode(&self.signature, &self.body)
    }

    /// The body's first value.
    pub fn first(&self) -> Result<Value, BusError> {
        self.body()?.into_iter().next().ok_or_else(|| malformed("an empty reply"))
    }
}

/// A peer-to-peer D-Bus connection, used from one thread: each call waits for its reply,
/// keeping the signals that arrive meanwhile for [`PeerBus::next_signal`]. A socket
/// connected from inside a container's PID namespace is used as it is.
pub struct PeerBus {
    pub stream: UnixStream,
    serial: u32,
    signals: VecDeque<Incoming>,
    destination: &'static str,
}

impl PeerBus {
    /// The EXTERNAL handshake as `systemctl` makes it: no identity in the AUTH line
    /// (the manager takes SO_PEERCRED's), an empty DATA answer to its challenge, then
    /// NEGOTIATE_UNIX_FD and BEGIN in one write, and the answer to NEGOTIATE_UNIX_FD
    /// awaited before any message. systemd 252 never reads a message that reaches it in
    /// the same read as BEGIN (it waits for more input that a caller waiting for its
    /// reply never sends), so the first call must not follow BEGIN closely. Descriptors
    /// it might pass are dropped by the plain reads used here; none of our calls gets one.
    /// Calls are addressed to `destination`.
    pub fn authenticate(mut stream: UnixStream, destination: &'static str) -> Result<PeerBus, BusError> {
        stream.write_all(b"\0AUTH EXTERNAL\r\n")?;
        let mut reply = read_line(&mut stream)?;
        if reply == "DATA" {
            stream.write_all(b"DATA\r\n")?;
            reply = read_line(&mut stream)?;
        }
        if !reply.starts_with("OK ") {
            return Err(BusError::Auth(reply));
        }
        stream.write_all(b"NEGOTIATE_UNIX_FD\r\nBEGIN\r\n")?;
        read_line(&mut stream)?;
        Ok(PeerBus::new(stream, destination))
    }

    /// A connection on a stream that is past the handshake.
    pub fn new(stream: UnixStream, destination: &'static str) -> PeerBus {
        PeerBus { stream, serial: 0, signals: VecDeque::new(), destination }
    }

    /// Calls `member` of `iface` on `path` with `body` of `signature` and waits for the reply.
    pub fn call(
        &mut self,
        path: &str,
        iface: &str,
        member: &str,
        signature: &str,
        body: &[Value],
    ) -> Result<Incoming, BusError> {
        self.serial += 1;
        let serial = self.serial;
        let fields = vec![
            (FIELD_PATH, Value::Path(path.to_owned())),
            (FIELD_INTERFACE, Value::Str(iface.to_owned())),
            (FIELD_MEMBER, Value::Str(member.to_owned())),
            (FIELD_DESTINATION, Value::Str(self.destination.to_owned())),
        ];
        self.stream.write_all(&message(METHOD_CALL, serial, fields, signature, body)?)?;
        loop {
            let incoming = self.read_message()?;
            match incoming.kind {
                SIGNAL => self.signals.push_back(incoming),
                METHOD_RETURN if incoming.reply_serial == Some(serial) => return Ok(incoming),
                ERROR if incoming.reply_serial == Some(serial) => {
                    let text = incoming.first().ok().and_then(|v| v.as_str().map(str::to_owned));
                    let name = incoming.error_name.unwrap_or_default();
                    return Err(BusError::Remote { name, text: text.unwrap_or_default() });
                }
                _ => {}
            }
        }
    }

    /// The next signal, waiting for it.
    pub fn next_signal(&mut self) -> Result<Incoming, BusError> {
        loop {
            if let Some(signal) = self.signals.pop_front() {
                return Ok(signal);
            }
            let incoming = self.read_message()?;
            if incoming.kind == SIGNAL {
                return Ok(incoming);
            }
        }
    }

    fn read_message(&mut self) -> Result<Incoming, BusError> {
        let mut fixed = [0u8; 16];
        if let Err(e) = self.stream.read_exact(&mut fixed) {
            return Err(match (e.kind(), self.stream.read_timeout()) {
                (std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut, Ok(Some(limit))) => {
                    BusError::NoAnswer(limit)
                }
                _ => e.into(),
            });
        }
        if fixed[0] != b'l' {
            // systemd speaks little-endian on the machines we run on; anything else is not its.
            return Err(BusError::Auth("a big-endian D-Bus peer".to_owned()));
        }
        let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().expect("4 bytes")) as usize;
        let (body_len, fields_len) = (word(4), word(12));
        let header_len = (16 + fields_len).next_multiple_of(8);
        let total = header_len.saturating_add(body_len);
        if total > MAX_MESSAGE {
            return Err(BusError::TooLong(total));
        }
        let mut bytes = vec![0u8; total];
        bytes[..16].copy_from_slice(&fixed);
        self.stream.read_exact(&mut bytes[16..])?;
        parse_message(bytes, header_len)
    }

    /// The value of property `name` of `iface` on `path`.
    pub fn property(&mut self, path: &str, iface: &str, name: &str) -> Result<Value, BusError> {
        let args = [Value::Str(iface.to_owned()), Value::Str(name.to_owned())];
        let reply = self.call(path, "org.freedesktop.DBus.Properties", "Get", "ss", &args)?;
        match reply.first()? {
            Value::Variant(inner) => Ok(*inner),
            other => Ok(other),
        }
    }
}

/// A message read whole: its header (`header_len` bytes with the padding) and body.
fn parse_message(mut bytes: Vec<u8>, header_len: usize) -> Result<Incoming, BusError> {
    let header = decode(HEADER_SIGNATURE, &bytes[..header_len])?;
    let mut incoming = Incoming {
        kind: header.get(1).and_then(Value::as_u32).unwrap_or(0) as u8,
        reply_serial: None,
        path: None,
        member: None,
        error_name: None,
        signature: String::new(),
        body: bytes.split_off(header_len),
    };
    for field in header.get(6).map(Value::items).unwrap_or_default() {
        let [code, value] = field.items() else { continue };
        let text = || value.as_str().map(str::to_owned);
        match code.as_u32().unwrap_or(0) as u8 {
            FIELD_PATH => incoming.path = text(),
            FIELD_MEMBER => incoming.member = text(),
            FIELD_ERROR_NAME => incoming.error_name = text(),
            FIELD_REPLY_SERIAL => incoming.reply_serial = value.as_u32(),
            FIELD_SIGNATURE => incoming.signature = text().unwrap_or_default(),
            _ => {}
        }
    }
    Ok(incoming)
}

/// One line of the authentication exchange, read byte by byte so that nothing of the
/// messages after it is taken.
fn read_line(stream: &mut UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 4096 {
        stream.read_exact(&mut byte)?;
        if byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(text: &str) -> Value {
        Value::Str(text.to_owned())
    }

    #[test]
    fn values_are_laid_out_as_the_specification_says() {
        // A byte, then a u32 aligned to 4, then a string: length, bytes, NUL.
        let bytes = encode("yus", &[Value::Byte(7), Value::U32(0x01020304), s("ab")]).unwrap();
        assert_eq!(bytes, [7, 0, 0, 0, 4, 3, 2, 1, 2, 0, 0, 0, b'a', b'b', 0]);
        // An array of u64: its length counts the elements, not the padding before the first.
        let bytes = encode("at", &[Value::Array(vec![Value::U64(1)])]).unwrap();
        assert_eq!(&bytes[..4], &8u32.to_le_bytes());
        assert_eq!(bytes.len(), 16, "4 length bytes, 4 padding, 8 of the element");
        // A variant: its signature, then its value.
        let bytes = encode("v", &[Value::Variant(Box::new(Value::U32(5)))]).unwrap();
        assert_eq!(bytes, [1, b'u', 0, 0, 5, 0, 0, 0]);
    }

    #[test]
    fn what_systemd_sends_reads_back() {
        let unit = Value::Struct(vec![
            s("ssh.service"),
            s("OpenBSD Secure Shell server"),
            s("loaded"),
            s("active"),
            s("running"),
            s(""),
            Value::Path("/org/freedesktop/systemd1/unit/ssh_2eservice".into()),
            Value::U32(0),
            s(""),
            Value::Path("/".into()),
        ]);
        let props = Value::Dict(vec![
            (s("ActiveEnterTimestampMonotonic"), Value::Variant(Box::new(Value::U64(1_500_000)))),
            (
                s("After"),
                Value::Variant(Box::new(Value::Array(vec![s("network.target"), s("basic.target")]))),
            ),
            (s("CanStart"), Value::Variant(Box::new(Value::Bool(true)))),
        ]);
        let values = vec![Value::Array(vec![unit.clone(), unit]), props, Value::Double(0.5), Value::I16(-2)];
        let signature = "a(ssssssouso)a{sv}dn";
        let bytes = encode(signature, &values).unwrap();
        let back = decode(signature, &bytes).unwrap();
        assert_eq!(back, values);
        assert_eq!(back[1].get("ActiveEnterTimestampMonotonic").and_then(Value::as_u64), Some(1_500_000));
        assert_eq!(back[1].get("After").map(Value::strings).unwrap(), ["network.target", "basic.target"]);
        assert_eq!(
            back[0].items()[1].items()[6].as_str(),
            Some("/org/freedesktop/systemd1/unit/ssh_2eservice")
        );
    }

    #[test]
    fn bad_data_is_an_error_not_a_panic() {
        let good =
            encode("a{sv}", &[Value::Dict(vec![(s("x"), Value::Variant(Box::new(Value::U32(1))))])]).unwrap();
        for cut in 0..good.len() {
            assert!(decode("a{sv}", &good[..cut]).is_err(), "cut at {cut}");
        }
        for (signature, bytes) in [
            ("b", vec![2, 0, 0, 0]),
            ("s", vec![1, 0, 0, 0, b'a', 1]),
            ("s", vec![255, 255, 255, 255]),
            ("au", vec![255, 255, 255, 127]),
            ("v", vec![2, b'u', b'u', 0, 0, 0, 0, 0]),
            ("v", vec![1, b'z', 0]),
            ("s", vec![1, 0, 0, 0, 0xff, 0]),
        ] {
            assert!(decode(signature, &bytes).is_err(), "{signature} {bytes:?}");
        }
        for signature in ["a", "(", "()", "a{vs}", "a{sss}", "z", &"a".repeat(70)] {
            assert!(parse_signature(signature).is_err(), "{signature}");
        }
        // Variants nested past the limit.
        let mut deep = Vec::new();
        for _ in 0..100 {
            deep.extend_from_slice(&[1, b'v', 0]);
        }
        assert!(decode("v", &deep).is_err());
        assert!(encode("u", &[s("x")]).is_err(), "a value of another type");
    }

    #[test]
    fn a_message_says_its_body_signature_as_a_signature_not_a_structure() {
        let bytes = message(METHOD_CALL, 3, vec![(FIELD_MEMBER, s("Get"))], "ss", &[s("a"), s("b")]).unwrap();
        let fields_end = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        assert!(bytes[..fields_end].ends_with(b"\x08\x01g\x00\x02ss\x00"), "{bytes:?}");
        let incoming = parse_message(bytes.clone(), fields_end.next_multiple_of(8)).unwrap();
        assert_eq!(incoming.kind, METHOD_CALL);
        assert_eq!(incoming.member.as_deref(), Some("Get"));
        assert_eq!(incoming.body().unwrap(), [s("a"), s("b")]);
    }

    #[test]
    fn the_handshake_is_systemctls_and_waits_for_begin_to_be_read() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            let mut lines = 0;
            while lines < 4 {
                theirs.read_exact(&mut byte).unwrap();
                seen.push(byte[0]);
                if byte[0] == b'\n' {
                    lines += 1;
                    match lines {
                        1 => theirs.write_all(b"DATA\r\n").unwrap(),
                        2 => theirs.write_all(b"OK 0123456789abcdef0123456789abcdef\r\n").unwrap(),
                        3 => theirs.write_all(b"AGREE_UNIX_FD\r\n").unwrap(),
                        _ => {}
                    }
                }
            }
            seen
        });
        assert!(PeerBus::authenticate(ours, "org.example").is_ok());
        assert_eq!(server.join().unwrap(), b"\0AUTH EXTERNAL\r\nDATA\r\nNEGOTIATE_UNIX_FD\r\nBEGIN\r\n");
    }
}
