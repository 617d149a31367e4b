//! The seed's scaled dot-product attention as a library: weights drawn like PyTorch
//! (or loaded from JSON), records embedded and projected, attention by the fast
//! kernel, and the output rows formatted as JSON.
//!
//! Submodules: `rng` (PyTorch's generator), `kernel` (tiled online-softmax attention
//! and the projection matmul), `reference` (the materialised softmax behind
//! `--print weights|scores`).

pub mod kernel;
pub mod reference;
pub mod rng;

use std::io::{BufRead, Write};

pub use rng::{LazyEmbedding, NormalFill, TorchRng};

use crate::error::{Error, Result};
use crate::format::ids as ndjson;
use crate::input::{self, Source};

/// Shape and provenance of weights drawn like the seed's example.
#[derive(Debug, Clone)]
pub struct DrawSpec {
    /// Rows of the embedding table (`nn.Embedding(vocab_size, dim)`).
    pub vocab_size: usize,
    /// Embedding width (the model dimension `d_in`).
    pub dim: usize,
    /// Query and key width per head.
    pub d_kq: usize,
    /// Value width per head.
    pub d_v: usize,
    /// Number of heads.
    pub heads: usize,
    /// `torch.manual_seed` value, used once for the embedding and again for the weights.
    pub seed: u64,
    /// Which PyTorch `normal_` kernel draws the embedding.
    pub fill: NormalFill,
}

impl Default for DrawSpec {
    /// The seed's example: `--vocab-size 50000 --dim 3 --d-kq 2 --d-v 4 --heads 1 --seed 123`.
    fn default() -> DrawSpec {
        DrawSpec {
            vocab_size: 50_000,
            dim: 3,
            d_kq: 2,
            d_v: 4,
            heads: 1,
            seed: 123,
            fill: NormalFill::Scalar,
        }
    }
}

/// One head's projections, each `dim` rows (row-major), as `x @ W` uses them.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// `dim x d_kq`.
    pub w_query: Vec<f32>,
    /// `dim x d_kq`.
    pub w_key: Vec<f32>,
    /// `dim x d_v`.
    pub w_value: Vec<f32>,
}

/// Where embedding rows come from.
#[derive(Clone)]
pub enum Embedding {
    /// Drawn on demand, as `nn.Embedding` would hold them.
    Drawn(LazyEmbedding),
    /// Given in full, `vocab_size x dim` row-major.
    Table(Vec<f32>),
    /// No table: records must be vectors.
    Absent,
}

/// Everything attention needs: the embedding and the heads' projections.
#[derive(Clone)]
pub struct Weights {
    /// Rows of the embedding table (0 when absent).
    pub vocab_size: usize,
    /// Embedding width.
    pub dim: usize,
    /// Query and key width per head.
    pub d_kq: usize,
    /// Value width per head.
    pub d_v: usize,
    /// The embedding table.
    pub embedding: Embedding,
    /// The heads, in order.
    pub heads: Vec<Head>,
}

impl Weights {
    /// Draws weights exactly as the seed does: `manual_seed(seed)`, `nn.Embedding`;
    /// `manual_seed(seed)` again, then per head `W_query`, `W_key`, `W_value` by `torch.rand`.
    pub fn draw(spec: &DrawSpec) -> Weights {
        let mut rng = TorchRng::new(spec.seed);
        let heads = (0..spec.heads)
            .map(|_| Head {
                w_query: rng.rand(spec.dim * spec.d_kq),
                w_key: rng.rand(spec.dim * spec.d_kq),
                w_value: rng.rand(spec.dim * spec.d_v),
            })
            .collect();
        Weights {
            vocab_size: spec.vocab_size,
            dim: spec.dim,
            d_kq: spec.d_kq,
            d_v: spec.d_v,
            embedding: Embedding::Drawn(LazyEmbedding::new(
                spec.seed,
                spec.vocab_size,
                spec.dim,
                spec.fill,
            )),
            heads,
        }
    }

