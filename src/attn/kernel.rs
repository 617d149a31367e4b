//! The fast path: tiled online-softmax attention (the flash-attention idea) and the
//! projection matmul, in auto-vectorizable Rust on all cores, compiled once per CPU kind
//! and chosen at run time.
//!
//! No intrinsics and no `unsafe`: the inner loops work on fixed-width arrays (`R` rows of
//! `N` lanes) with compile-time bounds, so LLVM keeps the accumulators in registers. The
//! tile shape is a const parameter of [`Tile`]; each CPU kind ([`Simd`]) gets the shape
//! that fits its registers, its code compiled with its features by `multiversion`:
//!
//! | path | features | tile R x N | keys per tile | accumulators |
//! | --- | --- | --- | --- | --- |
//! | `Avx512` | AVX-512 F/BW/VL, FMA | 4 x 64 | 64 | 16 of 32 zmm |
//! | `Avx2` | AVX2, FMA | 3 x 32 | 96 | 12 of 16 ymm |
//! | `Portable` x86-64 | SSE2 | 2 x 16 | 64 | 8 of 16 xmm |
//! | `Portable` AArch64 | NEON (FMA) | 4 x 16 | 64 | 16 of 32 q |
//!
//! [`Simd::detect`] picks the best path of this CPU; tests and benchmarks may force any
//! path (a path whose features the CPU lacks runs its baseline build, same shape, same
//! results), which is how the paths are compared on one host.
//!
//! Performance notes (fp32, 8 heads of 64, two threads; `scripts/bench-attn.sh` prints
//! the figures with the host kind):
//! - AVX2 shape: a 4 x 64 tile needs 32 ymm accumulators and spilled on AVX2 (27 stack
//!   loads and stores per 32 FMAs, ~45-50 GFLOP/s on two threads); 3 x 32 keeps 12
//!   accumulators and 3 broadcasts in the 16 registers, no spills. One thread's CPU
//!   time, T = 4096 causal, busy 2-core AMD EPYC (Zen 3) host, GFLOP/s: 3 x 32 with
//!   96-key tiles 51-54, with 48-key tiles 48-50, 2 x 48 52-54, 4 x 16 42-46,
//!   2 x 32 42-43. SSE2 (no FMA): 2 x 16 16-20, 3 x 16 13-14, 4 x 16 12-13.
//! - AVX-512 on 256-bit units (AMD Zen 4): the `Avx512` path stays the choice, 185-200
//!   GFLOP/s against the `Avx2` path's 178-188 on the same host (T = 4096, two threads,
//!   causal seed-style and full uniform data, `attn-bench ... PATH`).
//! - FMA is a property of the path, not of the build: `fmadd` fuses where the path's
//!   features have FMA and is a multiply and an add elsewhere (a fused multiply-add
//!   without the instruction is a slow library call).
//! - Scores are computed in the base-2 domain (`q` pre-scaled by `scale * log2(e)`), so
//!   the softmax needs one `exp2` per score: a 6-term polynomial and an exponent add,
//!   vectorised, instead of the C library's scalar `expf`.
//! - Scores are held transposed: one row per key, one lane per query, N queries (a
//!   "panel") side by side. The softmax's running maximum, sum and rescaling factor are
//!   then lane-wise vectors, with no horizontal reductions (held the other way round the
//!   softmax took 18% of the time at T = 1024; now about 10%, nearly all `exp2`).
//! - One micro-kernel does all the arithmetic ([`Tile::panel`]): R rows x N columns of
//!   accumulators over the whole reduction, each loaded panel row shared by the R rows.
//!   Q K^T is R keys (broadcast) x N queries; P V is R value columns (broadcast) x N
//!   queries, so the output is transposed too and is turned back once per block.
//! - Accumulators stay in registers only when the reduction loop is outside a loop of
//!   constant trip count over `[f32; N]` rows (with the accumulators in memory, LLVM
//!   kept them on the stack, 3-4x slower).
//! - The streamed panels are `Row`s, 64-byte aligned: with `[f32; 64]` (4-byte
//!   alignment) a run whose allocations straddled cache lines was 20% slower.
//! - Q, K and V are packed once per call, in parallel, whole rows of all heads in
//!   order (a head's rows alone, 2 KiB apart, defeated the prefetchers), into buffers
//!   kept on the calling thread for the next call: packing into fresh pages (a fault
//!   and a miss per line) took 12% at T = 1024. A tile's packed keys and values are
//!   contiguous: value column groups `s` keys apart shared L1 sets.
//! - Work items are (head, block of queries), from a shared counter, last first (causal
//!   blocks cost more the later they are), a head's blocks in a row so that its keys
//!   and values are still in L2. Blocks are up to 8 panels at long lengths (each key
//!   tile fetched serves more queries: 114 -> 124 GFLOP/s at T = 16384 on AVX-512),
//!   fewer where the items would be too few to balance the threads.
//! - Packing and attention run on one spawn of the threads, a `Barrier` between the
//!   phases; packed tiles are handed from the first phase to the second through
//!   `OnceLock`s, read without locking (best 211 against 206 GFLOP/s against a spawn per
//!   phase at T = 1024). Calls too small to repay a thread (under ~2^21 multiply-adds)
//!   run on the calling thread.
//! - Copies of variable length become `memmove` calls (8% at T = 1024 when packing
//!   4-number groups), and transposing loops became scatters or gathers: the packing
//!   code uses fixed-size arrays and a fixed-size fast path.
//! - The projection matmul packs its weights once per run into panels of N columns and
//!   blocks the reduction so that a panel block (16 KiB) stays in L1 while every row
//!   group of a 192-row block passes over it.

// Index loops with compile-time bounds over fixed arrays are the form LLVM unrolls
// and vectorizes best; the iterator forms clippy suggests hide the constant bounds.
#![allow(clippy::needless_range_loop)]

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Rows per work item of the matmul (a multiple of every path's R).
const BR: usize = 192;
/// Multiply-adds below which a call runs on the calling thread alone.
const SERIAL_WORK: usize = 1 << 21;

/// Which compiled version of the kernels runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Simd {
    /// x86-64 with AVX-512 (F, BW, VL) and FMA: 4 x 64 tiles.
    Avx512,
    /// x86-64 with AVX2 and FMA: 3 x 32 tiles.
    Avx2,
    /// The architecture's baseline, which every CPU of it runs (SSE2 on x86-64, NEON on
    /// AArch64).
    Portable,
}

