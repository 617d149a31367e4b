//! What the hand-written JSON readers and writers of the formats share: the one integer
//! scanner, whitespace, string quoting, and the byte-order-mark message.

/// The leading ASCII digits of `text`: how many there are, and their value when it fits
/// a u64 (`None` past `u64::MAX`). Every reader of integers in the formats goes through
/// this, so they agree on what a number is and where it overflows.
#[inline]
pub(crate) fn scan_digits(text: &[u8]) -> (Option<u64>, usize) {
    let mut value = Some(0u64);
    let mut digits = 0;
    for &b in text {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(digit)));
        digits += 1;
    }
    (value, digits)
}

/// A JSON non-negative integer that fits a u64 at the start of `text` (no sign, no
/// leading zeros, no fraction or exponent after it), and the text after it.
#[inline]
pub(crate) fn json_u64(text: &[u8]) -> Option<(u64, &[u8])> {
    let (value, digits) = scan_digits(text);
    if digits == 0 || (digits > 1 && text[0] == b'0') {
        return None;
    }
    let rest = &text[digits..];
    if matches!(rest.first(), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    Some((value?, rest))
}

/// The index of the first byte at or after `i` that is not JSON whitespace.
#[inline]
pub(crate) fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// `text` as a JSON string literal, quotes included.
pub(crate) fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_string())
}

/// The UTF-8 byte-order mark some editors put at the start of a file.
pub(crate) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What a reader says of a line that starts with [`BOM`]: JSON text has none, and
/// without this the error would only say that the first character is unexpected.
pub(crate) const BOM_MESSAGE: &str =
    "the line starts with a UTF-8 byte-order mark (U+FEFF), which JSON lines may not have; \
     remove it (an editor's \"UTF-8 without BOM\", or sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_one_way() {
        assert_eq!(json_u64(b"0,"), Some((0, &b","[..])));
        assert_eq!(json_u64(b"42]"), Some((42, &b"]"[..])));
        assert_eq!(
            json_u64(b"18446744073709551615"),
            Some((u64::MAX, &b""[..]))
        );
        assert_eq!(json_u64(b"18446744073709551616"), None);
        assert_eq!(json_u64(b"01"), None);
        assert_eq!(json_u64(b"1.5"), None);
        assert_eq!(json_u64(b"1e3"), None);
        assert_eq!(json_u64(b"-1"), None);
        assert_eq!(json_u64(b""), None);
        assert_eq!(scan_digits(b"99999999999999999999x"), (None, 20));
    }
}
