//! Id streams as NDJSON: one JSON array of non-negative integers per line (a record),
//! and header objects (`{"model":...}`) that say which model the records after them use.
//! Parsing is hand-written for the array form (the hot path of `bpe-decode` and `attn`);
//! headers go through serde_json.

use serde_json::{Map, Value};

use super::json::{json_string, scan_digits, skip_ws, BOM, BOM_MESSAGE};
use crate::identity::ModelSource;

/// Parses a JSON array of non-negative integers that fit in u32 into `out` (cleared
/// first). Errors are short lowercase phrases for `WHERE: WHAT` messages, quoting what
/// the line holds (`negative id -1`, `id 1e3 is not an integer`).
pub(crate) fn parse_ids_into(line: &[u8], out: &mut Vec<u32>) -> std::result::Result<(), String> {
    out.clear();
    parse_ids_piece(line, PieceState::Start, true, out).map(|_| ())
}

/// Where a record read in pieces stands between two of them ([`parse_ids_piece`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum PieceState {
    /// At the start of the line.
    #[default]
    Start,
    /// Past whitespace only (so a byte-order mark is no longer at the line's start).
    Blank,
    /// Past the `[`: an id or `]` comes next.
    Open,
    /// Past a `,`: an id comes next.
    Value,
    /// Past an id: `,` or `]` comes next.
    Separator,
    /// Past the `]`: only whitespace may follow.
    Done,
}

/// Parses one piece of a record (a line too long to hold, read in pieces), appending its
/// ids to `out`, and returns where the record stands after it; `last` says the piece
/// ends the line. Pieces must be cut where [`piece_end`] says. Read piece by piece from
/// [`PieceState::Start`], a line gives the ids and the error message that
/// [`parse_ids_into`] gives for the whole line.
pub(crate) fn parse_ids_piece(
    text: &[u8],
    mut state: PieceState,
    last: bool,
    out: &mut Vec<u32>,
) -> std::result::Result<PieceState, String> {
    let mut i = 0;
    loop {
        i = skip_ws(text, i);
        if i > 0 && state == PieceState::Start {
            state = PieceState::Blank;
        }
        let Some(&byte) = text.get(i) else {
            return match state {
                _ if !last => Ok(state),
                PieceState::Done => Ok(state),
                PieceState::Start | PieceState::Blank => {
                    Err("empty line where a record (a JSON array of ids) was expected".to_string())
                }
                _ => Err("unterminated array".to_string()),
            };
        };
        match state {
            PieceState::Start | PieceState::Blank => {
                if byte != b'[' {
                    return Err(if state == PieceState::Start && text.starts_with(BOM) {
                        BOM_MESSAGE.to_string()
                    } else {
                        "expected a JSON array of ids".to_string()
                    });
                }
                i += 1;
                state = PieceState::Open;
            }
            PieceState::Open if byte == b']' => {
                i += 1;
                state = PieceState::Done;
            }
            PieceState::Open | PieceState::Value => {
                i = parse_id(text, i, last, out)?;
                state = PieceState::Separator;
            }
            PieceState::Separator => {
                match byte {
                    b',' => state = PieceState::Value,
                    b']' => state = PieceState::Done,
                    _ => {
                        return Err(format!(
                            "expected ',' or ']' after an id, found {}",
                            snippet(&text[i..])
                        ))
                    }
                }
                i += 1;
            }
            PieceState::Done => return Err("unexpected text after the array".to_string()),
        }
    }
}

/// Where a piece of a record that does not end the line may be cut for
/// [`parse_ids_piece`]: after the last `,` or whitespace byte of `text`, or, where `text`
/// holds neither, at its end once it is [`PIECE_MIN`] bytes long: no record holds such
/// a stretch, and its first error and the quote of it lie within those bytes, so the
/// message is the one the whole line gives. `None`: too short to cut, more of the line
/// is needed.
pub(crate) fn piece_end(text: &[u8]) -> Option<usize> {
    match memchr::memrchr3(b',', b' ', b'\n', text) {
        Some(k) => Some(k + 1),
        None => match text.iter().rposition(|b| matches!(b, b'\t' | b'\r')) {
            Some(k) => Some(k + 1),
            None => (text.len() >= PIECE_MIN).then_some(text.len()),
        },
    }
}

