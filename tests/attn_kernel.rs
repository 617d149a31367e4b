//! attn: the fast kernels against naive f64 twins (materialised softmax), on seeded
//! random shapes; and the library stage against the seed's printed tables.

use crate::common::Rng;
use toksuite::attn::kernel::{self, Shape, View};
use toksuite::attn::{Attn, DrawSpec, NormalFill, Options, Precision, PrintKind, Weights};

fn uniform(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
        .collect()
}

/// softmax(scale * q k^T, masked) v per head, in f64, the whole matrix at once.
fn naive(shape: &Shape, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    let (h, dk, dv, t, s) = (shape.heads, shape.d_kq, shape.d_v, shape.t, shape.s);
    let mut out = vec![0f64; t * h * dv];
    for hi in 0..h {
        for i in 0..t {
            let visible = if shape.causal { (i + 1).min(s) } else { s };
            let sc: Vec<f64> = (0..visible)
                .map(|j| {
                    (0..dk)
                        .map(|d| {
                            q[i * h * dk + hi * dk + d] as f64 * k[j * h * dk + hi * dk + d] as f64
                        })
                        .sum::<f64>()
                        * shape.scale as f64
                })
                .collect();
            let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..dv {
                out[i * h * dv + hi * dv + c] = (0..visible)
                    .map(|j| e[j] * v[j * h * dv + hi * dv + c] as f64)
                    .sum::<f64>()
                    / sum;
            }
        }
    }
    out
}

#[test]
fn kernel_matches_naive_on_random_shapes() {
    let mut rng = Rng::new(2024);
    let mut pairs = 0usize;
    for case in 0..60 {
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
        let budget = 40_000_000 / (heads * (dk + dv));
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
        let amp = [0.1, 1.0, 3.0][case % 3];
        let q = uniform(&mut rng, t * heads * dk, amp);
        let k = uniform(&mut rng, s * heads * dk, amp);
        let v = uniform(&mut rng, s * heads * dv, 1.0);
        let mut out = vec![0f32; t * heads * dv];
        let threads = 1 + case % 2;
        kernel::attention(
            &shape,
            view(&q, heads * dk),
            view(&k, heads * dk),
            view(&v, heads * dv),
            &mut out,
            threads,
        );
        let want = naive(&shape, &q, &k, &v);
        // Normwise relative error per output row and head: entries that cancel to near
        // zero are measured against the size of their row.
        for (idx, (g, w)) in out.chunks(dv).zip(want.chunks(dv)).enumerate() {
            let norm = w.iter().fold(0f64, |m, x| m.max(x.abs()));
            for (&got, &w) in g.iter().zip(w) {
                let err = (got as f64 - w).abs();
                assert!(
                    err <= 1e-5 * norm + 1e-12,
                    "case {case} {shape:?}: row/head {idx}: {got} vs {w} (row norm {norm})"
                );
            }
        }
        pairs += t * s;
    }
    assert!(pairs > 100_000);
}

fn view(data: &[f32], stride: usize) -> View<'_> {
    View {
        data,
        stride,
        offset: 0,
    }
}

#[test]
fn matmul_matches_naive() {
    let mut rng = Rng::new(7);
    for _ in 0..30 {
        let t = 1 + rng.below(150) as usize;
        let d = 1 + rng.below(70) as usize;
        let n = 1 + rng.below(300) as usize;
        let x = uniform(&mut rng, t * d, 1.0);
        let w = uniform(&mut rng, d * n, 1.0);
        let got = kernel::matmul(&x, t, d, &w, n, 2);
        for i in 0..t {
            for j in 0..n {
                let want: f64 = (0..d)
                    .map(|k| x[i * d + k] as f64 * w[k * n + j] as f64)
                    .sum();
                assert!((got[i * n + j] as f64 - want).abs() < 1e-5 * (1.0 + want.abs()));
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
    let a: Vec<u32> = w.embed(&ids).unwrap().iter().map(|x| x.to_bits()).collect();
    let b: Vec<u32> = back
        .embed(&ids)
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
