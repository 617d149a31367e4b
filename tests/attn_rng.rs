//! attn: the PyTorch-compatible generator against bit patterns verified with real PyTorch
//! (project note pytorch-rng.md, §1.2-§1.9).

use toksuite::attn::{LazyEmbedding, NormalFill, TorchRng};

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
        assert_eq!(bits(&emb.rows(&[0, 1, 2, 3, 4, 5])), want, "{fill:?}");
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
            let got = emb.rows(&ids);
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
    toksuite::attn::rng::transform16(&mut d, NormalFill::Avx2);
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