/// The shortest stretch without a `,` or whitespace that [`piece_end`] cuts: its first
/// error is at most `[` and [`QUOTE_MAX`] digits in, and quotes at most `QUOTE_MAX + 1`
/// bytes from there (the quote's `...` needs one byte past it).
const PIECE_MIN: usize = 2 * QUOTE_MAX + 2;

/// The id at `text[start..]` pushed to `out`, and the index after it; or what is wrong
/// with it, quoting it.
fn parse_id(
    text: &[u8],
    start: usize,
    last: bool,
    out: &mut Vec<u32>,
) -> std::result::Result<usize, String> {
    let (value, digits) = scan_digits(&text[start..]);
    let i = start + digits;
    if digits == 0 {
        return Err(match text[start] {
            b'-' if text.get(start + 1).is_some_and(u8::is_ascii_digit) => {
                format!("negative id {}", number_text(text, start))
            }
            _ => format!(
                "expected a non-negative integer id, found {}",
                snippet(&text[start..])
            ),
        });
    }
    // What the number's start shows first, then its range, then what follows it: a
    // number that runs to the end of a piece that is not the last was cut where no `,`
    // or whitespace came for a long stretch, far too long to be an id, and what follows
    // it is not seen; the whole line gives the same message.
    if digits > 1 && text[start] == b'0' {
        return Err(format!(
            "invalid number {} (leading zero)",
            number_text(text, start)
        ));
    }
    let value = value.filter(|&v| v <= u64::from(u32::MAX) && (last || i < text.len()));
    let Some(value) = value else {
        return Err(format!(
            "id {} is out of range (ids are below 2^32)",
            number_text(text, start)
        ));
    };
    if matches!(text.get(i), Some(b'.' | b'e' | b'E')) {
        return Err(format!("id {} is not an integer", number_text(text, start)));
    }
    out.push(value as u32);
    Ok(i)
}

/// The longest a quoted piece of input in a message may be, in bytes.
const QUOTE_MAX: usize = 24;

/// The number-like text at `start` (what a JSON number may hold: digits, sign, point,
/// exponent), as the input has it, cut to [`QUOTE_MAX`] bytes (then `...`): messages
/// quote what they saw (`-1`, `1e3`, `71.0`).
fn number_text(line: &[u8], start: usize) -> String {
    let rest = &line[start..];
    let len = rest
        .iter()
        .position(|b| !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        .unwrap_or(rest.len());
    if len <= QUOTE_MAX {
        String::from_utf8_lossy(&rest[..len]).into_owned()
    } else {
        format!("{}...", String::from_utf8_lossy(&rest[..QUOTE_MAX]))
    }
}

/// What starts `rest`, as a quoted string for a message: one JSON token (up to a
/// separator or whitespace; a lone separator is itself), cut to [`QUOTE_MAX`] bytes.
fn snippet(rest: &[u8]) -> String {
    let is_end = |b: &u8| {
        matches!(
            b,
            b',' | b'[' | b']' | b'{' | b'}' | b':' | b' ' | b'\t' | b'\r' | b'\n'
        )
    };
    let len = rest
        .iter()
        .position(is_end)
        .unwrap_or(rest.len())
        .max(1)
        .min(rest.len());
    let cut = len.min(QUOTE_MAX);
    let text = String::from_utf8_lossy(&rest[..cut]);
    if cut < len {
        format!("{text:?}...")
    } else {
        format!("{text:?}")
    }
}

/// Parses a header line (a JSON object).
pub(crate) fn parse_header(line: &[u8]) -> std::result::Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("expected a header object".to_string()),
        Err(e) => Err(format!("malformed header: {e}")),
    }
}

/// True when the line is a header object rather than a record.
pub(crate) fn is_header(line: &[u8]) -> bool {
    line.get(skip_ws(line, 0)) == Some(&b'{')
}

/// Appends `ids` as a compact JSON array (no newline) to `buf`.
pub(crate) fn push_ids(buf: &mut Vec<u8>, ids: &[u32]) {
    buf.push(b'[');
    push_list(buf, None, ids);
    buf.push(b']');
}