    /// Embedding rows for `ids`, row-major. An id outside the vocabulary is an error.
    pub fn embed(&self, ids: &[u32]) -> Result<Vec<f32>> {
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= self.vocab_size) {
            return Err(Error::data(match self.embedding {
                Embedding::Absent => {
                    "the weights file has no embedding: give vectors (--vectors)".to_string()
                }
                _ => format!(
                    "id {bad} is not in the vocabulary (size {})",
                    self.vocab_size
                ),
            }));
        }
        Ok(match &self.embedding {
            Embedding::Drawn(lazy) => lazy.rows(ids),
            Embedding::Table(table) => {
                let mut out = Vec::with_capacity(ids.len() * self.dim);
                for &id in ids {
                    let i = id as usize * self.dim;
                    out.extend_from_slice(&table[i..i + self.dim]);
                }
                out
            }
            Embedding::Absent => Vec::new(),
        })
    }

    /// Reads weights from the JSON object `--dump-weights` writes:
    /// `{"dim":D,"d_kq":K,"d_v":V,"vocab_size":N,"embedding":[[..D]..N],"heads":[{"W_query":[[..K]..D],"W_key":..,"W_value":[[..V]..D]}]}`.
    /// `embedding` may be left out (then records must be vectors); the sizes are
    /// inferred from the arrays when their fields are absent.
    pub fn from_json(text: &[u8]) -> Result<Weights> {
        let value: serde_json::Value = serde_json::from_slice(text)
            .map_err(|e| Error::data(format!("not a JSON weights object: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| Error::data("not a JSON weights object"))?;
        let heads_v = obj
            .get("heads")
            .and_then(|h| h.as_array())
            .ok_or_else(|| Error::data("missing \"heads\" (an array of head objects)"))?;
        if heads_v.is_empty() {
            return Err(Error::data("\"heads\" is empty"));
        }
        let mut heads = Vec::new();
        let (mut dim, mut d_kq, mut d_v) = (None, None, None);
        for (h, hv) in heads_v.iter().enumerate() {
            let mut mats = Vec::new();
            for name in ["W_query", "W_key", "W_value"] {
                let width = if name == "W_value" {
                    &mut d_v
                } else {
                    &mut d_kq
                };
                let what = format!("heads[{h}].{name}");
                let m = hv
                    .get(name)
                    .ok_or_else(|| Error::data(format!("missing {what}")))?;
                let (data, rows, cols) = matrix(m, &what)?;
                check_dim(&mut dim, rows, &format!("rows of {what}"))?;
                check_dim(width, cols, &format!("columns of {what}"))?;
                mats.push(data);
            }
            let w_value = mats.pop().expect("3");
            let w_key = mats.pop().expect("3");
            let w_query = mats.pop().expect("3");
            heads.push(Head {
                w_query,
                w_key,
                w_value,
            });
        }
        let mut dim = dim.expect("one head");
        let (d_kq, d_v) = (d_kq.expect("one head"), d_v.expect("one head"));
        for (key, val) in [("dim", dim), ("d_kq", d_kq), ("d_v", d_v)] {
            if let Some(given) = obj.get(key) {
                if given.as_u64() != Some(val as u64) {
                    return Err(Error::data(format!(
                        "\"{key}\" is {given} but the matrices say {val}"
                    )));
                }
            }
        }
        let (embedding, vocab_size) = match obj.get("embedding") {
            None | Some(serde_json::Value::Null) => (Embedding::Absent, 0),
            Some(m) => {
                let (data, rows, cols) = matrix(m, "embedding")?;
                let mut d = Some(dim);
                check_dim(&mut d, cols, "columns of embedding")?;
                dim = cols;
                (Embedding::Table(data), rows)
            }
        };
        if let Some(given) = obj.get("vocab_size") {
            if !matches!(embedding, Embedding::Absent) && given.as_u64() != Some(vocab_size as u64)
            {
                return Err(Error::data(format!(
                    "\"vocab_size\" is {given} but the embedding has {vocab_size} rows"
                )));
            }
        }
        Ok(Weights {
            vocab_size,
            dim,
            d_kq,
            d_v,
            embedding,
            heads,
        })
    }

    /// Writes the weights as the JSON object [`Weights::from_json`] reads, one matrix
    /// row per line, numbers in their shortest round-trip form.
    pub fn write_json(&self, w: &mut dyn Write) -> std::io::Result<()> {
        write!(
            w,
            "{{\"vocab_size\":{},\"dim\":{},\"d_kq\":{},\"d_v\":{},\n\"embedding\":",
            self.vocab_size, self.dim, self.d_kq, self.d_v
        )?;
        match &self.embedding {
            Embedding::Absent => w.write_all(b"null")?,
            Embedding::Table(t) => write_json_matrix(w, t, self.dim)?,
            Embedding::Drawn(lazy) => write_json_matrix(w, &lazy.full(), self.dim)?,
        }
        w.write_all(b",\n\"heads\":[")?;
        for (h, head) in self.heads.iter().enumerate() {
            if h > 0 {
                w.write_all(b",")?;
            }
            w.write_all(b"\n{\"W_query\":")?;
            write_json_matrix(w, &head.w_query, self.d_kq)?;
            w.write_all(b",\n\"W_key\":")?;
            write_json_matrix(w, &head.w_key, self.d_kq)?;
            w.write_all(b",\n\"W_value\":")?;
            write_json_matrix(w, &head.w_value, self.d_v)?;
            w.write_all(b"}")?;
        }
        w.write_all(b"]}\n")
    }
}

fn check_dim(slot: &mut Option<usize>, n: usize, what: &str) -> Result<()> {
    match *slot {
        Some(m) if m != n => Err(Error::data(format!("{what}: {n}, expected {m}"))),
        _ => {
            *slot = Some(n);
            Ok(())
        }
    }
}

/// A JSON array of equal-length arrays of finite numbers, as (row-major data, rows, cols).
fn matrix(v: &serde_json::Value, what: &str) -> Result<(Vec<f32>, usize, usize)> {
    let rows = v
        .as_array()
        .ok_or_else(|| Error::data(format!("{what} is not an array of rows")))?;
    if rows.is_empty() {
        return Err(Error::data(format!("{what} has no rows")));
    }
    let mut cols = None;
    let mut data = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let row = row
            .as_array()
            .ok_or_else(|| Error::data(format!("{what}[{i}] is not an array")))?;
        check_dim(&mut cols, row.len(), &format!("length of {what}[{i}]"))?;
        for (j, x) in row.iter().enumerate() {
            let x = x
                .as_f64()
                .map(|x| x as f32)
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    Error::data(format!("{what}[{i}][{j}] is not a finite float32 number"))
                })?;
            data.push(x);
        }
    }
    let cols = cols.unwrap_or(0);
    if cols == 0 {
        return Err(Error::data(format!("{what} has empty rows")));
    }
    Ok((data, rows.len(), cols))
}

