//! The built-in vocabularies: tiktoken's GPT rank files (`assets/*.tiktoken`) with
//! tiktoken's exact split patterns and special tokens (`tiktoken_ext/openai_public.py`),
//! compiled into the binaries by `build.rs` as ready tables ([`super::tables`]) and read
//! in place.
//!
//! Kept decisions, each with its figure:
//! - Tables built at compile time: parsing o200k_base's rank file (base64, then every
//!   split of every token looked up) takes ~200 ms, which every `echo hi | bpe-encode`
//!   would pay.
//! - The pairs as a ready hash table, read in place: filling a map with o200k_base's
//!   446k pairs took ~22 of the ~34 ms of `echo hi | bpe-encode`.
//! - Token bytes and offsets borrowed from the binary: copying them (2.2 MB, ~550 page
//!   faults) took ~1 of the ~2.6 ms of `bpe-encode` on an empty input.

use std::borrow::Cow;

use super::tables::BlobLayout;
use super::{BpeModel, ModelSource, PairIds, PairTable, SpecialToken};
use crate::blob::{include_blob, le_words};
use crate::pretokenize::{self, SplitSpec};

/// The names of the built-in models, the default first.
pub(crate) const BUILTINS: &[&str] = &["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

// The rank files as build.rs converted them (layout: `super::tables`).
static O200K_BASE: &[u8] = include_blob!("o200k_base.bin");
static CL100K_BASE: &[u8] = include_blob!("cl100k_base.bin");
static P50K_BASE: &[u8] = include_blob!("p50k_base.bin");
static R50K_BASE: &[u8] = include_blob!("r50k_base.bin");

// The encoder's pair Bloom filters of the same (`super::tables::pair_bloom`).
static O200K_BLOOM: &[u8] = include_blob!("o200k_base.bloom");
static CL100K_BLOOM: &[u8] = include_blob!("cl100k_base.bloom");
static P50K_BLOOM: &[u8] = include_blob!("p50k_base.bloom");
static R50K_BLOOM: &[u8] = include_blob!("r50k_base.bloom");

// The decoder's slot tables of the same (`super::tables::write_decode_slots`).
static O200K_SLOTS: &[u8] = include_blob!("o200k_base.slots");
static CL100K_SLOTS: &[u8] = include_blob!("cl100k_base.slots");
static P50K_SLOTS: &[u8] = include_blob!("p50k_base.slots");
static R50K_SLOTS: &[u8] = include_blob!("r50k_base.slots");

// The encoder's units of the same (`super::units`).
static O200K_UNITS: &[u8] = include_blob!("o200k_base.units");
static CL100K_UNITS: &[u8] = include_blob!("cl100k_base.units");
static P50K_UNITS: &[u8] = include_blob!("p50k_base.units");
static R50K_UNITS: &[u8] = include_blob!("r50k_base.units");

/// The units of the built-in model `name` as build.rs found them; `None` for any other
/// name.
pub(crate) fn builtin_units(name: &str) -> Option<super::units::UnitTables> {
    super::units::UnitTables::from_bytes(match name {
        "o200k_base" => O200K_UNITS,
        "cl100k_base" => CL100K_UNITS,
        "p50k_base" => P50K_UNITS,
        "r50k_base" => R50K_UNITS,
        _ => return None,
    })
}

/// The decoder's slot table of the built-in model `name`, 16 bytes per ordinary id, as
/// build.rs wrote it; `None` for any other name.
pub(crate) fn decode_slots(name: &str) -> Option<&'static [u8]> {
    Some(match name {
        "o200k_base" => O200K_SLOTS,
        "cl100k_base" => CL100K_SLOTS,
        "p50k_base" => P50K_SLOTS,
        "r50k_base" => R50K_SLOTS,
        _ => return None,
    })
}

const ENDOFTEXT: &str = "<|endoftext|>";
const FIM_PREFIX: &str = "<|fim_prefix|>";
const FIM_MIDDLE: &str = "<|fim_middle|>";
const FIM_SUFFIX: &str = "<|fim_suffix|>";
const ENDOFPROMPT: &str = "<|endofprompt|>";