/// Appends the ids of `ids`, `first` (if any) before the first and `,` before each
/// other (nothing for no ids).
///
/// The ids go through a stack buffer, each as one fixed-width store of its eight
/// digits with the leading zeros shifted out, so that no id costs a call or a capacity
/// check (writing the ids digit by digit into the `Vec` took ~8% of a one-thread
/// o200k_base encode). The digits of four ids at a time come from [`digits8x4`]: the
/// 7.07M ids of the 27 MB benchmark text, o200k_base, AMD EPYC Zen 4, in process:
/// 17-18 ms against 35 ms one id at a time ([`digits8`]).
pub(crate) fn push_list(buf: &mut Vec<u8>, first: Option<u8>, ids: &[u32]) {
    const STAGE: usize = 1024;
    // Room past STAGE for one group of four of the longest ids with their commas.
    let mut stage = [0u8; STAGE + 48];
    let Some((&head, rest)) = ids.split_first() else {
        return;
    };
    let mut pos = put_id(&mut stage, 0, first, head);
    let mut groups = rest.chunks_exact(4);
    for group in &mut groups {
        let group: &[u32; 4] = group.try_into().expect("four ids");
        if group.iter().all(|&id| id < 100_000_000) {
            for digits in digits8x4(group) {
                stage[pos] = b',';
                pos = put_digits(&mut stage, pos + 1, digits);
            }
        } else {
            for &id in group {
                pos = put_id(&mut stage, pos, Some(b','), id);
            }
        }
        if pos >= STAGE {
            buf.extend_from_slice(&stage[..pos]);
            pos = 0;
        }
    }
    for &id in groups.remainder() {
        pos = put_id(&mut stage, pos, Some(b','), id);
    }
    buf.extend_from_slice(&stage[..pos]);
}

/// Writes `sep` (if any) and `id` at `pos` in `stage`, which needs 11 bytes of room
/// from `pos` (a separator and ten digits; the digits' fixed-width stores stay within
/// them). Returns the position after them.
#[inline(always)]
fn put_id(stage: &mut [u8], mut pos: usize, sep: Option<u8>, id: u32) -> usize {
    if let Some(sep) = sep {
        stage[pos] = sep;
        pos += 1;
    }
    if id < 100_000_000 {
        put_digits(stage, pos, digits8(id))
    } else {
        let (high, low) = (id / 100_000_000, id % 100_000_000);
        let high = digits8(high) >> 48;
        let width = if high & 0xFF == 0x30 { 1 } else { 2 };
        stage[pos..pos + width].copy_from_slice(&(high as u16).to_le_bytes()[2 - width..]);
        stage[pos + width..pos + width + 8].copy_from_slice(&digits8(low).to_le_bytes());
        pos + width + 8
    }
}

/// Writes the eight-digit word `digits` ([`digits8`]) at `pos` without its leading
/// zeros (id 0 keeps one): one 8-byte store. Returns the position after the digits.
#[inline(always)]
fn put_digits(stage: &mut [u8], pos: usize, digits: u64) -> usize {
    // Leading zeros are the low zero bytes of the digits' values.
    let zeros = ((digits ^ 0x3030_3030_3030_3030).trailing_zeros() / 8).min(7);
    stage[pos..pos + 8].copy_from_slice(&(digits >> (8 * zeros)).to_le_bytes());
    pos + 8 - zeros as usize
}

