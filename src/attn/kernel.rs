//! The fast path: tiled online-softmax attention (the flash-attention idea) and the
//! projection matmul, in portable auto-vectorizable Rust on all cores.
//!
//! No intrinsics and no `unsafe`: the inner loops work on fixed-width arrays (16 lanes,
//! one AVX-512 register; LLVM splits them for narrower SIMD) with compile-time bounds,
//! so LLVM keeps the accumulators in registers.
//!
//! Performance notes (2-core AVX-512 Xeon, fp32, 8 heads of 64; `scripts/bench-attn.sh`):
//! - Scores are computed in the base-2 domain (`q` pre-scaled by `scale * log2(e)`), so
//!   the softmax needs one `exp2` per score: a 6-term polynomial and an exponent add,
//!   vectorised, instead of the C library's scalar `expf`.
//! - Tiles of 48 queries x 64 keys: the micro-kernels hold 4 rows x 64 columns of
//!   accumulators (16 of the 32 vector registers) across the whole reduction; the
//!   tile's scores, 12 KiB, and the key and value tiles, 16 KiB each at d = 64, stay
//!   in L1 or L2. Values are packed per head: rows 2 KiB apart fell into a few L1 sets.
//! - Work items are blocks of query rows (all heads of a block in one item), taken from
//!   a shared counter, last block first, so that causal blocks (whose cost grows with
//!   their position) balance across the threads.

// Index loops with compile-time bounds over fixed arrays are the form LLVM unrolls
// and vectorizes best; the iterator forms clippy suggests hide the constant bounds.
#![allow(clippy::needless_range_loop)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// Lanes in one SIMD register's worth of f32 (AVX-512).
const L: usize = 16;
/// Keys per tile, and columns per micro-kernel panel.
const BC: usize = 64;
/// Rows per micro-kernel (the code of `panel_kernel` and `pv_chunk` spells out 4).
const R: usize = 4;
/// Query rows per work item.
const BR: usize = 48;

/// `a * b + c`, fused where the target has FMA (one rounding, twice the throughput),
/// plain otherwise: the portable build must not call the slow software `fma`.
#[inline(always)]
fn fmadd(a: f32, b: f32, c: f32) -> f32 {
    if cfg!(target_feature = "fma") {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
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

/// 2^x for x <= 0 (x may be -inf: gives 0), relative error < 2e-7. Cephes `exp2f`
/// polynomial on [-1/2, 1/2]; the integer part goes straight into the exponent bits.
#[inline(always)]
fn exp2(x: f32) -> f32 {
    let x = max(x, -127.0);
    // Adding 1.5 * 2^23 rounds to the nearest integer, which lands in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let shifted = x + MAGIC;
    let n = shifted - MAGIC;
    let ni = shifted.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    let f = x - n;
    let mut p = 1.535_336_2e-4f32;
    p = fmadd(p, f, 1.339_887_4e-3);
    p = fmadd(p, f, 9.618_437e-3);
    p = fmadd(p, f, 5.550_332_5e-2);
    p = fmadd(p, f, 2.402_264_8e-1);
    p = fmadd(p, f, 6.931_472e-1);
    p = fmadd(p, f, 1.0);
    // n = -127 gives exponent field 0, i.e. a factor of exactly 0.
    let scale = f32::from_bits((ni.wrapping_add(127) as u32) << 23);
    p * scale
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
    #[inline]
    fn row(&self, i: usize, col: usize, len: usize) -> &'a [f32] {
        let s = self.offset + i * self.stride + col;
        &self.data[s..s + len]
    }
}

/// `depth` rounded up to a multiple of 4: packed operands are zero-padded to it so that
/// the micro-kernels can take four steps of the reduction per pass over the accumulators.
fn depth4(depth: usize) -> usize {
    depth.div_ceil(4) * 4
}

/// R rows of A, packed as `depth4` groups of R numbers (`a[kd * R + r]` = row r,
/// column kd), times a packed panel `bp` (`depth4` rows of BC numbers): `out` gets the
/// R x BC products.
///
#[inline(always)]
fn panel_kernel(a: &[f32], bp: &[f32], out: &mut [[f32; BC]; R]) {
    // All R = 4 rows at once, accumulators in registers: each panel row loaded serves
    // the four rows, and 4 x 4 vectors make sixteen independent FMA chains.
    let mut acc = [[0f32; BC]; R];
    for (x, b) in a.chunks_exact(R).zip(bp.chunks_exact(BC)) {
        let b: &[f32; BC] = b.try_into().expect("BC numbers");
        let x: &[f32; R] = x.try_into().expect("R numbers");
        for c in 0..BC {
            acc[0][c] = fmadd(x[0], b[c], acc[0][c]);
            acc[1][c] = fmadd(x[1], b[c], acc[1][c]);
            acc[2][c] = fmadd(x[2], b[c], acc[2][c]);
            acc[3][c] = fmadd(x[3], b[c], acc[3][c]);
        }
    }
    *out = acc;
}

/// Packs R rows given by `row(r)` (each `depth` long; `None` for padding), scaled by
/// `c`, as `panel_kernel` reads them: `depth4(depth)` groups of R numbers.
fn pack_rows<'a>(dst: &mut [f32], depth: usize, c: f32, row: impl Fn(usize) -> Option<&'a [f32]>) {
    dst.fill(0.0);
    for r in 0..R {
        if let Some(src) = row(r) {
            for (kd, &x) in src[..depth].iter().enumerate() {
                dst[kd * R + r] = x * c;
            }
        }
    }
}

