//! One NDJSON line holding one flat JSON object of string, null or natural-number members,
//! scanned without building a tree. Anything outside that shape is `None`: the caller hands the block to the
//! Python path, which accepts or words the error. Never more lenient than RFC 8259.

use std::borrow::Cow;

/// A member's value: the only kinds the fast path takes.
pub enum Value<'a> {
    Null,
    Text(Cow<'a, str>),
    /// An integer written without sign, fraction or exponent, that fits in 64 bits.
    Natural(u64),
}

pub struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// How many bytes from the start of `bytes` are ASCII from space up, other than `"` and `\\`
/// (a string's text that needs no escape or UTF-8 check): eight at a time with the usual
/// zero-byte tricks, then one at a time.
fn plain_ascii(bytes: &[u8]) -> usize {
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let has_zero = |value: u64| value.wrapping_sub(ONES) & !value & HIGHS;
        let special = has_zero(word ^ (ONES * u64::from(b'"')))
            | has_zero(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGHS)
            | (word & HIGHS);
        if special != 0 {
            break;
        }
        at += 8;
    }
    at + bytes[at..]
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || !(0x20..0x80).contains(&byte))
        .unwrap_or(bytes.len() - at)
}

fn hex4(bytes: &[u8]) -> Option<u32> {
    if bytes.len() < 4 {
        return None;
    }
    let mut value = 0u32;
    for &byte in &bytes[..4] {
        value = value * 16 + char::from(byte).to_digit(16)?;
    }
    Some(value)
}

impl<'a> Scanner<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Scanner { bytes, at: 0 }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next non-space byte, consumed.
    pub fn next_token(&mut self) -> Option<u8> {
        self.skip_space();
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    /// Only space is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_space();
        self.at == self.bytes.len()
    }

    pub fn value(&mut self) -> Option<Value<'a>> {
        match self.next_token()? {
            b'"' => self.string().map(Value::Text),
            b'n' if self.bytes[self.at..].starts_with(b"ull") => {
                self.at += 3;
                Some(Value::Null)
            }
            first @ b'0'..=b'9' => self.natural(first).map(Value::Natural),
            _ => None,
        }
    }

    /// The digits of a number, its first digit consumed. A fraction or an exponent stops the
    /// member (the object's next token is not `,` or `}`), so the line is handed back.
    fn natural(&mut self, first: u8) -> Option<u64> {
        let mut value = u64::from(first - b'0');
        while let Some(&byte @ b'0'..=b'9') = self.bytes.get(self.at) {
            if value == 0 {
                return None; // a leading zero: not JSON
            }
            value = value.checked_mul(10)?.checked_add(u64::from(byte - b'0'))?;
            self.at += 1;
        }
        Some(value)
    }

    /// A string's text, its opening quote consumed.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at;
        let rest = &self.bytes[start..];
        let ascii = plain_ascii(rest);
        if rest.get(ascii) == Some(&b'"') {
            self.at = start + ascii + 1;
            // ASCII throughout: UTF-8 already.
            return Some(Cow::Borrowed(std::str::from_utf8(&rest[..ascii]).ok()?));
        }
        let plain = ascii
            + rest[ascii..]
                .iter()
                .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)?;
        if rest[plain] == b'"' {
            self.at = start + plain + 1;
            return std::str::from_utf8(&rest[..plain]).ok().map(Cow::Borrowed);
        }
        let mut text = Vec::with_capacity(plain + 16);
        text.extend_from_slice(&rest[..plain]);
        self.at = start + plain;
        loop {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            match byte {
                b'"' => return String::from_utf8(text).ok().map(Cow::Owned),
                b'\\' => self.escape(&mut text)?,
                0..=0x1f => return None,
                _ => text.push(byte),
            }
        }
    }

    fn escape(&mut self, text: &mut Vec<u8>) -> Option<()> {
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        let plain = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let code = self.unicode_escape()?;
                let mut buffer = [0u8; 4];
                text.extend_from_slice(code.encode_utf8(&mut buffer).as_bytes());
                return Some(());
            }
            _ => return None,
        };
        text.push(plain);
        Some(())
    }

    /// `\uXXXX`, its `\u` consumed; a surrogate pair makes one character, a lone surrogate
    /// is left to the Python path.
    fn unicode_escape(&mut self) -> Option<char> {
        let high = hex4(&self.bytes[self.at..])?;
        self.at += 4;
        if !(0xd800..0xdc00).contains(&high) {
            return char::from_u32(high);
        }
        if !self.bytes[self.at..].starts_with(b"\\u") {
            return None;
        }
        let low = hex4(&self.bytes[self.at + 2..])?;
        if !(0xdc00..0xe000).contains(&low) {
            return None;
        }
        self.at += 6;
        char::from_u32(0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00))
    }
}

/// The members of the object on `line`, in order, each name with its value; `None` unless
/// the line is exactly one object of string, null or natural-number members.
pub fn members(line: &[u8]) -> Option<Vec<(Cow<'_, str>, Value<'_>)>> {
    let mut scanner = Scanner::new(line);
    if scanner.next_token()? != b'{' {
        return None;
    }
    let mut found = Vec::with_capacity(4);
    match scanner.next_token()? {
        b'}' => return scanner.at_end().then_some(found),
        b'"' => {}
        _ => return None,
    }
    loop {
        let name = scanner.string()?;
        if scanner.next_token()? != b':' {
            return None;
        }
        found.push((name, scanner.value()?));
        match scanner.next_token()? {
            b',' => {
                if scanner.next_token()? != b'"' {
                    return None;
                }
            }
            b'}' => return scanner.at_end().then_some(found),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(line: &str) -> Option<Vec<(String, Option<String>)>> {
        members(line.as_bytes()).map(|found| {
            found
                .into_iter()
                .map(|(name, value)| {
                    let value = match value {
                        Value::Null => None,
                        Value::Text(text) => Some(text.into_owned()),
                        Value::Natural(number) => Some(format!("#{number}")),
                    };
                    (name.into_owned(), value)
                })
                .collect()
        })
    }

    #[test]
    fn reads_flat_objects() {
        assert_eq!(
            texts(r#" {"a": "x\"\u00e9\ud83d\ude00\n", "b":null}  "#).unwrap(),
            vec![("a".into(), Some("x\"é😀\n".into())), ("b".into(), None)]
        );
        assert_eq!(texts("{}").unwrap(), vec![]);
        assert_eq!(
            texts(r#"{"a":0,"b": 18446744073709551615 }"#).unwrap(),
            vec![
                ("a".into(), Some("#0".into())),
                ("b".into(), Some("#18446744073709551615".into()))
            ]
        );
    }

    #[test]
    fn refuses_anything_else() {
        for line in [
            r#"{"a": 01}"#,
            r#"{"a": -1}"#,
            r#"{"a": 1.5}"#,
            r#"{"a": 1e3}"#,
            r#"{"a": 18446744073709551616}"#,
            r#"{"a": true}"#,
            r#"{"a": "x"} {"#,
            r#"{"a": "x",}"#,
            r#"{"a" "x"}"#,
            r#"["a"]"#,
            "{\"a\": \"x\ty\"}",
            r#"{"a": "\ud83d"}"#,
            r#"{"a": "\x"}"#,
            r#"{"a": nul}"#,
            "",
        ] {
            assert!(texts(line).is_none(), "{line}");
        }
        assert!(members(b"{\"a\": \"\xff\"}").is_none());
    }
}