/// [`digits8`] of four ids (each below 10^8) at once, in SSE2 (part of every x86_64
/// CPU): the quotient and remainder by 10^4 in 32-bit lanes, then the same halving
/// steps as [`digits8`] in 16-bit lanes, where a multiply-high divides by 100 and 10.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn digits8x4(ids: &[u32; 4]) -> [u64; 4] {
    #[allow(unsafe_code)]
    // SAFETY: SSE2 is part of the x86_64 baseline, enabled in every build for it.
    unsafe {
        digits8x4_sse2(ids)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn digits8x4_sse2(ids: &[u32; 4]) -> [u64; 4] {
    use std::arch::x86_64::*;
    let lanes = ids.map(|id| id as i32);
    let v = _mm_setr_epi32(lanes[0], lanes[1], lanes[2], lanes[3]);
    // v / 10^4 is (v * 0xD1B71759) >> 45 for v < 10^8 (u32 lanes 0 and 2, then 1 and 3).
    let m = _mm_set1_epi32(0xD1B7_1759_u32 as i32);
    let even = _mm_srli_epi64::<45>(_mm_mul_epu32(v, m));
    let odd = _mm_srli_epi64::<45>(_mm_mul_epu32(_mm_srli_epi64::<32>(v), m));
    let q = _mm_or_si128(even, _mm_slli_epi64::<32>(odd));
    // q * 10^4 as a sum of 16-bit products (q < 2^15, its high half zero).
    let r = _mm_sub_epi32(v, _mm_madd_epi16(q, _mm_set1_epi32(10_000)));
    // 16-bit lanes: q0 r0 q1 r1 q2 r2 q3 r3, each below 10^4; y / 100 is
    // ((y * 5243) >> 16) >> 3 there.
    let fours = _mm_or_si128(q, _mm_slli_epi32::<16>(r));
    let high = _mm_srli_epi16::<3>(_mm_mulhi_epu16(fours, _mm_set1_epi16(5243)));
    let low = _mm_sub_epi16(fours, _mm_mullo_epi16(high, _mm_set1_epi16(100)));
    // Pairs below 100 in order, two ids per vector; z / 10 is (z * 6554) >> 16 there.
    let digits = |pairs: __m128i| {
        let tens = _mm_mulhi_epu16(pairs, _mm_set1_epi16(6554));
        let ones = _mm_sub_epi16(pairs, _mm_mullo_epi16(tens, _mm_set1_epi16(10)));
        let chars = _mm_or_si128(tens, _mm_slli_epi16::<8>(ones));
        _mm_add_epi8(chars, _mm_set1_epi8(b'0' as i8))
    };
    let d01 = digits(_mm_unpacklo_epi16(high, low));
    let d23 = digits(_mm_unpackhi_epi16(high, low));
    [
        _mm_cvtsi128_si64(d01) as u64,
        _mm_cvtsi128_si64(_mm_unpackhi_epi64(d01, d01)) as u64,
        _mm_cvtsi128_si64(d23) as u64,
        _mm_cvtsi128_si64(_mm_unpackhi_epi64(d23, d23)) as u64,
    ]
}

/// [`digits8`] of four ids (each below 10^8).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn digits8x4(ids: &[u32; 4]) -> [u64; 4] {
    ids.map(digits8)
}

/// The eight decimal digits of `v` (below 10^8, with leading zeros) as ASCII, the first
/// digit in the lowest byte: the halves, then pairs, then single digits are split in
/// the lanes of one word (quotients by multiplying with a reciprocal, exact for these
/// ranges; no lane carries into the next).
#[inline(always)]
fn digits8(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    // Two 32-bit lanes of four digits each, the first four in the low lane.
    let fours = u64::from(v / 10_000) | u64::from(v % 10_000) << 32;
    // y / 100 for y < 10^4 is (y * 10486) >> 20.
    let high = ((fours * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let low = fours - 100 * high;
    // Four 16-bit lanes of two digits each, in order.
    let pairs = high | low << 16;
    // z / 10 for z < 100 is (z * 103) >> 10.
    let tens = ((pairs * 103) >> 10) & 0x000F_000F_000F_000F;
    let ones = pairs - 10 * tens;
    (tens | ones << 8) + 0x3030_3030_3030_3030
}

/// Appends the decimal digits of `value`.
pub(crate) fn push_u32(buf: &mut Vec<u8>, mut value: u32) {
    let mut digits = [0u8; 10];
    let mut n = digits.len();
    loop {
        n -= 1;
        digits[n] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[n..]);
}

/// The header line of an id stream for `model` (without newline).
pub(crate) fn stream_header(source: &ModelSource) -> String {
    match source {
        ModelSource::Builtin(name) => format!("{{\"model\":{}}}", json_string(name)),
        ModelSource::File { name, sha256 } => format!(
            "{{\"model\":{},\"sha256\":{}}}",
            json_string(name),
            json_string(sha256)
        ),
    }
}

/// What an id-stream header names: a model name and, for files, its content hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamModel {
    pub(crate) name: String,
    pub(crate) sha256: Option<String>,
}

impl StreamModel {
    /// `"m.json" (sha256 0123456789ab)`, or `"o200k_base"`: the model, for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.sha256 {
            Some(hash) => {
                let short: String = hash.chars().take(12).collect();
                format!("{:?} (sha256 {short})", self.name)
            }
            None => format!("{:?}", self.name),
        }
    }
}

/// Reads an id-stream header object.
pub(crate) fn parse_stream_header(
    header: &Map<String, Value>,
) -> std::result::Result<StreamModel, String> {
    let name = header
        .get("model")
        .and_then(Value::as_str)
        .ok_or("header has no \"model\" name")?
        .to_string();
    let sha256 = match header.get("sha256") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("header \"sha256\" must be a string".to_string()),
    };
    Ok(StreamModel { name, sha256 })
}

