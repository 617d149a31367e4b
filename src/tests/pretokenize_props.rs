//! Tests of the split patterns: the hand-written preset splitters against fancy-regex
//! (random and real multilingual text) and against Python `regex` goldens, safe cuts,
//! chunk counting (single == parallel == streaming == naive) and invalid UTF-8.

use std::collections::HashMap;

use crate::pretokenize::SplitSpec;
use crate::pretokenize::{
    classes, count_chunks, find_safe_cut, is_safe_cut, preset_pattern, ChunkCounter, Splitter,
    CL100K_PATTERN, GPT2_PATTERN, GPT4_PATTERN, O200K_PATTERN, R50K_PATTERN,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pretokenize");

const PRESETS: [(&str, &str); 5] = [
    ("gpt2", GPT2_PATTERN),
    ("gpt4", GPT4_PATTERN),
    ("cl100k", CL100K_PATTERN),
    ("r50k", R50K_PATTERN),
    ("o200k", O200K_PATTERN),
];

fn spec(name: &str, pattern: &str) -> SplitSpec {
    SplitSpec {
        name: name.to_string(),
        pattern: pattern.to_string(),
    }
}

fn fast(pattern: &str) -> Splitter {
    let s = Splitter::new(&spec("x", pattern)).unwrap();
    assert!(s.is_preset());
    s
}

fn slow(pattern: &str) -> Splitter {
    let s = Splitter::new_regex(&spec("x", pattern)).unwrap();
    assert!(!s.is_preset());
    s
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/{name}")).unwrap()
}

use super::Rng;

const PIECES: &[&str] = &[
    "'s",
    "'t",
    "'re",
    "'ve",
    "'m",
    "'ll",
    "'d",
    "'S",
    "'T",
    "'RE",
    "'rE",
    "'Ve",
    "'M",
    "'LL",
    "'lL",
    "'D",
    "'x",
    "'",
    "''",
    "'ſ",
    "'K",
    " ",
    " ",
    " ",
    "  ",
    "   ",
    "\t",
    "\t\t",
    "\r",
    "\n",
    "\r\n",
    " \n",
    "\n\n",
    "\n ",
    "\u{a0}",
    "\u{3000}",
    "\u{2009}",
    "\u{85}",
    "\u{b}",
    "\u{c}",
    "\u{2028}",
    "\u{1680}",
    "\u{200b}",
    "\u{feff}",
    "\u{1c}",
    "a",
    "b",
    "s",
    "t",
    "ll",
    "Z",
    "hello",
    "World",
    "THE",
    "cAmEl",
    "HTTPServer",
    "ſ",
    "K",
    "0",
    "7",
    "42",
    "123",
    "2024",
    "123456789",
    "٣٤",
    "½",
    "Ⅻ",
    "𝟙𝟚",
    "①",
    ".",
    ",",
    "!",
    "?",
    "-",
    "/",
    "//",
    "(",
    "\"",
    "#",
    "$",
    // The bytes next to the ASCII letters' ranges.
    "@",
    "[",
    "`",
    "{",
    "...",
    "—",
    "«",
    "。",
    "，",
    "漢字",
    "かな",
    "カナ",
    "ー",
    "々",
    "한국어",
    "가",
    "Привет",
    "мир",
    "ΑΒΓ",
    "αβγ",
    "مرحبا",
    "ـ",
    "नमस्ते",
    "ไทย",
    "\u{301}",
    "\u{300}\u{323}",
    "e\u{301}",
    "\u{20dd}",
    "\u{903}",
    "😀",
    "👍🏽",
    "👨\u{200d}👩\u{200d}👧",
    "🇩🇪",
    "❤\u{fe0f}",
    "\u{200d}",
    "\u{fe0f}",
    "ǅ",
    "ǈ",
    "ʰ",
    "ª",
    "ᵃ",
    "ꜰ",
    "Ǆ",
    "ǆ",
    "Ⓐ",
    "ⓐ",
    "\u{0}",
    "\u{7f}",
];

/// A random text: pieces above, random code points of interesting planes, and
/// occasionally long runs of one piece.
fn random_text(rng: &mut Rng, max_pieces: usize) -> String {
    let mut s = String::new();
    let n = rng.below(max_pieces + 1);
    for _ in 0..n {
        match rng.below(20) {
            0 => {
                // Any assigned-or-not scalar value, weighted to the BMP.
                let cp = if rng.below(4) == 0 {
                    rng.below(0x110000) as u32
                } else {
                    rng.below(0x3400) as u32
                };
                if let Some(c) = char::from_u32(cp) {
                    s.push(c);
                }
            }
            1 => {
                let piece = PIECES[rng.below(PIECES.len())];
                for _ in 0..rng.below(12) {
                    s.push_str(piece);
                }
            }
            _ => s.push_str(PIECES[rng.below(PIECES.len())]),
        }
    }
    s
}

fn assert_same(name: &str, text: &[u8], got: &[&[u8]], want: &[&[u8]]) {
    if got != want {
        let show = |v: &[&[u8]]| -> Vec<String> {
            v.iter()
                .map(|c| format!("{:?}", String::from_utf8_lossy(c)))
                .collect()
        };
        panic!(
            "{name}: chunks differ for {:?}\n fast: {:?}\n want: {:?}",
            String::from_utf8_lossy(text),
            show(got),
            show(want)
        );
    }
}

#[test]
fn preset_patterns_are_minbpe_and_tiktoken_exactly() {
    // patterns.json was written by Python from minbpe/regex.py and
    // tiktoken_ext/openai_public.py.
    let json: serde_json::Value = serde_json::from_slice(&fixture("patterns.json")).unwrap();
    for (name, ours) in [
        ("gpt2", GPT2_PATTERN),
        ("gpt4", GPT4_PATTERN),
        ("cl100k", CL100K_PATTERN),
        ("r50k", R50K_PATTERN),
        ("p50k", R50K_PATTERN),
        ("o200k", O200K_PATTERN),
    ] {
        assert_eq!(json[name].as_str().unwrap(), ours, "{name}");
        assert_eq!(preset_pattern(name), Some(ours));
    }
    assert_eq!(preset_pattern("none"), None);
}

#[test]
fn class_tables_equal_python_regex() {
    let json: serde_json::Value = serde_json::from_slice(&fixture("python_classes.json")).unwrap();
    let mut want = vec![0u8; 0x110000];
    for (name, bit) in [
        ("L", classes::L),
        ("N", classes::N),
        ("S", classes::S),
        ("UP", classes::UP),
        ("LO", classes::LO),
        ("M", classes::M),
    ] {
        for r in json[name].as_array().unwrap() {
            let (lo, hi) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
            for cp in lo..=hi {
                want[cp as usize] |= bit;
            }
        }
    }
    // Python's `regex` knows Unicode 17, regex-syntax Unicode 16: compare the characters
    // assigned in Unicode 16.
    let unassigned = fancy_regex::Regex::new(r"\p{Cn}").unwrap();
    let mut differ = Vec::new();
    for cp in 0..0x110000u32 {
        if let Some(c) = char::from_u32(cp) {
            if classes::char_classes(c) != want[cp as usize]
                && !unassigned.is_match(c.encode_utf8(&mut [0; 4])).unwrap()
            {
                differ.push(cp);
            }
        }
    }
    // U+0295 LATIN LETTER PHARYNGEAL VOICED FRICATIVE moved from Ll to Lo in Unicode 17.
    assert!(
        differ == [0x295],
        "{} code points differ: {:x?}",
        differ.len(),
        &differ[..differ.len().min(200)]
    );
}

#[test]
fn fast_equals_regex_on_random_text() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (name, pattern) in PRESETS {
        let (f, r) = (fast(pattern), slow(pattern));
        for round in 0..1500 {
            let text = random_text(&mut rng, if round % 10 == 0 { 400 } else { 25 });
            let text = text.as_bytes();
            assert_same(name, text, &f.chunks(text), &r.chunks(text));
        }
        // A few large texts (about 100 KB each).
        for _ in 0..3 {
            let text = random_text(&mut rng, 20_000);
            let text = text.as_bytes();
            assert_same(name, text, &f.chunks(text), &r.chunks(text));
        }
    }
}