impl Simd {
    /// The kernels' path: the best this CPU has, or the one the hidden variable
    /// `TOKSUITE_ATTN_SIMD` names (`portable`, `avx2`, `avx512`), which tests and
    /// benchmarks use to compare the paths on one host.
    pub fn from_env() -> crate::Result<Simd> {
        match std::env::var("TOKSUITE_ATTN_SIMD") {
            Ok(name) => Simd::from_name(&name).ok_or_else(|| {
                crate::Error::usage(format!(
                    "TOKSUITE_ATTN_SIMD={name}: expected portable, avx2 or avx512"
                ))
            }),
            Err(_) => Ok(Simd::detect()),
        }
    }

    /// The fastest path this CPU runs.
    pub fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("fma")
            {
                return Simd::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }

    /// Every path, fastest first. Any of them runs on any CPU of the architecture (one
    /// whose features the CPU lacks runs its shape compiled for the baseline).
    pub(crate) fn all() -> [Simd; 3] {
        [Simd::Avx512, Simd::Avx2, Simd::Portable]
    }

    /// A short name: `avx512`, `avx2` or `portable`.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Avx512 => "avx512",
            Simd::Avx2 => "avx2",
            Simd::Portable => "portable",
        }
    }

    /// The path of that [`Simd::name`].
    pub fn from_name(name: &str) -> Option<Simd> {
        Simd::all().into_iter().find(|s| s.name() == name)
    }
}

/// A row-major matrix view: row `i` starts at `data[offset + i * stride]`.
#[derive(Clone, Copy, Debug)]
pub struct View<'a> {
    /// The backing numbers.
    pub data: &'a [f32],
    /// Distance between consecutive rows.
    pub stride: usize,
    /// Where row 0 starts.
    pub offset: usize,
}

impl<'a> View<'a> {
    /// `len` numbers of row `i` starting at column `col`.
    #[inline(always)]
    fn row(&self, i: usize, col: usize, len: usize) -> &'a [f32] {
        let s = self.offset + i * self.stride + col;
        &self.data[s..s + len]
    }
}

/// N numbers on a 64-byte boundary (whole cache lines for N a multiple of 16). The
/// panels the micro-kernel streams are made of these: `Vec<[f32; N]>` is only 4-byte
/// aligned, and runs whose allocations happened to straddle lines (every load split
/// across two) were 20% slower.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Row<const N: usize>([f32; N]);

impl<const N: usize> std::ops::Deref for Row<N> {
    type Target = [f32; N];
    fn deref(&self) -> &[f32; N] {
        &self.0
    }
}

impl<const N: usize> std::ops::DerefMut for Row<N> {
    fn deref_mut(&mut self) -> &mut [f32; N] {
        &mut self.0
    }
}

impl<const N: usize> Row<N> {
    const ZERO: Row<N> = Row([0.0; N]);
}

#[inline(always)]
fn max(a: f32, b: f32) -> f32 {
    // `f32::max` adds NaN fix-ups; inputs here are never NaN.
    if a > b {
        a
    } else {
        b
    }
}

/// The kernels of one tile shape: `R` rows of the broadcast operand by `N` lanes
/// (queries, or matmul columns), `BC` keys per tile (a multiple of R), fused
/// multiply-adds if `F`. Everything is `inline(always)`, so that it is compiled with the
/// features of the dispatched function that calls it.
struct Tile<const R: usize, const N: usize, const BC: usize, const F: bool>;

impl<const R: usize, const N: usize, const BC: usize, const F: bool> Tile<R, N, BC, F> {
    /// `a * b + c`, one rounding where the path has FMA.
    #[inline(always)]
    fn fmadd(a: f32, b: f32, c: f32) -> f32 {
        if F {
            a.mul_add(b, c)
        } else {
            a * b + c
        }
    }

    /// 2^x for x <= 0 (x may be -inf: gives 0), relative error < 2e-7. Cephes `exp2f`
    /// polynomial on [-1/2, 1/2]; the integer part goes straight into the exponent bits.
    #[inline(always)]
    fn exp2(x: f32) -> f32 {
        let x = max(x, -127.0);
        // Adding 1.5 * 2^23 rounds to the nearest integer, which lands in the low
        // mantissa bits.
        const MAGIC: f32 = 12_582_912.0;
        let shifted = x + MAGIC;
        let n = shifted - MAGIC;
        let ni = shifted.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
        let f = x - n;
        let mut p = 1.535_336_2e-4f32;
        p = Self::fmadd(p, f, 1.339_887_4e-3);
        p = Self::fmadd(p, f, 9.618_437e-3);
        p = Self::fmadd(p, f, 5.550_332_5e-2);
        p = Self::fmadd(p, f, 2.402_264_8e-1);
        p = Self::fmadd(p, f, 6.931_472e-1);
        p = Self::fmadd(p, f, 1.0);
        // n = -127 gives exponent field 0, i.e. a factor of exactly 0.
        let scale = f32::from_bits((ni.wrapping_add(127) as u32) << 23);
        p * scale
    }

    /// R rows of A, packed as groups of R numbers (`a[kd * R + r]` = row r, column kd),
    /// times a packed panel `bp` (rows of N numbers), added to `acc`: returns the R x N
    /// sums. The depth is the shorter of the two operands.
    #[inline(always)]
    fn panel(a: &[f32], bp: &[Row<N>], mut acc: [[f32; N]; R]) -> [[f32; N]; R] {
        for (x, b) in a.chunks_exact(R).zip(bp) {
            let x: &[f32; R] = x.try_into().expect("R numbers");
            for c in 0..N {
                for r in 0..R {
                    acc[r][c] = Self::fmadd(x[r], b[c], acc[r][c]);
                }
            }
        }
        acc
    }