/// Packs `n` columns of the `depth x n` row-major matrix given by `col(kd, c)` into
/// panels of BC columns: panel p holds `depth4(depth)` rows of BC numbers, zero-padded.
fn pack_panels(depth: usize, n: usize, get: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    let panels = n.div_ceil(BC);
    let d4 = depth4(depth);
    let mut out = vec![0f32; panels * d4 * BC];
    for p in 0..panels {
        for kd in 0..depth {
            let dst = &mut out[(p * d4 + kd) * BC..][..BC];
            for (c, d) in dst.iter_mut().enumerate() {
                let col = p * BC + c;
                if col < n {
                    *d = get(kd, col);
                }
            }
        }
    }
    out
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
            s.spawn(run);
        }
        run();
    });
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

/// `x (t x d) @ w (d x n)`, row-major, on `threads` threads. Returns `t x n` numbers.
pub fn matmul(x: &[f32], t: usize, d: usize, w: &[f32], n: usize, threads: usize) -> Vec<f32> {
    assert_eq!(x.len(), t * d);
    assert_eq!(w.len(), d * n);
    let mut out = vec![0f32; t * n];
    if t == 0 || n == 0 {
        return out;
    }
    let wp = pack_panels(d, n, |kd, c| w[kd * n + c]);
    let panels = n.div_ceil(BC);
    let chunks = row_chunks(&mut out, n, BR);
    parallel_items(
        chunks.len(),
        threads,
        || (vec![0f32; depth4(d) * R], [[0f32; BC]; R]),
        |(a, acc), item| {
            let mut guard = chunks[item].lock().expect("chunk");
            let chunk: &mut [f32] = &mut guard;
            let row0 = item * BR;
            let nrows = chunk.len() / n;
            for r0 in (0..nrows).step_by(R) {
                pack_rows(a, d, 1.0, |r| {
                    (r0 + r < nrows).then(|| &x[(row0 + r0 + r) * d..][..d])
                });
                let d4 = depth4(d);
                for p in 0..panels {
                    panel_kernel(a, &wp[p * d4 * BC..(p + 1) * d4 * BC], acc);
                    let cols = BC.min(n - p * BC);
                    for (r, acc_r) in acc.iter().enumerate().take(nrows - r0) {
                        chunk[(r0 + r) * n + p * BC..][..cols].copy_from_slice(&acc_r[..cols]);
                    }
                }
            }
        },
    );
    out
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

/// Scaled dot-product attention for all heads: `out` (t rows of `heads * d_v`) gets, for
/// head h, `softmax(scale * Q_h K_h^T [masked]) V_h` in columns `h*d_v..(h+1)*d_v`.
///
/// Row i of head h of Q is `q.row(i, h * d_kq, d_kq)`, likewise for K and V. Nothing of
/// size t x s is allocated: besides per-thread tiles, the kernel holds one packed copy
/// of K and of V (O(s * d)).
pub fn attention(shape: &Shape, q: View, k: View, v: View, out: &mut [f32], threads: usize) {
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
    let tiles = s.div_ceil(BC);
    // Keys, transposed into tiles: head h, tile kt holds dk rows of BC keys.
    let d4 = depth4(dk);
    let mut kpack = Vec::with_capacity(heads * tiles * d4 * BC);
    for h in 0..heads {
        kpack.extend(pack_panels(dk, s, |kd, j| k.row(j, h * dk, dk)[kd]));
    }
    // Values, per head, as contiguous rows of dvp numbers (zero-padded to whole
    // 16-lane groups). Rows of the caller's layout are heads * widths apart, a multiple
    // of 2 KiB for common shapes, so a tile's rows would fall into a few L1 sets and
    // evict each other; contiguous rows do not.
    let dvp = dv.div_ceil(L) * L;
    let mut vpack = vec![0f32; heads * s * dvp];
    for h in 0..heads {
        for j in 0..s {
            vpack[(h * s + j) * dvp..][..dv].copy_from_slice(v.row(j, h * dv, dv));
        }
    }
    let c = scale * std::f32::consts::LOG2_E;
    let chunks = row_chunks(out, width, BR);
    parallel_items(
        chunks.len(),
        threads,
        || Scratch::new(dk, dvp),
        |st, item| {
            let mut guard = chunks[item].lock().expect("chunk");
            let chunk: &mut [f32] = &mut guard;
            let i0 = item * BR;
            let nrows = chunk.len() / width;
            let last_q = i0 + nrows - 1;
            for h in 0..heads {
                st.start(&q, i0, nrows, h * dk, dk, c);
                let key_end = if causal { s.min(last_q + 1) } else { s };
                for kt in 0..key_end.div_ceil(BC) {
                    let j0 = kt * BC;
                    let jn = BC.min(key_end - j0);
                    let kp = &kpack[(h * tiles + kt) * d4 * BC..][..d4 * BC];
                    st.scores(nrows, d4, kp, i0, j0, jn, causal);
                    let vh = View {
                        data: &vpack,
                        stride: dvp,
                        offset: h * s * dvp,
                    };
                    st.accumulate(nrows, jn, &vh, j0, 0, dvp);
                }
                for r in 0..nrows {
                    let inv = 1.0 / st.l[r];
                    let dst = &mut chunk[r * width + h * dv..][..dv];
                    for (d, &o) in dst.iter_mut().zip(&st.o[r * dvp..]) {
                        *d = o * inv;
                    }
                }
            }
        },
    );
}

/// One thread's state for one block of query rows and one head.
struct Scratch {
    /// The block's queries, pre-scaled, BR rows of dk.
    q: Vec<f32>,
    /// The current tile's scores, then probabilities: BR rows of BC.
    sc: Vec<[f32; BC]>,
    /// Unnormalised outputs, BR rows of dvp.
    o: Vec<f32>,
    /// Running maximum (base-2 domain) and sum per row.
    m: [f32; BR],
    l: [f32; BR],
    /// Factor by which this tile rescales each row's earlier sums.
    alpha: [f32; BR],
}

impl Scratch {
    fn new(dk: usize, dvp: usize) -> Scratch {
        Scratch {
            q: vec![0f32; BR * depth4(dk)],
            sc: vec![[0f32; BC]; BR],
            o: vec![0f32; BR * dvp],
            m: [0f32; BR],
            l: [0f32; BR],
            alpha: [0f32; BR],
        }
    }

    fn start(&mut self, q: &View, i0: usize, nrows: usize, col: usize, dk: usize, c: f32) {
        for (g, dst) in self.q.chunks_exact_mut(depth4(dk) * R).enumerate() {
            let r0 = g * R;
            pack_rows(dst, dk, c, |r| {
                (r0 + r < nrows).then(|| q.row(i0 + r0 + r, col, dk))
            });
        }
        self.m.fill(f32::NEG_INFINITY);
        self.l.fill(0.0);
        self.o.fill(0.0);
    }

    /// Scores of the tile's keys `j0..j0 + jn` (packed in `kp`), masked, turned into
    /// probabilities relative to the updated running maximum.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn scores(
        &mut self,
        nrows: usize,
        d4: usize,
        kp: &[f32],
        i0: usize,
        j0: usize,
        jn: usize,
        causal: bool,
    ) {
        let nr = nrows.div_ceil(R) * R;
        for r0 in (0..nr).step_by(R) {
            let out: &mut [[f32; BC]; R] = (&mut self.sc[r0..r0 + R]).try_into().expect("R rows");
            panel_kernel(&self.q[r0 * d4..(r0 + R) * d4], kp, out);
        }
        self.softmax(nr, i0, j0, jn, causal);
    }

    /// Masks the tile's scores and turns them into probabilities relative to the
    /// updated running maximum; updates the running sums.
    #[inline(never)]
    fn softmax(&mut self, nr: usize, i0: usize, j0: usize, jn: usize, causal: bool) {
        for r in 0..nr {
            let row = &mut self.sc[r];
            let lim = if causal {
                (i0 + r + 1).saturating_sub(j0).min(jn)
            } else {
                jn
            };
            for x in row[lim..].iter_mut() {
                *x = f32::NEG_INFINITY;
            }
            let mut mx = [f32::NEG_INFINITY; L];
            for g in row.chunks_exact(L) {
                for (m, &x) in mx.iter_mut().zip(g) {
                    *m = max(*m, x);
                }
            }
            let mut w = L / 2;
            while w > 0 {
                for i in 0..w {
                    mx[i] = max(mx[i], mx[i + w]);
                }
                w /= 2;
            }
            let m_new = max(self.m[r], mx[0]);
            self.alpha[r] = exp2(self.m[r] - m_new);
            self.m[r] = m_new;
            let mut sum = [0f32; L];
            for g in row.chunks_exact_mut(L) {
                for (s, x) in sum.iter_mut().zip(g.iter_mut()) {
                    *x = exp2(*x - m_new);
                    *s += *x;
                }
            }
            let mut w = L / 2;
            while w > 0 {
                for i in 0..w {
                    sum[i] += sum[i + w];
                }
                w /= 2;
            }
            self.l[r] = self.l[r] * self.alpha[r] + sum[0];
        }
    }

    /// o = alpha * o + P V for the tile's keys `j0..j0 + jn`.
    ///
    /// Four keys per pass over a row of `o`, for the same reason as in `panel_kernel`;
    /// the row is cut into constant-width chunks so that each pass is straight-line
    /// vector code.
    #[inline(never)]
    fn accumulate(&mut self, nrows: usize, jn: usize, v: &View, j0: usize, col: usize, dvp: usize) {
        let nr = nrows.div_ceil(R) * R;
        for r in 0..nr {
            let a = self.alpha[r];
            if a != 1.0 {
                for x in self.o[r * dvp..][..dvp].iter_mut() {
                    *x *= a;
                }
            }
        }
        // R = 4 rows at a time: each value row loaded serves all four, and the rows'
        // vectors make independent FMA chains (enough to hide FMA latency).
        for r in (0..nr).step_by(R) {
            let p: [&[f32; BC]; R] = std::array::from_fn(|k| &self.sc[r + k]);
            let o = &mut self.o[r * dvp..(r + R) * dvp];
            let mut off = 0;
            while off < dvp {
                match dvp - off {
                    16 => pv_chunk::<16>(o, dvp, off, p, jn, v, j0, col),
                    32 => pv_chunk::<32>(o, dvp, off, p, jn, v, j0, col),
                    48 => pv_chunk::<48>(o, dvp, off, p, jn, v, j0, col),
                    _ => pv_chunk::<64>(o, dvp, off, p, jn, v, j0, col),
                }
                off += 64;
            }
        }
    }
}