#[test]
fn fast_equals_regex_on_invalid_utf8() {
    let mut rng = Rng(7);
    for (name, pattern) in PRESETS {
        let (f, r) = (fast(pattern), slow(pattern));
        for _ in 0..500 {
            let mut text = random_text(&mut rng, 20).into_bytes();
            for _ in 0..rng.below(4) {
                let at = rng.below(text.len() + 1);
                let junk: &[u8] = [
                    &[0xFF][..],
                    &[0xC3],
                    &[0xE2, 0x82],
                    &[0x80, 0x80],
                    &[0xF0, 0x9F, 0x98],
                    &[0xED, 0xA0, 0x80],
                    &[0xC0, 0xAF],
                ][rng.below(7)];
                text.splice(at..at, junk.iter().copied());
            }
            let got = f.chunks(&text);
            assert_same(name, &text, &got, &r.chunks(&text));
            assert_eq!(got.concat(), text, "{name}: round trip");
            // Every chunk is valid UTF-8 or a single byte.
            for c in &got {
                assert!(
                    std::str::from_utf8(c).is_ok() || c.len() == 1,
                    "{name}: {c:?}"
                );
            }
        }
    }
}

#[test]
fn invalid_bytes_are_chunks_of_their_own() {
    let f = fast(GPT4_PATTERN);
    let text = b"ab\xFF\xFEcd \xE2\x82 x\xF0\x9F\x98";
    let got = f.chunks(text);
    let want: Vec<&[u8]> = vec![
        b"ab", b"\xFF", b"\xFE", b"cd", b" ", b"\xE2", b"\x82", b" x", b"\xF0", b"\x9F", b"\x98",
    ];
    assert_eq!(got, want);
    assert!(f.chunks(b"").is_empty());
}