    /// Packs queries `p * N..` (up to N of the `t`), scaled by `c`, into `dst`: per
    /// head, `dk` rows of N (row d holds column d of each query; missing queries as
    /// zeros). Whole rows of Q (all heads) are read in order, as in `pack_kv`: a head's
    /// rows alone, read in each work item, waited on cache misses (8% of the time at
    /// T = 1024, causal).
    #[inline(always)]
    fn pack_q(g: &Geometry, p: usize, q: &View, t: usize, c: f32, dst: &mut [Row<N>]) {
        let dk = g.dk;
        let rows = N.min(t - p * N);
        // Transposed in blocks of T x T, fixed-size (a plain loop became scatter
        // instructions, 10% of the time at T = 1024).
        const T: usize = 16;
        for r0 in (0..N).step_by(T) {
            let src: [Option<&[f32]>; T] = std::array::from_fn(|r| {
                (r0 + r < rows).then(|| q.row(p * N + r0 + r, 0, g.heads * dk))
            });
            for (h, qt) in dst.chunks_exact_mut(dk).enumerate() {
                for d0 in (0..dk).step_by(T) {
                    let dn = T.min(dk - d0);
                    let mut blk = [[0f32; T]; T];
                    for (b, s) in blk.iter_mut().zip(src) {
                        let Some(s) = s else { continue };
                        let s = &s[h * dk + d0..][..dn];
                        if let Ok(full) = <&[f32; T]>::try_from(s) {
                            *b = *full;
                        } else {
                            for (y, &x) in b.iter_mut().zip(s) {
                                *y = x;
                            }
                        }
                    }
                    for d in 0..dn {
                        for r in 0..T {
                            qt[d0 + d][r0 + r] = blk[r][d] * c;
                        }
                    }
                }
            }
        }
    }

