//! Trainer tests: goldens (the seed's examples, taylorswift.txt from the seed's Python and
//! minbpe RegexTokenizer) and seeded random properties against naive twins.

use crate::pretokenize::SplitSpec;
use crate::pretokenize::{Splitter, GPT4_PATTERN};
use crate::train::{
    train_bytes, train_bytes_with, train_chunks, train_chunks_with, EngineChoice, Merge,
};
use std::collections::HashMap;

/// A merge as the naive trainers report it: (left, right, count).
type M = (u32, u32, u64);

/// Every layout and path must give the same merges: small inputs take 4-byte slots and the
/// one-thread set-up by default, so forcing 8-byte slots with the two-shard set-up and the
/// bucket queue keeps those under the same tests, and the tight variants make every pass
/// lean (positions only, pairs found in the slots) and collect the arena whenever a pass's
/// lists do not fit.
const ENGINES: [EngineChoice; 4] = [
    EngineChoice::Packed,
    EngineChoice::Wide,
    EngineChoice::PackedTight,
    EngineChoice::WideTight,
];

fn fast_bytes(text: &[u8], vocab: usize) -> Vec<M> {
    let mut seen = Vec::new();
    let out = train_bytes(text, vocab, &mut |m: &Merge| seen.push(*m));
    assert_eq!(out, seen, "on_merge must see every merge, in order");
    for choice in ENGINES {
        let mut calls = 0usize;
        let forced = train_bytes_with(choice, 2, text, vocab, &mut |_| calls += 1);
        assert_eq!(forced, out, "{choice:?} engine differs");
        assert_eq!(calls, out.len());
    }
    for (i, m) in out.iter().enumerate() {
        assert_eq!(m.id, 256 + i as u32);
    }
    out.iter().map(|m| (m.pair.0, m.pair.1, m.count)).collect()
}

fn fast_chunks(chunks: &[(&[u8], u64)], vocab: usize) -> Vec<M> {
    let mut calls = 0usize;
    let out = train_chunks(chunks.iter().copied(), vocab, &mut |_| calls += 1);
    assert_eq!(out.len(), calls);
    for choice in ENGINES {
        let forced = train_chunks_with(choice, 2, chunks.iter().copied(), vocab, &mut |_| {});
        assert_eq!(forced, out, "{choice:?} engine differs");
    }
    for (i, m) in out.iter().enumerate() {
        assert_eq!(m.id, 256 + i as u32);
    }
    out.iter().map(|m| (m.pair.0, m.pair.1, m.count)).collect()
}

/// The seed's `get_stats` over several sequences (minbpe passes one dict through all
/// chunks): counts in a map, pairs in first-insertion order.
fn get_stats(seqs: &[(Vec<u32>, u64)]) -> Vec<((u32, u32), u64)> {
    let mut index: HashMap<(u32, u32), usize> = HashMap::new();
    let mut stats: Vec<((u32, u32), u64)> = Vec::new();
    for (ids, w) in seqs {
        for win in ids.windows(2) {
            let pair = (win[0], win[1]);
            match index.get(&pair) {
                Some(&i) => stats[i].1 += w,
                None => {
                    index.insert(pair, stats.len());
                    stats.push((pair, *w));
                }
            }
        }
    }
    stats
}

/// The seed's `merge`.
fn merge(ids: &[u32], pair: (u32, u32), idx: u32) -> Vec<u32> {
    let mut out = Vec::with_capacity(ids.len());
    let mut i = 0;
    while i < ids.len() {
        if ids[i] == pair.0 && i + 1 < ids.len() && ids[i + 1] == pair.1 {
            out.push(idx);
            i += 2;
        } else {
            out.push(ids[i]);
            i += 1;
        }
    }
    out
}

/// The seed's train loop over weighted sequences: recount, Python's `max` (the FIRST
/// maximum in insertion order), merge everywhere. One sequence of weight 1 is the seed's
/// BasicTokenizer; all chunks of weight 1 is minbpe's RegexTokenizer.
fn naive_train(seqs: Vec<(Vec<u32>, u64)>, vocab: usize) -> Vec<M> {
    let mut seqs = seqs;
    let mut out = Vec::new();
    for i in 0..vocab.saturating_sub(256) {
        let stats = get_stats(&seqs);
        let mut best: Option<((u32, u32), u64)> = None;
        for &(pair, count) in &stats {
            if best.is_none_or(|(_, c)| count > c) {
                best = Some((pair, count));
            }
        }
        let Some((pair, count)) = best else { break };
        let idx = 256 + i as u32;
        for (ids, _) in seqs.iter_mut() {
            *ids = merge(ids, pair, idx);
        }
        out.push((pair.0, pair.1, count));
    }
    out
}