#[test]
fn fast_equals_regex_on_multilingual_fixture() {
    let text = fixture("multilingual.txt");
    for (name, pattern) in PRESETS {
        let (f, r) = (fast(pattern), slow(pattern));
        assert_same(name, &text, &f.chunks(&text), &r.chunks(&text));
        // Every line on its own, too (ends of text in many places).
        for line in text.split_inclusive(|&b| b == b'\n') {
            assert_same(name, line, &f.chunks(line), &r.chunks(line));
        }
    }
}

fn golden_chunks(v: &serde_json::Value) -> Vec<Vec<u8>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().as_bytes().to_vec())
        .collect()
}

#[test]
fn fast_equals_python_regex_goldens() {
    let gold: serde_json::Value = serde_json::from_slice(&fixture("golden_chunks.json")).unwrap();
    let randoms: Vec<String> = serde_json::from_slice(&fixture("random_texts.json")).unwrap();
    let multi = fixture("multilingual.txt");
    for (name, pattern) in PRESETS {
        let f = fast(pattern);
        let want = golden_chunks(&gold[name]["multilingual"]);
        let got: Vec<Vec<u8>> = f.chunks(&multi).iter().map(|c| c.to_vec()).collect();
        assert!(
            got == want,
            "{name}: multilingual fixture differs from Python regex"
        );
        for (i, text) in randoms.iter().enumerate() {
            let want = golden_chunks(&gold[name]["random"][i]);
            let got: Vec<Vec<u8>> = f
                .chunks(text.as_bytes())
                .iter()
                .map(|c| c.to_vec())
                .collect();
            assert!(
                got == want,
                "{name}: random text {i} {text:?}: {got:?} != {want:?}"
            );
        }
    }
}