/// The built-in model `name` (one of [`BUILTINS`]) with tiktoken's split pattern and
/// special tokens, or `None` for any other name.
pub(crate) fn builtin(name: &str) -> Option<BpeModel> {
    type Builtin = (&'static str, &'static [u8], &'static [u8], &'static str);
    let ((name, bytes, bloom, split), specials): (Builtin, &[(&str, u32)]) = match name {
        "o200k_base" => (
            ("o200k_base", O200K_BASE, O200K_BLOOM, "o200k"),
            &[(ENDOFTEXT, 199_999), (ENDOFPROMPT, 200_018)],
        ),
        "cl100k_base" => (
            ("cl100k_base", CL100K_BASE, CL100K_BLOOM, "cl100k"),
            &[
                (ENDOFTEXT, 100_257),
                (FIM_PREFIX, 100_258),
                (FIM_MIDDLE, 100_259),
                (FIM_SUFFIX, 100_260),
                (ENDOFPROMPT, 100_276),
            ],
        ),
        "p50k_base" => (
            ("p50k_base", P50K_BASE, P50K_BLOOM, "p50k"),
            &[(ENDOFTEXT, 50_256)],
        ),
        "r50k_base" => (
            ("r50k_base", R50K_BASE, R50K_BLOOM, "r50k"),
            &[(ENDOFTEXT, 50_256)],
        ),
        _ => return None,
    };
    let pattern = pretokenize::preset_pattern(split)?;
    let split = SplitSpec {
        name: split.to_string(),
        pattern: pattern.to_string(),
    };
    let specials = specials
        .iter()
        .map(|&(text, id)| SpecialToken {
            text: text.to_string(),
            id,
        })
        .collect();
    from_blob(
        bytes,
        Some(bloom),
        ModelSource::Builtin(name),
        split,
        specials,
    )
}

