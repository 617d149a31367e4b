//! Hand-written splitters for the preset patterns: the same chunks as the regex engine,
//! found by scanning character classes instead of backtracking.
//!
//! Each function below follows its pattern's alternatives in order at the current
//! position, exactly as a leftmost-first backtracking engine tries them; the comments
//! name the alternative a branch stands for. Inputs are valid UTF-8 (the caller splits
//! off invalid bytes first).
//!
//! A run of letters starts with its ASCII letters read eight bytes at a time
//! ([`ascii_letters`]), then goes on one character at a time: splitting the 27 MB
//! benchmark text in process (AMD EPYC Zen 4, min of 9) took 66 ms against 86 with
//! o200k_base's rules, 59 against 73 with cl100k_base's.

use super::classes::{Classes, L, LO, M, N, S, UP};
use super::Emit;

/// Which hand-written splitter a preset pattern uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preset {
    /// minbpe GPT-2 and tiktoken r50k/p50k: the two patterns differ only in ways that
    /// cannot change a match (possessive versus greedy with nothing after, `\s++$` versus
    /// `\s+(?!\S)` at the end, `\s` versus `\s+` for a lone whitespace character).
    Gpt2,
    /// minbpe GPT-4.
    Gpt4,
    /// tiktoken cl100k: GPT-4 plus `\s++$`, which keeps a final whitespace run whole.
    Cl100k,
    /// tiktoken o200k.
    O200k,
}

const CR: u32 = b'\r' as u32;
const LF: u32 = b'\n' as u32;
const SPACE: u32 = b' ' as u32;
const QUOTE: u32 = b'\'' as u32;
/// Anything that is neither `\s`, `\p{L}` nor `\p{N}` ("punctuation" below).
const LNS: u8 = L | N | S;

struct Text<'a> {
    s: &'a [u8],
    t: &'a Classes,
}