fn naive_bytes(text: &[u8], vocab: usize) -> Vec<M> {
    naive_train(
        vec![(text.iter().map(|&b| u32::from(b)).collect(), 1)],
        vocab,
    )
}

/// minbpe RegexTokenizer: every chunk occurrence as its own sequence.
fn naive_chunks(chunks: &[&[u8]], vocab: usize) -> Vec<M> {
    naive_train(
        chunks
            .iter()
            .map(|c| (c.iter().map(|&b| u32::from(b)).collect(), 1))
            .collect(),
        vocab,
    )
}

/// Distinct chunks in first-appearance order with their counts.
fn dedupe<'a>(chunks: &[&'a [u8]]) -> Vec<(&'a [u8], u64)> {
    let mut index: HashMap<&[u8], usize> = HashMap::new();
    let mut out: Vec<(&[u8], u64)> = Vec::new();
    for &c in chunks {
        match index.get(c) {
            Some(&i) => out[i].1 += 1,
            None => {
                index.insert(c, out.len());
                out.push((c, 1));
            }
        }
    }
    out
}

use super::Rng;

/// Random text from a small alphabet, random bytes, or runs like `aaaaab`.
fn random_text(rng: &mut Rng, max_len: usize) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => rng.below(3),
        _ => rng.below(max_len + 1),
    };
    match rng.below(4) {
        0 => (0..len).map(|_| rng.next_u64() as u8).collect(),
        1 => {
            let mut v = Vec::new();
            while v.len() < len {
                let b = b"ab\xff"[rng.below(3)];
                let run = 1 + rng.below(9);
                v.extend(std::iter::repeat_n(b, run));
            }
            v.truncate(len);
            v
        }
        _ => {
            let k = 1 + rng.below(4);
            (0..len).map(|_| b"abcd"[rng.below(k)]).collect()
        }
    }
}

fn read_golden(name: &str) -> Vec<M> {
    let path = format!("{}/tests/fixtures/train/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .map(|line| {
            let f: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            (f[0] as u32, f[1] as u32, f[2])
        })
        .collect()
}

fn taylorswift() -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/taylorswift.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn seed_example_happily() {
    let m = fast_bytes(b"happily happiness unhappy", 259);
    assert_eq!(m, vec![(104, 97, 3), (256, 112, 3), (257, 112, 3)]);
    assert_eq!(m, naive_bytes(b"happily happiness unhappy", 259));
}

#[test]
fn minbpe_example_aaabdaaabac() {
    let m = fast_bytes(b"aaabdaaabac", 259);
    assert_eq!(m, vec![(97, 97, 4), (256, 97, 2), (257, 98, 2)]);
}

#[test]
fn overlapping_runs_count_but_merge_left_to_right() {
    // `aaa` has two `aa`; merging leaves `Xa`; then one pair of count 1.
    assert_eq!(fast_bytes(b"aaa", 1000), vec![(97, 97, 2), (256, 97, 1)]);
    assert_eq!(fast_bytes(b"aaaa", 1000), vec![(97, 97, 3), (256, 256, 1)]);
}

#[test]
fn empty_and_tiny_inputs() {
    assert_eq!(fast_bytes(b"", 300), vec![]);
    assert_eq!(fast_bytes(b"x", 300), vec![]);
    assert_eq!(fast_bytes(b"xy", 300), vec![(120, 121, 1)]);
    assert_eq!(fast_bytes(b"abcabc", 256), vec![]);
    assert_eq!(fast_bytes(b"abcabc", 10), vec![]);
    assert_eq!(fast_chunks(&[], 300), vec![]);
    assert_eq!(fast_chunks(&[(b"a", 5), (b"", 2)], 300), vec![]);
    assert_eq!(fast_chunks(&[(b"ab", 0)], 300), vec![]);
    assert_eq!(fast_chunks(&[(b"ab", 3)], 300), vec![(97, 98, 3)]);
}

#[test]
fn taylorswift_basic_golden() {
    // Made by the seed's Python (scripts/fixtures/train_goldens.py).
    let want = read_golden("taylorswift_basic_512.txt");
    assert_eq!(want.len(), 256);
    assert_eq!(fast_bytes(&taylorswift(), 512), want);
}