/// Reads a blob written by build.rs; `None` if it is malformed (it never is: the tests
/// compare every built-in with a parse of its rank file).
fn from_blob(
    blob: &'static [u8],
    bloom: Option<&'static [u8]>,
    source: ModelSource,
    split: SplitSpec,
    specials: Vec<SpecialToken>,
) -> Option<BpeModel> {
    let word = |i: usize| -> Option<u32> {
        let b = blob.get(4 * i..4 * i + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let n = word(0)? as usize;
    let bits = word(n + 259).filter(|&b| b < 40)?;
    let layout = BlobLayout::of(n, bits);
    let mut base_id_of_byte = [0u32; 256];
    base_id_of_byte.copy_from_slice(&le_words(
        blob.get(layout.base..layout.offsets)?,
        u32::from_le_bytes,
    )?);
    let token_offsets = le_words(
        blob.get(layout.offsets..layout.pair_count)?,
        u32::from_le_bytes,
    )?;
    let n_pairs = word(layout.pair_count / 4)? as usize;
    let mut table = PairTable::new(blob.get(layout.slots..layout.tokens)?, bits, n_pairs)?;
    if let Some(bloom) = bloom {
        table = table.with_bloom(bloom)?;
    }
    let merge_ids = PairIds::from_table(table);
    let token_bytes = Cow::Borrowed(blob.get(layout.tokens..)?);
    if token_offsets.last().copied()? as usize != token_bytes.len() {
        return None;
    }
    Some(BpeModel::from_rank_table(
        source,
        Some(split),
        specials,
        base_id_of_byte,
        merge_ids,
        token_bytes,
        token_offsets,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tiktoken::load_rank_file;
    use crate::model::tables::{
        pair_bloom, pair_bloom_bit, pair_bloom_shift, parse_rank_file, write_blob,
        write_decode_slots, RankTables, PAIR_EMPTY, PAIR_ID_BITS,
    };

    /// A blob written by build.rs's code reads back as the model a runtime parse of the
    /// same rank file gives: same ids, bytes and pairs, on small random vocabularies.
    #[test]
    fn blobs_read_back_as_the_rank_file_parses() {
        let mut below = crate::test_rng::below_usize(0x9E37_79B9);
        for case in 0..20 {
            // Every byte, then random merged tokens of two existing ones, ranks shuffled
            // by a rotation and with a gap.
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            for _ in 0..below(200) {
                let t = [
                    tokens[below(tokens.len())].clone(),
                    tokens[below(tokens.len())].clone(),
                ]
                .concat();
                if !tokens.contains(&t) {
                    tokens.push(t);
                }
            }
            let shift = below(tokens.len());
            let mut text = String::new();
            for (k, token) in tokens.iter().enumerate() {
                let rank = (k + shift) % tokens.len() + usize::from(k % 7 == 3) * 1000;
                text.push_str(&format!("{} {rank}\n", base64(token)));
            }
            let tables = parse_rank_file::<ahash::RandomState>(text.as_bytes()).unwrap();
            let blob: &'static [u8] = Box::leak(write_blob(&tables).unwrap().into_boxed_slice());
            let split = SplitSpec {
                name: "gpt2".into(),
                pattern: pretokenize::GPT2_PATTERN.into(),
            };
            let source = ModelSource::Builtin("t");
            let read = from_blob(blob, None, source.clone(), split.clone(), vec![]).unwrap();
            let parsed = load_rank_file(text.as_bytes(), source, Some(split), vec![]).unwrap();
            assert_eq!(read.base_id_of_byte, parsed.base_id_of_byte, "case {case}");
            assert_eq!(read.token_offsets, parsed.token_offsets, "case {case}");
            assert_eq!(read.token_bytes(), parsed.token_bytes(), "case {case}");
            assert_eq!(*read.merge_ids, *parsed.merge_ids, "case {case}");
        }
    }

    /// The decoder's slot tables compiled in are those of the blobs beside them: for
    /// every id, its token's bytes and length when it has 1 to 15 bytes, else zeros.
    #[test]
    fn decode_slots_hold_the_blobs_tokens() {
        for name in BUILTINS {
            let model = builtin(name).unwrap();
            let tables = RankTables {
                token_bytes: model.token_bytes().to_vec(),
                token_offsets: model.token_offsets.to_vec(),
                base_id_of_byte: model.base_id_of_byte,
                pairs: Vec::new(),
            };
            let slots = decode_slots(name).unwrap();
            assert_eq!(slots, write_decode_slots(&tables), "{name}");
            let n = model.token_offsets.len() - 1;
            assert_eq!(slots.len(), 16 * n, "{name}");
            for (id, slot) in slots.chunks_exact(16).enumerate() {
                let size = usize::from(slot[15]);
                let span = &model.token_offsets[id..id + 2];
                let token = &model.token_bytes()[span[0] as usize..span[1] as usize];
                if (1..16).contains(&token.len()) {
                    assert_eq!((&slot[..size], size), (token, token.len()), "{name} {id}");
                    assert!(slot[size..15].iter().all(|&b| b == 0), "{name} {id}");
                } else {
                    assert_eq!(slot, &[0; 16], "{name} {id}");
                }
            }
        }
        assert_eq!(decode_slots("gpt2"), None);
    }

    /// The Bloom filters compiled in are those of the pair tables beside them: every
    /// pair's bit set (no false negative), the filter's size and bits what
    /// `pair_bloom` gives at run time; a filter of the wrong size is refused.
    #[test]
    fn pair_blooms_hold_the_tables_pairs() {
        for name in BUILTINS {
            let model = builtin(name).unwrap();
            let table = model.merge_ids.table().unwrap();
            let bloom = table.bloom().unwrap();
            let count = model.merge_ids.count();
            assert_eq!(bloom, pair_bloom(table.slots(), count), "{name}");
            let shift = pair_bloom_shift(count);
            assert_eq!(64 * bloom.len(), 1 << (64 - shift), "{name}");
            let mut pairs = 0;
            for &slot in table.slots().iter().filter(|&&slot| slot != PAIR_EMPTY) {
                let bit = pair_bloom_bit(slot >> PAIR_ID_BITS, shift);
                assert!(
                    bloom[bit / 64] >> (bit % 64) & 1 == 1,
                    "{name}: slot {slot:x}"
                );
                pairs += 1;
            }
            assert_eq!(pairs, count, "{name}");
            let set: u32 = bloom.iter().map(|w| w.count_ones()).sum();
            assert!(
                (set as usize) < count,
                "{name}: {set} bits for {count} pairs"
            );
            static SHORT: [u8; 8] = [0; 8];
            assert!(table.clone().with_bloom(&SHORT).is_none(), "{name}");
        }
    }

    fn base64(bytes: &[u8]) -> String {
        const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut acc = [0u8; 3];
            acc[..chunk.len()].copy_from_slice(chunk);
            let n = u32::from(acc[0]) << 16 | u32::from(acc[1]) << 8 | u32::from(acc[2]);
            for k in 0..4 {
                if k <= chunk.len() {
                    out.push(ABC[(n >> (18 - 6 * k) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }
}