#[test]
fn safe_cuts_split_independently() {
    let mut rng = Rng(99);
    let splitters: Vec<(&str, Splitter)> = PRESETS.iter().map(|(n, p)| (*n, slow(p))).collect();
    let mut cuts = 0;
    for _ in 0..300 {
        let mut text = random_text(&mut rng, 30).into_bytes();
        if rng.below(3) == 0 {
            let at = rng.below(text.len() + 1);
            text.insert(at, 0xFF);
        }
        for (name, r) in &splitters {
            let whole = r.chunks(&text);
            for p in 0..=text.len() {
                if !is_safe_cut(&text, p) {
                    continue;
                }
                cuts += 1;
                let mut parts = r.chunks(&text[..p]);
                parts.extend(r.chunks(&text[p..]));
                assert_same(name, &text, &parts, &whole);
            }
        }
    }
    assert!(cuts > 1000, "too few safe cuts exercised: {cuts}");
}

#[test]
fn find_safe_cut_finds_nearby_cuts() {
    let text = b"hello world, 12abc";
    assert_eq!(find_safe_cut(text, 8), Some(5)); // before " world"
    assert_eq!(find_safe_cut(text, 11), Some(11)); // "d" | ","
    assert_eq!(find_safe_cut(b"aaaa", 2), None);
    assert_eq!(find_safe_cut(b"", 0), None);
    assert_eq!(find_safe_cut(b"ab cd", 0), Some(2));
    let custom = Splitter::new(&spec("c", r"\w+|\W")).unwrap();
    assert_eq!(custom.find_safe_cut(text, 8), None);
    assert_eq!(fast(GPT4_PATTERN).find_safe_cut(text, 8), Some(5));
    // Never a cut inside a character or next to an incomplete one.
    let s = "日本語。次".as_bytes();
    for p in 0..=s.len() {
        if is_safe_cut(s, p) {
            assert!(std::str::from_utf8(&s[..p]).is_ok());
        }
    }
    assert!(is_safe_cut(s, 9)); // 語|。
    assert!(!is_safe_cut(&s[..10], 9)); // 。 incomplete
}

/// Naive count: a vector in first-appearance order and a map to its index.
fn naive_counts(chunks: &[&[u8]]) -> Vec<(Vec<u8>, u64)> {
    let mut order: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    for c in chunks {
        match index.get(*c) {
            Some(&i) => order[i].1 += 1,
            None => {
                index.insert(c.to_vec(), order.len());
                order.push((c.to_vec(), 1));
            }
        }
    }
    order
}

fn as_vec(c: &crate::pretokenize::ChunkCounts) -> Vec<(Vec<u8>, u64)> {
    c.iter().map(|(k, n)| (k.to_vec(), n)).collect()
}

#[test]
fn counting_single_parallel_streaming_agree() {
    let mut rng = Rng(4242);
    // Large enough for several 1 MiB shards: the fixture and random text, repeated with
    // variations so that later shards see both old and new chunks.
    let mut text = Vec::new();
    let multi = fixture("multilingual.txt");
    while text.len() < 3_300_000 {
        if rng.below(2) == 0 {
            text.extend_from_slice(&multi[rng.below(multi.len() / 2)..]);
        } else {
            text.extend_from_slice(random_text(&mut rng, 300).as_bytes());
        }
        if rng.below(10) == 0 {
            text.push(0xFF);
        }
    }
    for (name, pattern) in PRESETS {
        let f = fast(pattern);
        let single = count_chunks(&text, &f, 1);
        let want = naive_counts(&f.chunks(&text));
        assert!(as_vec(&single) == want, "{name}: single != naive");
        assert_eq!(single.total(), want.iter().map(|w| w.1).sum::<u64>());
        for threads in [2, 3] {
            assert!(
                count_chunks(&text, &f, threads) == single,
                "{name}: {threads} threads"
            );
        }
        // Streaming with odd block sizes (cutting UTF-8 sequences) and a small batch.
        let mut counter = ChunkCounter::new(&f, 2);
        counter.set_batch(1 << 16);
        let mut at = 0;
        while at < text.len() {
            let n = (1 + rng.below(40_000)).min(text.len() - at);
            counter.feed(&text[at..at + n]);
            at += n;
        }
        assert!(counter.finish() == single, "{name}: streaming");
    }
}