#[test]
fn taylorswift_gpt4_golden() {
    // Made by minbpe's RegexTokenizer (GPT-4 split), see scripts/fixtures/train_goldens.py.
    let want = read_golden("taylorswift_gpt4_512.txt");
    assert_eq!(want.len(), 256);
    let text = taylorswift();
    let splitter = Splitter::new(&SplitSpec {
        name: "gpt4".into(),
        pattern: GPT4_PATTERN.into(),
    })
    .unwrap();
    let mut chunks: Vec<&[u8]> = Vec::new();
    splitter.split(&text, &mut |c| chunks.push(c));
    assert_eq!(fast_chunks(&dedupe(&chunks), 512), want);
    // Without deduplication, every occurrence as its own chunk: the same merges.
    let ones: Vec<(&[u8], u64)> = chunks.iter().map(|&c| (c, 1)).collect();
    assert_eq!(fast_chunks(&ones, 512), want);
}

#[test]
fn taylorswift_prefix_matches_naive() {
    // The naive trainer is too slow for the whole file; a prefix still has real text.
    let text = taylorswift();
    let text = &text[..3000];
    assert_eq!(fast_bytes(text, 400), naive_bytes(text, 400));
}

#[test]
fn random_bytes_fast_equals_naive() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..3000 {
        let text = random_text(&mut rng, if case % 10 == 0 { 300 } else { 40 });
        // Vocab sizes below, at and past exhaustion.
        let vocab = 256 + rng.below(text.len() + 8);
        let fast = fast_bytes(&text, vocab);
        let naive = naive_bytes(&text, vocab);
        assert_eq!(fast, naive, "case {case}: text {text:?} vocab {vocab}");
    }
}

#[test]
fn random_chunks_fast_equals_naive() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    for case in 0..2000 {
        // A pool of chunk texts; the chunk stream draws from it, so chunks repeat.
        let pool: Vec<Vec<u8>> = (0..1 + rng.below(8))
            .map(|_| random_text(&mut rng, 12))
            .collect();
        let stream: Vec<&[u8]> = (0..rng.below(30))
            .map(|_| pool[rng.below(pool.len())].as_slice())
            .collect();
        let total: usize = stream.iter().map(|c| c.len()).sum();
        let vocab = 256 + rng.below(total + 8);
        let naive = naive_chunks(&stream, vocab);
        let deduped = dedupe(&stream);
        assert_eq!(
            fast_chunks(&deduped, vocab),
            naive,
            "case {case}: chunks {deduped:?} vocab {vocab}"
        );
        let ones: Vec<(&[u8], u64)> = stream.iter().map(|&c| (c, 1)).collect();
        assert_eq!(fast_chunks(&ones, vocab), naive, "case {case} undeduped");
    }
}

#[test]
fn random_weighted_chunks_fast_equals_naive() {
    // Arbitrary weights (not just occurrence counts), including heavy ones.
    let mut rng = Rng(42);
    for case in 0..1500 {
        let chunks: Vec<(Vec<u8>, u64)> = (0..rng.below(12))
            .map(|_| {
                let w = match rng.below(4) {
                    0 => 1,
                    1 => 1 + rng.below(3) as u64,
                    2 => rng.below(1000) as u64,
                    _ => 1 << 40,
                };
                (random_text(&mut rng, 16), w)
            })
            .collect();
        let total: usize = chunks.iter().map(|c| c.0.len()).sum();
        let vocab = 256 + rng.below(total + 8);
        let seqs: Vec<(Vec<u32>, u64)> = chunks
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|(c, w)| (c.iter().map(|&b| u32::from(b)).collect(), *w))
            .collect();
        let naive = naive_train(seqs, vocab);
        let refs: Vec<(&[u8], u64)> = chunks.iter().map(|(c, w)| (c.as_slice(), *w)).collect();
        assert_eq!(
            fast_chunks(&refs, vocab),
            naive,
            "case {case}: chunks {refs:?} vocab {vocab}"
        );
    }
}

#[test]
fn single_chunk_equals_train_bytes() {
    let mut rng = Rng(7);
    for _ in 0..300 {
        let text = random_text(&mut rng, 200);
        let vocab = 256 + rng.below(text.len() + 4);
        assert_eq!(fast_chunks(&[(&text, 1)], vocab), fast_bytes(&text, vocab));
    }
}

#[test]
fn long_runs_and_large_text_match_naive() {
    // Long runs exercise the (x, x) neighbour cases and long deleted gaps.
    let mut text = vec![b'a'; 700];
    text.push(b'b');
    text.extend(std::iter::repeat_n(b'a', 300));
    assert_eq!(fast_bytes(&text, 300), naive_bytes(&text, 300));
    let mut rng = Rng(99);
    let big = random_text(&mut Rng(5), 0)
        .into_iter()
        .chain((0..20000).map(|_| b"ab c"[rng.below(4)]));
    let big: Vec<u8> = big.collect();
    assert_eq!(fast_bytes(&big, 400), naive_bytes(&big, 400));
}

