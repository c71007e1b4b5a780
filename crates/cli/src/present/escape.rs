//! Text read from disk (entry files, /proc, mount tables) made safe for a terminal: control
//! characters, terminal escapes among them, shown as escapes rather than printed raw.

/// `s` with every control character (terminal escapes included) shown as `\u{..}`: for
/// text read from disk before it reaches a terminal.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// JSON text with every control character left raw by the serializer (DEL, C1 controls)
/// written as a `\uXXXX` escape; newlines between values stay. The text means the same.
pub fn printable_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
