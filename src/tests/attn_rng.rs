//! attn: the PyTorch-compatible generator against bit patterns verified with real PyTorch
//! (project note pytorch-rng.md, §1.2-§1.9).

use crate::attn::{LazyEmbedding, NormalFill, TorchRng};

#[test]
fn mt19937_check_values() {
    let mut r = TorchRng::new(5489);
    assert_eq!(
        [r.next_u32(), r.next_u32(), r.next_u32()],
        [3499211612, 581869302, 3890346734]
    );
    let mut r = TorchRng::new(123);
    assert_eq!(
        [r.next_u32(), r.next_u32(), r.next_u32(), r.next_u32()],
        [2991312382, 3062119789, 1228959102, 1840268610]
    );
}

#[test]
fn rand_f32_bits() {
    let mut r = TorchRng::new(123);
    let bits: Vec<u32> = r.rand(4).iter().map(|x| x.to_bits()).collect();
    assert_eq!(bits, [0x3e979bfc, 0x3f043d6d, 0x3e80dafc, 0x3f304542]);
}

#[test]
fn skip_matches_drawing() {
    for n in [0u64, 1, 622, 623, 624, 625, 1247, 1248, 1249, 5000, 150_000] {
        let mut a = TorchRng::new(7);
        let mut b = TorchRng::new(7);
        for _ in 0..n {
            a.next_u32();
        }
        b.skip(n);
        for _ in 0..1300 {
            assert_eq!(a.next_u32(), b.next_u32(), "after skipping {n}");
        }
    }
    // Skips from the middle of the stream, in several steps.
    let mut a = TorchRng::new(9);
    let mut b = TorchRng::new(9);
    for step in [3u64, 700, 0, 624, 1, 2000] {
        for _ in 0..step {
            a.next_u32();
        }
        b.skip(step);
        assert_eq!(a.next_u32(), b.next_u32());
    }
}

const ROWS_AVX2: [[u32; 3]; 6] = [
    [0x3eacbbc9, 0xbe360b3b, 0xbe9b67f8],
    [0xbf1687f2, 0x3eb27c61, 0x3f290c1b],
    [0xbe60e8af, 0xbec2228c, 0x3f446121],
    [0xbf98a3e8, 0x3f32c731, 0xbfb471cd],
    [0x3e37af4a, 0x3ff29436, 0x3efdab26],
    [0x3e89d465, 0xbd9dbcc9, 0xbf829ed3],
];
const ROWS_SCALAR: [[u32; 3]; 6] = [
    [0x3eacbbc8, 0xbe360b3b, 0xbe9b67f6],
    [0xbf1687fc, 0x3eb27c61, 0x3f290c1b],
    [0xbe60e8ac, 0xbec2228a, 0x3f446121],
    [0xbf98a3e8, 0x3f32c732, 0xbfb471ca],
    [0x3e37af4a, 0x3ff29436, 0x3efdab26],
    [0x3e89d468, 0xbd9dbcc9, 0xbf829ed8],
];

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn embedding_rows_both_flavours_bit_exact() {
    for (fill, rows) in [
        (NormalFill::Avx2, ROWS_AVX2),
        (NormalFill::Scalar, ROWS_SCALAR),
    ] {
        let emb = LazyEmbedding::new(123, 50_000, 3, fill);
        let want: Vec<u32> = rows.iter().flatten().copied().collect();
        assert_eq!(bits(&emb.rows(&[0, 1, 2, 3, 4, 5], 1)), want, "{fill:?}");
        let full = emb.full();
        assert_eq!(full.len(), 150_000);
        assert_eq!(bits(&full[..18]), want, "{fill:?} full");
    }
}

#[test]
fn lazy_rows_equal_full_table() {
    // Sizes with and without a tail block, dims that straddle blocks.
    for (vocab, dim) in [
        (50usize, 3usize),
        (7, 5),
        (33, 7),
        (100, 16),
        (9, 2),
        (17, 1),
    ] {
        for fill in [NormalFill::Scalar, NormalFill::Avx2] {
            let emb = LazyEmbedding::new(42, vocab, dim, fill);
            let full = emb.full();
            let ids: Vec<u32> = (0..vocab as u32)
                .rev()
                .chain([0, 0, vocab as u32 - 1])
                .collect();
            // Twice: the second call reads what the first kept (and draws the rest).
            let half: Vec<u32> = ids.iter().step_by(2).copied().collect();
            for ids in [&half, &ids] {
                let got = emb.rows(ids, 2);
                for (k, &id) in ids.iter().enumerate() {
                    let id = id as usize;
                    assert_eq!(
                        bits(&got[k * dim..(k + 1) * dim]),
                        bits(&full[id * dim..(id + 1) * dim]),
                        "vocab {vocab} dim {dim} id {id}"
                    );
                }
            }
        }
    }
}

