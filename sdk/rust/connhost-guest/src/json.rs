//! A small, strict JSON reader and writer: enough for a call's arguments,
//! a provider's answers and an operation's result, with no dependencies.
//!
//! [`parse`] refuses what the host's own decoder refuses: invalid UTF-8,
//! a member name given twice, anything after the value. [`Args`] reads a
//! call's arguments so that a member the operation does not read is an
//! error (the host's key never travels in the arguments, and a model
//! cannot smuggle one in).

use std::fmt::Write;

/// A JSON value. Numbers keep their text; read them with
/// [`Json::as_i64`] or [`Json::as_f64`].
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// null
    Null,
    /// true or false
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, members in order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
    /// The string, for a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
    /// The integer, for a number that is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
    /// The number, for a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Number(n) => n.parse().ok(),
            _ => None,
        }
    }
    /// The bool, for a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The elements, for an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(a) => Some(a),
            _ => None,
        }
    }
    /// A string member of an object ("" when absent or not a string).
    pub fn str_of(&self, name: &str) -> &str {
        self.get(name).and_then(Json::as_str).unwrap_or("")
    }
    /// An integer member of an object (0 when absent or not an integer).
    pub fn i64_of(&self, name: &str) -> i64 {
        self.get(name).and_then(Json::as_i64).unwrap_or(0)
    }
    /// The value written as JSON text.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }
    fn write(&self, s: &mut String) {
        match self {
            Json::Null => s.push_str("null"),
            Json::Bool(b) => s.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => s.push_str(n),
            Json::String(v) => quote_into(s, v),
            Json::Array(a) => {
                s.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    v.write(s);
                }
                s.push(']');
            }
            Json::Object(m) => {
                s.push('{');
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    quote_into(s, k);
                    s.push(':');
                    v.write(s);
                }
                s.push('}');
            }
        }
    }
}

/// Parses exactly one JSON value.
pub fn parse(b: &[u8]) -> Result<Json, String> {
    let text = std::str::from_utf8(b).map_err(|_| "json: invalid UTF-8".to_string())?;
    let mut p = Parser { s: text.as_bytes(), at: 0, depth: 0 };
    let v = p.value()?;
    p.ws();
    if p.at != p.s.len() {
        return Err(format!("json: trailing data at offset {}", p.at));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    depth: u32,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }
    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("json: {} at offset {}", what, self.at))
    }
    fn lit(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(v)
        } else {
            self.err("invalid literal")
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        if self.at >= self.s.len() {
            return self.err("unexpected end");
        }
        match self.s[self.at] {
            b'n' => self.lit("null", Json::Null),
            b't' => self.lit("true", Json::Bool(true)),
            b'f' => self.lit("false", Json::Bool(false)),
            b'"' => Ok(Json::String(self.string()?)),
            b'[' => {
                self.nest()?;
                self.at += 1;
                let mut out = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(Json::Array(out));
                }
                loop {
                    out.push(self.value()?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            self.depth -= 1;
                            return Ok(Json::Array(out));
                        }
                        _ => return self.err("expected , or ]"),
                    }
                }
            }
            b'{' => {
                self.nest()?;
                self.at += 1;
                let mut out: Vec<(String, Json)> = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.at += 1;
                    self.depth -= 1;
                    return Ok(Json::Object(out));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return self.err("expected a member name");
                    }
                    let k = self.string()?;
                    if out.iter().any(|(n, _)| *n == k) {
                        return Err(format!("json: member {:?} given twice", k));
                    }
                    self.ws();
                    if self.peek() != Some(b':') {
                        return self.err("expected :");
                    }
                    self.at += 1;
                    let v = self.value()?;
                    out.push((k, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            self.depth -= 1;
                            return Ok(Json::Object(out));
                        }
                        _ => return self.err("expected , or }"),
                    }
                }
            }
            b'-' | b'0'..=b'9' => self.number(),
            _ => self.err("unexpected character"),
        }
    }
    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > 128 {
            return self.err("nested too deep");
        }
        Ok(())
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }
    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let digits = |p: &mut Parser| {
            let s = p.at;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.at += 1;
            }
            p.at - s
        };
        let int_start = self.at;
        let n = digits(self);
        if n == 0 || (n > 1 && self.s[int_start] == b'0') {
            return self.err("invalid number");
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if digits(self) == 0 {
                return self.err("invalid number");
            }
        }
        if matches!(self.peek(), Some(b'e') | Some(b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                self.at += 1;
            }
            if digits(self) == 0 {
                return self.err("invalid number");
            }
        }
        Ok(Json::Number(String::from_utf8_lossy(&self.s[start..self.at]).into_owned()))
    }
    fn hex4(&mut self) -> Result<u32, String> {
        if self.s.len() - self.at < 4 {
            return self.err("truncated escape");
        }
        let h = std::str::from_utf8(&self.s[self.at..self.at + 4]).map_err(|_| "json: bad escape".to_string())?;
        let v = u32::from_str_radix(h, 16).map_err(|_| format!("json: bad escape at offset {}", self.at))?;
        self.at += 4;
        Ok(v)
    }
    fn string(&mut self) -> Result<String, String> {
        self.at += 1; // "
        let mut out = String::new();
        loop {
            let start = self.at;
            while self.at < self.s.len() && self.s[self.at] != b'"' && self.s[self.at] != b'\\' && self.s[self.at] >= 0x20 {
                self.at += 1;
            }
            // The input is valid UTF-8 and the run stops at ASCII bytes.
            out.push_str(std::str::from_utf8(&self.s[start..self.at]).unwrap_or(""));
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let c = match self.peek() {
                        Some(c) => c,
                        None => return self.err("truncated escape"),
                    };
                    self.at += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                if !self.s[self.at..].starts_with(b"\\u") {
                                    return self.err("unpaired surrogate");
                                }
                                self.at += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return self.err("unpaired surrogate");
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return self.err("unpaired surrogate");
                            } else {
                                hi
                            };
                            match char::from_u32(cp) {
                                Some(ch) => out.push(ch),
                                None => return self.err("invalid escape"),
                            }
                        }
                        _ => return self.err("invalid escape"),
                    }
                }
                _ => return self.err("unterminated string or control character"),
            }
        }
    }
}