    /// Packs key tile kt of every head into `dst`: per head, the keys as groups of R
    /// keys, each `dk` steps of R numbers (key `jj` of the tile, column `d` at
    /// `(jj / R) * dk * R + d * R + jj % R`), then the values as `dv4` groups of R
    /// columns, each BC steps of R numbers (column `x` at `((x / R) * BC + jj) * R +
    /// x % R`); keys past `s` and columns past `dv` as zeros (the buffer is reused).
    ///
    /// Tiles, not heads, are the unit: whole rows of K and V (all heads) are read in
    /// order, which the prefetchers follow (one head's rows, 2 KiB apart, they did not),
    /// and a tile's values are contiguous (with column groups `s` keys apart, 64 KiB at
    /// T = 4096, a tile's 16 groups fell into the same L1 sets).
    #[inline(always)]
    fn pack_kv<'a>(g: &Geometry, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]) {
        let (dk, dv) = (g.dk, g.dv);
        let (kl, vl) = g.tile_lens();
        // Row jj of the tile (all heads' `w` columns), if the key exists.
        let row = |m: &View<'a>, jj: usize, w: usize| -> Option<&'a [f32]> {
            let j = kt * BC + jj;
            (j < g.s).then(|| m.row(j, 0, g.heads * w))
        };
        // Keys, R at a time: blocks of R rows x 16 columns become 16 x R, fixed-size
        // arrays throughout so that the transposition is shuffles, not scalar stores.
        const W: usize = 16;
        for j0 in (0..BC).step_by(R) {
            let rows: [Option<&[f32]>; R] = std::array::from_fn(|r| row(k, j0 + r, dk));
            for (h, hd) in dst.chunks_exact_mut(kl + vl).enumerate() {
                let kd = &mut hd[(j0 / R) * dk * R..][..dk * R];
                let mut d0 = 0;
                while d0 < dk {
                    let w = W.min(dk - d0);
                    let blk: [[f32; W]; R] = std::array::from_fn(|r| {
                        let src = rows[r].map_or(&[][..], |x| &x[h * dk + d0..][..w]);
                        match <&[f32; W]>::try_from(src) {
                            Ok(full) => *full,
                            Err(_) => std::array::from_fn(|d| src.get(d).copied().unwrap_or(0.0)),
                        }
                    });
                    let mut t = [[0f32; R]; W];
                    for d in 0..W {
                        for r in 0..R {
                            t[d][r] = blk[r][d];
                        }
                    }
                    let t = t.as_flattened();
                    let out = &mut kd[d0 * R..][..w * R];
                    if out.len() == t.len() {
                        out.copy_from_slice(t);
                    } else {
                        for (o, &x) in out.iter_mut().zip(t) {
                            *o = x;
                        }
                    }
                    d0 += w;
                }
            }
        }
        // Values: each row's groups of R columns go to their group's run of the tile.
        for jj in 0..BC {
            let vrow = row(v, jj, dv);
            for (h, hd) in dst.chunks_exact_mut(kl + vl).enumerate() {
                let vd = &mut hd[kl..];
                let vs = vrow.map_or(&[][..], |x| &x[h * dv..][..dv]);
                let full = if vrow.is_some() { dv / R } else { 0 };
                for gi in 0..full {
                    let src: &[f32; R] = vs[gi * R..][..R].try_into().expect("R numbers");
                    let dst: &mut [f32; R] = (&mut vd[(gi * BC + jj) * R..][..R])
                        .try_into()
                        .expect("R numbers");
                    *dst = *src;
                }
                // A partial last group, and rows past the last key, as scalars padded
                // with zeros (a copy of variable length would call memmove).
                for gi in full..g.dv4 {
                    let src = vs.get(gi * R..).unwrap_or(&[]);
                    for (e, x) in vd[(gi * BC + jj) * R..][..R].iter_mut().enumerate() {
                        *x = src.get(e).copied().unwrap_or(0.0);
                    }
                }
            }
        }
    }

    /// Attention of head h for the block of queries `i0..i0 + nrows` (its packed query
    /// panels from `qt`, the packed key and value tiles in `packs`), written normalised
    /// into `chunk` (the block's rows of `width` numbers).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn attend(
        g: &Geometry,
        st: &mut Scratch<N>,
        qt: &[&[Row<N>]],
        packs: &[&[f32]],
        (h, i0, nrows): (usize, usize, usize),
        chunk: &mut [f32],
        width: usize,
    ) {
        let np = nrows.div_ceil(N);
        st.reset(nrows);
        // Keys a panel's queries see: all, or (causal) up to its last query.
        let key_end = |p: usize| {
            if g.causal {
                g.s.min(i0 + (p * N + N).min(nrows))
            } else {
                g.s
            }
        };
        // Key tiles outside, panels inside: each key and value tile, streamed from L2
        // or L3 at long lengths, serves the whole block.
        for kt in 0..key_end(np - 1).div_ceil(BC) {
            let j0 = kt * BC;
            let (kp, vp) = g.tile(packs, kt, h);
            for p in 0..np {
                let ke = key_end(p);
                if j0 >= ke {
                    continue;
                }
                let jn = BC.min(ke - j0).div_ceil(R) * R;
                let qi0 = i0 + p * N;
                let masked = j0 + jn > g.s || (g.causal && j0 + jn > qi0 + 1);
                let alpha = Self::scores(
                    st,
                    &kp[..jn * g.dk],
                    &qt[p][h * g.dk..][..g.dk],
                    p,
                    jn,
                    masked.then_some((j0, g.s, g.causal, qi0)),
                );
                Self::accumulate(st, vp, jn, p, &alpha);
            }
        }
        Self::write(st, chunk, width, h, g.dv, nrows);
    }

    /// Scores of `jn` keys (packed in `kp`) against panel p (`qt`), masked as `mask`
    /// says (first key, key count, causal, first query), then turned into probabilities
    /// relative to the updated running maximum. Returns the factor by which each
    /// query's earlier sums must be rescaled.
    #[inline(always)]
    fn scores(
        st: &mut Scratch<N>,
        kp: &[f32],
        qt: &[Row<N>],
        p: usize,
        jn: usize,
        mask: Option<(usize, usize, bool, usize)>,
    ) -> [f32; N] {
        let dk = st.dk;
        let sc = &mut st.sc[..jn];
        let mut mx = *st.m[p];
        for (gi, out) in sc.chunks_exact_mut(R).enumerate() {
            let acc = Self::panel(&kp[gi * R * dk..(gi + 1) * R * dk], qt, [[0f32; N]; R]);
            for (o, a) in out.iter_mut().zip(acc) {
                o.0 = a;
            }
        }
        if let Some((j0, s, causal, qi0)) = mask {
            for (j, row) in sc.iter_mut().enumerate() {
                let key = j0 + j;
                if key >= s {
                    row.fill(f32::NEG_INFINITY);
                } else if causal && key > qi0 {
                    row[..(key - qi0).min(N)].fill(f32::NEG_INFINITY);
                }
            }
        }
        for row in sc.iter() {
            for c in 0..N {
                mx[c] = max(mx[c], row[c]);
            }
        }
        let m = &mut st.m[p];
        let mut alpha = [0f32; N];
        for c in 0..N {
            alpha[c] = Self::exp2(m[c] - mx[c]);
        }
        **m = mx;
        let mut sum = [0f32; N];
        for row in sc.iter_mut() {
            for c in 0..N {
                let e = Self::exp2(row[c] - mx[c]);
                row[c] = e;
                sum[c] += e;
            }
        }
        let l = &mut st.l[p];
        for c in 0..N {
            l[c] = Self::fmadd(l[c], alpha[c], sum[c]);
        }
        alpha
    }

    /// `o = alpha * o + P V` for panel p and the tile's first `jn` keys (values packed
    /// in `vp` as `dv4` groups of BC keys of R numbers).
    #[inline(always)]
    fn accumulate(st: &mut Scratch<N>, vp: &[f32], jn: usize, p: usize, alpha: &[f32; N]) {
        let dv4 = st.dv4;
        let pt = &st.sc[..jn];
        let ot = &mut st.ot[p * dv4 * R..(p + 1) * dv4 * R];
        for (gi, o) in ot.chunks_exact_mut(R).enumerate() {
            let init: [[f32; N]; R] = std::array::from_fn(|r| {
                let mut x = *o[r];
                for c in 0..N {
                    x[c] *= alpha[c];
                }
                x
            });
            let a = &vp[gi * BC * R..][..jn * R];
            let acc = Self::panel(a, pt, init);
            for (o, a) in o.iter_mut().zip(acc) {
                o.0 = a;
            }
        }
    }

    /// Writes the block's normalised outputs for head h into `chunk` (the block's rows
    /// of `width` numbers).
    #[inline(always)]
    fn write(st: &Scratch<N>, chunk: &mut [f32], width: usize, h: usize, dv: usize, nrows: usize) {
        let dv4 = st.dv4;
        for r in 0..nrows {
            let (p, c) = (r / N, r % N);
            let inv = 1.0 / st.l[p][c];
            let ot = &st.ot[p * dv4 * R..];
            for (d, x) in chunk[r * width + h * dv..][..dv].iter_mut().enumerate() {
                *x = ot[d][c] * inv;
            }
        }
    }

    /// Rows `row0..` of `x (t x d) @ w` into `chunk` (whole rows of `n` numbers), `w`
    /// packed by [`pack_panels`] into panels of N columns. The reduction is cut into
    /// blocks of `KC` so that a panel's block stays in L1 while every row group of the
    /// chunk passes over it; `a` is scratch for the packed rows.
    #[inline(always)]
    fn matmul_rows(
        x: &[f32],
        row0: usize,
        d: usize,
        w: &[Row<N>],
        n: usize,
        chunk: &mut [f32],
        a: &mut Vec<f32>,
    ) {
        // 16 KiB of panel per reduction block.
        let kc_max = (4096 / N).max(R);
        let nrows = chunk.len() / n;
        let groups = nrows.div_ceil(R);
        let panels = n.div_ceil(N);
        for k0 in (0..d).step_by(kc_max) {
            let kc = kc_max.min(d - k0);
            // The chunk's rows, this block of the reduction, as groups of R rows.
            a.clear();
            a.resize(groups * kc * R, 0.0);
            for g in 0..groups {
                let dst = &mut a[g * kc * R..][..kc * R];
                for r in 0..R.min(nrows - g * R) {
                    let src = &x[(row0 + g * R + r) * d + k0..][..kc];
                    for (kk, &v) in src.iter().enumerate() {
                        dst[kk * R + r] = v;
                    }
                }
            }
            for p in 0..panels {
                let bp = &w[p * d + k0..][..kc];
                let cols = N.min(n - p * N);
                for g in 0..groups {
                    let rows = R.min(nrows - g * R);
                    let mut init = [[0f32; N]; R];
                    if k0 > 0 {
                        for r in 0..rows {
                            let src = &chunk[(g * R + r) * n + p * N..][..cols];
                            match <&[f32; N]>::try_from(src) {
                                Ok(full) => init[r] = *full,
                                Err(_) => init[r][..cols].copy_from_slice(src),
                            }
                        }
                    }
                    let acc = Self::panel(&a[g * kc * R..][..kc * R], bp, init);
                    for r in 0..rows {
                        let dst = &mut chunk[(g * R + r) * n + p * N..][..cols];
                        match <&mut [f32; N]>::try_from(&mut *dst) {
                            Ok(full) => *full = acc[r],
                            Err(_) => dst.copy_from_slice(&acc[r][..cols]),
                        }
                    }
                }
            }
        }
    }
}

