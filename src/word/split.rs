//! Splitting text into words as Python's `str.split()` does (the whitespace set and the
//! invalid-UTF-8 rule are in the module doc of [`super`]).

/// Byte classes for the splitter: part of a word, ASCII whitespace, or the lead byte of a
/// possible multi-byte whitespace character.
const WORD: u8 = 0;
const SPACE: u8 = 1;
const LEAD: u8 = 2;

static CLASS: [u8; 256] = {
    let mut t = [WORD; 256];
    let mut b = 0x09;
    while b <= 0x0d {
        t[b] = SPACE;
        b += 1;
    }
    let mut b = 0x1c;
    while b <= 0x20 {
        t[b] = SPACE;
        b += 1;
    }
    t[0xc2] = LEAD;
    t[0xe1] = LEAD;
    t[0xe2] = LEAD;
    t[0xe3] = LEAD;
    t
};

/// True for the characters Python's `str.isspace()` accepts, which are exactly those
/// `str.split()` splits at (the 29 code points listed in the module documentation).
pub(crate) fn is_python_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{09}'..='\u{0d}'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// The length of the multi-byte whitespace character starting at `text[i]` (a `LEAD`
/// byte), or 0.
#[inline]
fn lead_space_len(text: &[u8], i: usize) -> usize {
    let b1 = text.get(i + 1).copied().unwrap_or(0);
    let b2 = text.get(i + 2).copied().unwrap_or(0);
    let hit = match text[i] {
        0xc2 => return if b1 == 0x85 || b1 == 0xa0 { 2 } else { 0 },
        0xe1 => b1 == 0x9a && b2 == 0x80,
        0xe2 => {
            (b1 == 0x80 && matches!(b2, 0x80..=0x8a | 0xa8 | 0xa9 | 0xaf))
                || (b1 == 0x81 && b2 == 0x9f)
        }
        0xe3 => b1 == 0x80 && b2 == 0x80,
        _ => false,
    };
    if hit {
        3
    } else {
        0
    }
}

/// The length of the whitespace character at `text[i]`, or 0 when it is not whitespace.
#[inline]
fn space_len(text: &[u8], i: usize) -> usize {
    match CLASS[text[i] as usize] {
        WORD => 0,
        SPACE => 1,
        _ => lead_space_len(text, i),
    }
}

/// Emits every word of `text` that is followed by whitespace and returns the offset where
/// the unterminated last word starts (`text.len()` when the text ends in whitespace).
#[inline]
fn scan<'t, F: FnMut(&'t [u8])>(text: &'t [u8], emit: &mut F) -> usize {
    let n = text.len();
    let mut i = 0;
    loop {
        loop {
            if i >= n {
                return n;
            }
            let len = space_len(text, i);
            if len == 0 {
                break;
            }
            i += len;
        }
        let start = i;
        loop {
            if i >= n {
                return start;
            }
            match CLASS[text[i] as usize] {
                WORD => i += 1,
                SPACE => break,
                _ => {
                    if lead_space_len(text, i) > 0 {
                        break;
                    }
                    i += 1;
                }
            }
        }
        emit(&text[start..i]);
    }
}

#[inline]
pub(crate) fn split_generic<'t, F: FnMut(&'t [u8])>(text: &'t [u8], emit: &mut F) {
    let tail = scan(text, emit);
    if tail < text.len() {
        emit(&text[tail..]);
    }
}

#[cfg(test)]
/// Calls `emit` for each word of `text`, in order: Python's `str.split()` with no
/// arguments. Invalid UTF-8 is never whitespace (see the module documentation), so every
/// byte of `text` is either in a word or part of a whitespace character.
pub(crate) fn split_words<'t>(text: &'t [u8], emit: &mut dyn FnMut(&'t [u8])) {
    split_generic(text, &mut |w| emit(w));
}

/// The first whitespace character at or after `from`: its offset and length.
pub(crate) fn first_space(text: &[u8], from: usize) -> Option<(usize, usize)> {
    (from..text.len()).find_map(|i| match space_len(text, i) {
        0 => None,
        len => Some((i, len)),
    })
}

/// The offset just after the last whitespace character of `text`, if any. Whitespace
/// characters begin with a byte that is never a UTF-8 continuation byte, so a pattern
/// found scanning backwards is a whitespace character in the forward reading too.
pub(crate) fn last_space_end(text: &[u8]) -> Option<usize> {
    (1..=text.len()).rev().find(|&end| {
        let b = text[end - 1];
        CLASS[b as usize] == SPACE
            || (end >= 2 && text[end - 2] == 0xc2 && (b == 0x85 || b == 0xa0))
            || (end >= 3
                && CLASS[text[end - 3] as usize] == LEAD
                && lead_space_len(text, end - 3) == 3)
    })
}

/// A whitespace character that starts in `carry` (which holds none whole) and ends in
/// `block`: its offset in `carry` and how many bytes of `block` it takes.
pub(crate) fn straddling_space(carry: &[u8], block: &[u8]) -> Option<(usize, usize)> {
    let mut joined = [0u8; 5];
    for at in carry.len().saturating_sub(2)..carry.len() {
        let head = &carry[at..];
        let take = block.len().min(3);
        joined[..head.len()].copy_from_slice(head);
        joined[head.len()..head.len() + take].copy_from_slice(&block[..take]);
        let len = space_len(&joined[..head.len() + take], 0);
        if len > head.len() {
            return Some((at, len - head.len()));
        }
    }
    None
}
