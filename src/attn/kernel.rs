//! The fast path: tiled online-softmax attention (the flash-attention idea) and the
//! projection matmul, in portable auto-vectorizable Rust on all cores.
//!
//! No intrinsics and no `unsafe`: the inner loops work on fixed-width arrays (rows of
//! 64 = 4 x 16 lanes, four AVX-512 registers; LLVM splits them for narrower SIMD) with
//! compile-time bounds, so LLVM keeps the accumulators in registers.
//!
//! Performance notes (2-core AVX-512 Xeon, fp32, 8 heads of 64; `scripts/bench-attn.sh`
//! for the figures beside PyTorch, one-thread CPU time for the comparisons below, as the
//! machine is shared and wall-clock times vary by 30% from run to run):
//! - Scores are computed in the base-2 domain (`q` pre-scaled by `scale * log2(e)`), so
//!   the softmax needs one `exp2` per score: a 6-term polynomial and an exponent add,
//!   vectorised, instead of the C library's scalar `expf`.
//! - Scores are held transposed: one row per key, one lane per query, 64 queries (a
//!   "panel", four registers) side by side. The softmax's running maximum, sum and
//!   rescaling factor are then lane-wise vectors; held the other way round (a row per
//!   query), each row needed two horizontal reductions and a scalar `exp2`, and the
//!   softmax took 18% of the time at T = 1024 (now about 10%, nearly all `exp2`).
//! - One micro-kernel does all the arithmetic (`panel_kernel`): 4 rows x 64 columns of
//!   accumulators (16 of the 32 vector registers) over the whole reduction, each loaded
//!   panel row shared by the four rows. Q K^T is 4 keys (broadcast) x 64 queries; P V
//!   is 4 value columns (broadcast) x 64 queries, so the output is transposed too and
//!   is turned back once per block. In isolation it runs at about 85% of the FMA peak;
//!   5 rows (tiles of 80 keys) measured no better in the whole kernel.
//! - Accumulators stay in registers only when the reduction loop is outside a loop of
//!   constant trip count over a few `[f32; 64]` rows: spelled as one 6 x 64 array, or
//!   with the accumulators in memory, LLVM kept them on the stack (3-4x slower).
//! - The streamed panels are `Row`s, 64-byte aligned: with `[f32; 64]` (4-byte
//!   alignment) a run whose allocations straddled cache lines was 20% slower.
//! - Q, K and V are packed once per call, in parallel, whole rows of all heads in
//!   order (a head's rows alone, 2 KiB apart, defeated the prefetchers), into buffers
//!   kept on the calling thread for the next call: packing into fresh pages (a fault
//!   and a miss per line) took 12% at T = 1024. A tile's packed keys and values are
//!   contiguous: value column groups `s` keys apart shared L1 sets.
//! - Work items are (head, block of queries), from a shared counter, last first (causal
//!   blocks cost more the later they are), a head's blocks in a row so that its keys
//!   and values are still in L2. Blocks are 512 queries at long lengths (each key tile
//!   fetched serves more queries: 114 -> 124 GFLOP/s at T = 16384), fewer where the
//!   items would be too few to balance two threads.
//! - Packing and attention run on one spawn of the threads, a `Barrier` between the
//!   phases; packed tiles are handed from the first phase to the second through
//!   `OnceLock`s, read without locking. Against a spawn per phase, interleaved runs at
//!   T = 1024, full, two threads: best 211 against 206 GFLOP/s, ahead in 5 of 5 pairs;
//!   causal and T = 4096 unchanged within noise. Turning the output back in fixed-size
//!   16 x 16 blocks (as `pack_queries` does) measured slower: `write` took 8% instead
//!   of 4% of one thread's time.
//! - Copies of variable length become `memmove` calls (8% at T = 1024 when packing
//!   4-number groups), and transposing loops became scatters or gathers: the packing
//!   code uses fixed-size arrays and a fixed-size fast path.
//! - LLVM's tuning for this CPU prefers 256-bit vectors: with only `target-cpu=native`
//!   the kernels run on ymm registers. `-C target-feature=-prefer-256-bit` (rustc warns
//!   that the feature is unstable; LLVM honours it) gives zmm FMAs throughout.
//! - `scores`, `accumulate`, the packing functions and `write` are kept out of line
//!   (a call per tile or per block, a negligible cost) so that profiles attribute time
//!   per phase. At T = 1024, causal, on two threads: 42% scores (of which about a
//!   quarter is the softmax), 31% accumulate, 16% packing, 4% writing the output.

