//! Scaled dot-product attention as a library: weights drawn bit for bit like PyTorch
//! (or loaded from JSON), records embedded and projected, attention by the fast
//! kernel, and the output rows formatted as JSON.
//!
//! Submodules: `rng` (PyTorch's generator), `kernel` (tiled online-softmax attention
//! and the projection matmul), `reference` (the materialised softmax behind
//! `--print weights|scores`), `format` (the output: JSON text, raw float32, `.npy`).
//!
//! Invariants and kept decisions:
//! - Records run one after another; parallel work is inside a record (draws,
//!   projection, attention), each part on the calling thread below a work threshold.
//!   The thread count never follows the record count: 100 000 two-id records take
//!   0.9 s of CPU and start no thread (a thread per record took 19 s).
//! - Drawn embedding rows and the generator's states on the way to them are kept for
//!   the run ([`LazyEmbedding`]), so a far id (near 2^32) is walked to once per run,
//!   not once per record (23 s per record before).
//! - Sizes are checked before anything is allocated: at most [`MAX_HEADS`] heads and
//!   [`MAX_NUMBERS`] numbers of weights, of one record's projections and of one
//!   `--print weights|scores` matrix; beyond them a data error (exit 1), never an
//!   allocation abort (`--heads 10000000 --d-v 1 --d-kq 1` took 187 s and 18.7 GB for
//!   a 3-id record).
//! - Only a header object naming a `"model"` is skipped; any other object (`{}`) is an
//!   error at its line, and so is an unknown field in a weights file.
//! - The whole job (16384 ids, dim 512, 8 causal heads of 64; `perf`, AVX2 host) is
//!   the kernel's: attention 73% of its CPU time, the projection 12%, `{:.4}` text 3%
//!   (`scripts/bench-attn-job.sh` sets it beside PyTorch's whole job: 6.2-6.5 s CPU
//!   against PyTorch's 13.4-14.3 s for its process and 7.9-8.4 s for its compute).

pub(crate) mod format;
pub mod kernel;
pub(crate) mod reference;
pub mod rng;

use std::io::{BufRead, Write};

pub use format::{Format, Precision};
pub use rng::{LazyEmbedding, NormalFill, TorchRng};

/// The largest `--weights` file read: weights as JSON take about 12 bytes per number, so
/// this holds a 200k x 1024 embedding with room to spare, and refuses a runaway file
/// before reading it.
const WEIGHTS_FILE_LIMIT: u64 = 16 << 30;

use crate::error::{Error, Result};
use crate::format::ids as ndjson;
use crate::format::tokens;
use crate::input::{self, Source};

/// Shape and provenance of weights drawn with the PyTorch-compatible generator.
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
    /// The classic worked example: `--vocab-size 50000 --dim 3 --d-kq 2 --d-v 4 --heads 1 --seed 123`.
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

/// Most heads a stage takes: each head has its own scratch in the kernel for every
/// record, so a head count far beyond any model's is memory for nothing.
const MAX_HEADS: usize = 1 << 16;

/// Most float32 numbers in the heads' weights and in one record's buffers (projections,
/// `--print weights|scores` matrices): 2^30, 4 GiB. Checked before allocating, so that
/// a size no machine holds is an error with a message, not an abort.
const MAX_NUMBERS: usize = 1 << 30;

impl DrawSpec {
    /// Checks the sizes before anything is drawn: at least 1 each, at most [`MAX_HEADS`]
    /// heads and [`MAX_NUMBERS`] weights.
    pub fn check(&self) -> Result<()> {
        check_sizes(self.dim, self.d_kq, self.d_v, self.heads)
    }
}

/// The checks of [`DrawSpec::check`], also applied to weights read from a file.
fn check_sizes(dim: usize, d_kq: usize, d_v: usize, heads: usize) -> Result<()> {
    if dim == 0 || d_kq == 0 || d_v == 0 || heads == 0 {
        return Err(Error::usage("dimensions and head count must be at least 1"));
    }
    if heads > MAX_HEADS {
        return Err(Error::data(format!(
            "{heads} heads: at most {MAX_HEADS} are supported"
        )));
    }
    let numbers = d_kq
        .checked_mul(2)
        .and_then(|n| n.checked_add(d_v))
        .and_then(|n| n.checked_mul(heads))
        .and_then(|n| n.checked_mul(dim));
    match numbers {
        Some(n) if n <= MAX_NUMBERS => Ok(()),
        _ => Err(Error::data(format!(
            "the weights of {heads} heads of dim {dim} x (2 x {d_kq} + {d_v}) would be more \
             than 2^30 numbers (4 GiB)"
        ))),
    }
}