/// Packs the columns of the row-major `depth x n` matrix `w` into panels of N columns:
/// panel p holds `depth` rows of N numbers, zero-padded.
fn pack_panels<const N: usize>(depth: usize, n: usize, w: &[f32]) -> Vec<Row<N>> {
    let panels = n.div_ceil(N);
    let mut out = vec![Row::<N>::ZERO; panels * depth];
    for p in 0..panels {
        let cols = N.min(n - p * N);
        for kd in 0..depth {
            out[p * depth + kd][..cols].copy_from_slice(&w[kd * n + p * N..][..cols]);
        }
    }
    out
}

/// The entry points of one path, each compiled with the path's features.
trait Kernels<const N: usize> {
    /// Rows of the broadcast operand per micro-kernel call.
    const R: usize;
    /// Keys per tile.
    const BC: usize;
    fn pack_kv<'a>(g: &Geometry, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]);
    fn pack_q<'a>(g: &Geometry, p: usize, q: &View<'a>, t: usize, c: f32, dst: &mut [Row<N>]);
    fn attend(
        g: &Geometry,
        st: &mut Scratch<N>,
        qt: &[&[Row<N>]],
        packs: &[&[f32]],
        item: (usize, usize, usize),
        chunk: &mut [f32],
        width: usize,
    );
    #[allow(clippy::too_many_arguments)]
    fn matmul_rows(
        x: &[f32],
        row0: usize,
        d: usize,
        w: &[Row<N>],
        n: usize,
        chunk: &mut [f32],
        a: &mut Vec<f32>,
    );
}

/// Declares a path: a type implementing [`Kernels`] for the tile shape R x N with BC
/// keys per tile, each entry point compiled for `$target` (and, for CPUs without it,
/// for the baseline) with FMA exactly where the compiled target has it.
#[cfg(target_arch = "x86_64")]
macro_rules! dispatched_path {
    ($name:ident, $target:literal, $r:literal, $n:literal, $bc:literal) => {
        struct $name;
        impl Kernels<$n> for $name {
            const R: usize = $r;
            const BC: usize = $bc;
            fn pack_kv<'a>(g: &Geometry, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]) {
                #[multiversion::multiversion(targets($target))]
                fn go<'a>(g: &Geometry, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]) {
                    const F: bool =
                        multiversion::target::selected_target!().supports_feature_str("fma");
                    Tile::<$r, $n, $bc, F>::pack_kv(g, kt, k, v, dst)
                }
                go(g, kt, k, v, dst)
            }
            fn pack_q<'a>(
                g: &Geometry,
                p: usize,
                q: &View<'a>,
                t: usize,
                c: f32,
                dst: &mut [Row<$n>],
            ) {
                #[multiversion::multiversion(targets($target))]
                fn go<'a>(
                    g: &Geometry,
                    p: usize,
                    q: &View<'a>,
                    t: usize,
                    c: f32,
                    dst: &mut [Row<$n>],
                ) {
                    const F: bool =
                        multiversion::target::selected_target!().supports_feature_str("fma");
                    Tile::<$r, $n, $bc, F>::pack_q(g, p, q, t, c, dst)
                }
                go(g, p, q, t, c, dst)
            }
            fn attend(
                g: &Geometry,
                st: &mut Scratch<$n>,
                qt: &[&[Row<$n>]],
                packs: &[&[f32]],
                item: (usize, usize, usize),
                chunk: &mut [f32],
                width: usize,
            ) {
                #[multiversion::multiversion(targets($target))]
                fn go(
                    g: &Geometry,
                    st: &mut Scratch<$n>,
                    qt: &[&[Row<$n>]],
                    packs: &[&[f32]],
                    item: (usize, usize, usize),
                    chunk: &mut [f32],
                    width: usize,
                ) {
                    const F: bool =
                        multiversion::target::selected_target!().supports_feature_str("fma");
                    Tile::<$r, $n, $bc, F>::attend(g, st, qt, packs, item, chunk, width)
                }
                go(g, st, qt, packs, item, chunk, width)
            }
            fn matmul_rows(
                x: &[f32],
                row0: usize,
                d: usize,
                w: &[Row<$n>],
                n: usize,
                chunk: &mut [f32],
                a: &mut Vec<f32>,
            ) {
                #[multiversion::multiversion(targets($target))]
                fn go(
                    x: &[f32],
                    row0: usize,
                    d: usize,
                    w: &[Row<$n>],
                    n: usize,
                    chunk: &mut [f32],
                    a: &mut Vec<f32>,
                ) {
                    const F: bool =
                        multiversion::target::selected_target!().supports_feature_str("fma");
                    Tile::<$r, $n, $bc, F>::matmul_rows(x, row0, d, w, n, chunk, a)
                }
                go(x, row0, d, w, n, chunk, a)
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
dispatched_path!(
    Avx512,
    "x86_64+avx512f+avx512bw+avx512vl+avx2+fma",
    4,
    64,
    64
);
#[cfg(target_arch = "x86_64")]
dispatched_path!(Avx2, "x86_64+avx2+fma", 3, 32, 96);

/// The baseline path: plain functions, compiled for what every CPU of the architecture
/// has. AArch64's baseline (NEON) has FMA and 32 registers; x86-64's (SSE2) has neither.
struct Portable;

#[cfg(target_arch = "aarch64")]
const PORTABLE: (usize, usize, bool) = (4, 64, true);
#[cfg(not(target_arch = "aarch64"))]
const PORTABLE: (usize, usize, bool) = (2, 64, false);
const PORTABLE_N: usize = 16;
type PortableTile = Tile<{ PORTABLE.0 }, PORTABLE_N, { PORTABLE.1 }, { PORTABLE.2 }>;

impl Kernels<PORTABLE_N> for Portable {
    const R: usize = PORTABLE.0;
    const BC: usize = PORTABLE.1;
    fn pack_kv<'a>(g: &Geometry, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]) {
        PortableTile::pack_kv(g, kt, k, v, dst)
    }
    fn pack_q<'a>(g: &Geometry, p: usize, q: &View<'a>, t: usize, c: f32, dst: &mut [Row<16>]) {
        PortableTile::pack_q(g, p, q, t, c, dst)
    }
    fn attend(
        g: &Geometry,
        st: &mut Scratch<16>,
        qt: &[&[Row<16>]],
        packs: &[&[f32]],
        item: (usize, usize, usize),
        chunk: &mut [f32],
        width: usize,
    ) {
        PortableTile::attend(g, st, qt, packs, item, chunk, width)
    }
    fn matmul_rows(
        x: &[f32],
        row0: usize,
        d: usize,
        w: &[Row<16>],
        n: usize,
        chunk: &mut [f32],
        a: &mut Vec<f32>,
    ) {
        PortableTile::matmul_rows(x, row0, d, w, n, chunk, a)
    }
}