// Index loops with compile-time bounds over fixed arrays are the form LLVM unrolls
// and vectorizes best; the iterator forms clippy suggests hide the constant bounds.
#![allow(clippy::needless_range_loop)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// Columns per micro-kernel panel: four AVX-512 registers of 16 lanes.
const N: usize = 64;
/// Keys per tile.
const BC: usize = 64;
/// Rows per micro-kernel (the code of `panel_kernel` spells out 4).
const R: usize = 4;
/// Rows per work item of `matmul`.
const BR: usize = 192;

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

/// N numbers on a 64-byte boundary: one cache line, four aligned AVX-512 loads. The
/// panels the micro-kernel streams are made of these: `Vec<[f32; N]>` is only 4-byte
/// aligned, and runs whose allocations happened to straddle lines (every load split
/// across two) were 20% slower (109 against 134 GFLOP/s at T = 1024, one thread,
/// alternating from run to run).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Row([f32; N]);

impl std::ops::Deref for Row {
    type Target = [f32; N];
    fn deref(&self) -> &[f32; N] {
        &self.0
    }
}

impl std::ops::DerefMut for Row {
    fn deref_mut(&mut self) -> &mut [f32; N] {
        &mut self.0
    }
}

/// A row of zeros.
const ZERO: Row = Row([0.0; N]);

/// R rows of A, packed as groups of R numbers (`a[kd * R + r]` = row r, column kd),
/// times a packed panel `bp` (rows of N numbers), added to `acc`: returns the R x N
/// sums. The depth is the shorter of the two operands.
#[inline(always)]
fn panel_kernel(a: &[f32], bp: &[Row], mut acc: [[f32; N]; R]) -> [[f32; N]; R] {
    // All R = 4 rows at once, accumulators in registers: each panel row loaded serves
    // the four rows, and 4 x 4 vectors make sixteen independent FMA chains.
    for (x, b) in a.chunks_exact(R).zip(bp) {
        let x: &[f32; R] = x.try_into().expect("R numbers");
        for c in 0..N {
            acc[0][c] = fmadd(x[0], b[c], acc[0][c]);
            acc[1][c] = fmadd(x[1], b[c], acc[1][c]);
            acc[2][c] = fmadd(x[2], b[c], acc[2][c]);
            acc[3][c] = fmadd(x[3], b[c], acc[3][c]);
        }
    }
    acc
}

/// Packs R rows given by `row(r)` (each `depth` long; `None` for padding) as
/// `panel_kernel` reads them: `depth` groups of R numbers.
fn pack_rows<'a>(dst: &mut [f32], depth: usize, row: impl Fn(usize) -> Option<&'a [f32]>) {
    dst.fill(0.0);
    for r in 0..R {
        if let Some(src) = row(r) {
            for (kd, &x) in src[..depth].iter().enumerate() {
                dst[kd * R + r] = x;
            }
        }
    }
}