#[test]
fn tail_block_consumes_sixteen_fresh_draws() {
    // normal_ on 20 elements draws 20 + 16 uniforms; the next rand continues at draw 37.
    let mut a = TorchRng::new(123);
    let v = a.normal_f32(20, NormalFill::Avx2);
    assert_eq!(v.len(), 20);
    let mut b = TorchRng::new(123);
    b.skip(36);
    assert_eq!(a.uniform_f32().to_bits(), b.uniform_f32().to_bits());
    // The last 16 come from the fresh draws 20..36 alone.
    let mut c = TorchRng::new(123);
    c.skip(20);
    let mut d: [f32; 16] = std::array::from_fn(|_| c.uniform_f32());
    crate::attn::rng::transform16(&mut d, NormalFill::Avx2);
    assert_eq!(bits(&v[4..]), bits(&d));
}

#[test]
fn small_tensors_take_the_double_path_with_cache() {
    // Below 16 elements: pairs of doubles, cosine sample then the cached sine sample.
    let mut a = TorchRng::new(123);
    let v = a.normal_f32(3, NormalFill::Scalar);
    let mut b = TorchRng::new(123);
    let w: Vec<f32> = (0..3).map(|_| b.normal_scalar() as f32).collect();
    assert_eq!(bits(&v), bits(&w));
    // Four draws give two normals; the third needs four more.
    let mut c = TorchRng::new(123);
    c.skip(8);
    assert_eq!(a.next_u32(), c.next_u32());
}

/// Row `id` of `nn.Embedding(vocab, dim)` (no tail block) by a plain walk.
fn row_by_walking(seed: u64, id: u64, dim: u64, fill: NormalFill) -> Vec<f32> {
    let (s, e) = (id * dim, (id + 1) * dim);
    (s / 16..e.div_ceil(16))
        .flat_map(|b| {
            let mut rng = TorchRng::new(seed);
            rng.skip(16 * b);
            let mut d: [f32; 16] = std::array::from_fn(|_| rng.uniform_f32());
            crate::attn::rng::transform16(&mut d, fill);
            (16 * b..16 * b + 16).zip(d)
        })
        .filter(|&(i, _)| (s..e).contains(&i))
        .map(|(_, x)| x)
        .collect()
}

#[test]
fn far_ids_are_walked_to_once_per_run() {
    // A table too large to keep whole (6.4e9 numbers): blocks are kept by index.
    let fill = NormalFill::Avx2;
    let emb = LazyEmbedding::new(5, 1 << 31, 3, fill);
    let far = 60_000_000u32; // 1.8e8 draws into the stream
    let a = emb.rows(&[far, 1], 1);
    let walked = emb.draws_walked();
    assert!(walked >= 179_999_000, "{walked}");
    assert_eq!(bits(&a[..3]), bits(&row_by_walking(5, far as u64, 3, fill)));
    // Records after it start from the states kept on the way, not from the seed.
    for k in 1..4u32 {
        let b = emb.rows(&[2, far + 1000 * k, far], 1);
        assert_eq!(bits(&b[6..]), bits(&a[..3]));
        let near = row_by_walking(5, (far + 1000 * k) as u64, 3, fill);
        assert_eq!(bits(&b[3..6]), bits(&near));
    }
    // Each at most the spacing of kept states (2^20 draws) from one.
    let again = emb.draws_walked() - walked;
    assert!(again < 3 << 20, "walked {again} draws again");
    // A whole table keeps its rows too.
    let emb = LazyEmbedding::new(5, 4_000_000, 16, fill);
    emb.rows(&[3_999_999], 1);
    let walked = emb.draws_walked();
    emb.rows(&[3_999_999, 3_999_998], 1);
    assert!(emb.draws_walked() - walked < 2 << 20);
}