/// An error unless a buffer of `a x b x c` numbers is within [`MAX_NUMBERS`].
fn check_buffer(what: &str, a: usize, b: usize, c: usize) -> Result<()> {
    match a.checked_mul(b).and_then(|n| n.checked_mul(c)) {
        Some(n) if n <= MAX_NUMBERS => Ok(()),
        _ => Err(Error::data(format!(
            "{what} would be {a} x {b} x {c} numbers, more than 2^30 (4 GiB)"
        ))),
    }
}

/// One head's projections, each `dim` rows (row-major), as `x @ W` uses them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Head {
    /// `dim x d_kq`.
    w_query: Vec<f32>,
    /// `dim x d_kq`.
    w_key: Vec<f32>,
    /// `dim x d_v`.
    w_value: Vec<f32>,
}

/// Where embedding rows come from.
#[derive(Clone)]
pub(crate) enum Embedding {
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
    pub(crate) vocab_size: usize,
    /// Embedding width.
    pub(crate) dim: usize,
    /// Query and key width per head.
    pub(crate) d_kq: usize,
    /// Value width per head.
    pub(crate) d_v: usize,
    /// The embedding table.
    pub(crate) embedding: Embedding,
    /// The heads, in order.
    pub(crate) heads: Vec<Head>,
}

impl Weights {
    /// Draws weights exactly as PyTorch code seeded once per table does: `manual_seed(seed)`, `nn.Embedding`;
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

    /// Embedding rows for `ids`, row-major, drawn on up to `threads` threads. An id
    /// outside the vocabulary is an error.
    pub(crate) fn embed(&self, ids: &[u32], threads: usize) -> Result<Vec<f32>> {
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
            Embedding::Drawn(lazy) => lazy.rows(ids, threads),
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

    /// Reads a `--weights` file: a regular file (not a device, FIFO or directory) of at
    /// most [`WEIGHTS_FILE_LIMIT`] bytes, checked before it is read, then
    /// [`Weights::from_json`]; errors name the file.
    pub fn read_file(path: &std::path::Path) -> Result<Weights> {
        let name = path.display().to_string();
        let rules = crate::input::WholeFile {
            what: "weights file",
            limit: WEIGHTS_FILE_LIMIT,
            pipes: false,
            pipe_flag: None,
        };
        let text = crate::input::read_whole_file(path, &name, &rules)?;
        Weights::from_json(&text).map_err(|e| e.in_file(&name))
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
        unknown_field(obj, WEIGHTS_FIELDS, "")?;
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
            let head = hv
                .as_object()
                .ok_or_else(|| Error::data(format!("heads[{h}] is not a head object")))?;
            unknown_field(head, HEAD_FIELDS, &format!("heads[{h}]."))?;
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

/// The fields of a weights object, and of each of its heads.
const WEIGHTS_FIELDS: &[&str] = &["vocab_size", "dim", "d_kq", "d_v", "embedding", "heads"];
const HEAD_FIELDS: &[&str] = &["W_query", "W_key", "W_value"];

/// An error naming the first field of `obj` not in `known` (a misspelt field would
/// otherwise be ignored silently).
fn unknown_field(
    obj: &serde_json::Map<String, serde_json::Value>,
    known: &[&str],
    prefix: &str,
) -> Result<()> {
    match obj.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(Error::data(format!(
            "unknown field \"{prefix}{k}\" (the fields are {})",
            known.join(", ")
        ))),
        None => Ok(()),
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

/// Options of one `attn` run besides the weights.
#[derive(Debug, Clone)]
pub struct Options {
    /// Query i attends only to keys j <= i.
    pub causal: bool,
    /// What to print.
    pub print: PrintKind,
    /// How to write records.
    pub format: Format,
    /// How to write numbers in JSON.
    pub precision: Precision,
    /// Records are arrays of embedding rows instead of ids.
    pub vectors: bool,
    /// Threads for the kernel (the machine's cores by default).
    pub threads: usize,
    /// Which compiled kernels run (the best this CPU has by default).
    pub simd: kernel::Simd,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            causal: false,
            print: PrintKind::Context,
            format: Format::Ndjson,
            precision: Precision::Fixed(4),
            vectors: false,
            threads: kernel::default_threads(),
            simd: kernel::Simd::detect(),
        }
    }
}

/// One parsed input record: its embedded rows (`rows x dim`, row-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    /// Row-major numbers.
    pub(crate) data: Vec<f32>,
    /// Number of rows (tokens).
    rows: usize,
}

/// A configured attention stage: weights plus options.
pub struct Attn {
    /// The weights in use.
    weights: Weights,
    /// The run's options.
    options: Options,
    /// All heads' projections side by side: `dim x heads*(2 d_kq + d_v)`, laid out as
    /// [Q of every head | K of every head | V of every head], packed for the kernel.
    w_all: kernel::Projection,
}

impl Attn {
    /// Builds the stage; checks that the shapes fit together.
    pub fn new(weights: Weights, options: Options) -> Result<Attn> {
        let (dim, dk, dv, h) = (weights.dim, weights.d_kq, weights.d_v, weights.heads.len());
        check_sizes(dim, dk, dv, h)?;
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
        let w_all = kernel::Projection::new(options.simd, &w_all, dim, n);
        Ok(Attn {
            weights,
            options,
            w_all,
        })
    }

