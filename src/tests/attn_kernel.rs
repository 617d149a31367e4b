//! attn: the fast kernels against naive f64 twins (materialised softmax), on seeded
//! random shapes; and the library stage against the seed's printed tables.

use super::Rng;
use crate::attn::kernel::{self, Shape, Simd, View};
use crate::attn::reference;
use crate::attn::{Attn, DrawSpec, NormalFill, Options, Precision, PrintKind, Weights};

fn uniform(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
        .collect()
}

/// Standard normal samples (Box-Muller in f64).
fn normal(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let u1 = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
            let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        })
        .collect()
}

/// `x (rows x d) @ w (d x n)`, each product summed in f64 and rounded once.
fn naive_matmul(x: &[f32], d: usize, w: &[f32], n: usize) -> Vec<f32> {
    x.chunks(d)
        .flat_map(|row| {
            (0..n).map(move |j| {
                row.iter()
                    .enumerate()
                    .map(|(k, &a)| a as f64 * w[k * n + j] as f64)
                    .sum::<f64>() as f32
            })
        })
        .collect()
}

/// The inputs of one kernel case.
#[derive(Clone, Copy, Debug)]
enum Data {
    /// Q, K and V uniform in (-amp, amp).
    Uniform(f32),
    /// As the seed's job makes them: N(0, 1) embeddings of width `dim` times
    /// `torch.rand` (uniform [0, 1)) projections, so scores are large (tens after
    /// scaling) and most softmax weights are zero.
    Seed(usize),
}

fn make_inputs(rng: &mut Rng, data: Data, sh: &Shape) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (h, dk, dv) = (sh.heads, sh.d_kq, sh.d_v);
    match data {
        Data::Uniform(amp) => (
            uniform(rng, sh.t * h * dk, amp),
            uniform(rng, sh.s * h * dk, amp),
            uniform(rng, sh.s * h * dv, 1.0),
        ),
        Data::Seed(dim) => {
            let w = |rng: &mut Rng, n| {
                let u = uniform(rng, dim * n, 0.5);
                u.iter().map(|x| x + 0.5).collect::<Vec<f32>>()
            };
            let (wq, wk, wv) = (w(rng, h * dk), w(rng, h * dk), w(rng, h * dv));
            let x = normal(rng, sh.t * dim);
            let y = if sh.s == sh.t {
                x.clone()
            } else {
                normal(rng, sh.s * dim)
            };
            (
                naive_matmul(&x, dim, &wq, h * dk),
                naive_matmul(&y, dim, &wk, h * dk),
                naive_matmul(&y, dim, &wv, h * dv),
            )
        }
    }
}

/// The largest error of `got` against the f64 twin, per output row and head, relative
/// to the row's largest entry (entries that cancel to near zero are measured against
/// the size of their row), over the tolerance 1e-5: at most 1 passes.
fn error_ratio(sh: &Shape, got: &[f32], want: &[f64]) -> f64 {
    let mut worst = 0f64;
    for (g, w) in got.chunks(sh.d_v).zip(want.chunks(sh.d_v)) {
        let norm = w.iter().fold(0f64, |m, x| m.max(x.abs()));
        let tol = 1e-5 * norm + 1e-12;
        for (&a, &b) in g.iter().zip(w) {
            worst = worst.max((a as f64 - b).abs() / tol);
        }
    }
    worst
}

