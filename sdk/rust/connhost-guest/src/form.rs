//! URL encoding: form bodies (application/x-www-form-urlencoded), query
//! strings and path segments.

/// A form or query string, fields in the order added.
#[derive(Default, Clone, Debug)]
pub struct Form {
    s: String,
}

impl Form {
    /// An empty form.
    pub fn new() -> Form {
        Form::default()
    }
    /// Adds a field.
    pub fn add(mut self, name: &str, value: &str) -> Form {
        if !self.s.is_empty() {
            self.s.push('&');
        }
        escape_into(&mut self.s, name, true);
        self.s.push('=');
        escape_into(&mut self.s, value, true);
        self
    }
    /// The encoded form (`a=1&b=x+y`).
    pub fn encode(&self) -> String {
        self.s.clone()
    }
}

/// s escaped for a query string or form value (space as `+`).
pub fn query_escape(s: &str) -> String {
    let mut out = String::new();
    escape_into(&mut out, s, true);
    out
}

/// s escaped for one path segment (space as `%20`, `/` escaped).
pub fn path_escape(s: &str) -> String {
    let mut out = String::new();
    escape_into(&mut out, s, false);
    out
}

fn escape_into(out: &mut String, s: &str, query: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' if query => out.push('+'),
            _ => {
                out.push('%');
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 15) as usize] as char);
            }
        }
    }
}