/// For the R rows k of `o` (each `dvp` long):
/// `o[k][off..off + W] += sum over j < jn of p[k][j] * V[j0 + j][col + off..][..W]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn pv_chunk<const W: usize>(
    o: &mut [f32],
    dvp: usize,
    off: usize,
    p: [&[f32; BC]; R],
    jn: usize,
    v: &View,
    j0: usize,
    col: usize,
) {
    let mut acc: [[f32; W]; R] =
        std::array::from_fn(|k| o[k * dvp + off..][..W].try_into().expect("W numbers"));
    for j in 0..jn.min(BC) {
        let vr: &[f32; W] = v.row(j0 + j, col + off, W).try_into().expect("W numbers");
        let (p0, p1, p2, p3) = (p[0][j], p[1][j], p[2][j], p[3][j]);
        for c in 0..W {
            acc[0][c] = fmadd(p0, vr[c], acc[0][c]);
            acc[1][c] = fmadd(p1, vr[c], acc[1][c]);
            acc[2][c] = fmadd(p2, vr[c], acc[2][c]);
            acc[3][c] = fmadd(p3, vr[c], acc[3][c]);
        }
    }
    for (k, a) in acc.iter().enumerate() {
        o[k * dvp + off..][..W].copy_from_slice(a);
    }
}