/// A call's arguments, read strictly: every member must be read, each
/// with its type, and [`Args::finish`] refuses what was not.
///
/// ```ignore
/// let mut a = json::Args::parse(args)?;
/// let amount = a.i64("amount")?;           // required
/// let note = a.opt_str("note")?;           // optional
/// a.finish()?;                             // no other member
/// ```
pub struct Args {
    members: Vec<(String, Json)>,
    read: Vec<bool>,
}

impl Args {
    /// Parses the arguments, which must be one JSON object.
    pub fn parse(args: &[u8]) -> Result<Args, String> {
        match parse(args)? {
            Json::Object(members) => {
                let read = vec![false; members.len()];
                Ok(Args { members, read })
            }
            _ => Err("arguments: not a JSON object".to_string()),
        }
    }
    fn take(&mut self, name: &str) -> Option<&Json> {
        let i = self.members.iter().position(|(k, _)| k == name)?;
        self.read[i] = true;
        match &self.members[i].1 {
            Json::Null => None,
            v => Some(v),
        }
    }
    /// A required string member.
    pub fn str(&mut self, name: &str) -> Result<String, String> {
        self.opt_str(name)?.ok_or_else(|| format!("arguments: {} is required", name))
    }
    /// An optional string member (absent or null: None).
    pub fn opt_str(&mut self, name: &str) -> Result<Option<String>, String> {
        match self.take(name) {
            None => Ok(None),
            Some(Json::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("arguments: {} must be a string", name)),
        }
    }
    /// A required integer member.
    pub fn i64(&mut self, name: &str) -> Result<i64, String> {
        self.opt_i64(name)?.ok_or_else(|| format!("arguments: {} is required", name))
    }
    /// An optional integer member.
    pub fn opt_i64(&mut self, name: &str) -> Result<Option<i64>, String> {
        match self.take(name) {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| format!("arguments: {} must be an integer", name)),
        }
    }
    /// An optional bool member.
    pub fn opt_bool(&mut self, name: &str) -> Result<Option<bool>, String> {
        match self.take(name) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| format!("arguments: {} must be true or false", name)),
        }
    }
    /// An optional member of any type.
    pub fn opt_value(&mut self, name: &str) -> Option<Json> {
        self.take(name).cloned()
    }
    /// Refuses the members nothing read.
    pub fn finish(&self) -> Result<(), String> {
        let unread: Vec<&str> = self.members.iter().zip(&self.read).filter(|(_, r)| !**r).map(|((k, _), _)| k.as_str()).collect();
        if unread.is_empty() {
            Ok(())
        } else {
            Err(format!("arguments: unknown member(s) {}", unread.join(", ")))
        }
    }
}

/// Writes an object member by member.
#[derive(Default)]
pub struct Object {
    s: String,
}

impl Object {
    /// An empty object.
    pub fn new() -> Object {
        Object { s: String::from("{") }
    }
    fn name(&mut self, k: &str) {
        if self.s.len() > 1 {
            self.s.push(',');
        }
        quote_into(&mut self.s, k);
        self.s.push(':');
    }
    /// A string member.
    pub fn str(mut self, k: &str, v: &str) -> Object {
        self.name(k);
        quote_into(&mut self.s, v);
        self
    }
    /// A string member, or null.
    pub fn opt_str(self, k: &str, v: Option<&str>) -> Object {
        match v {
            Some(v) => self.str(k, v),
            None => self.raw(k, b"null"),
        }
    }
    /// An integer member.
    pub fn int(mut self, k: &str, v: i64) -> Object {
        self.name(k);
        let _ = write!(self.s, "{}", v);
        self
    }
    /// A bool member.
    pub fn bool(mut self, k: &str, v: bool) -> Object {
        self.name(k);
        self.s.push_str(if v { "true" } else { "false" });
        self
    }
    /// A member whose value is JSON text already.
    pub fn raw(mut self, k: &str, json: &[u8]) -> Object {
        self.name(k);
        self.s.push_str(&String::from_utf8_lossy(json));
        self
    }
    /// The object's JSON text.
    pub fn build(mut self) -> Vec<u8> {
        self.s.push('}');
        self.s.into_bytes()
    }
}

/// The JSON array of JSON texts.
pub fn array(items: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(it);
    }
    out.push(b']');
    out
}

/// s as a JSON string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s);
    out
}

fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                // As Go's encoding/json writes them.
                let _ = write!(out, "\\u{:04x}", ch as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
