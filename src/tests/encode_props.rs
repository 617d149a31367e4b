//! Property tests of the encoder: the fast encoder equals a naive transliteration of
//! the seed's `encode` (and of tiktoken's `byte_pair_merge` for rank tables) on many
//! seeded random models and inputs; parallel paths equal the single-record path; and
//! decoding (concatenating token bytes) gives the input back.

use crate::encode::{AllowedSpecial, Encoder};
use crate::format::tiktoken;
use crate::model::{identity_bytes, BpeModel, ModelSource, SpecialToken};
use crate::pretokenize::SplitSpec;
use crate::pretokenize::{self, Splitter};
use ahash::AHashMap;

use super::Rng;

/// A model-file style model from its merges (ids 256.. in order), identity base ids.
pub fn model_from_merges(
    merges: &[(u32, u32)],
    split: Option<SplitSpec>,
    specials: Vec<SpecialToken>,
) -> BpeModel {
    let source = ModelSource::File {
        name: "test".into(),
        sha256: String::new(),
    };
    BpeModel::from_merges(source, split, specials, identity_bytes(), merges.to_vec())
}

/// Random merges over a small alphabet: each merge joins two existing ids, never the
/// same pair twice; biased toward recent ids so long tokens appear.
pub fn random_merges(rng: &mut Rng, alphabet: &[u8], count: usize) -> Vec<(u32, u32)> {
    let mut merges = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut ids: Vec<u32> = alphabet.iter().map(|&b| b as u32).collect();
    let mut tries = 0;
    while merges.len() < count && tries < count * 20 {
        tries += 1;
        let pick = |rng: &mut Rng, ids: &[u32]| {
            if rng.below(3) == 0 {
                ids[ids.len() - 1 - rng.below(ids.len().min(4))]
            } else {
                ids[rng.below(ids.len())]
            }
        };
        let pair = (pick(rng, &ids), pick(rng, &ids));
        if seen.insert(pair) {
            merges.push(pair);
            ids.push(255 + merges.len() as u32);
        }
    }
    merges
}

/// Random bytes: mostly from `alphabet`, with runs and the occasional arbitrary byte
/// (so invalid UTF-8 appears).
pub fn random_text(rng: &mut Rng, alphabet: &[u8], max_len: usize) -> Vec<u8> {
    let len = rng.below(max_len + 1);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        match rng.below(10) {
            0 => {
                let b = alphabet[rng.below(alphabet.len())];
                let run = rng.below(40);
                out.extend(std::iter::repeat_n(b, run));
            }
            1 => out.push(rng.below(256) as u8),
            _ => out.push(alphabet[rng.below(alphabet.len())]),
        }
    }
    out.truncate(len);
    out
}

/// The seed's `encode`, transliterated: get_stats, min by merge id, merge pass.
pub fn naive_encode(model: &BpeModel, bytes: &[u8]) -> Vec<u32> {
    let mut ids: Vec<u32> = bytes
        .iter()
        .map(|&b| model.base_id_of_byte[b as usize])
        .collect();
    while ids.len() >= 2 {
        // get_stats keeps first-appearance order; min returns the first minimum.
        let mut stats: Vec<(u32, u32)> = Vec::new();
        for w in ids.windows(2) {
            if !stats.contains(&(w[0], w[1])) {
                stats.push((w[0], w[1]));
            }
        }
        let rank = |p: &(u32, u32)| model.merge_ids.get(p).copied().unwrap_or(u32::MAX);
        let mut pair = stats[0];
        for p in &stats {
            if rank(p) < rank(&pair) {
                pair = *p;
            }
        }
        let Some(&idx) = model.merge_ids.get(&pair) else {
            break;
        };
        let mut new = Vec::with_capacity(ids.len());
        let mut i = 0;
        while i < ids.len() {
            if i + 1 < ids.len() && (ids[i], ids[i + 1]) == pair {
                new.push(idx);
                i += 2;
            } else {
                new.push(ids[i]);
                i += 1;
            }
        }
        ids = new;
    }
    ids
}