#[test]
fn streaming_with_tiny_blocks_equals_whole() {
    let mut rng = Rng(17);
    for (name, pattern) in PRESETS {
        let (f, r) = (fast(pattern), slow(pattern));
        for _ in 0..100 {
            let mut text = random_text(&mut rng, 60).into_bytes();
            if rng.below(4) == 0 {
                let at = rng.below(text.len() + 1);
                text.insert(at, 0x80);
            }
            let want = naive_counts(&r.chunks(&text));
            let mut counter = ChunkCounter::new(&f, 1 + rng.below(2));
            counter.set_batch(1 + rng.below(8));
            let mut at = 0;
            while at < text.len() {
                let n = (1 + rng.below(5)).min(text.len() - at);
                counter.feed(&text[at..at + n]);
                at += n;
            }
            let got = counter.finish();
            assert!(
                as_vec(&got) == want,
                "{name}: {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
    // A custom pattern holds everything back and still counts exactly.
    let custom = Splitter::new(&spec("c", r"\w+|\s+|.")).unwrap();
    let text = "ab cd ab\n\nef ab".as_bytes();
    let mut counter = ChunkCounter::new(&custom, 2);
    counter.set_batch(1);
    for b in text.chunks(3) {
        counter.feed(b);
    }
    let got = counter.finish();
    assert_eq!(as_vec(&got), naive_counts(&custom.chunks(text)));
    assert_eq!(got.len(), 5);
    assert_eq!(got.get(0), Some((&b"ab"[..], 3)));
}

#[test]
fn invalid_custom_pattern_is_a_usage_error() {
    let err = Splitter::new(&spec("c", "(unclosed")).err().unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.message().starts_with("invalid split pattern"),
        "{}",
        err.message()
    );
}

/// Throughput figures, not a check: `PRETOK_BENCH_CORPUS=FILE cargo test --release --test
/// integration bench_pretokenize -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_pretokenize() {
    let Ok(path) = std::env::var("PRETOK_BENCH_CORPUS") else {
        return;
    };
    let text = std::fs::read(path).unwrap();
    let mb = text.len() as f64 / 1e6;
    // CPU time of this thread (the machine may be shared): /proc/thread-self/schedstat.
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        s.split_whitespace()
            .next()
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1e9
    };
    let time = |f: &mut dyn FnMut() -> usize| {
        let mut best = f64::MAX;
        let mut n = 0;
        for _ in 0..3 {
            let t = cpu();
            n = f();
            best = best.min(cpu() - t);
        }
        (best, n)
    };
    let wall = |f: &mut dyn FnMut() -> usize| {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    println!("corpus: {mb:.1} MB");
    for (name, pattern) in PRESETS {
        let (f, r) = (fast(pattern), slow(pattern));
        let (tf, nf) = time(&mut || {
            let mut n = 0;
            f.split(&text, &mut |_| n += 1);
            n
        });
        let (tr, nr) = time(&mut || {
            let mut n = 0;
            r.split(&text, &mut |_| n += 1);
            n
        });
        assert_eq!(nf, nr);
        let (c1, d1) = time(&mut || count_chunks(&text, &f, 1).len());
        // Process CPU (all threads), in clock ticks of 10 ms: /proc/self/stat.
        let proc_cpu = || -> f64 {
            let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
            let rest = s.rsplit(')').next().unwrap_or("");
            let f: Vec<f64> = rest
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0.0))
                .collect();
            (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
        };
        let p0 = proc_cpu();
        for _ in 0..5 {
            count_chunks(&text, &f, 2);
        }
        let p2 = (proc_cpu() - p0) / 5.0;
        let w1 = wall(&mut || count_chunks(&text, &f, 1).len());
        let w2 = wall(&mut || count_chunks(&text, &f, 2).len());
        println!(
            "{name:7} split fast {:7.1} MB/s  fancy-regex {:6.1} MB/s ({:4.1}x)  count_chunks cpu 1 thread {c1:.3} s, 2 threads {p2:.2} s in all; wall 1 thread {w1:.3} s, 2 threads {w2:.3} s ({nf} chunks, {d1} distinct)",
            mb / tf,
            mb / tr,
            tr / tf,
        );
    }
}