/// True when `source` is the model a stream header names (same built-in, or same file
/// content).
pub(crate) fn same_model(source: &ModelSource, named: &StreamModel) -> bool {
    match (source, &named.sha256) {
        (ModelSource::Builtin(name), None) => *name == named.name,
        (ModelSource::File { sha256, .. }, Some(hash)) => sha256 == hash,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> std::result::Result<Vec<u32>, String> {
        let mut out = Vec::new();
        parse_ids_into(text.as_bytes(), &mut out).map(|()| out)
    }

    /// The naive twin of the id writers: `format!` of each id.
    fn naive_list(first: Option<u8>, ids: &[u32]) -> String {
        if ids.is_empty() {
            return String::new();
        }
        let mut out = first.map(|b| (b as char).to_string()).unwrap_or_default();
        let digits: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        out.push_str(&digits.join(","));
        out
    }

    #[test]
    fn ids_are_written_as_format_writes_them() {
        // Every digit count and its edges, then seeded random ids of every magnitude.
        let mut edges = vec![0, 1, 9, u32::MAX, u32::MAX - 1, 4_199_999_999];
        for p in 1..=9 {
            let t = 10u32.pow(p);
            edges.extend([t - 1, t, t + 1, 2 * t - 1, 4 * t]);
        }
        for &v in &edges {
            if v < 100_000_000 {
                assert_eq!(digits8(v).to_le_bytes(), *format!("{v:08}").as_bytes());
            }
        }
        let mut rng = crate::test_rng::Rng::new(81);
        for round in 0..2000 {
            let len = rng.below(if round % 10 == 0 { 3000 } else { 40 });
            let ids: Vec<u32> = (0..len)
                .map(|_| match rng.below(4) {
                    0 => rng.below(256) as u32,
                    1 => rng.below(1 << 18) as u32,
                    2 => edges[rng.below(edges.len())],
                    _ => rng.next_u64() as u32 >> rng.below(32),
                })
                .collect();
            for first in [None, Some(b'['), Some(b',')] {
                let mut buf = b"x".to_vec();
                push_list(&mut buf, first, &ids);
                assert_eq!(buf[1..], *naive_list(first, &ids).as_bytes(), "{ids:?}");
            }
            let mut buf = Vec::new();
            push_ids(&mut buf, &ids);
            assert_eq!(buf, format!("[{}]", naive_list(None, &ids)).into_bytes());
        }
    }

    /// Four ids' digits at once equal `format!`'s, for every id below 10^6 (the ids of
    /// every tiktoken vocabulary) in every lane, and for seeded random ids below 10^8
    /// with each power of ten and its neighbours.
    #[test]
    fn four_ids_digits_equal_format() {
        let check = |group: [u32; 4]| {
            let words = digits8x4(&group);
            for (v, word) in group.iter().zip(words) {
                assert_eq!(
                    word.to_le_bytes(),
                    *format!("{v:08}").as_bytes(),
                    "{group:?}"
                );
            }
        };
        for v in 0..1_000_000u32 {
            check([v, 999_999 - v, v.wrapping_mul(7) % 1_000_000, v / 3]);
        }
        let mut rng = crate::test_rng::Rng::new(0x0D16_1754);
        let mut edges = vec![99_999_999];
        for p in 0..8 {
            let t = 10u32.pow(p);
            edges.extend([t - 1, t, t + 1, 5 * t, 10 * t - 1]);
        }
        for _ in 0..200_000 {
            check([0; 4].map(|_| match rng.below(2) {
                0 => rng.below(100_000_000) as u32,
                _ => edges[rng.below(edges.len())],
            }));
        }
    }

    #[test]
    fn parses_arrays_and_rejects_malformed_ones() {
        assert_eq!(ids("[]"), Ok(vec![]));
        assert_eq!(ids(" [ 1 , 22,333 ] \r"), Ok(vec![1, 22, 333]));
        assert_eq!(ids("[4294967295]"), Ok(vec![u32::MAX]));
        assert!(ids("[4294967296]").unwrap_err().contains("out of range"));
        assert_eq!(ids("[-1]").unwrap_err(), "negative id -1");
        assert_eq!(ids("[1e3]").unwrap_err(), "id 1e3 is not an integer");
        assert_eq!(ids("[71.0]").unwrap_err(), "id 71.0 is not an integer");
        assert_eq!(
            ids("[2,1.5e-3]").unwrap_err(),
            "id 1.5e-3 is not an integer"
        );
        assert_eq!(ids("[01]").unwrap_err(), "invalid number 01 (leading zero)");
        assert_eq!(
            ids("[4294967296]").unwrap_err(),
            "id 4294967296 is out of range (ids are below 2^32)"
        );
        let long = format!("[{}]", "9".repeat(1000));
        assert_eq!(
            ids(&long).unwrap_err(),
            format!(
                "id {}... is out of range (ids are below 2^32)",
                "9".repeat(24)
            )
        );
        assert_eq!(
            ids("[1,\"a\"]").unwrap_err(),
            "expected a non-negative integer id, found \"\\\"a\\\"\""
        );
        assert_eq!(
            ids("[1 x]").unwrap_err(),
            "expected ',' or ']' after an id, found \"x\""
        );
        assert!(ids("[1,]").is_err());
        assert!(ids("[1 2]").is_err());
        assert!(ids("[01]").is_err());
        assert!(ids("[1] x").is_err());
        assert!(ids("[1").is_err());
        assert!(ids("").unwrap_err().contains("empty line"));
        assert!(ids("\"x\"").is_err());
    }

    /// Reads `line` as the reader of a long line does: parts of random sizes, each cut
    /// where [`piece_end`] says (a part twice as long when it says none), parsed one at
    /// a time.
    fn ids_in_pieces(
        line: &[u8],
        below: &mut impl FnMut(u64) -> u64,
    ) -> std::result::Result<Vec<u32>, String> {
        let mut out = Vec::new();
        let mut state = PieceState::Start;
        let mut start = 0;
        let mut want = 1 + below(8) as usize;
        loop {
            if start + want >= line.len() {
                parse_ids_piece(&line[start..], state, true, &mut out)?;
                return Ok(out);
            }
            match piece_end(&line[start..start + want]) {
                Some(used) => {
                    state = parse_ids_piece(&line[start..start + used], state, false, &mut out)?;
                    start += used;
                    want = 1 + below(8) as usize;
                }
                None => want *= 2,
            }
        }
    }

    #[test]
    fn pieces_read_as_the_whole_line() {
        let mut below = crate::test_rng::below_u64(25);
        let alphabet = b"0123456789,, [] -.e\"x{}\t";
        let mut cases: Vec<Vec<u8>> = [
            "[1,2,3]",
            " [ 1 , 22 ,333 ] ",
            "[]",
            "[1,]",
            "[1 2]",
            "[-1]",
            "[1e3]",
            "[71.0]",
            "[01]",
            "[4294967296]",
            "[1] x",
            "   ",
            "",
            "[1,",
            "\u{feff}[1]",
        ]
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .collect();
        for _ in 0..3000 {
            let len = below(24) as usize;
            let mut line = vec![b'['];
            line.extend((0..len).map(|_| alphabet[below(alphabet.len() as u64) as usize]));
            // A stretch without a separator, longer than a piece may be cut in, half of
            // the time right after the `[`.
            if below(4) == 0 {
                if below(2) == 0 {
                    line.truncate(1);
                }
                let run: &[u8] = [&b"1234567890"[..], b"x", b"9e", b"0"][below(4) as usize];
                let n = below(160) as usize;
                line.extend(run.iter().cycle().take(n));
                line.extend((0..below(6)).map(|_| alphabet[below(alphabet.len() as u64) as usize]));
            }
            if below(2) == 0 {
                line.push(b']');
            }
            cases.push(line);
        }
        for line in &cases {
            let whole = ids(&String::from_utf8_lossy(line));
            for _ in 0..4 {
                let pieces = ids_in_pieces(line, &mut below);
                assert_eq!(pieces, whole, "{:?}", String::from_utf8_lossy(line));
            }
        }
    }

    #[test]
    fn writes_compact_arrays() {
        let mut buf = Vec::new();
        push_ids(&mut buf, &[0, 7, 4294967295, 10]);
        assert_eq!(buf, b"[0,7,4294967295,10]");
        let header = br#"{"model":"x"}"#;
        assert!(is_header(header) && parse_header(header).is_ok());
    }
}