#[test]
fn every_path_matches_the_f64_twin_and_each_other() {
    let mut rng = Rng::new(2024);
    let mut pairs = 0usize;
    let mut worst = [0f64; 2];
    for case in 0..72 {
        let t = match case % 4 {
            0 => 1 + rng.below(8) as usize,
            1 => 1 + rng.below(200) as usize,
            2 => 40 + rng.below(100) as usize,
            _ => 1 + rng.below(2000) as usize,
        };
        let heads = 1 + rng.below(8) as usize;
        let dk = 1 + rng.below(128) as usize;
        let dv = 1 + rng.below(128) as usize;
        // Keep the naive f64 work (t * s * heads * (dk + dv)) small enough to be quick.
        let budget = 30_000_000 / (heads * (dk + dv));
        let t = t.min((budget as f64).sqrt() as usize).max(1);
        let s = if case % 5 == 0 {
            1 + rng.below(300) as usize
        } else {
            t
        };
        let causal = rng.below(2) == 0;
        let shape = Shape {
            heads,
            d_kq: dk,
            d_v: dv,
            t,
            s,
            causal,
            scale: 1.0 / (dk as f32).sqrt(),
        };
        let data = match case % 4 {
            0 => Data::Seed(8 + rng.below(120) as usize),
            1 => Data::Uniform(1.0),
            2 => Data::Seed(3),
            _ => Data::Uniform([0.1, 3.0][case / 4 % 2]),
        };
        let (q, k, v) = make_inputs(&mut rng, data, &shape);
        let (qv, kv, vv) = (
            view(&q, heads * dk),
            view(&k, heads * dk),
            view(&v, heads * dv),
        );
        let want = reference::attention_f64(&shape, qv, kv, vv);
        let threads = 1 + case % 2;
        let mut outs = Vec::new();
        for simd in Simd::all() {
            let mut out = vec![0f32; t * heads * dv];
            kernel::attention(&shape, qv, kv, vv, &mut out, threads, simd);
            let ratio = error_ratio(&shape, &out, &want);
            assert!(
                ratio <= 1.0,
                "case {case} {simd:?} {data:?} {shape:?}: error {ratio} x the tolerance"
            );
            let kind = matches!(data, Data::Seed(_)) as usize;
            worst[kind] = worst[kind].max(ratio);
            outs.push(out);
        }
        // The paths against each other: within twice the tolerance, as both are
        // within it of the twin.
        let first: Vec<f64> = outs[0].iter().map(|&x| x as f64).collect();
        for o in &outs[1..] {
            let ratio = error_ratio(&shape, o, &first);
            assert!(
                ratio <= 2.0,
                "case {case}: paths differ, {ratio} x the tolerance"
            );
        }
        pairs += t * s;
    }
    assert!(pairs > 100_000);
    eprintln!(
        "worst error / tolerance: uniform {:.3}, seed-style {:.3}",
        worst[0], worst[1]
    );
}

fn view(data: &[f32], stride: usize) -> View<'_> {
    View {
        data,
        stride,
        offset: 0,
    }
}

#[test]
fn matmul_matches_naive_on_every_path() {
    let mut rng = Rng::new(7);
    for case in 0..40 {
        let t = 1 + rng.below(450) as usize;
        let d = 1 + rng.below(300) as usize;
        let n = 1 + rng.below(300) as usize;
        let x = uniform(&mut rng, t * d, 1.0);
        let w = uniform(&mut rng, d * n, 1.0);
        for simd in Simd::all() {
            let got = kernel::matmul(&x, t, d, &w, n, 1 + case % 2, simd);
            for i in 0..t {
                for j in 0..n {
                    let terms = (0..d).map(|k| x[i * d + k] as f64 * w[k * n + j] as f64);
                    let want: f64 = terms.clone().sum();
                    let size: f64 = terms.map(f64::abs).sum();
                    assert!(
                        (got[i * n + j] as f64 - want).abs() <= 1e-6 * size + 1e-30,
                        "{simd:?} {t}x{d}x{n} [{i}][{j}]: {} vs {want}",
                        got[i * n + j]
                    );
                }
            }
        }
    }
}

fn seed_stage(fill: NormalFill, print: PrintKind) -> Attn {
    let weights = Weights::draw(&DrawSpec {
        fill,
        ..DrawSpec::default()
    });
    let options = Options {
        print,
        ..Options::default()
    };
    Attn::new(weights, options).unwrap()
}

fn fmt4(v: &[f32]) -> Vec<String> {
    v.iter().map(|x| format!("{x:.4}")).collect()
}

