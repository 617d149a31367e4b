//! A PyTorch-compatible CPU generator: MT19937 seeded like `torch.manual_seed`,
//! `torch.rand` for float32 and `Tensor.normal_` as `nn.Embedding` draws it, bit for bit.
//!
//! The facts (block layout, tail rule, both transcendental flavours, the fused
//! multiply-adds GCC emitted in PyTorch's AVX2 kernel) are in the project note
//! `pytorch-rng.md`; section numbers below refer to it.

use std::sync::Mutex;

/// Which of PyTorch's two vectorised `normal_` kernels to reproduce.
///
/// Both agree with each other to about 3 ulp; they differ in the last bits only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NormalFill {
    /// PyTorch's portable `normal_fill` with the C library's `logf`/`cosf`/`sinf`: what
    /// PyTorch runs on ARM and Apple machines and with `ATEN_CPU_CAPABILITY=default`.
    /// With glibc this matches PyTorch bit for bit, and it gives the digits PyTorch prints on those machines.
    #[default]
    Scalar,
    /// x86-64 PyTorch's `normal_fill_AVX2` (also used on AVX-512 machines), bit for bit:
    /// Cephes-style `log`/`sincos` in float32 with GCC's fused multiply-adds.
    Avx2,
}

const N: usize = 624;
const M: usize = 397;

/// MT19937's state update, in three loops without wrap-around indices, which LLVM
/// vectorizes: the first reads only words it has not written yet, the second words
/// written at least N - M = 227 steps before. Compiled for AVX2 too (8 words a step;
/// walking 1.26e10 draws took 29.7 s with the one loop of `% N` indices, 2.8 s with
/// these loops on SSE2, 1.9 s on AVX2).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn twist(st: &mut [u32; N]) {
    #[inline(always)]
    fn mix(this: u32, next: u32, far: u32) -> u32 {
        let y = (this & 0x8000_0000) | (next & 0x7fff_ffff);
        far ^ (y >> 1) ^ ((next & 1).wrapping_neg() & 0x9908_b0df)
    }
    for k in 0..N - M {
        st[k] = mix(st[k], st[k + 1], st[k + M]);
    }
    for k in N - M..N - 1 {
        st[k] = mix(st[k], st[k + 1], st[k + M - N]);
    }
    st[N - 1] = mix(st[N - 1], st[0], st[M - 1]);
}

/// The MT19937 engine as PyTorch seeds and steps it, with the cached
/// normal sample of PyTorch's per-element path.
#[derive(Clone)]
pub struct TorchRng {
    state: [u32; N],
    next: usize,
    left: usize,
    cached_normal: Option<f64>,
}

impl TorchRng {
    /// A generator after `torch.manual_seed(seed)`. PyTorch keeps the low 32 bits.
    pub fn new(seed: u64) -> TorchRng {
        let mut state = [0u32; N];
        state[0] = seed as u32;
        for j in 1..N {
            let prev = state[j - 1];
            state[j] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(j as u32);
        }
        TorchRng {
            state,
            next: 0,
            left: 1,
            cached_normal: None,
        }
    }

    fn twist(&mut self) {
        twist(&mut self.state);
        self.left = N;
        self.next = 0;
    }

