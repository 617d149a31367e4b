//! The materialised path: whole score and weight matrices (t x s per head), computed
//! as the textbook formula reads, for `--print scores|weights`. Simple loops in f32; the
//! fast kernel never builds these matrices.

use super::kernel::{Shape, View};

/// Raw scores `q_i . k_j` (unscaled, unmasked, as PyTorch's `q @ k.T`): t rows of
/// `heads * s`, head after head within a row.
pub(crate) fn scores(shape: &Shape, q: View, k: View) -> Vec<f32> {
    let (h, dk, t, s) = (shape.heads, shape.d_kq, shape.t, shape.s);
    let mut out = vec![0f32; t * h * s];
    for i in 0..t {
        for hi in 0..h {
            let qi = &q.data[q.offset + i * q.stride + hi * dk..][..dk];
            for j in 0..s {
                let kj = &k.data[k.offset + j * k.stride + hi * dk..][..dk];
                out[(i * h + hi) * s + j] = qi.iter().zip(kj).map(|(a, b)| a * b).sum();
            }
        }
    }
    out
}

/// Attention weights `softmax(scale * scores)` per row, with 0 where the causal mask
/// hides a key: t rows of `heads * s`.
pub(crate) fn weights(shape: &Shape, q: View, k: View) -> Vec<f32> {
    let s = shape.s;
    let mut out = scores(shape, q, k);
    for (row_i, row) in out.chunks_mut(s.max(1)).enumerate() {
        let i = row_i / shape.heads;
        let visible = if shape.causal { (i + 1).min(s) } else { s };
        let mx = row[..visible]
            .iter()
            .map(|&x| x * shape.scale)
            .fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for x in row[..visible].iter_mut() {
            *x = (*x * shape.scale - mx).exp();
            sum += *x;
        }
        for x in row[..visible].iter_mut() {
            *x /= sum;
        }
        row[visible..].fill(0.0);
    }
    out
}

#[cfg(test)]
/// The naive twin of the fast kernel, in f64: for every head and query, the whole row of
/// scores, its softmax (causal mask applied) and the weighted sum of values, each in one
/// pass over the materialised row. t rows of `heads * d_v`. Tests hold
/// [`super::kernel::attention`] to it.
pub(crate) fn attention_f64(shape: &Shape, q: View, k: View, v: View) -> Vec<f64> {
    let (h, dk, dv, t, s) = (shape.heads, shape.d_kq, shape.d_v, shape.t, shape.s);
    let row = |m: &View, i: usize, col: usize, len: usize| -> Vec<f64> {
        m.data[m.offset + i * m.stride + col..][..len]
            .iter()
            .map(|&x| x as f64)
            .collect()
    };
    let mut out = vec![0f64; t * h * dv];
    for hi in 0..h {
        for i in 0..t {
            let visible = if shape.causal { (i + 1).min(s) } else { s };
            let qi = row(&q, i, hi * dk, dk);
            let sc: Vec<f64> = (0..visible)
                .map(|j| {
                    let kj = row(&k, j, hi * dk, dk);
                    qi.iter().zip(&kj).map(|(a, b)| a * b).sum::<f64>() * shape.scale as f64
                })
                .collect();
            let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = sc.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            let o = &mut out[(i * h + hi) * dv..][..dv];
            for (j, w) in e.iter().enumerate() {
                for (x, vj) in o.iter_mut().zip(row(&v, j, hi * dv, dv)) {
                    *x += w * vj;
                }
            }
            for x in o.iter_mut() {
                *x /= sum;
            }
        }
    }
    out
}
