//! Times attn's attention kernel alone on random inputs (the figure `scripts/bench-attn.sh`
//! sets beside PyTorch's `scaled_dot_product_attention`).
//!
//! Usage: `attn-bench T HEADS D causal|full [REPEATS]`; prints `T heads d mode seconds GFLOP/s`.
#![deny(unsafe_code)]

use std::time::Instant;
use toksuite::attn::kernel::{self, Shape, View};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (t, heads, d) = (num(0, 1024), num(1, 8), num(2, 64));
    let causal = args.get(3).is_some_and(|s| s == "causal");
    let repeats = num(4, 3);
    // A small xorshift generator: inputs in [-1, 1).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let width = heads * d;
    let q: Vec<f32> = (0..t * width).map(|_| rnd()).collect();
    let k: Vec<f32> = (0..t * width).map(|_| rnd()).collect();
    let v: Vec<f32> = (0..t * width + 16).map(|_| rnd()).collect();
    let shape = Shape {
        heads,
        d_kq: d,
        d_v: d,
        t,
        s: t,
        causal,
        scale: 1.0 / (d as f32).sqrt(),
    };
    let view = |data| View {
        data,
        stride: width,
        offset: 0,
    };
    let mut out = vec![0f32; t * width];
    let threads = kernel::default_threads();
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let start = Instant::now();
        kernel::attention(&shape, view(&q), view(&k), view(&v), &mut out, threads);
        best = best.min(start.elapsed().as_secs_f64());
    }
    let pairs = if causal {
        (t * (t + 1) / 2) as f64
    } else {
        (t * t) as f64
    };
    let flops = 4.0 * pairs * d as f64 * heads as f64;
    println!(
        "attn {t} {heads} {d} {} {best:.4} {:.1}",
        if causal { "causal" } else { "full" },
        flops / best / 1e9
    );
}