    /// One 32-bit draw (`CPUGeneratorImpl::random`).
    pub(crate) fn next_u32(&mut self) -> u32 {
        self.left -= 1;
        if self.left == 0 {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// Skips `count` 32-bit draws without tempering them: whole twists are done in bulk.
    pub(crate) fn skip(&mut self, mut count: u64) {
        loop {
            let avail = (self.left - 1) as u64;
            if count <= avail {
                self.left -= count as usize;
                self.next += count as usize;
                return;
            }
            count -= avail;
            self.twist();
            // A fresh twist holds N untempered draws; `left` counts one past them.
            self.left = N + 1;
        }
    }

    /// One `torch.rand` float32 sample in [0, 1).
    pub(crate) fn uniform_f32(&mut self) -> f32 {
        let u = self.next_u32();
        (u & 0x00ff_ffff) as f32 * (1.0 / 16_777_216.0)
    }

    /// One `random64()`-based double in [0, 1), as `uniform_real_distribution<double>`.
    fn uniform_f64(&mut self) -> f64 {
        let hi = self.next_u32() as u64;
        let lo = self.next_u32() as u64;
        ((hi << 32 | lo) & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `torch.rand(rows, cols)` in row-major order (`nn.Parameter(torch.rand(..))`).
    pub fn rand(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform_f32()).collect()
    }

    /// One standard normal sample from PyTorch's per-element double path,
    /// used for tensors of fewer than 16 elements; the sine sample is cached.
    pub(crate) fn normal_scalar(&mut self) -> f64 {
        if let Some(v) = self.cached_normal.take() {
            return v;
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let th = 2.0 * std::f64::consts::PI * u1;
        self.cached_normal = Some(r * th.sin());
        r * th.cos()
    }

    /// `Tensor.normal_(0, 1)` on a fresh contiguous float32 tensor of `n` elements, as
    /// `nn.Embedding` initialises its weight.
    pub fn normal_f32(&mut self, n: usize, fill: NormalFill) -> Vec<f32> {
        if n < 16 {
            return (0..n).map(|_| self.normal_scalar() as f32).collect();
        }
        let mut data: Vec<f32> = (0..n).map(|_| self.uniform_f32()).collect();
        for block in data.chunks_exact_mut(16) {
            transform16(block.try_into().expect("16 elements"), fill);
        }
        if !n.is_multiple_of(16) {
            let tail: &mut [f32; 16] = (&mut data[n - 16..]).try_into().expect("16 elements");
            for x in tail.iter_mut() {
                *x = self.uniform_f32();
            }
            transform16(tail, fill);
        }
        data
    }
}

/// Box-Muller on one 16-block, in place: element j < 8 pairs with j + 8.
pub(crate) fn transform16(d: &mut [f32; 16], fill: NormalFill) {
    for j in 0..8 {
        let u1 = 1.0f32 - d[j];
        let u2 = d[j + 8];
        let (c, s) = match fill {
            NormalFill::Scalar => {
                let r = ((-2.0f32) * u1.ln()).sqrt();
                let th = ((2.0 * std::f64::consts::PI) * u2 as f64) as f32;
                (r * th.cos(), r * th.sin())
            }
            NormalFill::Avx2 => {
                let r = ((-2.0f32) * log256(u1)).sqrt();
                let th = f32::from_bits(0x40c9_0fdb) * u2;
                let (s, c) = sincos256(th);
                // fma(r*c, std, mean) with std = 1, mean = 0 is exactly r*c.
                (r * c, r * s)
            }
        };
        d[j] = c;
        d[j + 8] = s;
    }
}

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// `log256_ps` of PyTorch's `avx_mathfun.h` with GCC's contractions.
fn log256(x: f32) -> f32 {
    let x = x.max(f32::from_bits(0x0080_0000));
    let b = x.to_bits();
    let mut e = ((b >> 23) as i32 - 127) as f32 + 1.0;
    let mut x = f32::from_bits((b & !0x7f80_0000) | 0.5f32.to_bits());
    if x < f(0x3f35_04f3) {
        e -= 1.0;
        x = (x - 1.0) + x;
    } else {
        x = (x - 1.0) + 0.0;
    }
    let z = x * x;
    let mut y = f(0x3d90_21bb);
    for p in [
        0xbdeb_d1b8,
        0x3def_251a,
        0xbdfe_5d4f,
        0x3e11_e9bf,
        0xbe2a_ae50,
        0x3e4c_ceac,
        0xbe7f_fffc,
        0x3eaa_aaaa,
    ] {
        y = y.mul_add(x, f(p));
    }
    y *= x;
    y = y.mul_add(z, e * f(0xb95e_8083));
    y -= z * 0.5;
    e.mul_add(f(0x3f31_8000), x + y)
}

/// `sincos256_ps` of PyTorch's `avx_mathfun.h` with GCC's contractions; returns (sin, cos).
fn sincos256(x: f32) -> (f32, f32) {
    let mut sgn_sin = x < 0.0;
    let mut x = x.abs();
    let mut j = (x * f(0x3fa2_f983)) as i32;
    j = (j + 1) & !1;
    let y = j as f32;
    let swap_sin = j & 4 != 0;
    let use_sinpoly_for_sin = j & 2 == 0;
    x = y.mul_add(f(0xbf49_0000), x);
    x = y.mul_add(f(0xb97d_a000), x);
    x = y.mul_add(f(0xb322_2169), x);
    let sgn_cos = (!(j - 2)) & 4 != 0;
    sgn_sin ^= swap_sin;
    let z = x * x;
    let mut yc = f(0x37cc_f5ce)
        .mul_add(z, f(0xbab6_061a))
        .mul_add(z, f(0x3d2a_aaa5));
    yc *= z;
    yc = yc.mul_add(z, -(z * 0.5));
    yc += 1.0;
    let mut ys = f(0xb94c_a1f9)
        .mul_add(z, f(0x3c08_839e))
        .mul_add(z, f(0xbe2a_aaa3));
    ys *= z;
    ys = ys.mul_add(x, x);
    let (s, c) = if use_sinpoly_for_sin {
        (ys, yc)
    } else {
        (yc, ys)
    };
    (if sgn_sin { -s } else { s }, if sgn_cos { -c } else { c })
}

/// Rows of `nn.Embedding(vocab, dim)`'s weight after `torch.manual_seed(seed)`, computed
/// only where asked: the normal fill transforms independent 16-blocks whose uniforms are
/// draws `16b..16b+16` in order, so a row needs only its blocks (and the tail block).
///
/// What is drawn is kept for the rest of the run (a clone starts afresh): the blocks,
/// in a table of the embedding's size whose pages fill as rows are drawn (tables up to
/// [`DENSE_MAX`] numbers), or else up to [`SPARSE_BLOCKS`] blocks by index; and the
/// generator's state every `spacing` draws along the way (at most [`MAX_CHECKPOINTS`]
/// states, the spacing doubling when they fill up), so that an id far into the stream is
/// walked to once per run, not once per record.
pub struct LazyEmbedding {
    seed: u64,
    vocab: usize,
    dim: usize,
    fill: NormalFill,
    kept: Mutex<Kept>,
}

/// Largest table (in numbers) kept as a whole: 256 MiB of address space, of which only
/// the pages of drawn rows are ever touched.
const DENSE_MAX: usize = 1 << 26;
/// Blocks kept by index for larger tables (about 100 MB).
const SPARSE_BLOCKS: usize = 1 << 20;
/// Generator states kept (2.5 KB each).
const MAX_CHECKPOINTS: usize = 1024;
/// The first spacing of kept generator states, in draws (about a millisecond of walking).
const FIRST_SPACING: u64 = 1 << 20;

/// What a [`LazyEmbedding`] keeps between calls.
struct Kept {
    store: Store,
    /// The tail block (elements `n - 16..n` when n is not a multiple of 16).
    tail: Option<[f32; 16]>,
    walker: Walker,
}

/// Drawn blocks.
enum Store {
    /// The whole table (`n` numbers, zero where not drawn) and a bit per drawn block.
    Dense { table: Vec<f32>, drawn: Vec<u64> },
    /// Blocks by index.
    Sparse(ahash::AHashMap<u64, [f32; 16]>),
}

/// Generator states kept along the stream.
struct Walker {
    /// States at draw positions that are multiples of `spacing`, ascending.
    checkpoints: Vec<(u64, TorchRng)>,
    spacing: u64,
    /// Draws walked over in all (for tests: a far id is walked to once).
    walked: u64,
}

impl Walker {
    /// Moves `cur` (a generator and its draw position) to position `target`: walked on
    /// from where it is, or from the latest kept state before `target` if that is
    /// closer (or `cur` is past `target` or absent), or from the seed; states met at
    /// multiples of the spacing are kept. Generators are moved in place (2.5 KB each).
    fn seek<'c>(
        &mut self,
        seed: u64,
        target: u64,
        cur: &'c mut Option<(u64, TorchRng)>,
    ) -> &'c mut TorchRng {
        let kept = self.checkpoints.partition_point(|(p, _)| *p <= target);
        let latest = kept.checked_sub(1).map(|k| self.checkpoints[k].0);
        let usable = matches!(cur, Some((p, _)) if *p <= target && latest.is_none_or(|l| l <= *p));
        if !usable {
            *cur = Some(match kept.checked_sub(1) {
                Some(k) => self.checkpoints[k].clone(),
                None => (0, TorchRng::new(seed)),
            });
        }
        let (pos, rng) = cur.as_mut().expect("set above");
        self.walked += target - *pos;
        loop {
            let next = (*pos / self.spacing + 1) * self.spacing;
            if next > target {
                break;
            }
            rng.skip(next - *pos);
            *pos = next;
            self.keep(next, rng);
        }
        rng.skip(target - *pos);
        *pos = target;
        rng
    }

    fn keep(&mut self, pos: u64, rng: &TorchRng) {
        let at = self.checkpoints.partition_point(|(p, _)| *p < pos);
        if self.checkpoints.get(at).is_some_and(|(p, _)| *p == pos) {
            return;
        }
        self.checkpoints.insert(at, (pos, rng.clone()));
        if self.checkpoints.len() > MAX_CHECKPOINTS {
            self.spacing *= 2;
            let spacing = self.spacing;
            self.checkpoints.retain(|(p, _)| p % spacing == 0);
        }
    }
}

impl Clone for LazyEmbedding {
    fn clone(&self) -> LazyEmbedding {
        LazyEmbedding::new(self.seed, self.vocab, self.dim, self.fill)
    }
}

impl LazyEmbedding {
    /// The embedding of `vocab` rows of `dim` numbers drawn after `manual_seed(seed)`.
    pub fn new(seed: u64, vocab: usize, dim: usize, fill: NormalFill) -> LazyEmbedding {
        LazyEmbedding {
            seed,
            vocab,
            dim,
            fill,
            kept: Mutex::new(Kept {
                store: Store::Sparse(Default::default()),
                tail: None,
                walker: Walker {
                    checkpoints: Vec::new(),
                    spacing: FIRST_SPACING,
                    walked: 0,
                },
            }),
        }
    }

    /// The whole table, row-major (what `nn.Embedding` holds).
    pub(crate) fn full(&self) -> Vec<f32> {
        TorchRng::new(self.seed).normal_f32(self.vocab * self.dim, self.fill)
    }

    #[cfg(test)]
    /// Draws walked over so far by [`LazyEmbedding::rows`] (to show that what was
    /// walked to is kept).
    pub(crate) fn draws_walked(&self) -> u64 {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .walker
            .walked
    }

    /// The rows `ids` (each < vocab), row-major, in the order given, the Box-Muller
    /// transforms spread over `threads` threads. One forward walk through the
    /// generator's stream for the blocks not drawn before, skipping the draws of rows
    /// nobody asked for.
    pub fn rows(&self, ids: &[u32], threads: usize) -> Vec<f32> {
        let n = self.vocab * self.dim;
        let dim = self.dim;
        if n < 16 || dim == 0 {
            let full = self.full();
            let mut out = Vec::with_capacity(ids.len() * dim);
            for &id in ids {
                out.extend_from_slice(&full[id as usize * dim..(id as usize + 1) * dim]);
            }
            return out;
        }
        let tail_start = if !n.is_multiple_of(16) { n - 16 } else { n };
        let mut uniq = ids.to_vec();
        uniq.sort_unstable();
        uniq.dedup();
        let mut guard = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let Kept {
            store,
            tail,
            walker,
        } = &mut *guard;
        if n <= DENSE_MAX && matches!(store, Store::Sparse(_)) {
            *store = Store::Dense {
                table: vec![0.0; n],
                drawn: vec![0; n.div_ceil(16).div_ceil(64)],
            };
        }
        // Blocks (index b: elements 16b..16b+16) of the needed elements before the tail.
        let blocks_of = |id: u32| {
            let (s, e) = (id as usize * dim, ((id as usize + 1) * dim).min(tail_start));
            if s < e {
                (s / 16) as u64..e.div_ceil(16) as u64
            } else {
                0..0
            }
        };
        let need_tail = uniq
            .last()
            .is_some_and(|&id| (id as usize + 1) * dim > tail_start);
        // Those not kept, ascending.
        let mut missing: Vec<u64> = Vec::new();
        let collect = |missing: &mut Vec<u64>, keep: &dyn Fn(u64) -> bool| {
            for &id in &uniq {
                let r = blocks_of(id);
                let from = missing.last().map_or(r.start, |&b| r.start.max(b + 1));
                missing.extend((from..r.end).filter(|&b| !keep(b)));
            }
        };
        collect(&mut missing, &|b| store.has(b));
        if let Store::Sparse(map) = store {
            // Room for this call's blocks, or else all drawn afresh (and kept if they fit).
            if map.len() + missing.len() > SPARSE_BLOCKS {
                map.clear();
                missing.clear();
                collect(&mut missing, &|_| false);
            }
        }
        // Their uniforms, in stream order, then the transforms in parallel.
        let mut fresh: Vec<[f32; 16]> = Vec::with_capacity(missing.len());
        let mut cur: Option<(u64, TorchRng)> = None;
        for &b in &missing {
            let rng = walker.seek(self.seed, 16 * b, &mut cur);
            fresh.push(std::array::from_fn(|_| rng.uniform_f32()));
            if let Some((pos, _)) = &mut cur {
                *pos += 16;
            }
        }
        if need_tail && tail.is_none() {
            let rng = walker.seek(self.seed, n as u64, &mut cur);
            let mut d = std::array::from_fn(|_| rng.uniform_f32());
            transform16(&mut d, self.fill);
            *tail = Some(d);
        }
        let per = fresh.len().div_ceil(threads.max(1)).max(4096);
        let fill = self.fill;
        std::thread::scope(|s| {
            let mut parts = fresh.chunks_mut(per);
            let first = parts.next();
            for part in parts {
                super::kernel::count_spawn();
                s.spawn(move || part.iter_mut().for_each(|d| transform16(d, fill)));
            }
            if let Some(part) = first {
                part.iter_mut().for_each(|d| transform16(d, fill));
            }
        });
        let tail = tail.as_ref();
        let mut out = Vec::with_capacity(ids.len() * dim);
        match store {
            Store::Dense { table, drawn } => {
                for (&b, v) in missing.iter().zip(&fresh) {
                    let s = 16 * b as usize;
                    let e = (s + 16).min(tail_start);
                    table[s..e].copy_from_slice(&v[..e - s]);
                    drawn[b as usize / 64] |= 1 << (b % 64);
                }
                if let Some(t) = tail {
                    table[tail_start..].copy_from_slice(&t[..n - tail_start]);
                }
                for &id in ids {
                    out.extend_from_slice(&table[id as usize * dim..][..dim]);
                }
            }
            Store::Sparse(map) => {
                let block = |b: u64| -> &[f32; 16] {
                    match missing.binary_search(&b) {
                        Ok(k) => &fresh[k],
                        Err(_) => &map[&b],
                    }
                };
                for &id in ids {
                    let (s, e) = (id as usize * dim, (id as usize + 1) * dim);
                    let mut i = s;
                    while i < e {
                        let (x, run) = if i >= tail_start {
                            (&tail.expect("tail drawn")[i - tail_start..], e - i)
                        } else {
                            let run = (16 - i % 16).min(e - i).min(tail_start - i);
                            (&block((i / 16) as u64)[i % 16..], run)
                        };
                        out.extend_from_slice(&x[..run]);
                        i += run;
                    }
                }
                if map.len() + fresh.len() <= SPARSE_BLOCKS {
                    map.extend(missing.into_iter().zip(fresh));
                }
            }
        }
        out
    }
}

impl Store {
    fn has(&self, b: u64) -> bool {
        match self {
            Store::Dense { drawn, .. } => drawn[b as usize / 64] & (1 << (b % 64)) != 0,
            Store::Sparse(map) => map.contains_key(&b),
        }
    }
}