fn write_json_matrix(w: &mut dyn Write, data: &[f32], cols: usize) -> std::io::Result<()> {
    w.write_all(b"[")?;
    for (i, row) in data.chunks(cols.max(1)).enumerate() {
        w.write_all(if i == 0 { b"[" } else { b",\n[" })?;
        for (j, x) in row.iter().enumerate() {
            if j > 0 {
                w.write_all(b",")?;
            }
            serde_json::to_writer(&mut *w, x).map_err(std::io::Error::from)?;
        }
        w.write_all(b"]")?;
    }
    w.write_all(b"]")
}

/// What `attn` prints for each record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrintKind {
    /// T rows of `heads * d_v` context numbers.
    #[default]
    Context,
    /// T rows of `heads * S` attention weights (softmax of the scaled, masked scores).
    Weights,
    /// T rows of `heads * S` raw scores `q . k` (before scaling and masking).
    Scores,
}

/// How numbers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Fixed digits after the decimal point, like PyTorch's printout (the seed's 4).
    Fixed(usize),
    /// The shortest text that reads back as the same float32.
    Shortest,
}

/// Options of one `attn` run besides the weights.
#[derive(Debug, Clone)]
pub struct Options {
    /// Query i attends only to keys j <= i.
    pub causal: bool,
    /// What to print.
    pub print: PrintKind,
    /// How to write numbers.
    pub precision: Precision,
    /// Records are arrays of embedding rows instead of ids.
    pub vectors: bool,
    /// Threads for the kernel (the machine's cores by default).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            causal: false,
            print: PrintKind::Context,
            precision: Precision::Fixed(4),
            vectors: false,
            threads: kernel::default_threads(),
        }
    }
}

/// One parsed input record: its embedded rows (`rows x dim`, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    /// Row-major numbers.
    pub data: Vec<f32>,
    /// Number of rows (tokens).
    pub rows: usize,
}

/// A configured attention stage: weights plus options.
pub struct Attn {
    /// The weights in use.
    pub weights: Weights,
    /// The run's options.
    pub options: Options,
    /// All heads' projections side by side: `dim x heads*(2 d_kq + d_v)`, laid out as
    /// [Q of every head | K of every head | V of every head].
    w_all: Vec<f32>,
}