#[cfg(test)]
thread_local! {
    /// Threads spawned from this thread by attention's parallel loops (tests only).
    pub(crate) static SPAWNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one spawn for the tests; nothing in a normal build.
#[inline(always)]
pub(crate) fn count_spawn() {
    #[cfg(test)]
    SPAWNED.with(|c| c.set(c.get() + 1));
}

/// The number of threads to use: the machine's cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Hands out work items `0..count` to `threads` threads, last item first; each thread
/// gets its own scratch state from `init`.
fn parallel_items<S>(
    count: usize,
    threads: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) + Sync,
) {
    let next = AtomicUsize::new(0);
    let run = || {
        let mut scratch = init();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= count {
                break;
            }
            work(&mut scratch, count - 1 - k);
        }
    };
    let threads = threads.clamp(1, count.max(1));
    if threads == 1 {
        run();
        return;
    }
    std::thread::scope(|s| {
        for _ in 1..threads {
            count_spawn();
            s.spawn(run);
        }
        run();
    });
}

/// Runs `first` items of `pack` and then, after a barrier, `second` items of `work`,
/// on `threads` threads spawned once for both phases (last item first in each, as in
/// `parallel_items`); `init` makes each thread's scratch state after the barrier.
fn parallel_phases<S>(
    (first, pack): (usize, impl Fn(usize) + Sync),
    (second, work): (usize, impl Fn(&mut S, usize) + Sync),
    init: impl Fn() -> S + Sync,
    threads: usize,
) {
    let threads = threads.clamp(1, first.max(second).max(1));
    let (next1, next2) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let barrier = std::sync::Barrier::new(threads);
    let run = || {
        loop {
            let k = next1.fetch_add(1, Ordering::Relaxed);
            if k >= first {
                break;
            }
            pack(first - 1 - k);
        }
        barrier.wait();
        let mut scratch = init();
        loop {
            let k = next2.fetch_add(1, Ordering::Relaxed);
            if k >= second {
                break;
            }
            work(&mut scratch, second - 1 - k);
        }
    };
    if threads == 1 {
        run();
        return;
    }
    std::thread::scope(|s| {
        for _ in 1..threads {
            count_spawn();
            s.spawn(run);
        }
        run();
    });
}

/// A buffer part filled by one thread and then read by all: taken out of `todo`,
/// filled, and published in `done` (which the barrier between phases orders).
struct Slot<'a, T> {
    todo: std::sync::Mutex<Option<&'a mut [T]>>,
    done: std::sync::OnceLock<&'a [T]>,
}

impl<'a, T> Slot<'a, T> {
    fn new(part: &'a mut [T]) -> Self {
        Slot {
            todo: std::sync::Mutex::new(Some(part)),
            done: std::sync::OnceLock::new(),
        }
    }

    fn fill(&self, f: impl FnOnce(&mut [T])) {
        let part = self.todo.lock().expect("slot").take().expect("filled once");
        f(part);
        let part: &'a [T] = part;
        let _ = self.done.set(part);
    }

    fn get(&self) -> &'a [T] {
        self.done.get().expect("filled before the barrier")
    }
}

/// Splits `out` (rows of `width` numbers) into chunks of `rows` rows for the threads.
fn row_chunks(out: &mut [f32], width: usize, rows: usize) -> Vec<std::sync::Mutex<&mut [f32]>> {
    if width == 0 {
        return Vec::new();
    }
    out.chunks_mut(rows * width)
        .map(std::sync::Mutex::new)
        .collect()
}

/// A `depth x n` weight matrix packed once for [`Projection::apply`] by one path.
pub struct Projection {
    simd: Simd,
    depth: usize,
    n: usize,
    /// `Vec<Row<N>>` of the path's N.
    panels: Box<dyn Any + Send + Sync>,
}

