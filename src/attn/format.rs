//! How `attn` writes a record's rows: JSON text (numbers with fixed digits or in their
//! shortest round-trip form), raw little-endian float32, or a `.npy` stream per record.
//!
//! The JSON numbers are exactly the text `core::fmt` gives (`{:.N}` and `{}`), produced
//! without it:
//! - Fixed digits: a float32 is `m * 2^e` exactly (m < 2^24), so `x * 10^N` is an
//!   integer product and shift, rounded half to even as `core::fmt` rounds; values of
//!   2^40 and more go through `core::fmt`. 8.4 M numbers of the 16384-token job at
//!   `{:.4}`: ~3 s through `core::fmt` (its exact mode falls back to bignum arithmetic
//!   for most of them), ~0.1 s here.
//! - Shortest: the digits come from `zmij` (Schubfach, the serde_json default) and are
//!   laid out as `core::fmt`'s `{}` lays them out (no exponent). The text is
//!   `core::fmt`'s but where two shortest digit strings are equally close to the value
//!   (1.00390625: `1.0039062` here, `1.0039063` there); both read back as the same
//!   float32.
//!
//! Binary layouts (documented in attn(1)): `f32` writes each record's rows as T x C
//! little-endian float32 numbers, row after row, records back to back, nothing else;
//! `npy` writes each record as one complete NPY 1.0 stream (`<f4`, C order, shape
//! `(T, C)`, header padded to 64 bytes), so that `numpy.load(f)` called again and
//! again on one open file reads the records in order.

use std::io::Write;

/// How a record's rows are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One line per record: a JSON array of rows of numbers.
    #[default]
    Ndjson,
    /// Raw little-endian float32 numbers, row-major, records back to back.
    F32,
    /// One NPY stream per record: a float32 array of shape (T, C).
    Npy,
}

/// How numbers are written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Fixed digits after the decimal point, like PyTorch's printout (4 by default).
    Fixed(usize),
    /// The shortest text that reads back as the same float32.
    Shortest,
}

/// Writes `data` (rows of `cols` numbers) as one record in `format`.
pub(crate) fn write_record(
    w: &mut dyn Write,
    data: &[f32],
    cols: usize,
    format: Format,
    precision: Precision,
) -> std::io::Result<()> {
    let rows = data.len().checked_div(cols).unwrap_or(0);
    match format {
        Format::Ndjson => write_json(w, data, cols, precision),
        Format::F32 => write_le(w, data),
        Format::Npy => {
            w.write_all(&npy_header(rows, cols))?;
            write_le(w, data)
        }
    }
}

/// The numbers as little-endian float32, in pieces of 64 KiB.
fn write_le(w: &mut dyn Write, data: &[f32]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    for part in data.chunks(1 << 14) {
        buf.clear();
        buf.extend(part.iter().flat_map(|x| x.to_le_bytes()));
        w.write_all(&buf)?;
    }
    Ok(())
}

/// The NPY 1.0 header of a C-order float32 array of shape (rows, cols): magic, version,
/// header length, the header dictionary padded with spaces and ended by a newline so
/// that the data starts at a multiple of 64 bytes.
fn npy_header(rows: usize, cols: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    let unpadded = 10 + dict.len() + 1;
    let len = unpadded.next_multiple_of(64) - 10;
    let mut out = Vec::with_capacity(10 + len);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + len - 1, b' ');
    out.push(b'\n');
    out
}

/// One JSON line: an array of rows of `cols` numbers, written in pieces (a 100k-token
/// record of 512 numbers a row is hundreds of MB of text, which need not be held).
fn write_json(
    w: &mut dyn Write,
    data: &[f32],
    cols: usize,
    precision: Precision,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    buf.push(b'[');
    if cols > 0 {
        for (i, row) in data.chunks(cols).enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.push(b'[');
            for (j, &x) in row.iter().enumerate() {
                if j > 0 {
                    buf.push(b',');
                }
                match precision {
                    Precision::Fixed(p) => push_fixed(&mut buf, x, p),
                    Precision::Shortest => push_shortest(&mut buf, x),
                }
            }
            buf.push(b']');
            if buf.len() >= 1 << 16 {
                w.write_all(&buf)?;
                buf.clear();
            }
        }
    }
    buf.extend_from_slice(b"]\n");
    w.write_all(&buf)
}