impl Text<'_> {
    /// The code point at `i` (a character boundary of valid UTF-8), its class bits and
    /// its length in bytes.
    #[inline(always)]
    fn at(&self, i: usize) -> (u32, u8, usize) {
        let b0 = self.s[i];
        if b0 < 0x80 {
            return (b0 as u32, self.t.ascii[b0 as usize], 1);
        }
        let (cp, len) = decode_multi(self.s, i);
        (cp, self.t.of(cp), len)
    }

    /// The class bits at `i`, or 0 at the end of the text.
    #[inline(always)]
    fn class(&self, i: usize) -> u8 {
        if i < self.s.len() {
            self.at(i).1
        } else {
            0
        }
    }

    /// The end of the run of characters from `i` whose class has a bit of `mask`.
    #[inline(always)]
    fn run(&self, mut i: usize, mask: u8) -> usize {
        // The ASCII letters of a letter run eight at a time (`mask` is a constant here).
        if mask == L || mask == LO {
            i = ascii_letters(self.s, i, mask == L);
        }
        while i < self.s.len() {
            let b = self.s[i];
            if b < 0x80 {
                if self.t.ascii[b as usize] & mask == 0 {
                    break;
                }
                i += 1;
            } else {
                let (_, k, len) = self.at(i);
                if k & mask == 0 {
                    break;
                }
                i += len;
            }
        }
        i
    }

    /// The end of the run of "punctuation" (`[^\s\p{L}\p{N}]`) from `i`.
    #[inline(always)]
    fn punct_run(&self, mut i: usize) -> usize {
        while i < self.s.len() {
            let (_, k, len) = self.at(i);
            if k & LNS != 0 {
                break;
            }
            i += len;
        }
        i
    }

    /// The end of the run of bytes from `i` that are in `set`.
    #[inline(always)]
    fn byte_run(&self, mut i: usize, set: &[u8]) -> usize {
        while i < self.s.len() && set.contains(&self.s[i]) {
            i += 1;
        }
        i
    }

    /// The whitespace run from `i`: its end, the start of its last character and the
    /// end of its last `\r` or `\n` (if any).
    #[inline(always)]
    fn ws_run(&self, mut i: usize) -> (usize, usize, Option<usize>) {
        let mut last = i;
        let mut crlf_end = None;
        while i < self.s.len() {
            let (c, k, len) = self.at(i);
            if k & S == 0 {
                break;
            }
            if c == CR || c == LF {
                crlf_end = Some(i + 1);
            }
            last = i;
            i += len;
        }
        (i, last, crlf_end)
    }

    /// Up to three `\p{N}` from `i` (`\p{N}{1,3}`).
    #[inline(always)]
    fn digits3(&self, mut i: usize) -> usize {
        for _ in 0..3 {
            if i >= self.s.len() {
                break;
            }
            let (_, k, len) = self.at(i);
            if k & N == 0 {
                break;
            }
            i += len;
        }
        i
    }

    /// Length of `(?:[sdmt]|ll|ve|re)` at `i` (case-sensitive).
    #[inline(always)]
    fn contraction_cs(&self, i: usize) -> Option<usize> {
        let s = self.s;
        match s.get(i)? {
            b's' | b'd' | b'm' | b't' => Some(1),
            b'l' if s.get(i + 1) == Some(&b'l') => Some(2),
            b'v' | b'r' if s.get(i + 1) == Some(&b'e') => Some(2),
            _ => None,
        }
    }

    /// Length of `(?i:[sdmt]|ll|ve|re)` at `i` (the same set as o200k's
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)` after its quote).
    #[inline(always)]
    fn contraction_ci(&self, i: usize) -> Option<usize> {
        let s = self.s;
        let b = *s.get(i)?;
        match b.to_ascii_lowercase() {
            b's' | b'd' | b'm' | b't' => Some(1),
            b'l' if s.get(i + 1).map(|b| b.to_ascii_lowercase()) == Some(b'l') => Some(2),
            b'v' | b'r' if s.get(i + 1).map(|b| b.to_ascii_lowercase()) == Some(b'e') => Some(2),
            // U+017F LATIN SMALL LETTER LONG S matches `s` under `(?i)` (simple case
            // folding) in regex-syntax and in Python's `regex` alike.
            0xC5 if s.get(i + 1) == Some(&0xBF) => Some(2),
            _ => None,
        }
    }
}

/// The end of the run of ASCII letters from `i` (`a-z`, or `A-Za-z` with `both_cases`:
/// the ASCII bytes of [`LO`] and [`L`]), read eight bytes at a time while eight are
/// left; the caller's loop goes on from there, one character at a time.
#[inline(always)]
fn ascii_letters(s: &[u8], mut i: usize, both_cases: bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(word) = s.get(i..i + 8) {
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        // Each byte's low seven bits (upper case folded to lower), then a high bit per
        // byte for `>= a` and for `> z`: no sum carries into the next byte.
        let y = if both_cases { x | (0x20 * ONES) } else { x } & !HIGH;
        let from_a = y + (0x80 - u64::from(b'a')) * ONES;
        let past_z = y + (0x80 - u64::from(b'z') - 1) * ONES;
        let letters = from_a & !past_z & !x & HIGH;
        if letters != HIGH {
            return i + ((!letters & HIGH).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// Decodes the multi-byte character at `i` of valid UTF-8.
#[inline(always)]
fn decode_multi(s: &[u8], i: usize) -> (u32, usize) {
    let b0 = s[i] as u32;
    let cont = |k: usize| (s.get(i + k).copied().unwrap_or(0x80) as u32) & 0x3F;
    if b0 < 0xE0 {
        (((b0 & 0x1F) << 6) | cont(1), 2)
    } else if b0 < 0xF0 {
        (((b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            ((b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        )
    }
}

/// Splits valid UTF-8 `s` with the preset's rules.
pub(crate) fn split<'t, F: Emit<'t> + ?Sized>(
    preset: Preset,
    classes: &Classes,
    s: &'t [u8],
    emit: &mut F,
) {
    let t = Text { s, t: classes };
    match preset {
        Preset::Gpt2 => split_gpt2(&t, s, emit),
        Preset::Gpt4 => split_gpt4(&t, s, emit, false),
        Preset::Cl100k => split_gpt4(&t, s, emit, true),
        Preset::O200k => split_o200k(&t, s, emit),
    }
}

/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
fn split_gpt2<'t, F: Emit<'t> + ?Sized>(t: &Text, s: &'t [u8], emit: &mut F) {
    let n = s.len();
    let mut i = 0;
    while i < n {
        let (c, k, _) = t.at(i);
        let contraction = if c == QUOTE {
            t.contraction_cs(i + 1)
        } else {
            None
        };
        let end = if let Some(m) = contraction {
            i + 1 + m
        } else if k & S == 0 {
            same_kind_run(t, i, k)
        } else if c == SPACE && i + 1 < n && t.class(i + 1) & S == 0 {
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+` with the space.
            same_kind_run(t, i + 1, t.class(i + 1))
        } else {
            let (j, last, _) = t.ws_run(i);
            // `\s+(?!\S)` gives back the last character unless the run ends the text;
            // a lone character before non-space falls to `\s+`.
            if j == n || last == i {
                j
            } else {
                last
            }
        };
        emit.emit(&s[i..end]);
        i = end;
    }
}