impl Projection {
    /// Packs the row-major `depth x n` matrix `w` for the path `simd`.
    pub fn new(simd: Simd, w: &[f32], depth: usize, n: usize) -> Projection {
        assert_eq!(w.len(), depth * n);
        let panels: Box<dyn Any + Send + Sync> = match Path::of(simd) {
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => Box::new(pack_panels::<64>(depth, n, w)),
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => Box::new(pack_panels::<32>(depth, n, w)),
            Path::Portable => Box::new(pack_panels::<PORTABLE_N>(depth, n, w)),
        };
        Projection {
            simd,
            depth,
            n,
            panels,
        }
    }

    /// `x (t x depth) @ w` on `threads` threads: `t x n` numbers, row-major.
    pub fn apply(&self, x: &[f32], t: usize, threads: usize) -> Vec<f32> {
        let mut out = vec![0f32; t * self.n];
        self.apply_into(x, t, threads, &mut out);
        out
    }

    /// [`Projection::apply`] into `out` (`t x n` numbers).
    fn apply_into(&self, x: &[f32], t: usize, threads: usize, out: &mut [f32]) {
        assert_eq!(x.len(), t * self.depth);
        assert_eq!(out.len(), t * self.n);
        if t == 0 || self.n == 0 {
            return;
        }
        if self.depth == 0 {
            out.fill(0.0);
            return;
        }
        let threads = if t * self.depth * self.n < SERIAL_WORK {
            1
        } else {
            threads
        };
        match Path::of(self.simd) {
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => self.run::<64, Avx512>(x, threads, out),
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => self.run::<32, Avx2>(x, threads, out),
            Path::Portable => self.run::<PORTABLE_N, Portable>(x, threads, out),
        }
    }

    fn run<const N: usize, K: Kernels<N>>(&self, x: &[f32], threads: usize, out: &mut [f32]) {
        let w: &Vec<Row<N>> = self.panels.downcast_ref().expect("packed for this path");
        let (d, n) = (self.depth, self.n);
        let chunks = row_chunks(out, n, BR);
        parallel_items(chunks.len(), threads, Vec::new, |a, item| {
            let mut guard = chunks[item].lock().expect("chunk");
            K::matmul_rows(x, item * BR, d, w, n, &mut guard, a);
        });
    }
}

/// `x (t x d) @ w (d x n)`, row-major, on `threads` threads with the path `simd`.
/// Returns `t x n` numbers.
pub fn matmul(
    x: &[f32],
    t: usize,
    d: usize,
    w: &[f32],
    n: usize,
    threads: usize,
    simd: Simd,
) -> Vec<f32> {
    assert_eq!(x.len(), t * d);
    Projection::new(simd, w, d, n).apply(x, t, threads)
}

/// The path that runs: on other architectures than x86-64, always the baseline.
#[derive(Clone, Copy)]
enum Path {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Portable,
}

impl Path {
    fn of(simd: Simd) -> Path {
        match simd {
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => Path::Avx512,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => Path::Avx2,
            _ => Path::Portable,
        }
    }
}

/// Shapes and options of one attention call (all heads).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Number of heads.
    pub heads: usize,
    /// Query and key width per head.
    pub d_kq: usize,
    /// Value width per head.
    pub d_v: usize,
    /// Query rows.
    pub t: usize,
    /// Key and value rows.
    pub s: usize,
    /// Query i attends only to keys j <= i.
    pub causal: bool,
    /// Factor applied to q.k before the softmax (PyTorch: 1 / sqrt(d_kq)).
    pub scale: f32,
}

impl Shape {
    /// Multiply-adds of the call (q.k and p.v over the visible pairs).
    fn work(&self) -> usize {
        let pairs = if self.causal {
            // Query i sees min(i + 1, s) keys.
            let full = self.t.min(self.s);
            full * (full + 1) / 2 + (self.t - full) * self.s
        } else {
            self.t * self.s
        };
        pairs.saturating_mul(self.heads * (self.d_kq + self.d_v))
    }
}

/// Scaled dot-product attention for all heads with the path `simd`: `out` (t rows of
/// `heads * d_v`) gets, for head h, `softmax(scale * Q_h K_h^T [masked]) V_h` in
/// columns `h*d_v..(h+1)*d_v`.
///
/// Row i of head h of Q is `q.row(i, h * d_kq, d_kq)`, likewise for K and V. Nothing of
/// size t x s is allocated: besides per-thread tiles, the kernel holds one packed copy
/// of Q, K and V (O((t + s) * d)), which stays allocated on the calling thread for its
/// next call.
pub fn attention(
    shape: &Shape,
    q: View,
    k: View,
    v: View,
    out: &mut [f32],
    threads: usize,
    simd: Simd,
) {
    let threads = if shape.work() < SERIAL_WORK {
        1
    } else {
        threads
    };
    match Path::of(simd) {
        #[cfg(target_arch = "x86_64")]
        Path::Avx512 => attention_on::<64, Avx512>(shape, q, k, v, out, threads),
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => attention_on::<32, Avx2>(shape, q, k, v, out, threads),
        Path::Portable => attention_on::<PORTABLE_N, Portable>(shape, q, k, v, out, threads),
    }
}

/// The packed keys and values (`f32`) and queries (`Row<N>`) of one path.
type Packs<const N: usize> = (Vec<f32>, Vec<Row<N>>);

thread_local! {
    /// The packed keys, values and queries of the last call on this thread, kept for
    /// the next ([`Packs`] of the path that ran): fresh pages cost a fault and a cache
    /// miss per line on first write (packing into new memory took 12% of the time at
    /// T = 1024, 8 heads). Holds O((t + s) * d) numbers between calls.
    static PACKS: std::cell::RefCell<Option<Box<dyn Any>>> = const { std::cell::RefCell::new(None) };
}