/// 10^p for p <= 9.
const POW10: [u64; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// Appends `x` with `p` (at most 9) digits after the decimal point: exactly the text of
/// `format!("{x:.p$}")`.
fn push_fixed(buf: &mut Vec<u8>, x: f32, p: usize) {
    let bits = x.to_bits();
    let biased = (bits >> 23) & 0xff;
    // 2^40 and up (and infinities, NaN): rare here, and beyond the u64 arithmetic.
    if p > 9 || biased >= 127 + 40 {
        let _ = write!(buf, "{x:.p$}");
        return;
    }
    // x = m * 2^e exactly.
    let (m, e) = if biased == 0 {
        (bits & 0x7f_ffff, -149)
    } else {
        ((bits & 0x7f_ffff) | 0x80_0000, biased as i32 - 150)
    };
    let scale = POW10[p];
    let num = m as u64 * scale; // < 2^54
                                // (integer part, fraction digits) of x * 10^p rounded to the nearest integer, ties
                                // to even.
    let (int, frac) = if e >= 0 {
        // x >= 2^23: exact, up to 2^70 (x < 2^40, 10^p < 2^30).
        let q = (num as u128) << e;
        ((q / scale as u128) as u64, (q % scale as u128) as u64)
    } else {
        let q = if e <= -64 {
            0 // num < 2^54 <= 2^(-e-1): below one half
        } else {
            let sh = -e as u32;
            let q = num >> sh;
            let rem = num & ((1u64 << sh) - 1);
            let half = 1u64 << (sh - 1);
            q + u64::from(rem > half || (rem == half && q & 1 == 1))
        };
        (q / scale, q % scale)
    };
    if bits >> 31 != 0 {
        buf.push(b'-');
    }
    push_u64(buf, int);
    if p > 0 {
        buf.push(b'.');
        let mut digits = [b'0'; 9];
        let mut f = frac;
        for d in digits[..p].iter_mut().rev() {
            *d = b'0' + (f % 10) as u8;
            f /= 10;
        }
        buf.extend_from_slice(&digits[..p]);
    }
}

/// Appends the decimal digits of `v`.
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[at..]);
}

/// Appends the shortest text that reads back as `x`, laid out as `format!("{x}")`
/// lays it out (all digits, no exponent: `1e-7` is `0.0000001`); the same text but for
/// the last digit of exact ties between two shortest candidates.
fn push_shortest(buf: &mut Vec<u8>, x: f32) {
    if !x.is_finite() {
        let _ = write!(buf, "{x}");
        return;
    }
    let mut zb = zmij::Buffer::new();
    let text = zb.format_finite(x).as_bytes();
    let (neg, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exp) = match text.iter().position(|&c| c == b'e' || c == b'E') {
        Some(k) => (&text[..k], parse_exp(&text[k + 1..])),
        None => (text, 0),
    };
    // Digits and the position of the decimal point within them.
    let mut digits = [0u8; 24];
    let mut len = 0;
    let mut point = None;
    for &c in mantissa {
        if c == b'.' {
            point = Some(len);
        } else {
            digits[len] = c;
            len += 1;
        }
    }
    let mut point = point.unwrap_or(len) as i32 + exp;
    let mut digits = &digits[..len];
    while let Some((b'0', rest)) = digits.split_first() {
        digits = rest;
        point -= 1;
    }
    while let Some((b'0', rest)) = digits.split_last() {
        digits = rest;
    }
    if neg {
        buf.push(b'-');
    }
    if digits.is_empty() {
        buf.push(b'0');
    } else if point <= 0 {
        buf.extend_from_slice(b"0.");
        buf.resize(buf.len() + (-point) as usize, b'0');
        buf.extend_from_slice(digits);
    } else if point as usize >= digits.len() {
        buf.extend_from_slice(digits);
        buf.resize(buf.len() + point as usize - digits.len(), b'0');
    } else {
        let (int, frac) = digits.split_at(point as usize);
        buf.extend_from_slice(int);
        buf.push(b'.');
        buf.extend_from_slice(frac);
    }
}