/// Packs the columns of the row-major `depth x n` matrix `w` into panels of N columns:
/// panel p holds `depth` rows of N numbers, zero-padded.
fn pack_panels(depth: usize, n: usize, w: &[f32]) -> Vec<Row> {
    let panels = n.div_ceil(N);
    let mut out = vec![ZERO; panels * depth];
    for p in 0..panels {
        let cols = N.min(n - p * N);
        for kd in 0..depth {
            out[p * depth + kd][..cols].copy_from_slice(&w[kd * n + p * N..][..cols]);
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

/// `x (t x d) @ w (d x n)`, row-major, on `threads` threads. Returns `t x n` numbers.
pub fn matmul(x: &[f32], t: usize, d: usize, w: &[f32], n: usize, threads: usize) -> Vec<f32> {
    assert_eq!(x.len(), t * d);
    assert_eq!(w.len(), d * n);
    let mut out = vec![0f32; t * n];
    if t == 0 || n == 0 {
        return out;
    }
    let wp = pack_panels(d, n, w);
    let panels = n.div_ceil(N);
    let chunks = row_chunks(&mut out, n, BR);
    parallel_items(
        chunks.len(),
        threads,
        || vec![0f32; d * R],
        |a, item| {
            let mut guard = chunks[item].lock().expect("chunk");
            let chunk: &mut [f32] = &mut guard;
            let row0 = item * BR;
            let nrows = chunk.len() / n;
            for r0 in (0..nrows).step_by(R) {
                pack_rows(a, d, |r| {
                    (r0 + r < nrows).then(|| &x[(row0 + r0 + r) * d..][..d])
                });
                for p in 0..panels {
                    let acc = panel_kernel(a, &wp[p * d..(p + 1) * d], [[0f32; N]; R]);
                    let cols = N.min(n - p * N);
                    for (r, acc_r) in acc.iter().enumerate().take(nrows - r0) {
                        chunk[(r0 + r) * n + p * N..][..cols].copy_from_slice(&acc_r[..cols]);
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
/// of Q, K and V (O((t + s) * d)), which stays allocated on the calling thread for its
/// next call.
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
    let geo = Geometry {
        heads,
        dk,
        dv,
        dv4: dv.div_ceil(R),
        s,
        causal,
    };
    // Keys and values, packed once (in parallel, one key tile of all heads per item)
    // in the order the micro-kernel reads its broadcast operand, into a buffer kept
    // from the last call on this thread (see `PACKS`).
    // The queries likewise, pre-scaled and transposed, panel by panel (all heads).
    let c = scale * std::f32::consts::LOG2_E;
    let (mut buf, mut qbuf) = PACKS.with(|p| p.take());
    buf.resize(geo.tiles() * geo.tile_stride(), 0.0);
    let qstride = (heads * dk).max(1);
    qbuf.resize(t.div_ceil(QP) * qstride, ZERO);
    // Queries per work item: each packed key and value tile fetched (from L3 at long
    // lengths) serves the whole block, so long blocks pay at long lengths (one thread,
    // T = 16384: 114 GFLOP/s with 128 rows, 124 with 512), while short sequences need
    // enough items to balance the threads (T = 1024, 8 heads: 64 items of 128 rows).
    let np = [8, 4, 2, 1]
        .into_iter()
        .find(|&np| heads * t.div_ceil(np * QP) >= 32 * threads)
        .unwrap_or(1);
    let br = np * QP;
    let blocks = t.div_ceil(br);
    {
        let tiles: Vec<Slot<f32>> = buf.chunks_mut(geo.tile_stride()).map(Slot::new).collect();
        let panels: Vec<Slot<Row>> = qbuf.chunks_mut(qstride).map(Slot::new).collect();
        let chunks = row_chunks(out, width, br);
        // Both phases on one spawn of the threads, a barrier between them.
        // Items are (head, block) pairs, last first: causal blocks cost more the later
        // they are. A head's blocks follow each other, so that its packed keys and
        // values are still in L2 for the next block.
        parallel_phases(
            (tiles.len() + panels.len(), |i: usize| {
                match i.checked_sub(tiles.len()) {
                    None => tiles[i].fill(|dst| geo.pack(i, &k, &v, dst)),
                    Some(p) => panels[p].fill(|dst| geo.pack_queries(p, &q, t, c, dst)),
                }
            }),
            (
                blocks * heads,
                |(st, packs, qts): &mut (Scratch, Vec<&[f32]>, Vec<&[Row]>), item: usize| {
                    let (h, b) = (item / blocks, item % blocks);
                    let i0 = b * br;
                    let nrows = br.min(t - i0);
                    st.run(&geo, &qts[i0 / QP..], h, nrows, i0, packs);
                    let mut guard = chunks[b].lock().expect("chunk");
                    st.write(&mut guard, width, h, dv, nrows);
                },
            ),
            || {
                (
                    Scratch::new(dk, geo.dv4, np),
                    tiles.iter().map(Slot::get).collect(),
                    panels.iter().map(Slot::get).collect(),
                )
            },
            threads,
        );
    }
    PACKS.with(|p| p.replace((buf, qbuf)));
}

thread_local! {
    /// The packed keys and values of the last call on this thread, kept for the next:
    /// fresh pages cost a fault and a cache miss per line on first write (packing into
    /// new memory took 12% of the time at T = 1024, 8 heads). Holds O(s * d) numbers
    /// between calls.
    static PACKS: std::cell::RefCell<(Vec<f32>, Vec<Row>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
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
}

impl Geometry {
    /// Key tiles.
    fn tiles(&self) -> usize {
        self.s.div_ceil(BC)
    }

    /// Numbers in one head's packed key tile (`BC * dk`) and value tile.
    fn tile_lens(&self) -> (usize, usize) {
        (BC * self.dk, self.dv4 * BC * R)
    }

    /// Numbers in one packed tile of all heads.
    fn tile_stride(&self) -> usize {
        let (kl, vl) = self.tile_lens();
        self.heads * (kl + vl)
    }

    /// Head h's packed keys and values of tile kt.
    fn tile<'a>(&self, tiles: &[&'a [f32]], kt: usize, h: usize) -> (&'a [f32], &'a [f32]) {
        let (kl, vl) = self.tile_lens();
        tiles[kt][h * (kl + vl)..][..kl + vl].split_at(kl)
    }

    /// Packs queries `p * QP..` (up to QP of the `t`), scaled by `c`, into `dst`: per
    /// head, `dk` rows of QP (row d holds column d of each query; missing queries as
    /// zeros). Whole rows of Q (all heads) are read in order, as in `pack`: a head's
    /// rows alone, read in each work item, waited on cache misses (8% of the time at
    /// T = 1024, causal).
    #[inline(never)]
    fn pack_queries(&self, p: usize, q: &View, t: usize, c: f32, dst: &mut [Row]) {
        let dk = self.dk;
        let rows = QP.min(t - p * QP);
        // Transposed in blocks of T x T, fixed-size (a plain loop became scatter
        // instructions, 10% of the time at T = 1024).
        const T: usize = 16;
        for r0 in (0..QP).step_by(T) {
            let src: [Option<&[f32]>; T] = std::array::from_fn(|r| {
                (r0 + r < rows).then(|| q.row(p * QP + r0 + r, 0, self.heads * dk))
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
    #[inline(never)]
    fn pack<'a>(&self, kt: usize, k: &View<'a>, v: &View<'a>, dst: &mut [f32]) {
        let (dk, dv) = (self.dk, self.dv);
        let (kl, vl) = self.tile_lens();
        // Row jj of the tile (all heads' `w` columns), if the key exists.
        let row = |m: &View<'a>, jj: usize, w: usize| -> Option<&'a [f32]> {
            let j = kt * BC + jj;
            (j < self.s).then(|| m.row(j, 0, self.heads * w))
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
                    let mut t = [0f32; W * R];
                    for d in 0..W {
                        for r in 0..R {
                            t[d * R + r] = blk[r][d];
                        }
                    }
                    let out = &mut kd[d0 * R..][..w * R];
                    if let Ok(out) = <&mut [f32; W * R]>::try_from(&mut *out) {
                        *out = t;
                    } else {
                        for (o, x) in out.iter_mut().zip(t) {
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
                    vd[(gi * BC + jj) * R..][..R].copy_from_slice(src);
                }
                // A partial last group, and rows past the last key, as scalars padded
                // with zeros (a copy of variable length would call memmove).
                for gi in full..self.dv4 {
                    let src = vs.get(gi * R..).unwrap_or(&[]);
                    for (e, x) in vd[(gi * BC + jj) * R..][..R].iter_mut().enumerate() {
                        *x = src.get(e).copied().unwrap_or(0.0);
                    }
                }
            }
        }
    }
}

/// Queries per panel: the lanes of four AVX-512 registers. Scores are held transposed
/// (one row per key, one lane per query), so the softmax's maximum and sum per query
/// are lane-wise, with no horizontal reductions.
const QP: usize = N;
/// One thread's state for one block of query rows (up to `np` panels) and one head.
struct Scratch {
    dk: usize,
    dv4: usize,
    /// Unnormalised outputs, transposed: `np` panels of `dv4 * R` rows of QP.
    ot: Vec<Row>,
    /// Running maximum (base-2 domain) and sum per query.
    m: Vec<Row>,
    l: Vec<Row>,
    /// The current tile's scores, then probabilities: BC rows (keys) of QP (queries).
    sc: Vec<Row>,
}

impl Scratch {
    fn new(dk: usize, dv4: usize, np: usize) -> Scratch {
        Scratch {
            dk,
            dv4,
            ot: vec![ZERO; np * dv4 * R],
            m: vec![ZERO; np],
            l: vec![ZERO; np],
            sc: vec![ZERO; BC],
        }
    }

    /// Resets the running state for a block of `nrows` queries.
    fn reset(&mut self, nrows: usize) {
        let dv4 = self.dv4;
        for p in 0..nrows.div_ceil(QP) {
            self.m[p] = Row([f32::NEG_INFINITY; QP]);
            self.l[p] = ZERO;
            self.ot[p * dv4 * R..(p + 1) * dv4 * R].fill(ZERO);
        }
    }

    /// Attention of head h for queries `i0..i0 + nrows`, into `ot`, `l`; `qt` holds
    /// the packed query panels from the block's first (see `pack_queries`), `packs`
    /// the packed key and value tiles.
    fn run(
        &mut self,
        g: &Geometry,
        qt: &[&[Row]],
        h: usize,
        nrows: usize,
        i0: usize,
        packs: &[&[f32]],
    ) {
        let np = nrows.div_ceil(QP);
        self.reset(nrows);
        // Keys a panel's queries see: all, or (causal) up to its last query.
        let key_end = |p: usize| {
            if g.causal {
                g.s.min(i0 + (p * QP + QP).min(nrows))
            } else {
                g.s
            }
        };
        // Key tiles outside, panels inside: each key and value tile, streamed from L2
        // or L3 at long lengths, serves the whole block.
        for kt in 0..key_end(np - 1).div_ceil(BC) {
            let j0 = kt * BC;
            for p in 0..np {
                let ke = key_end(p);
                if j0 >= ke {
                    continue;
                }
                let jn = BC.min(ke - j0).div_ceil(R) * R;
                let qi0 = i0 + p * QP;
                let masked = j0 + jn > g.s || (g.causal && j0 + jn > qi0 + 1);
                let (kp, vp) = g.tile(packs, kt, h);
                let alpha = self.scores(
                    &kp[..jn * g.dk],
                    &qt[p][h * g.dk..][..g.dk],
                    p,
                    jn,
                    masked.then_some((j0, g.s, g.causal, qi0)),
                );
                self.accumulate(vp, jn, p, &alpha);
            }
        }
    }

    /// Scores of `jn` keys (packed in `kp`) against panel p (`qt`), masked as `mask` says
    /// (first key, key count, causal, first query), then turned into probabilities
    /// relative to the updated running maximum. Returns the factor by which each
    /// query's earlier sums must be rescaled.
    #[inline(never)]
    fn scores(
        &mut self,
        kp: &[f32],
        qt: &[Row],
        p: usize,
        jn: usize,
        mask: Option<(usize, usize, bool, usize)>,
    ) -> [f32; QP] {
        let dk = self.dk;
        let sc = &mut self.sc[..jn];
        let mut mx = *self.m[p];
        for (gi, out) in sc.chunks_exact_mut(R).enumerate() {
            let acc = panel_kernel(&kp[gi * R * dk..(gi + 1) * R * dk], qt, [[0f32; N]; R]);
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
                    row[..(key - qi0).min(QP)].fill(f32::NEG_INFINITY);
                }
            }
        }
        for row in sc.iter() {
            for c in 0..QP {
                mx[c] = max(mx[c], row[c]);
            }
        }
        let m = &mut self.m[p];
        let mut alpha = [0f32; QP];
        for c in 0..QP {
            alpha[c] = exp2(m[c] - mx[c]);
        }
        **m = mx;
        let mut sum = [0f32; QP];
        for row in sc.iter_mut() {
            for c in 0..QP {
                let e = exp2(row[c] - mx[c]);
                row[c] = e;
                sum[c] += e;
            }
        }
        let l = &mut self.l[p];
        for c in 0..QP {
            l[c] = fmadd(l[c], alpha[c], sum[c]);
        }
        alpha
    }

    /// `o = alpha * o + P V` for panel p and the tile's first `jn` keys (values packed
    /// in `vp` as `dv4` groups of BC keys of R numbers).
    #[inline(never)]
    fn accumulate(&mut self, vp: &[f32], jn: usize, p: usize, alpha: &[f32; QP]) {
        let dv4 = self.dv4;
        let pt = &self.sc[..jn];
        let ot = &mut self.ot[p * dv4 * R..(p + 1) * dv4 * R];
        for (gi, o) in ot.chunks_exact_mut(R).enumerate() {
            let init: [[f32; N]; R] = std::array::from_fn(|r| {
                let mut x = *o[r];
                for c in 0..N {
                    x[c] *= alpha[c];
                }
                x
            });
            let a = &vp[gi * BC * R..][..jn * R];
            let acc = panel_kernel(a, pt, init);
            for (o, a) in o.iter_mut().zip(acc) {
                o.0 = a;
            }
        }
    }

    /// Writes the block's normalised outputs for head h into `chunk` (the block's rows
    /// of `width` numbers).
    #[inline(never)]
    fn write(&self, chunk: &mut [f32], width: usize, h: usize, dv: usize, nrows: usize) {
        let dv4 = self.dv4;
        for r in 0..nrows {
            let (p, c) = (r / QP, r % QP);
            let inv = 1.0 / self.l[p][c];
            let ot = &self.ot[p * dv4 * R..];
            for (d, x) in chunk[r * width + h * dv..][..dv].iter_mut().enumerate() {
                *x = ot[d][c] * inv;
            }
        }
    }
}