/// tiktoken's `byte_pair_merge` over a rank map, with its whole-piece shortcut.
pub fn naive_tiktoken(ranks: &AHashMap<Vec<u8>, u32>, piece: &[u8]) -> Vec<u32> {
    if let Some(&r) = ranks.get(piece) {
        return vec![r];
    }
    let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
    loop {
        let mut best: Option<(u32, usize)> = None;
        for i in 0..parts.len().saturating_sub(1) {
            let mut joined = parts[i].clone();
            joined.extend_from_slice(&parts[i + 1]);
            if let Some(&r) = ranks.get(&joined) {
                if best.is_none_or(|(b, _)| r < b) {
                    best = Some((r, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        let right = parts.remove(i + 1);
        parts[i].extend_from_slice(&right);
    }
    parts.iter().map(|p| ranks[p]).collect()
}

/// Naive encoding of a record with split pattern and allowed specials (longest at the
/// leftmost position), each ordinary chunk by `chunk`.
pub fn naive_record(
    model: &BpeModel,
    allowed: &[(Vec<u8>, u32)],
    text: &[u8],
    chunk: &dyn Fn(&[u8]) -> Vec<u32>,
) -> Vec<u32> {
    let mut out = Vec::new();
    let splitter = model
        .split
        .as_ref()
        .map(|s| Splitter::new(s).expect("valid pattern"));
    let ordinary = |seg: &[u8], out: &mut Vec<u32>| match &splitter {
        Some(sp) => {
            let mut chunks: Vec<Vec<u8>> = Vec::new();
            sp.split(seg, &mut |c: &[u8]| chunks.push(c.to_vec()));
            for c in chunks {
                out.extend(chunk(&c));
            }
        }
        None => {
            if !seg.is_empty() {
                out.extend(chunk(seg))
            }
        }
    };
    let mut start = 0;
    let mut i = 0;
    while i < text.len() {
        let best = allowed
            .iter()
            .filter(|(s, _)| text[i..].starts_with(s))
            .max_by_key(|(s, _)| s.len());
        if let Some((s, id)) = best {
            ordinary(&text[start..i], &mut out);
            out.push(*id);
            i += s.len();
            start = i;
        } else {
            i += 1;
        }
    }
    ordinary(&text[start..], &mut out);
    out
}

fn decode(model: &BpeModel, ids: &[u32]) -> Vec<u8> {
    let mut out = Vec::new();
    for &id in ids {
        out.extend_from_slice(model.token(id).expect("id in vocabulary"));
    }
    out
}

const ALPHABETS: &[&[u8]] = &[
    b"a",
    b"ab",
    b"abc",
    b"ab \n",
    b"aab c.\n\t",
    b"hello world, I'm 42!\n",
];

fn split_spec(name: &str) -> SplitSpec {
    SplitSpec {
        name: name.into(),
        pattern: pretokenize::preset_pattern(name).expect("preset").into(),
    }
}

/// Encodes `text` with `enc`, asserts that the ids equal `naive` (the message names
/// `what` and the text), and returns them.
fn encode_like(enc: &Encoder, text: &[u8], naive: Vec<u32>, what: &str) -> Vec<u32> {
    let mut fast = Vec::new();
    enc.encode(text, &mut fast);
    assert_eq!(
        fast,
        naive,
        "{what} text {:?}",
        String::from_utf8_lossy(text)
    );
    fast
}

#[test]
fn fast_equals_naive_seed_encode() {
    let mut rng = Rng::new(1);
    for case in 0..600 {
        let alphabet = ALPHABETS[case % ALPHABETS.len()];
        let merges = {
            let count = 1 + rng.below(60);
            random_merges(&mut rng, alphabet, count)
        };
        let split = match case % 3 {
            0 => None,
            1 => Some(split_spec("gpt4")),
            _ => Some(split_spec("gpt2")),
        };
        let model = model_from_merges(&merges, split, vec![]);
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        for _ in 0..6 {
            // Lengths around the encoder's scan/heap switch (1024 bytes) included.
            let max = match rng.below(16) {
                0 => 2500,
                1 | 2 => 400,
                _ => 40,
            };
            let text = random_text(&mut rng, alphabet, max);
            let fast = encode_like(
                &enc,
                &text,
                naive_record(&model, &[], &text, &|c| naive_encode(&model, c)),
                &format!("case {case}"),
            );
            assert_eq!(decode(&model, &fast), text);
        }
    }
}

/// The short-sequence scan packs merge id and position into one u32; vocabularies
/// too large for the widest packing use narrower ones or the heap alone, with the
/// same ids.
#[test]
fn huge_vocabularies_encode_like_naive() {
    let mut rng = Rng::new(77);
    let alphabet = b"ab";
    let merges = random_merges(&mut rng, alphabet, 40);
    for special_id in [
        None,
        Some(3_000_000),
        Some(5_000_000),
        Some(20_000_000),
        Some(100_000_000),
    ] {
        let specials = special_id
            .map(|id| {
                vec![SpecialToken {
                    text: "<|x|>".into(),
                    id,
                }]
            })
            .unwrap_or_default();
        let model = model_from_merges(&merges, None, specials);
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        for len in [
            2usize, 60, 63, 64, 65, 255, 256, 257, 1023, 1024, 1025, 3000,
        ] {
            let text: Vec<u8> = (0..len).map(|_| alphabet[rng.below(2)]).collect();
            let mut fast = Vec::new();
            enc.encode(&text, &mut fast);
            assert_eq!(fast, naive_encode(&model, &text), "{special_id:?} {len}");
        }
    }
}

#[test]
fn empty_and_one_byte_inputs() {
    let model = model_from_merges(&[(97, 97)], None, vec![]);
    let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
    let mut out = Vec::new();
    enc.encode(b"", &mut out);
    assert!(out.is_empty());
    enc.encode(b"a", &mut out);
    assert_eq!(out, [97]);
    let none = model_from_merges(&[], None, vec![]);
    let enc = Encoder::new(&none, &AllowedSpecial::None).unwrap();
    out.clear();
    enc.encode(b"\xff\x00ab", &mut out);
    assert_eq!(out, [255, 0, 97, 98]);
}

#[test]
fn seed_examples() {
    // minbpe's aaabdaaabac at 259: merges (97,97), (256,97), (257,98).
    let model = model_from_merges(&[(97, 97), (256, 97), (257, 98)], None, vec![]);
    let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
    let mut out = Vec::new();
    enc.encode(b"aaabdaaabac", &mut out);
    assert_eq!(out, [258, 100, 258, 97, 99]);
    // The seed's happily example: (104,97)->256, (256,112)->257, (257,112)->258.
    let model = model_from_merges(&[(104, 97), (256, 112), (257, 112)], None, vec![]);
    let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
    out.clear();
    enc.encode(b"happily", &mut out);
    assert_eq!(out, [258, 105, 108, 121]);
}

#[test]
fn long_sequences_equal_naive() {
    // Past the heap threshold: runs and tiny alphabets, many equal pairs.
    let mut rng = Rng::new(2);
    for case in 0..60 {
        let alphabet = ALPHABETS[case % 4];
        let merges = {
            let count = 5 + rng.below(80);
            random_merges(&mut rng, alphabet, count)
        };
        let model = model_from_merges(&merges, None, vec![]);
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        let text = random_text(&mut rng, alphabet, 3000);
        let mut fast = Vec::new();
        enc.encode(&text, &mut fast);
        assert_eq!(fast, naive_encode(&model, &text), "case {case}");
    }
}

/// Long sequences are encoded left to right in steps, each window joined to the ids
/// before it; with steps of 1 to 16 bytes nearly every byte boundary is a join, so every
/// way two tokens can meet (runs, the same token on both sides, ties, a change that
/// reaches several tokens back) is met, and must give the naive ids.
#[test]
fn steps_joined_at_every_boundary_equal_naive() {
    let mut rng = Rng::new(31);
    let mut compared = 0;
    for case in 0..1500 {
        let alphabet = ALPHABETS[case % ALPHABETS.len()];
        let merges = {
            let count = 1 + rng.below(if case % 5 == 0 { 200 } else { 40 });
            random_merges(&mut rng, alphabet, count)
        };
        let model = model_from_merges(&merges, None, vec![]);
        let step = [1, 2, 3, 4, 5, 8, 16][case % 7];
        let enc = Encoder::new(&model, &AllowedSpecial::None)
            .unwrap()
            .with_step(step);
        for _ in 0..4 {
            let max = if rng.below(8) == 0 { 600 } else { 90 };
            let text = random_text(&mut rng, alphabet, max);
            encode_like(
                &enc,
                &text,
                naive_encode(&model, &text),
                &format!("case {case} steps of {step}"),
            );
            compared += usize::from(text.len() > 2 * step);
        }
    }
    assert!(
        compared > 4000,
        "only {compared} texts long enough for steps"
    );
}

/// Runs of one byte, where a change at the right end moves every token after it (the
/// tokens fall into another phase), at lengths around every threshold: the steps and
/// twice them, the scan's limit (1024 bytes), and long runs (which must not take
/// quadratic time: the naive encoder is fast on them, one pass per merge).
#[test]
fn runs_of_one_byte_in_steps_equal_naive() {
    let mut merges = vec![(97u32, 97u32)];
    for k in 0..12 {
        merges.push((256 + k, 256 + k));
    }
    merges.push((97, 256));
    let model = model_from_merges(&merges, None, vec![]);
    let mut naive: std::collections::HashMap<usize, Vec<u32>> = Default::default();
    for step in [1, 3, 64, 255, 256, 257, 512] {
        let enc = Encoder::new(&model, &AllowedSpecial::None)
            .unwrap()
            .with_step(step);
        let mut lengths = vec![1usize, 2, 3, 5, 1000, 1023, 1024, 1025, 4097, 200_001];
        for m in [step, 2 * step, 3 * step] {
            lengths.extend([m - 1, m, m + 1]);
        }
        for len in lengths {
            let text = vec![b'a'; len];
            let mut fast = Vec::new();
            enc.encode(&text, &mut fast);
            let expected = naive
                .entry(len)
                .or_insert_with(|| naive_encode(&model, &text));
            assert!(fast == *expected, "steps {step} len {len}");
        }
    }
}

/// A random rank table: tokens from random merges (distinct bytes), ranks shuffled
/// except that a token's rank is above its parts' ranks only sometimes, and the 256
/// bytes permuted.
fn random_rank_file(rng: &mut Rng, alphabet: &[u8]) -> (Vec<u8>, AHashMap<Vec<u8>, u32>) {
    let merges = {
        let count = 10 + rng.below(80);
        random_merges(rng, alphabet, count)
    };
    rank_file_of_merges(rng, &merges)
}

/// A rank table of the tokens of `merges` (each distinct one once), ranks shuffled
/// with one gap: the bytes permuted, a token's rank above its parts' only sometimes.
pub fn rank_file_of_merges(
    rng: &mut Rng,
    merges: &[(u32, u32)],
) -> (Vec<u8>, AHashMap<Vec<u8>, u32>) {
    let base = model_from_merges(merges, None, vec![]);
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for id in 0..base.vocab_size() as u32 {
        let t = base.token(id).unwrap().to_vec();
        if seen.insert(t.clone()) {
            tokens.push(t);
        }
    }
    // Shuffle the order (ranks) freely: tiktoken's algorithm needs no monotonicity.
    for i in (1..tokens.len()).rev() {
        let j = rng.below(i + 1);
        tokens.swap(i, j);
    }
    let mut file = Vec::new();
    let mut ranks = AHashMap::new();
    let gap = rng.below(tokens.len());
    for (i, t) in tokens.iter().enumerate() {
        // One rank gap, as p50k_base has.
        let rank = if i >= gap { i as u32 + 1 } else { i as u32 };
        file.extend_from_slice(base64(t).as_bytes());
        file.extend_from_slice(format!(" {rank}\n").as_bytes());
        ranks.insert(t.clone(), rank);
    }
    (file, ranks)
}

pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = c.len();
        let v = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= n {
                s.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[test]
fn rank_tables_equal_naive_tiktoken() {
    let mut rng = Rng::new(3);
    for case in 0..300 {
        let alphabet = ALPHABETS[case % ALPHABETS.len()];
        let (file, ranks) = random_rank_file(&mut rng, alphabet);
        let split = if case % 2 == 0 {
            None
        } else {
            Some(split_spec("cl100k"))
        };
        let source = ModelSource::File {
            name: "test.tiktoken".into(),
            sha256: String::new(),
        };
        let model = tiktoken::load_rank_file(&file, source, split, vec![]).unwrap();
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        for _ in 0..6 {
            let max = if rng.below(8) == 0 { 300 } else { 30 };
            let text = random_text(&mut rng, alphabet, max);
            let fast = encode_like(
                &enc,
                &text,
                naive_record(&model, &[], &text, &|c| naive_tiktoken(&ranks, c)),
                &format!("case {case}"),
            );
            assert_eq!(decode(&model, &fast), text);
        }
    }
}

/// Rank tables whose merged tokens' ids do not fit the flat pair table's slots (ranks
/// from 3,000,000, past 2^21): the pairs go through the per-thread pair cache, with
/// tiktoken's ids (its algorithm run naively).
#[test]
fn rank_tables_past_the_pair_slots_equal_naive_tiktoken() {
    let mut rng = Rng::new(41);
    for case in 0..40 {
        let alphabet = ALPHABETS[case % ALPHABETS.len()];
        let (_, ranks) = random_rank_file(&mut rng, alphabet);
        // The same order of merges, the merged tokens' ranks moved up.
        let ranks: AHashMap<Vec<u8>, u32> = ranks
            .into_iter()
            .map(|(bytes, rank)| {
                let far = if bytes.len() > 1 {
                    rank + 3_000_000
                } else {
                    rank
                };
                (bytes, far)
            })
            .collect();
        let mut far = Vec::new();
        for (bytes, rank) in &ranks {
            far.extend_from_slice(format!("{} {rank}\n", base64(bytes)).as_bytes());
        }
        let source = ModelSource::File {
            name: "far.tiktoken".into(),
            sha256: String::new(),
        };
        let model = tiktoken::load_rank_file(&far, source, None, vec![]).unwrap();
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        assert!(!enc.has_flat_pairs(), "case {case}");
        for _ in 0..6 {
            let text = random_text(&mut rng, alphabet, 200);
            encode_like(
                &enc,
                &text,
                naive_record(&model, &[], &text, &|c| naive_tiktoken(&ranks, c)),
                &format!("case {case}"),
            );
        }
    }
}

/// Rank tables, ranks in any order, in steps of 1 to 16 bytes: each join is checked by
/// encoding the two tokens' bytes again, which must give tiktoken's ids (its algorithm
/// run naively on the whole sequence).
#[test]
fn rank_tables_in_steps_equal_naive_tiktoken() {
    let mut rng = Rng::new(5);
    let mut compared = 0;
    for case in 0..400 {
        let alphabet = ALPHABETS[case % ALPHABETS.len()];
        let (file, ranks) = random_rank_file(&mut rng, alphabet);
        let source = ModelSource::File {
            name: "test.tiktoken".into(),
            sha256: String::new(),
        };
        let model = tiktoken::load_rank_file(&file, source, None, vec![]).unwrap();
        let step = [1, 2, 3, 5, 8, 16][case % 6];
        let enc = Encoder::new(&model, &AllowedSpecial::None)
            .unwrap()
            .with_step(step);
        for _ in 0..4 {
            let max = if rng.below(6) == 0 { 400 } else { 80 };
            let text = random_text(&mut rng, alphabet, max);
            encode_like(
                &enc,
                &text,
                naive_record(&model, &[], &text, &|c| naive_tiktoken(&ranks, c)),
                &format!("case {case} steps of {step}"),
            );
            compared += usize::from(text.len() > 2 * step);
        }
    }
    assert!(
        compared > 1000,
        "only {compared} texts long enough for steps"
    );
}

/// The built-in vocabularies on chunks without a split point (random lowercase letters,
/// runs of one byte, a repeated pair, random bytes and text without spaces for
/// `--split none`), at lengths around the step thresholds and the scan's limit, in
/// steps of several sizes: the same ids as the whole-sequence encoder (which the tests
/// above hold to tiktoken's algorithm, and the goldens to tiktoken itself).
#[test]
fn builtins_on_long_chunks_equal_the_whole_sequence_encoder() {
    let mut rng = Rng::new(6);
    let text = "Nel mezzo del cammin di nostra vita mi ritrovai per una selva oscura, \
                ché la diritta via era smarrita. Ахкакадуро тяжко говорить! 東京都は日本の首都です。";
    for name in ["o200k_base", "cl100k_base"] {
        let model = crate::model::builtin(name).unwrap();
        let mut none = model.clone();
        none.split = None;
        let lengths = [33usize, 511, 512, 513, 1023, 1024, 1025, 1537, 5000, 30_000];
        for len in lengths {
            let letters: Vec<u8> = (0..len).map(|_| b'a' + rng.below(26) as u8).collect();
            let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            let words: Vec<u8> = text
                .bytes()
                .filter(|&b| b != b' ')
                .cycle()
                .take(len)
                .collect();
            let inputs: [(&BpeModel, Vec<u8>); 7] = [
                (&model, letters.clone()),
                (&model, vec![b'a'; len]),
                (&model, vec![b' '; len]),
                (&model, b"ab".repeat(len / 2)),
                (&none, letters),
                (&none, bytes),
                (&none, words),
            ];
            for (m, input) in &inputs {
                let whole = Encoder::new(m, &AllowedSpecial::None).unwrap().with_step(0);
                let mut expected = Vec::new();
                whole.encode(input, &mut expected);
                for step in [1, 7, 64, 256, 512] {
                    let enc = Encoder::new(m, &AllowedSpecial::None)
                        .unwrap()
                        .with_step(step);
                    let mut got = Vec::new();
                    enc.encode(input, &mut got);
                    assert!(
                        got == expected,
                        "{name} split {:?} len {len} steps of {step}: {:?}",
                        m.split.as_ref().map(|s| &s.name),
                        String::from_utf8_lossy(&input[..input.len().min(40)])
                    );
                }
            }
        }
    }
}

/// Every two-byte chunk of the built-in vocabularies (all 65,536 byte pairs, each
/// followed by ` x`, a two-byte chunk of its own): the encoder's ids equal tiktoken's
/// algorithm run naively over the vocabulary's ranks, chunk by chunk; and those of
/// random merge lists with o200k_base's split, on short random texts of their letters
/// and spaces, equal the seed's `encode` run naively.
#[test]
fn two_byte_chunks_equal_naive() {
    for name in crate::model::BUILTINS {
        let model = crate::model::builtin(name).unwrap();
        let ranks: AHashMap<Vec<u8>, u32> = (0..model.vocab_size() as u32)
            .filter_map(|id| Some((model.token(id)?.to_vec(), id)))
            .collect();
        let splitter = Splitter::new(model.split.as_ref().unwrap()).unwrap();
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        let (mut got, mut expected) = (Vec::new(), Vec::new());
        for pair in 0..1u32 << 16 {
            let text = [(pair >> 8) as u8, pair as u8, b' ', b'x'];
            got.clear();
            enc.encode(&text, &mut got);
            expected.clear();
            splitter.split(&text, &mut |c: &[u8]| {
                expected.extend(naive_tiktoken(&ranks, c))
            });
            assert_eq!(got, expected, "{name} {text:?}");
        }
    }
    let mut rng = Rng::new(22);
    for case in 0..40 {
        let count = 1 + rng.below(20);
        let merges = random_merges(&mut rng, b"ab c", count);
        let model = model_from_merges(&merges, Some(split_spec("o200k")), vec![]);
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        for _ in 0..20 {
            let text = random_text(&mut rng, b"ab c", 12);
            encode_like(
                &enc,
                &text,
                naive_record(&model, &[], &text, &|c| naive_encode(&model, c)),
                &format!("case {case}"),
            );
        }
    }
}

#[test]
fn special_tokens_allowed_and_not() {
    let mut rng = Rng::new(4);
    let alphabet: &[u8] = b"<|>ab e";
    for case in 0..200 {
        let merges = {
            let count = 1 + rng.below(40);
            random_merges(&mut rng, alphabet, count)
        };
        let n = 256 + merges.len() as u32;
        let specials = vec![
            SpecialToken {
                text: "<|e|>".into(),
                id: n,
            },
            SpecialToken {
                text: "<|e|>b".into(),
                id: n + 1,
            },
            SpecialToken {
                text: "ab".into(),
                id: n + 2,
            },
        ];
        let split = (case % 2 == 1).then(|| split_spec("o200k"));
        let model = model_from_merges(&merges, split, specials.clone());
        let all: Vec<(Vec<u8>, u32)> = specials
            .iter()
            .map(|s| (s.text.as_bytes().to_vec(), s.id))
            .collect();
        let encs = [
            (AllowedSpecial::None, vec![]),
            (AllowedSpecial::All, all.clone()),
            (
                AllowedSpecial::Some(vec!["<|e|>".into()]),
                vec![all[0].clone()],
            ),
        ];
        for (allowed, list) in &encs {
            let enc = Encoder::new(&model, allowed).unwrap();
            for _ in 0..5 {
                let text = random_text(&mut rng, alphabet, 60);
                let mut fast = Vec::new();
                enc.encode(&text, &mut fast);
                let naive = naive_record(&model, list, &text, &|c| naive_encode(&model, c));
                assert_eq!(fast, naive, "text {:?}", String::from_utf8_lossy(&text));
                assert_eq!(decode(&model, &fast), text);
            }
        }
    }
}

#[test]
fn unknown_allowed_special_is_a_usage_error() {
    let model = model_from_merges(&[], None, vec![]);
    let err = Encoder::new(&model, &AllowedSpecial::Some(vec!["<|x|>".into()]))
        .err()
        .expect("error");
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().contains("<|x|>"), "{}", err.message());
}

#[test]
fn batch_and_whole_parallel_equal_encode() {
    let mut rng = Rng::new(5);
    for case in 0..8 {
        let alphabet: &[u8] = b"ab c\nd.Ef";
        let merges = {
            let count = 50 + rng.below(200);
            random_merges(&mut rng, alphabet, count)
        };
        let split = match case % 3 {
            0 => None,
            1 => Some(split_spec("gpt4")),
            _ => Some(split_spec("o200k")),
        };
        let specials = vec![SpecialToken {
            text: "E\n".into(),
            id: 256 + merges.len() as u32,
        }];
        let model = model_from_merges(&merges, split, specials);
        let allowed = if case % 2 == 0 {
            AllowedSpecial::All
        } else {
            AllowedSpecial::None
        };
        let enc = Encoder::new(&model, &allowed).unwrap();
        // Big enough for several pieces (~1 MB each).
        let mut text = Vec::new();
        while text.len() < 2_200_000 {
            text.extend(random_text(&mut rng, alphabet, 2000));
        }
        let mut one = Vec::new();
        enc.encode(&text, &mut one);
        for threads in [1, 2, 3] {
            let mut par = Vec::new();
            enc.encode_whole_parallel(&text, threads, &mut par);
            assert_eq!(par, one, "case {case} threads {threads}");
        }
        let records: Vec<&[u8]> = text.split(|&b| b == b'\n').take(3000).collect();
        let (mut ids, mut ends) = (Vec::new(), Vec::new());
        enc.encode_records(&records, &mut ids, &mut ends);
        assert_eq!(ends.len(), records.len());
        let mut start = 0;
        for (r, &end) in records.iter().zip(&ends) {
            let mut single = Vec::new();
            enc.encode(r, &mut single);
            assert_eq!(&single[..], &ids[start..end]);
            start = end;
        }
    }
}

#[test]
fn random_bytes_round_trip() {
    let mut rng = Rng::new(6);
    let all: Vec<u8> = (0..=255).collect();
    for case in 0..40 {
        let merges = random_merges(&mut rng, &all, 300);
        let split = (case % 2 == 1).then(|| split_spec("cl100k"));
        let model = model_from_merges(&merges, split, vec![]);
        let enc = Encoder::new(&model, &AllowedSpecial::None).unwrap();
        let text: Vec<u8> = (0..rng.below(5000)).map(|_| rng.below(256) as u8).collect();
        let mut ids = Vec::new();
        enc.encode(&text, &mut ids);
        assert_eq!(decode(&model, &ids), text);
    }
}