fn parse_exp(text: &[u8]) -> i32 {
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    let v = digits
        .iter()
        .fold(0i32, |v, &d| v * 10 + i32::from(d - b'0'));
    if neg {
        -v
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::below_u64;

    fn fixed(x: f32, p: usize) -> String {
        let mut buf = Vec::new();
        push_fixed(&mut buf, x, p);
        String::from_utf8(buf).unwrap()
    }

    fn shortest(x: f32) -> String {
        let mut buf = Vec::new();
        push_shortest(&mut buf, x);
        String::from_utf8(buf).unwrap()
    }

    /// Values worth checking: zeros, subnormals, powers of two and ten, halves and other
    /// exact decimal ties at every precision, the largest values, and random bit patterns.
    fn values() -> Vec<f32> {
        let mut v = vec![
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::MAX,
            f32::MIN,
            f32::EPSILON,
            0.5,
            1.5,
            2.5,
            -0.5,
            0.25,
            0.125,
            0.375,
            0.00005,
            0.00015,
            1e-5,
            1e-10,
            123456.78,
            16777216.0,
            16777217.0,
            1099511627776.0, // 2^40
            1099511627775.9,
            3e38,
            1.0,
            -1.0,
            0.1,
            0.2,
            0.3,
            9.99995,
            0.99999994,
        ];
        // Dyadic fractions k / 2^s: exact decimal ties at some precisions (0.125 at 2
        // digits), and the same shifted to where fewer bits are left for them.
        for s in 1..=24 {
            for k in [1u32, 3, 5, 7, 9, 11, 13, 15, 1023] {
                let x = k as f32 / (1u32 << s) as f32;
                v.push(x);
                v.push(-x);
                v.push(x + 1.0);
                v.push(x + 1000.0);
            }
        }
        let mut below = below_u64(0x5eed_f10a);
        for _ in 0..200_000 {
            let x = f32::from_bits(below(1 << 32) as u32);
            if x.is_finite() {
                v.push(x);
            }
            // Magnitudes of attention outputs.
            v.push(below(1 << 24) as f32 / (1u64 << 24) as f32 * 200.0 - 100.0);
        }
        v
    }

    #[test]
    fn fixed_digits_are_core_fmt_text() {
        for x in values() {
            for p in 0..=9 {
                assert_eq!(
                    fixed(x, p),
                    format!("{x:.p$}"),
                    "{x:e} ({:#x}) p={p}",
                    x.to_bits()
                );
            }
        }
        // Ties go to even, as core::fmt rounds.
        assert_eq!(fixed(0.5, 0), "0");
        assert_eq!(fixed(1.5, 0), "2");
        assert_eq!(fixed(2.5, 0), "2");
        assert_eq!(fixed(0.125, 2), "0.12");
        assert_eq!(fixed(0.375, 2), "0.38");
        assert_eq!(fixed(-0.0, 4), "-0.0000");
        assert_eq!(fixed(-1e-9, 4), "-0.0000");
    }

    #[test]
    fn shortest_reads_back_and_is_core_fmt_text_but_for_ties() {
        for x in values() {
            let s = shortest(x);
            let back: f32 = s.parse().unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{s}");
            let want = format!("{x}");
            if s != want {
                // As short, equally close: the same text up to its last digit, which
                // differs by one, and the value exactly between the two.
                assert_eq!(s.len(), want.len(), "{s} vs {want}");
                assert_eq!(s[..s.len() - 1], want[..want.len() - 1], "{s} vs {want}");
                let (a, b): (f64, f64) = (s.parse().unwrap(), want.parse().unwrap());
                assert_eq!((a + b) / 2.0, x as f64, "{s} vs {want}");
            }
        }
        assert_eq!(shortest(-0.0), "-0");
        assert_eq!(shortest(1e-7), "0.0000001");
        assert_eq!(shortest(1e20), "100000000000000000000");
    }

    #[test]
    fn npy_header_is_aligned() {
        for (rows, cols) in [(0, 0), (6, 4), (16384, 512), (1 << 40, 7)] {
            let h = npy_header(rows, cols);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
            assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
            assert_eq!(*h.last().unwrap(), b'\n');
        }
    }
}
