//! BPE training (placeholder until the incremental trainer lands).

/// One learned merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merge {
    pub pair: (u32, u32),
    pub id: u32,
    pub count: u64,
}

/// The seed's algorithm over one sequence.
pub fn train_bytes(text: &[u8], vocab_size: usize, on_merge: &mut dyn FnMut(&Merge)) -> Vec<Merge> {
    train_chunks([(text, 1u64)], vocab_size, on_merge)
}

/// Chunked training over distinct chunks with counts.
pub fn train_chunks<'a>(
    chunks: impl IntoIterator<Item = (&'a [u8], u64)>,
    vocab_size: usize,
    on_merge: &mut dyn FnMut(&Merge),
) -> Vec<Merge> {
    let mut seqs: Vec<(Vec<u32>, u64)> = chunks
        .into_iter()
        .map(|(c, w)| (c.iter().map(|&b| u32::from(b)).collect(), w))
        .collect();
    let mut merges = Vec::new();
    for id in 256..vocab_size as u32 {
        let mut order: Vec<(u32, u32)> = Vec::new();
        let mut counts: ahash::AHashMap<(u32, u32), u64> = ahash::AHashMap::new();
        for (seq, w) in &seqs {
            for p in seq.windows(2) {
                let e = counts.entry((p[0], p[1])).or_insert_with(|| {
                    order.push((p[0], p[1]));
                    0
                });
                *e += w;
            }
        }
        let mut best: Option<((u32, u32), u64)> = None;
        for p in order {
            let c = counts[&p];
            if best.is_none_or(|(_, bc)| c > bc) {
                best = Some((p, c));
            }
        }
        let Some((pair, count)) = best else { break };
        for (seq, _) in &mut seqs {
            let mut out = Vec::with_capacity(seq.len());
            let mut i = 0;
            while i < seq.len() {
                if i + 1 < seq.len() && (seq[i], seq[i + 1]) == pair {
                    out.push(id);
                    i += 2;
                } else {
                    out.push(seq[i]);
                    i += 1;
                }
            }
            *seq = out;
        }
        let m = Merge { pair, id, count };
        on_merge(&m);
        merges.push(m);
    }
    merges
}