fn attention_on<const N: usize, K: Kernels<N>>(
    shape: &Shape,
    q: View,
    k: View,
    v: View,
    out: &mut [f32],
    threads: usize,
) {
    let Shape {
        heads,
        d_kq: dk,
        d_v: dv,
        t,
        s,
        causal,
        scale,
    } = *shape;
    let width = heads * dv;
    assert_eq!(out.len(), t * width);
    if t == 0 || width == 0 {
        return;
    }
    assert!(s > 0, "attention over no keys");
    let geo = Geometry {
        heads,
        dk,
        dv,
        dv4: dv.div_ceil(K::R),
        s,
        causal,
        r: K::R,
        bc: K::BC,
    };
    // Keys and values, packed once (in parallel, one key tile of all heads per item)
    // in the order the micro-kernel reads its broadcast operand, into a buffer kept
    // from the last call on this thread (see `PACKS`).
    // The queries likewise, pre-scaled and transposed, panel by panel (all heads).
    let c = scale * std::f32::consts::LOG2_E;
    let (mut buf, mut qbuf): Packs<N> = PACKS
        .with(|p| p.take())
        .and_then(|b| b.downcast::<Packs<N>>().ok())
        .map_or_else(Default::default, |b| *b);
    buf.resize(geo.tiles() * geo.tile_stride(), 0.0);
    let qstride = (heads * dk).max(1);
    qbuf.resize(t.div_ceil(N) * qstride, Row::ZERO);
    // Queries per work item: each packed key and value tile fetched (from L3 at long
    // lengths) serves the whole block, so long blocks pay at long lengths (one thread,
    // T = 16384: 114 GFLOP/s with 128 rows, 124 with 512 on AVX-512), while short
    // sequences need enough items to balance the threads.
    let np = [8, 4, 2, 1]
        .into_iter()
        .find(|&np| heads * t.div_ceil(np * N) >= 32 * threads)
        .unwrap_or(1);
    let br = np * N;
    let blocks = t.div_ceil(br);
    {
        let tiles: Vec<Slot<f32>> = buf.chunks_mut(geo.tile_stride()).map(Slot::new).collect();
        let panels: Vec<Slot<Row<N>>> = qbuf.chunks_mut(qstride).map(Slot::new).collect();
        let chunks = row_chunks(out, width, br);
        // Both phases on one spawn of the threads, a barrier between them.
        // Items are (head, block) pairs, last first: causal blocks cost more the later
        // they are. A head's blocks follow each other, so that its packed keys and
        // values are still in L2 for the next block.
        parallel_phases(
            (tiles.len() + panels.len(), |i: usize| {
                match i.checked_sub(tiles.len()) {
                    None => tiles[i].fill(|dst| K::pack_kv(&geo, i, &k, &v, dst)),
                    Some(p) => panels[p].fill(|dst| K::pack_q(&geo, p, &q, t, c, dst)),
                }
            }),
            (
                blocks * heads,
                |(st, packs, qts): &mut (Scratch<N>, Vec<&[f32]>, Vec<&[Row<N>]>), item: usize| {
                    let (h, b) = (item / blocks, item % blocks);
                    let i0 = b * br;
                    let nrows = br.min(t - i0);
                    let mut guard = chunks[b].lock().expect("chunk");
                    K::attend(
                        &geo,
                        st,
                        &qts[i0 / N..],
                        packs,
                        (h, i0, nrows),
                        &mut guard,
                        width,
                    );
                },
            ),
            || {
                (
                    Scratch::new(dk, geo.dv4, np, K::R, K::BC),
                    tiles.iter().map(Slot::get).collect(),
                    panels.iter().map(Slot::get).collect(),
                )
            },
            threads,
        );
    }
    PACKS.with(|p| p.replace(Some(Box::new((buf, qbuf)))));
}

/// Sizes that every work item of one attention call shares.
struct Geometry {
    heads: usize,
    dk: usize,
    dv: usize,
    /// Value columns in groups of R.
    dv4: usize,
    /// Keys.
    s: usize,
    causal: bool,
    /// The path's R and BC.
    r: usize,
    bc: usize,
}

impl Geometry {
    /// Key tiles.
    fn tiles(&self) -> usize {
        self.s.div_ceil(self.bc)
    }

    /// Numbers in one head's packed key tile (`BC * dk`) and value tile.
    #[inline(always)]
    fn tile_lens(&self) -> (usize, usize) {
        (self.bc * self.dk, self.dv4 * self.bc * self.r)
    }

    /// Numbers in one packed tile of all heads.
    fn tile_stride(&self) -> usize {
        let (kl, vl) = self.tile_lens();
        self.heads * (kl + vl)
    }

    /// Head h's packed keys and values of tile kt.
    #[inline(always)]
    fn tile<'a>(&self, tiles: &[&'a [f32]], kt: usize, h: usize) -> (&'a [f32], &'a [f32]) {
        let (kl, vl) = self.tile_lens();
        tiles[kt][h * (kl + vl)..][..kl + vl].split_at(kl)
    }
}

/// One thread's state for one block of query rows (up to `np` panels of N) and one head.
struct Scratch<const N: usize> {
    dk: usize,
    dv4: usize,
    /// Unnormalised outputs, transposed: `np` panels of `dv4 * R` rows of N.
    ot: Vec<Row<N>>,
    /// Running maximum (base-2 domain) and sum per query.
    m: Vec<Row<N>>,
    l: Vec<Row<N>>,
    /// The current tile's scores, then probabilities: BC rows (keys) of N (queries).
    sc: Vec<Row<N>>,
    /// The path's R.
    r: usize,
}

impl<const N: usize> Scratch<N> {
    fn new(dk: usize, dv4: usize, np: usize, r: usize, bc: usize) -> Scratch<N> {
        Scratch {
            dk,
            dv4,
            ot: vec![Row::ZERO; np * dv4 * r],
            m: vec![Row::ZERO; np],
            l: vec![Row::ZERO; np],
            sc: vec![Row::ZERO; bc],
            r,
        }
    }

    /// Resets the running state for a block of `nrows` queries.
    #[inline(always)]
    fn reset(&mut self, nrows: usize) {
        let g = self.dv4 * self.r;
        for p in 0..nrows.div_ceil(N) {
            self.m[p] = Row([f32::NEG_INFINITY; N]);
            self.l[p] = Row::ZERO;
            self.ot[p * g..(p + 1) * g].fill(Row::ZERO);
        }
    }
}