#[test]
fn engines_agree_past_the_small_limit() {
    // Above 2^20 positions the default is the large engine; the small one must agree there
    // too (chunked: the separators count as positions).
    let mut rng = Rng(1234);
    let text: Vec<u8> = (0..(1 << 20) + 5000)
        .map(|_| b"abcdefgh "[rng.below(9)])
        .collect();
    let auto = fast_bytes(&text, 600);
    assert_eq!(auto.len(), 344);
    // On one thread (`-j 1`) the large engine sets up without its second shard.
    let one: Vec<M> = train_bytes_with(EngineChoice::Wide, 1, &text, 600, &mut |_| {})
        .iter()
        .map(|m| (m.pair.0, m.pair.1, m.count))
        .collect();
    assert_eq!(one, auto);
    let pieces: Vec<(&[u8], u64)> = text.chunks(7).map(|c| (c, 1 + c[0] as u64 % 3)).collect();
    let chunked = fast_chunks(&pieces, 600);
    let one = train_chunks_with(
        EngineChoice::Wide,
        1,
        pieces.iter().copied(),
        600,
        &mut |_| {},
    );
    assert_eq!(one.len(), chunked.len());
    assert!(one
        .iter()
        .zip(&chunked)
        .all(|(m, c)| (m.pair.0, m.pair.1, m.count) == *c));
}

#[test]
fn runs_of_one_byte_match_naive() {
    // The single-chunk worst case: every pass undoes the (c, a) pairs it makes, the long
    // passes are lean, and the run as one chunk takes the uniform weights.
    let mut rng = Rng(0x0005_eed0_fa11);
    for case in 0..90 {
        let len = match case % 3 {
            0 => rng.below(70),
            1 => rng.below(1500),
            _ => 1 + rng.below(6000),
        };
        let b = rng.next_u64() as u8;
        let mut text = vec![b; len];
        match case % 4 {
            1 if len > 0 => {
                let at = rng.below(len);
                text[at] = b.wrapping_add(1);
            }
            2 => text.extend(std::iter::repeat_n(b.wrapping_add(1), rng.below(3000))),
            _ => {}
        }
        let vocab = 256 + rng.below(40);
        let naive = naive_bytes(&text, vocab);
        assert_eq!(fast_bytes(&text, vocab), naive, "case {case}: len {len}");
        assert_eq!(
            fast_chunks(&[(&text, 1)], vocab),
            naive,
            "case {case} chunk"
        );
        let text: &[u8] = &text;
        let weighted = [(text, 3), (b"xyxy".as_slice(), 2), (text, 1)];
        let seqs: Vec<(Vec<u32>, u64)> = weighted
            .iter()
            .map(|(c, w)| (c.iter().map(|&b| u32::from(b)).collect(), *w))
            .collect();
        assert_eq!(
            fast_chunks(&weighted, vocab),
            naive_train(seqs, vocab),
            "case {case} weighted"
        );
        let twice = [(text, 5)];
        let seqs = vec![(text.iter().map(|&b| u32::from(b)).collect(), 5)];
        assert_eq!(fast_chunks(&twice, vocab), naive_train(seqs, vocab));
    }
}

#[test]
fn inputs_around_the_large_input_limit_match_naive() {
    // From 2^20 positions the set-up runs in two shards and the queue keeps buckets; 4-byte
    // slots reach past it for vocabularies below 512 (here), 8-byte ones above.
    let mut rng = Rng(77);
    for (len, vocab) in [
        ((1 << 20) - 1, 270),
        (1 << 20, 280),
        ((1 << 20) + 1, 600),
        ((1 << 20) + 3, 270),
    ] {
        let mut text = Vec::with_capacity(len);
        while text.len() < len {
            let longest = if rng.below(50) == 0 { 5000 } else { 6 };
            let run = 1 + rng.below(longest);
            text.extend(std::iter::repeat_n(b"abcd e"[rng.below(6)], run));
        }
        text.truncate(len);
        let naive = naive_bytes(&text, vocab.min(290));
        let fast = fast_bytes(&text, vocab);
        assert_eq!(fast[..naive.len()], naive, "len {len}");
        // The same text cut in chunks of two weights.
        let pieces: Vec<(&[u8], u64)> = text
            .chunks(1000)
            .map(|c| (c, 1 + (c[0] & 1) as u64))
            .collect();
        let seqs: Vec<(Vec<u32>, u64)> = pieces
            .iter()
            .map(|(c, w)| (c.iter().map(|&b| u32::from(b)).collect(), *w))
            .collect();
        let naive = naive_train(seqs, 270);
        assert_eq!(fast_chunks(&pieces, 270), naive, "len {len} chunked");
    }
}