/// The run of letters, digits or punctuation (whichever `k`, the class at `i`, is).
#[inline(always)]
fn same_kind_run(t: &Text, i: usize, k: u8) -> usize {
    if k & L != 0 {
        t.run(i, L)
    } else if k & N != 0 {
        t.run(i, N)
    } else {
        t.punct_run(i)
    }
}

/// GPT-4: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}|
/// ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`; cl100k (`end_run`) adds `\s++$`
/// before `\s*[\r\n]` (its other differences cannot change a match).
fn split_gpt4<'t, F: Emit<'t> + ?Sized>(t: &Text, s: &'t [u8], emit: &mut F, end_run: bool) {
    let n = s.len();
    let mut i = 0;
    while i < n {
        let (c, k, len) = t.at(i);
        let contraction = if c == QUOTE {
            t.contraction_ci(i + 1)
        } else {
            None
        };
        let end = if let Some(m) = contraction {
            i + 1 + m
        } else if k & L != 0 {
            t.run(i, L)
        } else if k & N != 0 {
            t.digits3(i)
        } else if c != CR && c != LF && t.class(i + len) & L != 0 {
            // `[^\r\n\p{L}\p{N}]?+\p{L}+` with its optional character.
            t.run(i + len, L)
        } else if k & S == 0 {
            t.byte_run(t.punct_run(i), b"\r\n")
        } else if c == SPACE && i + 1 < n && t.class(i + 1) & LNS == 0 {
            t.byte_run(t.punct_run(i + 1), b"\r\n")
        } else {
            let (j, last, crlf_end) = t.ws_run(i);
            if end_run && j == n {
                j
            } else if let Some(e) = crlf_end {
                // `\s*[\r\n]` backtracks to the run's last line break.
                e
            } else if j == n || last == i {
                j
            } else {
                last
            }
        };
        emit.emit(&s[i..end]);
        i = end;
    }
}