    /// The embedded rows of a record of ids (each must be in the vocabulary).
    fn embed_ids(&self, ids: &[u32]) -> Result<Embedded> {
        let data = self.weights.embed(ids, self.options.threads)?;
        Ok(Embedded {
            data,
            rows: ids.len(),
        })
    }

    /// Parses one input line: `Ok(None)` for a header object (`{...}`), else the
    /// record's embedded rows. Ids must be in the vocabulary; vectors must be finite
    /// and `dim` wide.
    pub fn parse_record(&self, line: &[u8]) -> Result<Option<Embedded>> {
        let trimmed = line.trim_ascii();
        if ndjson::is_header(trimmed) {
            // A header names a model; any other object is not data this stage can skip.
            ndjson::parse_header(trimmed)
                .and_then(|h| ndjson::parse_stream_header(&h))
                .map_err(|e| {
                    Error::data(format!(
                        "{e}: a line is a record (a JSON array) or a header object naming its \"model\""
                    ))
                })?;
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
            self.embed_ids(&parse_ids(trimmed)?).map(Some)
        }
    }

    /// Projections of `x` into [Q | K | V] rows, `heads*(2 d_kq + d_v)` wide, plus 16
    /// spare zero columns so that the kernel can read whole vector groups.
    fn project(&self, x: &Embedded) -> Vec<f32> {
        let mut p = self.w_all.apply(&x.data, x.rows, self.options.threads);
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
        check_buffer("the projections of this record", x.rows, 1, n)?;
        if let Some(c) = context {
            check_buffer("the projections of the context record", c.rows, 1, n)?;
        }
        if self.options.print != PrintKind::Context {
            let s = context.map_or(x.rows, |c| c.rows);
            check_buffer("the matrix of this record (T x heads x S)", x.rows, h, s)?;
        }
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
                kernel::attention(
                    &shape,
                    q,
                    k,
                    v,
                    &mut out,
                    self.options.threads,
                    self.options.simd,
                );
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

    /// Writes one output record (rows of `cols` numbers) in the run's format.
    pub(crate) fn write_rows(
        &self,
        w: &mut dyn Write,
        data: &[f32],
        cols: usize,
    ) -> std::io::Result<()> {
        format::write_record(w, data, cols, self.options.format, self.options.precision)
    }
}

/// Reads records from `sources` (and, for cross-attention, the record on the same
/// line-aligned position of `context`), runs the stage on each and writes one output
/// line per record to `out`. Header lines (`{...}`) are skipped in both streams.
/// Errors carry the file name and line number of the record at fault.
/// How token files among the inputs are read: `--input-format` (raw ids have no magic;
/// llm.c files and Megatron datasets are recognised) and where records end (`--eot ID`,
/// `--bos ID`; without either a raw or llm.c file is one record, a Megatron document one).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenInput {
    pub format: Option<tokens::Format>,
    pub eot: Option<u32>,
    pub bos: Option<u32>,
}

/// Runs the stage over `sources`: id streams (NDJSON, one record per line, with an
/// optional `context` stream for cross-attention), or token files (the files
/// `bpe-encode --format` writes, records as [`TokenInput`] says). The two are not mixed.
pub fn run(
    attn: &Attn,
    sources: &[Source],
    no_mmap: bool,
    context: Option<&Source>,
    token_input: TokenInput,
    out: &mut dyn Write,
) -> Result<()> {
    let mut inputs = Vec::with_capacity(sources.len());
    for source in sources {
        let kind = tokens::detect(source, token_input.format)?;
        inputs.push(tokens::Input {
            source: source.clone(),
            kind,
        });
    }
    let files = inputs
        .iter()
        .filter(|i| i.kind != tokens::Kind::Ndjson)
        .count();
    if files > 0 {
        return run_token_files(attn, &inputs, files, no_mmap, context, token_input, out);
    }
    if token_input.eot.is_some() || token_input.bos.is_some() {
        return Err(Error::usage(
            "--eot and --bos apply to token files (the records of an id stream are its lines)",
        ));
    }
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

/// [`run`] over token files: each record's ids embedded, attended and written.
fn run_token_files(
    attn: &Attn,
    inputs: &[tokens::Input],
    files: usize,
    no_mmap: bool,
    context: Option<&Source>,
    token_input: TokenInput,
    out: &mut dyn Write,
) -> Result<()> {
    if files < inputs.len() {
        return Err(Error::usage(
            "id streams and token files do not go together in one run",
        ));
    }
    if context.is_some() || attn.options.vectors {
        return Err(Error::usage(
            "--context and --vectors read id streams, not token files",
        ));
    }
    let boundary = match (token_input.eot, token_input.bos) {
        (Some(_), Some(_)) => return Err(Error::usage("give --eot or --bos, not both")),
        (Some(eot), None) => tokens::Boundary::Eot(eot),
        (None, Some(bos)) => tokens::Boundary::Bos(bos),
        (None, None) => tokens::Boundary::None,
    };
    tokens::read_records(inputs, boundary, no_mmap, &mut |file, number, ids| {
        let at = |e: Error| Error::data(format!("record {number}: {e}")).in_file(file);
        let x = attn.embed_ids(ids).map_err(at)?;
        let (data, cols) = attn.compute(&x, None).map_err(at)?;
        attn.write_rows(out, &data, cols).map_err(Error::write)
    })
}

/// Parses a JSON array of non-negative integer ids that fit in 32 bits.
fn parse_ids(text: &[u8]) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    ndjson::parse_ids_into(text, &mut ids).map_err(Error::data)?;
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads spawned on this thread while `f` runs.
    fn spawns(f: impl FnOnce()) -> usize {
        let before = kernel::SPAWNED.with(|c| c.get());
        f();
        kernel::SPAWNED.with(|c| c.get()) - before
    }

    #[test]
    fn short_records_start_no_threads_whatever_their_count() {
        let spec = DrawSpec {
            dim: 64,
            d_kq: 16,
            d_v: 16,
            heads: 4,
            ..DrawSpec::default()
        };
        let options = Options {
            threads: 2,
            ..Options::default()
        };
        let stage = Attn::new(Weights::draw(&spec), options).unwrap();
        let mut out = Vec::new();
        let mut one = |line: &[u8]| {
            let x = stage.parse_record(line).unwrap().unwrap();
            let (data, cols) = stage.compute(&x, None).unwrap();
            stage.write_rows(&mut out, &data, cols).unwrap();
        };
        let n = spawns(|| {
            for i in 0..20_000u32 {
                one(format!("[{},{}]", i, 49_999 - i).as_bytes());
            }
        });
        assert_eq!(n, 0, "20 000 two-id records started {n} threads");
        // A long record does use the second core: the count above can see spawns.
        let ids: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
        let n = spawns(|| one(format!("[{}]", ids.join(",")).as_bytes()));
        assert!((1..=8).contains(&n), "{n}");
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 20_001);
    }
}