#[test]
fn seed_walkthrough_to_every_printed_digit() {
    let stage = seed_stage(NormalFill::Scalar, PrintKind::Context);
    let x = stage.parse_record(b"[0,4,5,2,1,3]").unwrap().unwrap();
    // Embedded sentence, as printed.
    assert_eq!(
        fmt4(&x.data),
        [
            "0.3374", "-0.1778", "-0.3035", "0.1794", "1.8951", "0.4954", "0.2692", "-0.0770",
            "-1.0205", "-0.2196", "-0.3792", "0.7671", "-0.5880", "0.3486", "0.6603", "-1.1925",
            "0.6984", "-1.4097"
        ]
    );
    // omega_2 = query_2 @ keys.T, via --print scores.
    let scores = seed_stage(NormalFill::Scalar, PrintKind::Scores);
    let (s, cols) = scores.compute(&x, None).unwrap();
    assert_eq!(cols, 6);
    assert_eq!(
        fmt4(&s[6..12]),
        ["-0.6004", "3.4707", "-1.5023", "0.4991", "1.2903", "-1.3374"]
    );
    let weights = seed_stage(NormalFill::Scalar, PrintKind::Weights);
    let (w, _) = weights.compute(&x, None).unwrap();
    assert_eq!(
        fmt4(&w[6..12]),
        ["0.0386", "0.6870", "0.0204", "0.0840", "0.1470", "0.0229"]
    );
    let (c, cols) = stage.compute(&x, None).unwrap();
    assert_eq!(cols, 4);
    assert_eq!(fmt4(&c[4..8]), ["0.5313", "1.3607", "0.7891", "1.3110"]);
    let mut out = Vec::new();
    stage.write_rows(&mut out, &c, cols).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "[[-0.1564,0.1028,-0.0763,-0.0764],[0.5313,1.3607,0.7891,1.3110],\
         [-0.3542,-0.1234,-0.2627,-0.3706],[0.0071,0.3345,0.0969,0.1998],\
         [0.1008,0.4780,0.2021,0.3674],[-0.5296,-0.2799,-0.4107,-0.6006]]\n"
    );
    // x86 PyTorch's embedding gives -0.2626 at [2][2] (and the same elsewhere).
    let x86 = seed_stage(NormalFill::Avx2, PrintKind::Context);
    let xa = x86.parse_record(b"[0,4,5,2,1,3]").unwrap().unwrap();
    let (ca, _) = x86.compute(&xa, None).unwrap();
    assert_eq!(format!("{:.4}", ca[10]), "-0.2626");
}

#[test]
fn weights_round_trip_through_json() {
    let w = Weights::draw(&DrawSpec {
        vocab_size: 40,
        dim: 5,
        d_kq: 3,
        d_v: 2,
        heads: 2,
        seed: 9,
        fill: NormalFill::Avx2,
    });
    let mut text = Vec::new();
    w.write_json(&mut text).unwrap();
    let back = Weights::from_json(&text).unwrap();
    assert_eq!(back.heads, w.heads);
    assert_eq!(
        (back.vocab_size, back.dim, back.d_kq, back.d_v),
        (40, 5, 3, 2)
    );
    let ids: Vec<u32> = (0..40).collect();
    let a: Vec<u32> = w
        .embed(&ids, 1)
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    let b: Vec<u32> = back
        .embed(&ids, 2)
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(a, b);
    let opts = Options {
        precision: Precision::Shortest,
        ..Options::default()
    };
    let s1 = Attn::new(w, opts.clone()).unwrap();
    let s2 = Attn::new(back, opts).unwrap();
    let x1 = s1.parse_record(b"[3,1,4,1,5,9,2,6]").unwrap().unwrap();
    let x2 = s2.parse_record(b"[3,1,4,1,5,9,2,6]").unwrap().unwrap();
    assert_eq!(
        s1.compute(&x1, None).unwrap(),
        s2.compute(&x2, None).unwrap()
    );
}