/// o200k: `[^\r\n\p{L}\p{N}]?[UP]*[LO]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
/// [^\r\n\p{L}\p{N}]?[UP]+[LO]*(?i:...)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|
/// \s*[\r\n]+|\s+(?!\S)|\s+` with UP = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` and
/// LO = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
fn split_o200k<'t, F: Emit<'t> + ?Sized>(t: &Text, s: &'t [u8], emit: &mut F) {
    let n = s.len();
    let mut i = 0;
    while i < n {
        let (c, k, len) = t.at(i);
        let prefix = c != CR && c != LF && k & (L | N) == 0;
        // The first alternative with its optional character, then without it; then the
        // second alternative the same way. Without a letter or mark at `i`, the forms
        // without the optional character cannot match.
        let word = if prefix {
            if k & M != 0 {
                upper_lower(t, i + len)
                    .or_else(|| upper_lower(t, i))
                    .or_else(|| upper_then_lower(t, i + len))
                    .or_else(|| upper_then_lower(t, i))
            } else {
                upper_lower(t, i + len).or_else(|| upper_then_lower(t, i + len))
            }
        } else if k & L != 0 {
            upper_lower(t, i).or_else(|| upper_then_lower(t, i))
        } else {
            None
        };
        let end = if let Some(e) = word {
            match s.get(e) {
                Some(b'\'') => t.contraction_ci(e + 1).map_or(e, |m| e + 1 + m),
                _ => e,
            }
        } else if k & N != 0 {
            t.digits3(i)
        } else if k & S == 0 {
            t.byte_run(t.punct_run(i), b"\r\n/")
        } else if c == SPACE && i + 1 < n && t.class(i + 1) & LNS == 0 {
            t.byte_run(t.punct_run(i + 1), b"\r\n/")
        } else {
            let (j, last, crlf_end) = t.ws_run(i);
            if let Some(e) = crlf_end {
                // `\s*[\r\n]+` backtracks to the run's last line break.
                e
            } else if j == n || last == i {
                j
            } else {
                last
            }
        };
        emit.emit(&s[i..end]);
        i = end;
    }
}

/// What `[UP]*[LO]+` matches from `i`: the greedy UP run, then a LO run if one follows;
/// otherwise the UP run backtracks to its last character that is also LO.
#[inline(always)]
fn upper_lower(t: &Text, mut i: usize) -> Option<usize> {
    let n = t.s.len();
    let mut last_lo_end = None;
    while i < n {
        let (_, k, len) = t.at(i);
        if k & UP == 0 {
            if k & LO != 0 {
                return Some(t.run(i, LO));
            }
            break;
        }
        i += len;
        if k & LO != 0 {
            last_lo_end = Some(i);
        }
    }
    last_lo_end
}

/// What `[UP]+[LO]*` matches from `i`.
#[inline(always)]
fn upper_then_lower(t: &Text, i: usize) -> Option<usize> {
    if t.class(i) & UP == 0 {
        return None;
    }
    Some(t.run(t.run(i, UP), LO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The ASCII bytes the class tables give [`L`] and [`LO`] are the ones
    /// [`ascii_letters`] takes for them.
    #[test]
    fn ascii_letters_are_the_class_tables_ascii_letters() {
        let classes = super::super::classes::classes();
        for b in 0..128u8 {
            let k = classes.ascii[b as usize];
            assert_eq!(k & L != 0, b.is_ascii_alphabetic(), "{b:#x}");
            assert_eq!(k & LO != 0, b.is_ascii_lowercase(), "{b:#x}");
        }
    }

    /// [`ascii_letters`] stops at the first byte that is not a letter of its kind, or
    /// earlier only where fewer than eight bytes are left, on seeded random strings of
    /// letters and the bytes at the edges of its ranges (`@`, `A`, `Z`, `[`, the
    /// backquote, `a`, `z`, `{`, DEL, bytes whose low seven bits are letters), from
    /// every start.
    #[test]
    fn ascii_letters_stops_where_the_letters_end() {
        let mut rng = Rng::new(0xA5C1_1E77);
        let edges = b"@AZ[`az{\x7f\xc1\xe1\xda\xfa\xbfmM";
        for case in 0..3000 {
            let len = rng.below(40);
            let letters: &[u8] = if case % 3 == 0 { b"azAZ" } else { b"azqm" };
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(6) == 0 {
                        edges[rng.below(edges.len())]
                    } else {
                        letters[rng.below(letters.len())]
                    }
                })
                .collect();
            for both_cases in [false, true] {
                let letter = |b: u8| {
                    if both_cases {
                        b.is_ascii_alphabetic()
                    } else {
                        b.is_ascii_lowercase()
                    }
                };
                for i in 0..=len {
                    let end = (i..len).find(|&j| !letter(s[j])).unwrap_or(len);
                    let got = ascii_letters(&s, i, both_cases);
                    let early = got + 8 > len && (i..got).all(|j| letter(s[j])) && got <= end;
                    assert!(got == end || early, "{s:?} from {i}: {got}, want {end}");
                }
            }
        }
    }
}