impl Attn {
    /// Builds the stage; checks that the shapes fit together.
    pub fn new(weights: Weights, options: Options) -> Result<Attn> {
        let (dim, dk, dv, h) = (weights.dim, weights.d_kq, weights.d_v, weights.heads.len());
        if dim == 0 || dk == 0 || dv == 0 || h == 0 {
            return Err(Error::usage("dimensions and head count must be at least 1"));
        }
        let n = h * (2 * dk + dv);
        let mut w_all = vec![0f32; dim * n];
        for (hi, head) in weights.heads.iter().enumerate() {
            for d in 0..dim {
                let row = &mut w_all[d * n..(d + 1) * n];
                row[hi * dk..][..dk].copy_from_slice(&head.w_query[d * dk..][..dk]);
                row[h * dk + hi * dk..][..dk].copy_from_slice(&head.w_key[d * dk..][..dk]);
                row[2 * h * dk + hi * dv..][..dv].copy_from_slice(&head.w_value[d * dv..][..dv]);
            }
        }
        Ok(Attn {
            weights,
            options,
            w_all,
        })
    }

    /// Parses one input line: `Ok(None)` for a header object (`{...}`), else the
    /// record's embedded rows. Ids must be in the vocabulary; vectors must be finite
    /// and `dim` wide.
    pub fn parse_record(&self, line: &[u8]) -> Result<Option<Embedded>> {
        let trimmed = line.trim_ascii();
        if ndjson::is_header(trimmed) {
            return Ok(None);
        }
        let dim = self.weights.dim;
        if self.options.vectors {
            let rows: Vec<Vec<f64>> = serde_json::from_slice(trimmed).map_err(|_| {
                Error::data("expected a JSON array of embedding rows (arrays of numbers)")
            })?;
            let mut data = Vec::with_capacity(rows.len() * dim);
            for (i, row) in rows.iter().enumerate() {
                if row.len() != dim {
                    return Err(Error::data(format!(
                        "row {i} has {} numbers, expected {dim} (the embedding width)",
                        row.len()
                    )));
                }
                for &x in row {
                    let y = x as f32;
                    if !y.is_finite() {
                        return Err(Error::data(format!(
                            "row {i} has {x}, which is not a finite float32 number"
                        )));
                    }
                    data.push(y);
                }
            }
            Ok(Some(Embedded {
                data,
                rows: rows.len(),
            }))
        } else {
            let ids = parse_ids(trimmed)?;
            let data = self.weights.embed(&ids)?;
            Ok(Some(Embedded {
                data,
                rows: ids.len(),
            }))
        }
    }

    /// Projections of `x` into [Q | K | V] rows, `heads*(2 d_kq + d_v)` wide, plus 16
    /// spare zero columns so that the kernel can read whole vector groups.
    fn project(&self, x: &Embedded) -> Vec<f32> {
        let n = self.weights.heads.len() * (2 * self.weights.d_kq + self.weights.d_v);
        let mut p = kernel::matmul(
            &x.data,
            x.rows,
            self.weights.dim,
            &self.w_all,
            n,
            self.options.threads,
        );
        p.extend_from_slice(&[0.0; 16]);
        p
    }

    /// Computes what `--print` asks for, for queries from `x` and keys and values from
    /// `context` (or `x` itself): `rows` rows of `cols` numbers, row-major.
    pub fn compute(&self, x: &Embedded, context: Option<&Embedded>) -> Result<(Vec<f32>, usize)> {
        let (h, dk, dv) = (
            self.weights.heads.len(),
            self.weights.d_kq,
            self.weights.d_v,
        );
        let n = h * (2 * dk + dv);
        let px = self.project(x);
        let pc;
        let (kv, s) = match context {
            Some(c) => {
                pc = self.project(c);
                (&pc, c.rows)
            }
            None => (&px, x.rows),
        };
        if s == 0 && x.rows > 0 {
            return Err(Error::data(
                "the context record is empty: nothing to attend to",
            ));
        }
        let shape = kernel::Shape {
            heads: h,
            d_kq: dk,
            d_v: dv,
            t: x.rows,
            s,
            causal: self.options.causal,
            scale: 1.0 / (dk as f32).sqrt(),
        };
        let q = kernel::View {
            data: &px,
            stride: n,
            offset: 0,
        };
        let k = kernel::View {
            data: kv,
            stride: n,
            offset: h * dk,
        };
        let v = kernel::View {
            data: kv,
            stride: n,
            offset: 2 * h * dk,
        };
        let (out, cols) = match self.options.print {
            PrintKind::Context => {
                let mut out = vec![0f32; x.rows * h * dv];
                kernel::attention(&shape, q, k, v, &mut out, self.options.threads);
                (out, h * dv)
            }
            PrintKind::Weights => (reference::weights(&shape, q, k), h * s),
            PrintKind::Scores => (reference::scores(&shape, q, k), h * s),
        };
        if out.iter().any(|x| !x.is_finite()) {
            return Err(Error::data(
                "a result is not a finite float32 number (the inputs are too large)",
            ));
        }
        Ok((out, cols))
    }

