//! A PyTorch-compatible CPU generator: MT19937 seeded like `torch.manual_seed`,
//! `torch.rand` for float32 and `Tensor.normal_` as `nn.Embedding` draws it, bit for bit.
//!
//! The facts (block layout, tail rule, both transcendental flavours, the fused
//! multiply-adds GCC emitted in PyTorch's AVX2 kernel) are in the project note
//! `pytorch-rng.md`; section numbers below refer to it.

/// Which of PyTorch's two vectorised `normal_` kernels to reproduce (note §1.6).
///
/// Both agree with each other to about 3 ulp; they differ in the last bits only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NormalFill {
    /// PyTorch's portable `normal_fill` with the C library's `logf`/`cosf`/`sinf`: what
    /// PyTorch runs on ARM and Apple machines and with `ATEN_CPU_CAPABILITY=default`.
    /// With glibc this matches PyTorch bit for bit, and it gives the seed's printed digits.
    #[default]
    Scalar,
    /// x86-64 PyTorch's `normal_fill_AVX2` (also used on AVX-512 machines), bit for bit:
    /// Cephes-style `log`/`sincos` in float32 with GCC's fused multiply-adds.
    Avx2,
}

const N: usize = 624;
const M: usize = 397;

/// The MT19937 engine as PyTorch seeds and steps it (note §1.2), with the cached
/// normal sample of PyTorch's per-element path (§1.7).
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
        let st = &mut self.state;
        for k in 0..N {
            let y = (st[k] & 0x8000_0000) | (st[(k + 1) % N] & 0x7fff_ffff);
            let mag = if st[(k + 1) % N] & 1 != 0 {
                0x9908_b0df
            } else {
                0
            };
            st[k] = st[(k + M) % N] ^ (y >> 1) ^ mag;
        }
        self.left = N;
        self.next = 0;
    }

    /// One 32-bit draw (`CPUGeneratorImpl::random`).
    pub fn next_u32(&mut self) -> u32 {
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
    pub fn skip(&mut self, mut count: u64) {
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

    /// One `torch.rand` float32 sample in [0, 1) (note §1.3).
    pub fn uniform_f32(&mut self) -> f32 {
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

    /// One standard normal sample from PyTorch's per-element double path (note §1.7),
    /// used for tensors of fewer than 16 elements; the sine sample is cached.
    pub fn normal_scalar(&mut self) -> f64 {
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
    /// `nn.Embedding` initialises its weight (note §1.4, §1.5).
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

/// Box-Muller on one 16-block, in place: element j < 8 pairs with j + 8 (note §1.5).
pub fn transform16(d: &mut [f32; 16], fill: NormalFill) {
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

/// `log256_ps` of PyTorch's `avx_mathfun.h` with GCC's contractions (note §1.6a).
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
#[derive(Clone)]
pub struct LazyEmbedding {
    seed: u64,
    vocab: usize,
    dim: usize,
    fill: NormalFill,
}

impl LazyEmbedding {
    /// The embedding of `vocab` rows of `dim` numbers drawn after `manual_seed(seed)`.
    pub fn new(seed: u64, vocab: usize, dim: usize, fill: NormalFill) -> LazyEmbedding {
        LazyEmbedding {
            seed,
            vocab,
            dim,
            fill,
        }
    }

    /// The whole table, row-major (what `nn.Embedding` holds).
    pub fn full(&self) -> Vec<f32> {
        TorchRng::new(self.seed).normal_f32(self.vocab * self.dim, self.fill)
    }

    /// The rows `ids` (each < vocab), row-major, in the order given. One forward walk
    /// through the generator's stream, skipping the draws of rows nobody asked for.
    pub fn rows(&self, ids: &[u32]) -> Vec<f32> {
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
        // Blocks (index b: elements 16b..16b+16) that hold some needed element before the tail.
        let mut blocks: Vec<usize> = Vec::new();
        let mut need_tail = false;
        for &id in ids {
            let (s, e) = (id as usize * dim, (id as usize + 1) * dim);
            if e > tail_start {
                need_tail = true;
            }
            let e = e.min(tail_start);
            if s < e {
                blocks.extend(s / 16..e.div_ceil(16));
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        let mut rng = TorchRng::new(self.seed);
        let mut pos = 0u64; // draws consumed so far
        let mut values: Vec<[f32; 16]> = Vec::with_capacity(blocks.len());
        for &b in &blocks {
            rng.skip(16 * b as u64 - pos);
            let mut d = [0f32; 16];
            for x in d.iter_mut() {
                *x = rng.uniform_f32();
            }
            transform16(&mut d, self.fill);
            values.push(d);
            pos = 16 * b as u64 + 16;
        }
        let mut tail = [0f32; 16];
        if need_tail {
            rng.skip(n as u64 - pos);
            for x in tail.iter_mut() {
                *x = rng.uniform_f32();
            }
            transform16(&mut tail, self.fill);
        }
        let mut out = Vec::with_capacity(ids.len() * dim);
        for &id in ids {
            for i in id as usize * dim..(id as usize + 1) * dim {
                out.push(if i >= tail_start {
                    tail[i - tail_start]
                } else {
                    let k = blocks.binary_search(&(i / 16)).expect("block generated");
                    values[k][i % 16]
                });
            }
        }
        out
    }
}
