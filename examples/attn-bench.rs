//! Times attn's kernels alone: attention (`scripts/bench-attn.sh` sets it beside
//! PyTorch's `scaled_dot_product_attention`) or the projection matmul.
//!
//! Usage: `attn-bench T HEADS D causal|full [REPEATS [uniform|seed [PATH]]]`, or
//! `attn-bench matmul T DIM N [REPEATS [PATH]]`. PATH is `avx512`, `avx2` or `portable`
//! (default: the best this CPU has). Data: `uniform` draws Q, K and V uniform in
//! (-1, 1); `seed` projects N(0, 1) embeddings of width 512 with uniform [0, 1) weights,
//! as drawn embeddings and heads give (scores in the tens after scaling, most softmax
//! weights zero).
//! Prints `attn T heads d mode data path seconds GFLOP/s` (best of the repeats).
#![deny(unsafe_code)]

use std::time::Instant;
use toksuite::attn::kernel::{self, Shape, Simd, View};
use toksuite::attn::{NormalFill, TorchRng};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "matmul") {
        return matmul(&args[1..]);
    }
    if args.first().is_some_and(|a| a == "embed") {
        return embed(&args[1..]);
    }
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (t, heads, d) = (num(0, 1024), num(1, 8), num(2, 64));
    let causal = args.get(3).is_some_and(|s| s == "causal");
    let repeats = num(4, 3);
    let data = args.get(5).map_or("uniform", |s| s.as_str());
    let simd = path(args.get(6));
    let threads = threads();
    let width = heads * d;
    let (q, k, v) = match data {
        "seed" => {
            let dim = 512;
            let mut rng = TorchRng::new(123);
            let x = rng.normal_f32(t * dim, NormalFill::Avx2);
            let mut proj = || {
                let w = rng.rand(dim * width);
                kernel::matmul(&x, t, dim, &w, width, threads, simd)
            };
            (proj(), proj(), proj())
        }
        _ => {
            // A small xorshift generator: inputs in [-1, 1).
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut rnd = || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            };
            let mut m = || (0..t * width).map(|_| rnd()).collect::<Vec<f32>>();
            (m(), m(), m())
        }
    };
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
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let timer = Timer::start(threads);
        kernel::attention(
            &shape,
            view(&q),
            view(&k),
            view(&v),
            &mut out,
            threads,
            simd,
        );
        best = best.min(timer.seconds());
    }
    let pairs = if causal {
        (t * (t + 1) / 2) as f64
    } else {
        (t * t) as f64
    };
    let flops = 4.0 * pairs * d as f64 * heads as f64;
    println!(
        "attn {t} {heads} {d} {} {data} {} {best:.4} {:.1}",
        if causal { "causal" } else { "full" },
        simd.name(),
        flops / best / 1e9
    );
}

fn path(arg: Option<&String>) -> Simd {
    arg.map_or_else(Simd::detect, |name| {
        Simd::from_name(name).unwrap_or_else(|| panic!("unknown path {name}"))
    })
}

/// `matmul T DIM N [REPEATS [PATH]]`: `x (T x DIM) @ w (DIM x N)`, weights packed once.
fn matmul(args: &[String]) {
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (t, dim, n, repeats) = (num(0, 16384), num(1, 512), num(2, 1536), num(3, 3));
    let simd = path(args.get(4));
    let mut rng = TorchRng::new(1);
    let x = rng.normal_f32(t * dim, NormalFill::Avx2);
    let w = rng.rand(dim * n);
    let proj = kernel::Projection::new(simd, &w, dim, n);
    let threads = threads();
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let timer = Timer::start(threads);
        std::hint::black_box(proj.apply(&x, t, threads));
        best = best.min(timer.seconds());
    }
    let flops = 2.0 * (t * dim * n) as f64;
    println!(
        "matmul {t} {dim} {n} {} {best:.4} {:.1}",
        simd.name(),
        flops / best / 1e9
    );
}

/// `embed T VOCAB DIM [FIRST_ID]`: the rows of T random ids (from FIRST_ID up) of the
/// drawn `nn.Embedding(VOCAB, DIM)`, then the same again (kept blocks).
fn embed(args: &[String]) {
    let num = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (t, vocab, dim, first) = (num(0, 16384), num(1, 50000), num(2, 512), num(3, 0));
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let ids: Vec<u32> = (0..t)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (first + state % (vocab - first)) as u32
        })
        .collect();
    let emb =
        toksuite::attn::LazyEmbedding::new(123, vocab as usize, dim as usize, NormalFill::Scalar);
    for pass in ["first", "again"] {
        let timer = Timer::start(threads());
        std::hint::black_box(emb.rows(&ids, threads()));
        println!(
            "embed {t} {vocab} {dim} {first} {pass} {:.4}",
            timer.seconds()
        );
    }
}

/// Threads: `ATTN_BENCH_THREADS`, or the machine's cores.
fn threads() -> usize {
    std::env::var("ATTN_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(kernel::default_threads)
}

/// Wall-clock time, or on one thread under Linux the thread's CPU time (from
/// /proc/thread-self/schedstat, in ns), which other work on a shared machine disturbs
/// less.
struct Timer {
    wall: Instant,
    cpu: Option<u64>,
}

impl Timer {
    fn start(threads: usize) -> Timer {
        Timer {
            wall: Instant::now(),
            cpu: if threads == 1 { cpu_ns() } else { None },
        }
    }

    fn seconds(&self) -> f64 {
        match (self.cpu, cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64 * 1e-9,
            _ => self.wall.elapsed().as_secs_f64(),
        }
    }
}

fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