    /// Writes one output record: a JSON array of rows of `cols` numbers, and a newline.
    pub fn write_rows(&self, w: &mut dyn Write, data: &[f32], cols: usize) -> std::io::Result<()> {
        // Written in pieces: a 100k-token record of 512 numbers a row is hundreds of MB
        // of text, which need not be held at once.
        let mut buf = String::with_capacity(1 << 16);
        buf.push('[');
        if cols > 0 {
            for (i, row) in data.chunks(cols).enumerate() {
                if i > 0 {
                    buf.push(',');
                }
                buf.push('[');
                for (j, &x) in row.iter().enumerate() {
                    if j > 0 {
                        buf.push(',');
                    }
                    push_number(&mut buf, x, self.options.precision);
                }
                buf.push(']');
                if buf.len() >= 1 << 16 {
                    w.write_all(buf.as_bytes())?;
                    buf.clear();
                }
            }
        }
        buf.push_str("]\n");
        w.write_all(buf.as_bytes())
    }
}

fn push_number(buf: &mut String, x: f32, precision: Precision) {
    use std::fmt::Write as _;
    match precision {
        Precision::Fixed(p) => {
            let _ = write!(buf, "{x:.p$}");
        }
        Precision::Shortest => {
            let _ = write!(buf, "{x}");
        }
    }
}

/// Reads records from `sources` (and, for cross-attention, the record on the same
/// line-aligned position of `context`), runs the stage on each and writes one output
/// line per record to `out`. Header lines (`{...}`) are skipped in both streams.
/// Errors carry the file name and line number of the record at fault.
pub fn run(
    attn: &Attn,
    sources: &[Source],
    no_mmap: bool,
    context: Option<&Source>,
    out: &mut dyn Write,
) -> Result<()> {
    let mut ctx = match context {
        Some(src) => Some((src.name.clone(), input::open_stream(src)?, 0u64, 0u64)),
        None => None,
    };
    let mut records = 0u64;
    input::for_each_line(sources, no_mmap, &mut |name, line_no, line| {
        let at = |e: Error| e.at_line(name, line_no);
        let Some(x) = attn.parse_record(line).map_err(at)? else {
            return Ok(());
        };
        records += 1;
        let c = match &mut ctx {
            Some((cname, stream, cline, crecords)) => {
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    let n = stream
                        .read_until(b'\n', &mut buf)
                        .map_err(|e| Error::io("read failed", e).in_file(cname))?;
                    if n == 0 {
                        return Err(at(Error::data(format!(
                            "record {records} has no partner in the context file {cname} \
                             (it has {crecords} records)"
                        ))));
                    }
                    *cline += 1;
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    if let Some(c) = attn
                        .parse_record(&buf)
                        .map_err(|e| e.at_line(cname, *cline))?
                    {
                        *crecords += 1;
                        break Some(c);
                    }
                }
            }
            None => None,
        };
        let (data, cols) = attn.compute(&x, c.as_ref()).map_err(at)?;
        attn.write_rows(out, &data, cols).map_err(Error::write)
    })?;
    if let Some((cname, mut stream, mut cline, _)) = ctx {
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = stream
                .read_until(b'\n', &mut buf)
                .map_err(|e| Error::io("read failed", e).in_file(&cname))?;
            if n == 0 {
                break;
            }
            cline += 1;
            if !buf.trim_ascii().is_empty() && !ndjson::is_header(&buf) {
                return Err(Error::data(format!(
                    "the context file has more records than the input ({records})"
                ))
                .at_line(&cname, cline));
            }
        }
    }
    Ok(())
}

/// Parses a JSON array of non-negative integer ids that fit in 32 bits.
pub fn parse_ids(text: &[u8]) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    ndjson::parse_ids_into(text, &mut ids).map_err(Error::data)?;
    Ok(ids)
}
