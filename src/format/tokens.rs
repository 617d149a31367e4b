//! Token files: the binary layouts LLM trainers memory-map, written, read back and merged
//! here. `docs/formats.md` ("Token files") is their normative description; in short:
//!
//! - `u16`, `u32`: the ids as little-endian integers, nothing else (nanoGPT's
//!   `train.bin` is `u16`). Files concatenate: `cat a.bin b.bin` is one dataset.
//! - `llmc`: llm.c's file, a header of 256 little-endian int32 words (20240520, 1, the
//!   token count, zeros) and the ids as little-endian uint16; optionally shards of N tokens
//!   each, `PREFIX_000000.bin`, ..., a document cut where a shard fills, as llm.c's
//!   FineWeb script does. An llm.c file holds at most 2^31 - 1 tokens (an int32 count).
//! - `megatron`: Megatron-LM's indexed dataset, `PREFIX.bin` (the documents' ids
//!   concatenated, uint16 when the vocabulary has fewer than 65500 ids, else int32, as
//!   Megatron's `DType.optimal_dtype` chooses) and `PREFIX.idx` (magic, version, dtype
//!   code, sequence and document counts, sequence lengths, byte pointers, document
//!   index). Each document is one sequence; a document with no tokens has none, as
//!   Megatron's `preprocess_data.py` writes it.
//!
//! Document boundaries are ids the caller places (`--eot`, `--bos`); this module writes
//! what it is given and, reading back, cuts records at those ids ([`Boundary`]).
//!
//! Invariants: writers stream with bounded memory — what only the end knows (llm.c's
//! count, Megatron's index) goes back into the header or comes from scratch files, never
//! from memory that grows with the corpus; every file is written under a temporary name
//! and renamed into place when complete ([`AtomicFile`]). Readers check every length,
//! count and pointer against the file sizes before trusting it, and name the file and
//! token of what is wrong.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::cli::{AtomicFile, Output, SpillFile};
use crate::error::{Error, Result};
use crate::input::{self, Data, Source};
use crate::model::Model;

/// llm.c's magic number of a uint16 token file (`data_common.py`, `dataloader.h`).
const LLMC_MAGIC: u32 = 20240520;
/// llm.c's version word for [`LLMC_MAGIC`].
const LLMC_VERSION: u32 = 1;
/// The magic of llm.c's uint32 ("llama-3") variant, version 7: read, never written (the
/// C loader and modded-nanogpt reject it).
const LLMC_MAGIC_U32: u32 = 20240801;
/// The uint32 variant's version word.
const LLMC_VERSION_U32: u32 = 7;
/// The bytes of an llm.c header: 256 int32 words.
const LLMC_HEADER_BYTES: usize = 1024;
/// The most tokens an llm.c file holds: its header counts them in an int32.
const LLMC_MAX_TOKENS: u64 = i32::MAX as u64;
/// The first bytes of a Megatron `.idx` file.
const MEGATRON_MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The `.idx` version Megatron writes and reads.
const MEGATRON_VERSION: u64 = 1;
/// The bytes of the `.idx` header: magic, version, dtype code, two counts.
const MEGATRON_HEADER_BYTES: usize = 34;
/// Megatron's `DType.optimal_dtype`: uint16 for vocabularies below this size, else int32.
const MEGATRON_U16_BELOW: usize = 65500;

/// The formats `--format` names: the id stream (NDJSON) and the token files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Ndjson,
    U16,
    U32,
    Llmc,
    Megatron,
}

impl Format {
    /// The names, as `--format` takes them.
    pub const NAMES: [&'static str; 5] = ["ndjson", "u16", "u32", "llmc", "megatron"];

    /// The format named `name`.
    pub fn parse(name: &str) -> Option<Format> {
        Some(match name {
            "ndjson" => Format::Ndjson,
            "u16" => Format::U16,
            "u32" => Format::U32,
            "llmc" => Format::Llmc,
            "megatron" => Format::Megatron,
            _ => return None,
        })
    }

    /// The format's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::U16 => "u16",
            Format::U32 => "u32",
            Format::Llmc => "llmc",
            Format::Megatron => "megatron",
        }
    }
}

/// The element type of a token file, named as numpy names it. Megatron's index can name
/// all but `U32`; ids are read from any integer type whose values are ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    U8,
    I8,
    I16,
    I32,
    I64,
    F64,
    F32,
    U16,
    U32,
}

impl Dtype {
    /// Bytes per element.
    fn size(self) -> usize {
        match self {
            Dtype::U8 | Dtype::I8 => 1,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::F64 => 8,
        }
    }

    /// numpy's name for it.
    fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I8 => "int8",
            Dtype::I16 => "int16",
            Dtype::I32 => "int32",
            Dtype::I64 => "int64",
            Dtype::F64 => "float64",
            Dtype::F32 => "float32",
            Dtype::U16 => "uint16",
            Dtype::U32 => "uint32",
        }
    }

    /// Its code in a Megatron index (`indexed_dataset.DType`).
    fn megatron_code(self) -> Option<u8> {
        Some(match self {
            Dtype::U8 => 1,
            Dtype::I8 => 2,
            Dtype::I16 => 3,
            Dtype::I32 => 4,
            Dtype::I64 => 5,
            Dtype::F64 => 6,
            Dtype::F32 => 7,
            Dtype::U16 => 8,
            Dtype::U32 => return None,
        })
    }

    /// The type of a Megatron dtype code.
    fn from_megatron_code(code: u8) -> Option<Dtype> {
        Some(match code {
            1 => Dtype::U8,
            2 => Dtype::I8,
            3 => Dtype::I16,
            4 => Dtype::I32,
            5 => Dtype::I64,
            6 => Dtype::F64,
            7 => Dtype::F32,
            8 => Dtype::U16,
            _ => return None,
        })
    }

    /// The largest id it holds.
    fn max_id(self) -> u64 {
        match self {
            Dtype::U8 => u8::MAX.into(),
            Dtype::I8 => i8::MAX as u64,
            Dtype::I16 => i16::MAX as u64,
            Dtype::U16 => u16::MAX.into(),
            Dtype::I32 => i32::MAX as u64,
            Dtype::I64 | Dtype::U32 => u32::MAX.into(),
            Dtype::F32 | Dtype::F64 => 0,
        }
    }

    /// Appends `ids` as little-endian elements (the writers' types: `U16`, `U32`, `I32`,
    /// whose range the caller checked against the model's largest id).
    fn pack(self, ids: &[u32], out: &mut Vec<u8>) {
        match self {
            Dtype::U16 => {
                out.reserve(2 * ids.len());
                for &id in ids {
                    out.extend_from_slice(&(id as u16).to_le_bytes());
                }
            }
            _ => {
                out.reserve(4 * ids.len());
                for &id in ids {
                    out.extend_from_slice(&id.to_le_bytes());
                }
            }
        }
    }

    /// Appends the ids held in `bytes` (whole little-endian elements) to `out`; `Err` gives
    /// the index of the first element that is no id (negative, too large, a float) and
    /// why.
    fn unpack(self, bytes: &[u8], out: &mut Vec<u32>) -> std::result::Result<(), (usize, String)> {
        let size = self.size();
        out.reserve(bytes.len() / size);
        let elements = bytes.chunks_exact(size).enumerate();
        let no_id = |k: usize, what: String| Err((k, what));
        match self {
            Dtype::U8 => out.extend(bytes.iter().map(|&b| u32::from(b))),
            Dtype::U16 => out.extend(
                bytes
                    .chunks_exact(2)
                    .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))),
            ),
            Dtype::U32 => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
            Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64 => {
                for (k, c) in elements {
                    let value: i64 = match self {
                        Dtype::I8 => i64::from(c[0] as i8),
                        Dtype::I16 => i64::from(i16::from_le_bytes([c[0], c[1]])),
                        Dtype::I32 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                        _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
                    };
                    match u32::try_from(value) {
                        Ok(id) => out.push(id),
                        Err(_) => return no_id(k, format!("{value} is not a token id")),
                    }
                }
            }
            Dtype::F32 | Dtype::F64 => {
                return no_id(0, format!("{} values are not token ids", self.name()))
            }
        }
        Ok(())
    }
}

/// How a model is named in messages: its built-in name or the file name given.
pub(crate) fn model_name(model: &Model) -> String {
    match model.source() {
        crate::identity::ModelSource::Builtin(name) => (*name).to_string(),
        crate::identity::ModelSource::File { name, .. } => name.clone(),
    }
}

/// The id `--eot`/`--bos` (`flag`) names: a decimal id, a special token's text, or the
/// text of one ordinary token (a word of a word model). Anything else is a usage error
/// that lists the model's special tokens.
pub(crate) fn resolve_token(model: &Model, flag: &str, spec: &str) -> Result<u32> {
    let size = model.vocab_size();
    let known = |id: u32| match model {
        Model::Bpe(bpe) => bpe.token(id).is_some(),
        Model::Word(word) => id <= word.unk_id,
    };
    if !spec.is_empty() && spec.bytes().all(|b| b.is_ascii_digit()) {
        return match spec.parse::<u32>() {
            Ok(id) if known(id) => Ok(id),
            _ => Err(Error::usage(format!(
                "{flag} {spec} is not an id of {} (vocabulary size {size})",
                model_name(model)
            ))),
        };
    }
    let found = match model {
        Model::Bpe(bpe) => bpe
            .specials
            .iter()
            .find(|s| s.text == spec)
            .map(|s| s.id)
            .or_else(|| {
                (0..bpe.token_offsets.len().saturating_sub(1) as u32)
                    .find(|&id| bpe.token(id) == Some(spec.as_bytes()))
            }),
        Model::Word(word) => crate::word::lookup(word, spec.as_bytes())
            .or((spec == word.unk_text).then_some(word.unk_id)),
    };
    found.ok_or_else(|| {
        let specials: Vec<String> = match model {
            Model::Bpe(bpe) => bpe
                .specials
                .iter()
                .map(|s| format!("{:?}", s.text))
                .collect(),
            Model::Word(word) => vec![format!("{:?}", word.unk_text)],
        };
        Error::usage(format!(
            "{flag} {spec:?} is neither a token of {} nor an id (its special tokens: {})",
            model_name(model),
            if specials.is_empty() {
                "none".to_string()
            } else {
                specials.join(", ")
            }
        ))
    })
}

/// The element type `format` is written in for a model of `vocab_size` ids (largest
/// `vocab_size - 1`); a usage error, naming the largest id, when the ids do not fit.
pub(crate) fn write_dtype(format: Format, vocab_size: usize, model: &str) -> Result<Dtype> {
    let largest = vocab_size.saturating_sub(1);
    let dtype = match format {
        Format::U16 | Format::Llmc => Dtype::U16,
        Format::U32 => Dtype::U32,
        Format::Megatron if vocab_size < MEGATRON_U16_BELOW => Dtype::U16,
        Format::Megatron => Dtype::I32,
        Format::Ndjson => return Err(Error::usage("ndjson is not a token-file format")),
    };
    if largest as u64 > dtype.max_id() {
        return Err(Error::usage(format!(
            "--format {} holds ids up to {}, but the largest id of {model} is {largest}; \
             use --format u32 or megatron",
            format.name(),
            dtype.max_id()
        )));
    }
    Ok(dtype)
}

// ---------------------------------------------------------------------------------
// Writing

/// A token file being written: ids arrive in order, documents end, and closing commits
/// every file (or discards what cannot be kept).
pub(crate) trait TokenSink {
    /// Appends ids to the current document.
    fn extend(&mut self, ids: &[u32]) -> Result<()>;
    /// Ends the current document (Megatron: one sequence, or none if it has no ids).
    fn end_document(&mut self) -> Result<()>;
    /// Ends the run: finishes every file and renames it into place.
    fn commit(self: Box<Self>) -> Result<()>;
    /// Ends a failed run: the files being written are removed (llm.c shards already
    /// complete stay), except standard output, which gets what was written before the
    /// error (behind an llm.c header counting it); returns the error, a write failure
    /// named after its output.
    fn fail(self: Box<Self>, err: Error) -> Error;
}

/// Where a token file goes: `format`, the `-o` path (a FILE, or a PREFIX for Megatron
/// and llm.c shards; `None` for standard output), llm.c's shard size.
#[derive(Debug, Clone)]
pub(crate) struct SinkSpec<'a> {
    pub(crate) format: Format,
    pub(crate) dtype: Dtype,
    pub(crate) output: Option<&'a Path>,
    pub(crate) shard_tokens: Option<u64>,
}

/// Opens the files of `spec` (every file that will exist even for an empty input is
/// created now, so a run that cannot create its output fails before reading).
pub(crate) fn create_sink(spec: &SinkSpec) -> Result<Box<dyn TokenSink>> {
    match spec.format {
        Format::U16 | Format::U32 => Ok(Box::new(RawSink {
            out: Output::create(spec.output)?,
            dtype: spec.dtype,
            buf: Vec::with_capacity(1 << 16),
        })),
        Format::Llmc => Ok(Box::new(LlmcSink::new(spec.output, spec.shard_tokens)?)),
        Format::Megatron => {
            let prefix = spec.output.ok_or_else(|| {
                Error::usage("--format megatron writes PREFIX.bin and PREFIX.idx: give -o PREFIX")
            })?;
            Ok(Box::new(MegatronSink::new(prefix, spec.dtype)?))
        }
        Format::Ndjson => Err(Error::usage("ndjson is not a token-file format")),
    }
}

/// `PREFIX` of `-o PREFIX` for Megatron: the path given, less a `.bin` or `.idx` ending.
fn megatron_prefix(path: &Path) -> PathBuf {
    let text = path.as_os_str().to_string_lossy();
    for ending in [".bin", ".idx"] {
        if let Some(stem) = text.strip_suffix(ending) {
            if !stem.is_empty() && !stem.ends_with('/') {
                return PathBuf::from(stem);
            }
        }
    }
    path.to_path_buf()
}

/// `PREFIX.bin` / `PREFIX.idx`.
fn with_ending(prefix: &Path, ending: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_os_string();
    name.push(ending);
    PathBuf::from(name)
}

/// The name of llm.c shard `index` of `PREFIX`: `PREFIX_000003.bin`.
fn shard_path(prefix: &Path, index: usize) -> PathBuf {
    with_ending(prefix, &format!("_{index:06}.bin"))
}

/// Raw ids (`u16`, `u32`) to standard output or `-o FILE`.
struct RawSink {
    out: Output,
    dtype: Dtype,
    buf: Vec<u8>,
}

impl TokenSink for RawSink {
    fn extend(&mut self, ids: &[u32]) -> Result<()> {
        // A part at a time, so that the buffer stays in cache until it is written (a 1
        // MB piece of `--whole` text came as 260k ids). Intel Xeon model 167, one
        // thread, o200k_base, 27 MB, `--format u32`, CPU ms (min / p10 / median of 15
        // alternated runs): 400 / 403 / 426 against 403 / 417 / 432.
        for part in ids.chunks(1 << 14) {
            self.dtype.pack(part, &mut self.buf);
            if self.buf.len() >= 1 << 16 {
                self.out.write_all(&self.buf).map_err(Error::write)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    fn end_document(&mut self) -> Result<()> {
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        match self.out.write_all(&self.buf) {
            Ok(()) => self.out.finish(),
            Err(e) => Err(self.out.fail(Error::write(e))),
        }
    }

    fn fail(mut self: Box<Self>, err: Error) -> Error {
        let _ = self.out.write_all(&self.buf);
        self.out.fail(err)
    }
}

/// The llm.c header for `tokens` tokens.
fn llmc_header(tokens: u64) -> Vec<u8> {
    let mut header = vec![0u8; LLMC_HEADER_BYTES];
    header[0..4].copy_from_slice(&LLMC_MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&LLMC_VERSION.to_le_bytes());
    header[8..12].copy_from_slice(&(tokens as u32).to_le_bytes());
    header
}

/// One llm.c file being written: to its own temporary file (header filled in at the
/// end), or, bound for standard output or a pipe, to a scratch file copied out behind
/// the header once the count is known.
enum LlmcPart {
    File {
        file: AtomicFile,
        tokens: u64,
    },
    Spilled {
        spill: SpillFile,
        tokens: u64,
        out: Output,
    },
}

impl LlmcPart {
    fn open(path: Option<&Path>) -> Result<LlmcPart> {
        let seekable = match path {
            None => false,
            // An existing FIFO or device is written in place, and cannot be sought.
            Some(p) => std::fs::metadata(p).map_or(true, |m| m.is_file()),
        };
        match path {
            Some(path) if seekable => {
                let mut file = AtomicFile::create(path)?;
                let name = file.name().to_string();
                file.write_all(&llmc_header(0))
                    .map_err(|e| Error::write(e).in_file(&name))?;
                Ok(LlmcPart::File { file, tokens: 0 })
            }
            _ => {
                let out = Output::create(path)?;
                let dir = std::env::temp_dir();
                Ok(LlmcPart::Spilled {
                    spill: SpillFile::create(&dir)?,
                    tokens: 0,
                    out,
                })
            }
        }
    }

    fn tokens(&self) -> u64 {
        match self {
            LlmcPart::File { tokens, .. } | LlmcPart::Spilled { tokens, .. } => *tokens,
        }
    }

    fn write(&mut self, bytes: &[u8], tokens: u64) -> Result<()> {
        match self {
            LlmcPart::File { file, tokens: n } => {
                *n += tokens;
                let name = file.name().to_string();
                file.write_all(bytes)
                    .map_err(|e| Error::write(e).in_file(&name))
            }
            LlmcPart::Spilled {
                spill, tokens: n, ..
            } => {
                *n += tokens;
                spill
                    .write_all(bytes)
                    .map_err(|e| Error::io("cannot write a temporary file", e))
            }
        }
    }

    /// Completes the file: its count into the header, then into place.
    fn finish(self) -> Result<()> {
        match self {
            LlmcPart::File { mut file, tokens } => {
                file.patch(0, &llmc_header(tokens)[..12])?;
                file.commit()
            }
            LlmcPart::Spilled {
                mut spill,
                tokens,
                mut out,
            } => {
                let copied = out
                    .write_all(&llmc_header(tokens))
                    .and_then(|()| spill.copy_to(&mut out));
                match copied {
                    Ok(()) => out.finish(),
                    Err(e) => Err(out.fail(Error::write(e))),
                }
            }
        }
    }

    /// Ends a failed run: a file is removed; standard output (or a pipe) gets the ids
    /// written so far behind a header counting them.
    fn fail(self, err: Error) -> Error {
        match self {
            LlmcPart::File { .. } => err,
            LlmcPart::Spilled {
                mut spill,
                tokens,
                mut out,
            } => {
                let _ = out
                    .write_all(&llmc_header(tokens))
                    .and_then(|()| spill.copy_to(&mut out));
                out.fail(err)
            }
        }
    }
}

/// llm.c files: one, or shards of `shard_tokens` tokens.
struct LlmcSink {
    output: Option<PathBuf>,
    shard_tokens: Option<u64>,
    /// The number of the shard being written (or to be opened).
    shard: usize,
    current: Option<LlmcPart>,
    buf: Vec<u8>,
}

impl LlmcSink {
    fn new(output: Option<&Path>, shard_tokens: Option<u64>) -> Result<LlmcSink> {
        if let Some(n) = shard_tokens {
            if output.is_none() {
                return Err(Error::usage(
                    "--shard-tokens writes numbered files PREFIX_000000.bin, ...: give -o PREFIX",
                ));
            }
            if n == 0 || n > LLMC_MAX_TOKENS {
                return Err(Error::usage(format!(
                    "--shard-tokens must be between 1 and {LLMC_MAX_TOKENS} (an llm.c header \
                     counts tokens in an int32)"
                )));
            }
        }
        // One file is there even for an empty input; shards appear as tokens fill them.
        let current = match shard_tokens {
            None => Some(LlmcPart::open(output)?),
            Some(_) => None,
        };
        Ok(LlmcSink {
            output: output.map(Path::to_path_buf),
            shard_tokens,
            shard: 0,
            current,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    fn limit(&self) -> u64 {
        self.shard_tokens.unwrap_or(LLMC_MAX_TOKENS)
    }
}

impl TokenSink for LlmcSink {
    fn extend(&mut self, mut ids: &[u32]) -> Result<()> {
        while !ids.is_empty() {
            if self.current.is_none() {
                let prefix = self.output.as_deref().expect("shards have a prefix");
                self.current = Some(LlmcPart::open(Some(&shard_path(prefix, self.shard)))?);
            }
            let limit = self.limit();
            let part = self.current.as_mut().expect("opened above");
            let room = limit - part.tokens();
            if room == 0 {
                return Err(Error::data(format!(
                    "an llm.c file holds at most {LLMC_MAX_TOKENS} tokens (its header counts \
                     them in an int32); give --shard-tokens N to write shards"
                )));
            }
            let take = ids.len().min(room as usize);
            self.buf.clear();
            Dtype::U16.pack(&ids[..take], &mut self.buf);
            part.write(&self.buf, take as u64)?;
            ids = &ids[take..];
            if self.shard_tokens.is_some() && part.tokens() == limit {
                let full = self.current.take().expect("written above");
                full.finish()?;
                self.shard += 1;
            }
        }
        Ok(())
    }

    fn end_document(&mut self) -> Result<()> {
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        match self.current.take() {
            Some(part) => part.finish(),
            None => Ok(()),
        }
    }

    fn fail(mut self: Box<Self>, err: Error) -> Error {
        match self.current.take() {
            Some(part) => part.fail(err),
            None => err,
        }
    }
}

/// A Megatron dataset: `PREFIX.bin` streamed; `PREFIX.idx` gets its lengths as the
/// documents end (right after the header, whose counts are filled in at the end), and
/// its pointers and document index go to scratch files appended at the end.
struct MegatronSink {
    bin: AtomicFile,
    idx: AtomicFile,
    pointers: SpillFile,
    documents: SpillFile,
    dtype: Dtype,
    sequences: u64,
    document_count: u64,
    /// Ids of the current document so far.
    open_tokens: u64,
    bin_bytes: u64,
    buf: Vec<u8>,
}

impl MegatronSink {
    fn new(prefix: &Path, dtype: Dtype) -> Result<MegatronSink> {
        let prefix = megatron_prefix(prefix);
        let bin = AtomicFile::create(&with_ending(&prefix, ".bin"))?;
        let mut idx = AtomicFile::create(&with_ending(&prefix, ".idx"))?;
        let dir = match prefix.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = idx.name().to_string();
        idx.write_all(&megatron_header(dtype, 0, 0))
            .map_err(|e| Error::write(e).in_file(&name))?;
        Ok(MegatronSink {
            bin,
            idx,
            pointers: SpillFile::create(&dir)?,
            documents: SpillFile::create(&dir)?,
            dtype,
            sequences: 0,
            document_count: 0,
            open_tokens: 0,
            bin_bytes: 0,
            buf: Vec::with_capacity(1 << 16),
        })
    }

    fn finish(mut self) -> Result<()> {
        let idx_name = self.idx.name().to_string();
        let spill = |e| Error::io("cannot read back a temporary file", e).in_file(&idx_name);
        self.pointers.copy_to(&mut self.idx).map_err(spill)?;
        self.idx
            .write_all(&0i64.to_le_bytes())
            .map_err(|e| Error::write(e).in_file(&idx_name))?;
        self.documents.copy_to(&mut self.idx).map_err(spill)?;
        let header = megatron_header(self.dtype, self.sequences, self.document_count + 1);
        self.idx.patch(0, &header)?;
        // The index last: a reader that finds the new index finds the new data.
        self.bin.commit()?;
        self.idx.commit()
    }
}

/// A Megatron `.idx` header.
fn megatron_header(dtype: Dtype, sequences: u64, document_entries: u64) -> Vec<u8> {
    let mut header = Vec::with_capacity(MEGATRON_HEADER_BYTES);
    header.extend_from_slice(MEGATRON_MAGIC);
    header.extend_from_slice(&MEGATRON_VERSION.to_le_bytes());
    header.push(dtype.megatron_code().unwrap_or(0));
    header.extend_from_slice(&sequences.to_le_bytes());
    header.extend_from_slice(&document_entries.to_le_bytes());
    header
}

impl TokenSink for MegatronSink {
    fn extend(&mut self, ids: &[u32]) -> Result<()> {
        self.buf.clear();
        self.dtype.pack(ids, &mut self.buf);
        let name = self.bin.name().to_string();
        self.bin
            .write_all(&self.buf)
            .map_err(|e| Error::write(e).in_file(&name))?;
        self.open_tokens += ids.len() as u64;
        self.bin_bytes += self.buf.len() as u64;
        Ok(())
    }

    fn end_document(&mut self) -> Result<()> {
        let tokens = std::mem::take(&mut self.open_tokens);
        if tokens > 0 {
            let length = i32::try_from(tokens).map_err(|_| {
                Error::data(format!(
                    "a document of {tokens} tokens: Megatron's index holds lengths up to {}",
                    i32::MAX
                ))
            })?;
            let start = self.bin_bytes - tokens * self.dtype.size() as u64;
            let name = self.idx.name().to_string();
            self.idx
                .write_all(&length.to_le_bytes())
                .map_err(|e| Error::write(e).in_file(&name))?;
            self.pointers
                .write_all(&start.to_le_bytes())
                .map_err(|e| Error::io("cannot write a temporary file", e))?;
            self.sequences += 1;
        }
        self.document_count += 1;
        self.documents
            .write_all(&self.sequences.to_le_bytes())
            .map_err(|e| Error::io("cannot write a temporary file", e))
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        if self.open_tokens > 0 {
            self.end_document()?;
        }
        self.finish()
    }

    fn fail(self: Box<Self>, err: Error) -> Error {
        err
    }
}

// ---------------------------------------------------------------------------------
// Reading

/// What an input is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An id stream (NDJSON): not a token file.
    Ndjson,
    /// Raw little-endian ids.
    Raw(Dtype),
    /// An llm.c file (its header says uint16 or uint32).
    Llmc,
    /// A Megatron dataset: `PREFIX.bin` and `PREFIX.idx`.
    Megatron(PathBuf),
}

impl Kind {
    /// The format's name.
    pub(crate) fn format(&self) -> Format {
        match self {
            Kind::Ndjson => Format::Ndjson,
            Kind::Raw(Dtype::U16) => Format::U16,
            Kind::Raw(_) => Format::U32,
            Kind::Llmc => Format::Llmc,
            Kind::Megatron(_) => Format::Megatron,
        }
    }
}

/// An input with its kind.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    pub(crate) source: Source,
    pub(crate) kind: Kind,
}

/// What `source` holds: `forced` (`--format`), else what its first bytes say — an llm.c
/// magic, a Megatron index (the file itself, `PREFIX.bin` beside its index, or a PREFIX
/// that names no file but has `PREFIX.idx`) — else an id stream. Raw files have no magic:
/// they need `--format u16|u32`.
pub(crate) fn detect(source: &Source, forced: Option<Format>) -> Result<Kind> {
    let Some(path) = source.path() else {
        return Ok(match forced {
            Some(Format::Megatron) => {
                return Err(Error::usage(
                    "a Megatron dataset is two files (PREFIX.bin, PREFIX.idx): name its PREFIX, \
                     not standard input",
                ))
            }
            Some(format) => kind_of(format, Path::new("-")),
            None => {
                // The first bytes stay in standard input's buffer for whoever reads next.
                let start = io::stdin()
                    .lock()
                    .fill_buf()
                    .map(|b| b.get(..4.min(b.len())).unwrap_or_default().to_vec())
                    .unwrap_or_default();
                if !start.is_empty() && llmc_magic_start(&start) {
                    Kind::Llmc
                } else {
                    Kind::Ndjson
                }
            }
        });
    };
    if let Some(format) = forced {
        return Ok(kind_of(format, path));
    }
    let head = match File::open(path) {
        Ok(mut file) => {
            let mut head = [0u8; 9];
            let n = read_up_to(&mut file, &mut head).unwrap_or(0);
            head[..n].to_vec()
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if with_ending(path, ".idx").is_file() {
                return Ok(Kind::Megatron(path.to_path_buf()));
            }
            return Ok(Kind::Ndjson);
        }
        // Let the reader report it.
        Err(_) => return Ok(Kind::Ndjson),
    };
    if head.starts_with(MEGATRON_MAGIC) {
        return Ok(Kind::Megatron(megatron_prefix(path)));
    }
    if head.len() >= 4 && llmc_magic_start(&head) {
        return Ok(Kind::Llmc);
    }
    let text = path.as_os_str().to_string_lossy();
    if let Some(stem) = text.strip_suffix(".bin") {
        let mut idx_head = [0u8; 9];
        let idx = with_ending(Path::new(stem), ".idx");
        if let Ok(mut file) = File::open(&idx) {
            if read_up_to(&mut file, &mut idx_head).ok() == Some(9) && &idx_head == MEGATRON_MAGIC {
                return Ok(Kind::Megatron(PathBuf::from(stem)));
            }
        }
    }
    Ok(Kind::Ndjson)
}

fn kind_of(format: Format, path: &Path) -> Kind {
    match format {
        Format::Ndjson => Kind::Ndjson,
        Format::U16 => Kind::Raw(Dtype::U16),
        Format::U32 => Kind::Raw(Dtype::U32),
        Format::Llmc => Kind::Llmc,
        Format::Megatron => Kind::Megatron(megatron_prefix(path)),
    }
}

/// True when `start` (1 to 4 bytes) begins either llm.c magic. No id stream starts so:
/// their first bytes (0x88, 0xa1) are not text.
fn llmc_magic_start(start: &[u8]) -> bool {
    let n = start.len().min(4);
    [LLMC_MAGIC, LLMC_MAGIC_U32]
        .iter()
        .any(|m| m.to_le_bytes()[..n] == start[..n])
}

/// Reads until `buf` is full or the input ends; the number of bytes read.
fn read_up_to(reader: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Where records end in a token stream (`--eot`, `--bos` of `bpe-decode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Boundary {
    /// Raw and llm.c files are one record; each Megatron document is one.
    None,
    /// Each record ends with this id, which is not part of it (nanoGPT, Megatron's
    /// `--append-eod`); ids after the last one are a record too.
    Eot(u32),
    /// Each record starts with this id, which is not part of it (llm.c's FineWeb); ids
    /// before the first one are a record too.
    Bos(u32),
}

/// A part of a record read from token files, in order.
#[derive(Debug)]
pub(crate) struct Piece<'a> {
    /// The file the ids come from.
    pub(crate) file: &'a str,
    /// The position of the first id among that file's tokens.
    pub(crate) offset: u64,
    pub(crate) ids: &'a [u32],
    /// The record ends after these ids.
    pub(crate) end: bool,
}

/// Ids per block read (a quarter of a megabyte of u32).
const BLOCK_IDS: usize = 1 << 16;

/// Reads the records of token files, in order, as pieces of at most a block of ids each
/// (memory stays bounded whatever the record's length). Consecutive raw and llm.c files
/// make one stream, as if concatenated (shards of one dataset): records cross file ends.
/// Each Megatron document is one record, less a leading `Bos` or trailing `Eot` id.
pub(crate) fn read_pieces(
    inputs: &[Input],
    boundary: Boundary,
    no_mmap: bool,
    each: &mut dyn FnMut(Piece) -> Result<()>,
) -> Result<()> {
    let mut stream = StreamRecords {
        boundary,
        open: false,
    };
    let mut in_stream = false;
    for input in inputs {
        match &input.kind {
            Kind::Ndjson => {
                return Err(
                    Error::usage("an id stream is not a token file").in_file(&input.source.name)
                )
            }
            Kind::Megatron(prefix) => {
                if in_stream {
                    stream.end(&input.source.name, each)?;
                    in_stream = false;
                }
                let dataset = Megatron::open(prefix, no_mmap)?;
                dataset.read_documents(boundary, &mut |_, piece| each(piece))?;
            }
            Kind::Raw(_) | Kind::Llmc => {
                if !in_stream {
                    stream.start();
                    in_stream = true;
                }
                let mut ids = IdFile::open(input)?;
                let mut block = Vec::with_capacity(BLOCK_IDS);
                while let Some(offset) = ids.next_block(&mut block)? {
                    stream.feed(&input.source.name, offset, &block, each)?;
                }
            }
        }
    }
    if in_stream {
        let last = inputs.last().map_or("", |i| i.source.name.as_str());
        stream.end(last, each)?;
    }
    Ok(())
}

/// A callback for [`read_records`]: the file a record ends in, its number from 1, and
/// its ids.
type RecordHandler<'a> = dyn FnMut(&str, u64, &[u32]) -> Result<()> + 'a;

/// Reads whole records (for tools that need a record at once, such as `attn`).
pub(crate) fn read_records(
    inputs: &[Input],
    boundary: Boundary,
    no_mmap: bool,
    each: &mut RecordHandler,
) -> Result<()> {
    let mut record = Vec::new();
    let mut number = 0;
    read_pieces(inputs, boundary, no_mmap, &mut |piece| {
        record.extend_from_slice(piece.ids);
        if piece.end {
            number += 1;
            each(piece.file, number, &record)?;
            record.clear();
        }
        Ok(())
    })
}

/// The record state of a raw / llm.c token stream.
struct StreamRecords {
    boundary: Boundary,
    /// A record has begun and not ended.
    open: bool,
}

impl StreamRecords {
    fn start(&mut self) {
        // With no boundary the whole stream is one record, even an empty one.
        self.open = self.boundary == Boundary::None;
    }

    fn feed(
        &mut self,
        file: &str,
        offset: u64,
        ids: &[u32],
        each: &mut dyn FnMut(Piece) -> Result<()>,
    ) -> Result<()> {
        let mark = match self.boundary {
            Boundary::None => {
                return each(Piece {
                    file,
                    offset,
                    ids,
                    end: false,
                })
            }
            Boundary::Eot(id) | Boundary::Bos(id) => id,
        };
        let mut start = 0;
        while start < ids.len() {
            let at = ids[start..].iter().position(|&id| id == mark);
            let stop = at.map_or(ids.len(), |k| start + k);
            if stop > start {
                self.open = true;
                each(Piece {
                    file,
                    offset: offset + start as u64,
                    ids: &ids[start..stop],
                    end: false,
                })?;
            }
            if at.is_none() {
                break;
            }
            let at_offset = offset + stop as u64;
            match self.boundary {
                Boundary::Eot(_) => {
                    self.open = false;
                    each(Piece {
                        file,
                        offset: at_offset,
                        ids: &[],
                        end: true,
                    })?;
                }
                _ => {
                    if self.open {
                        each(Piece {
                            file,
                            offset: at_offset,
                            ids: &[],
                            end: true,
                        })?;
                    }
                    self.open = true;
                }
            }
            start = stop + 1;
        }
        Ok(())
    }

    fn end(&mut self, file: &str, each: &mut dyn FnMut(Piece) -> Result<()>) -> Result<()> {
        if std::mem::take(&mut self.open) {
            each(Piece {
                file,
                offset: 0,
                ids: &[],
                end: true,
            })?;
        }
        Ok(())
    }
}

/// A raw or llm.c file read block by block.
struct IdFile {
    reader: Box<dyn BufRead>,
    name: String,
    dtype: Dtype,
    /// llm.c: the count its header gives.
    expected: Option<u64>,
    /// Ids read so far.
    read: u64,
    bytes: Vec<u8>,
}

impl IdFile {
    fn open(input: &Input) -> Result<IdFile> {
        let name = input.source.name.clone();
        let mut reader = input::open_stream(&input.source)?;
        let (dtype, expected) = match input.kind {
            Kind::Raw(dtype) => (dtype, None),
            _ => {
                let mut header = vec![0u8; LLMC_HEADER_BYTES];
                let n = read_up_to(&mut reader, &mut header)
                    .map_err(|e| Error::io("read failed", e).in_file(&name))?;
                let (dtype, tokens) =
                    parse_llmc_header(&header[..n]).map_err(|e| e.in_file(&name))?;
                (dtype, Some(tokens))
            }
        };
        Ok(IdFile {
            reader,
            name,
            dtype,
            expected,
            read: 0,
            bytes: Vec::new(),
        })
    }

    /// Reads the next block of ids into `ids` (cleared first); the position of its first
    /// id, or `None` at the end.
    fn next_block(&mut self, ids: &mut Vec<u32>) -> Result<Option<u64>> {
        ids.clear();
        let size = self.dtype.size();
        let mut want = BLOCK_IDS * size;
        if let Some(total) = self.expected {
            want = want.min(((total - self.read) as usize).saturating_mul(size));
        }
        self.bytes.resize(want, 0);
        let n = read_up_to(&mut self.reader, &mut self.bytes)
            .map_err(|e| Error::io("read failed", e).in_file(&self.name))?;
        let whole = n / size * size;
        if whole < n || (n < want && self.expected.is_some()) {
            return Err(Error::data(match self.expected {
                Some(total) => format!(
                    "the header counts {total} tokens but the file ends after {}",
                    self.read + (n / size) as u64
                ),
                None => format!(
                    "the file ends inside a token: {} bytes after the last whole {}",
                    n - whole,
                    self.dtype.name()
                ),
            })
            .in_file(&self.name));
        }
        if n == 0 {
            if self.expected.is_some() {
                let mut extra = [0u8; 1];
                if read_up_to(&mut self.reader, &mut extra).unwrap_or(0) > 0 {
                    return Err(Error::data(format!(
                        "more data after the {} tokens the header counts",
                        self.read
                    ))
                    .in_file(&self.name));
                }
            }
            return Ok(None);
        }
        self.dtype
            .unpack(&self.bytes[..n], ids)
            .map_err(|(k, why)| {
                Error::data(format!("token {}: {why}", self.read + k as u64)).in_file(&self.name)
            })?;
        let offset = self.read;
        self.read += ids.len() as u64;
        Ok(Some(offset))
    }
}

/// The element type and token count of an llm.c header (`bytes` may be short: an
/// error then).
fn parse_llmc_header(bytes: &[u8]) -> Result<(Dtype, u64)> {
    if bytes.len() < LLMC_HEADER_BYTES {
        return Err(Error::data(format!(
            "not an llm.c token file: {} bytes, shorter than its {LLMC_HEADER_BYTES}-byte header",
            bytes.len()
        )));
    }
    let word = |k: usize| {
        i32::from_le_bytes([
            bytes[4 * k],
            bytes[4 * k + 1],
            bytes[4 * k + 2],
            bytes[4 * k + 3],
        ])
    };
    let (magic, version, count) = (word(0), word(1), word(2));
    let dtype = match (magic as u32, version as u32) {
        (LLMC_MAGIC, LLMC_VERSION) => Dtype::U16,
        (LLMC_MAGIC_U32, LLMC_VERSION_U32) => Dtype::U32,
        (LLMC_MAGIC | LLMC_MAGIC_U32, v) => {
            return Err(Error::data(format!(
                "llm.c token file of version {v}, which is not known (1: uint16, 7: uint32)"
            )))
        }
        (m, _) => {
            return Err(Error::data(format!(
                "not an llm.c token file: magic {m}, not {LLMC_MAGIC}"
            )))
        }
    };
    let count = u64::try_from(count)
        .map_err(|_| Error::data(format!("llm.c header with a negative token count {count}")))?;
    Ok((dtype, count))
}

/// A Megatron dataset open for reading: its index (mapped) checked against the sizes.
struct Megatron {
    prefix: PathBuf,
    idx_name: String,
    bin_name: String,
    index: Data,
    dtype: Dtype,
    sequences: u64,
    /// Documents (the index's entries less one).
    documents: u64,
    bin: BufReader<File>,
    bin_len: u64,
}

impl Megatron {
    /// Opens `PREFIX.idx` and `PREFIX.bin` and checks the index: magic, version, dtype,
    /// its size from the counts, document index from 0 to the sequence count and never
    /// decreasing, every sequence inside `.bin`.
    fn open(prefix: &Path, no_mmap: bool) -> Result<Megatron> {
        let idx_path = with_ending(prefix, ".idx");
        let bin_path = with_ending(prefix, ".bin");
        let idx_name = idx_path.display().to_string();
        let bin_name = bin_path.display().to_string();
        let index = input::read_source(&Source::file(&idx_path), no_mmap)?;
        let bad = |what: String| Error::data(what).in_file(&idx_name);
        if index.len() < MEGATRON_HEADER_BYTES || !index.starts_with(MEGATRON_MAGIC) {
            return Err(bad("not a Megatron index (no MMIDIDX magic)".to_string()));
        }
        let u64_at = |at: usize| u64::from_le_bytes(index[at..at + 8].try_into().expect("8 bytes"));
        let version = u64_at(9);
        if version != MEGATRON_VERSION {
            return Err(bad(format!(
                "index version {version}, not {MEGATRON_VERSION}"
            )));
        }
        let dtype = Dtype::from_megatron_code(index[17])
            .ok_or_else(|| bad(format!("unknown dtype code {}", index[17])))?;
        let (sequences, entries) = (u64_at(18), u64_at(26));
        let expected =
            (sequences as u128) * 12 + (entries as u128) * 8 + MEGATRON_HEADER_BYTES as u128;
        if expected != index.len() as u128 {
            return Err(bad(format!(
                "{} bytes, but {sequences} sequences and {entries} document entries need {expected}",
                index.len()
            )));
        }
        if entries == 0 {
            return Err(bad(
                "the document index is empty (it starts with 0)".to_string()
            ));
        }
        let bin_file =
            File::open(&bin_path).map_err(|e| Error::io("cannot open", e).in_file(&bin_name))?;
        let bin_len = bin_file
            .metadata()
            .map_err(|e| Error::io("cannot read", e).in_file(&bin_name))?
            .len();
        let dataset = Megatron {
            prefix: prefix.to_path_buf(),
            idx_name,
            bin_name,
            index,
            dtype,
            sequences,
            documents: entries - 1,
            bin: BufReader::with_capacity(1 << 16, bin_file),
            bin_len,
        };
        dataset.check()?;
        Ok(dataset)
    }

    fn lengths_at(&self) -> usize {
        MEGATRON_HEADER_BYTES
    }

    fn pointers_at(&self) -> usize {
        MEGATRON_HEADER_BYTES + 4 * self.sequences as usize
    }

    fn documents_at(&self) -> usize {
        MEGATRON_HEADER_BYTES + 12 * self.sequences as usize
    }

    /// Sequence `k`'s length in elements.
    fn length(&self, k: u64) -> u64 {
        let at = self.lengths_at() + 4 * k as usize;
        i32::from_le_bytes(self.index[at..at + 4].try_into().expect("4 bytes")) as u64
    }

    /// Sequence `k`'s byte offset in `.bin`.
    fn pointer(&self, k: u64) -> u64 {
        let at = self.pointers_at() + 8 * k as usize;
        i64::from_le_bytes(self.index[at..at + 8].try_into().expect("8 bytes")) as u64
    }

    /// Document index entry `k` (0 ..= documents): the sequences before document `k`.
    fn document_entry(&self, k: u64) -> u64 {
        let at = self.documents_at() + 8 * k as usize;
        i64::from_le_bytes(self.index[at..at + 8].try_into().expect("8 bytes")) as u64
    }

    /// The raw bytes of the index's lengths (for merging).
    fn lengths_bytes(&self) -> &[u8] {
        &self.index[self.lengths_at()..self.pointers_at()]
    }

    fn check(&self) -> Result<()> {
        let bad = |what: String| Error::data(what).in_file(&self.idx_name);
        let size = self.dtype.size() as u64;
        for k in 0..self.sequences {
            let at = self.lengths_at() + 4 * k as usize;
            let length = i32::from_le_bytes(self.index[at..at + 4].try_into().expect("4 bytes"));
            let at = self.pointers_at() + 8 * k as usize;
            let pointer = i64::from_le_bytes(self.index[at..at + 8].try_into().expect("8 bytes"));
            let inside = length >= 0
                && pointer >= 0
                && (pointer as u128) + (length as u128) * (size as u128) <= self.bin_len as u128;
            if !inside {
                return Err(bad(format!(
                    "sequence {k} (length {length} at byte {pointer}) is not inside {} ({} bytes)",
                    self.bin_name, self.bin_len
                )));
            }
        }
        let mut previous = 0i64;
        for k in 0..=self.documents {
            let at = self.documents_at() + 8 * k as usize;
            let entry = i64::from_le_bytes(self.index[at..at + 8].try_into().expect("8 bytes"));
            let wrong = if k == 0 {
                entry != 0
            } else {
                entry < previous || entry as u64 > self.sequences
            };
            if wrong {
                return Err(bad(format!(
                    "document index entry {k} is {entry} (entries go from 0 up to the {} sequences)",
                    self.sequences
                )));
            }
            previous = entry;
        }
        if previous as u64 != self.sequences {
            return Err(bad(format!(
                "the document index ends at {previous}, not at the {} sequences",
                self.sequences
            )));
        }
        Ok(())
    }

    /// The tokens of all sequences.
    fn tokens(&self) -> u64 {
        (0..self.sequences).map(|k| self.length(k)).sum()
    }

    /// Reads elements `count` at byte `pointer` of `.bin` into `ids`.
    fn read_ids(
        &mut self,
        pointer: u64,
        count: u64,
        ids: &mut Vec<u32>,
        bytes: &mut Vec<u8>,
    ) -> Result<()> {
        let size = self.dtype.size();
        bytes.resize(count as usize * size, 0);
        let position = self
            .bin
            .stream_position()
            .map_err(|e| Error::io("read failed", e).in_file(&self.bin_name))?;
        if position != pointer {
            self.bin
                .seek(SeekFrom::Start(pointer))
                .map_err(|e| Error::io("read failed", e).in_file(&self.bin_name))?;
        }
        self.bin
            .read_exact(bytes)
            .map_err(|e| Error::io("read failed", e).in_file(&self.bin_name))?;
        ids.clear();
        self.dtype.unpack(bytes, ids).map_err(|(k, why)| {
            Error::data(format!("token {}: {why}", pointer / size as u64 + k as u64))
                .in_file(&self.bin_name)
        })
    }

    /// Reads every document, in order, as pieces (each document a record, less a
    /// leading `Bos` or trailing `Eot` id). `each` also gets the document's number.
    fn read_documents(
        mut self,
        boundary: Boundary,
        each: &mut dyn FnMut(u64, Piece) -> Result<()>,
    ) -> Result<()> {
        let size = self.dtype.size() as u64;
        let name = self.bin_name.clone();
        let mut ids = Vec::new();
        let mut bytes = Vec::new();
        let mut first_id = Vec::new();
        for doc in 0..self.documents {
            let (from, to) = (self.document_entry(doc), self.document_entry(doc + 1));
            // The document's first and last token, to leave out a boundary id.
            let nonempty: Vec<u64> = (from..to).filter(|&s| self.length(s) > 0).collect();
            let mut skip_first = false;
            let mut skip_last = false;
            if let (Some(&first), Some(&last)) = (nonempty.first(), nonempty.last()) {
                match boundary {
                    Boundary::Bos(id) => {
                        self.read_ids(self.pointer(first), 1, &mut first_id, &mut bytes)?;
                        skip_first = first_id[0] == id;
                    }
                    Boundary::Eot(id) => {
                        let end = self.pointer(last) + (self.length(last) - 1) * size;
                        self.read_ids(end, 1, &mut first_id, &mut bytes)?;
                        skip_last = first_id[0] == id;
                    }
                    Boundary::None => {}
                }
            }
            for (n, &seq) in nonempty.iter().enumerate() {
                let mut start = self.pointer(seq);
                let mut left = self.length(seq);
                if n == 0 && skip_first {
                    start += size;
                    left -= 1;
                }
                if n + 1 == nonempty.len() && skip_last {
                    left -= 1;
                }
                while left > 0 {
                    let count = left.min(BLOCK_IDS as u64);
                    self.read_ids(start, count, &mut ids, &mut bytes)?;
                    each(
                        doc,
                        Piece {
                            file: &name,
                            offset: start / size,
                            ids: &ids,
                            end: false,
                        },
                    )?;
                    start += count * size;
                    left -= count;
                }
            }
            each(
                doc,
                Piece {
                    file: &name,
                    offset: 0,
                    ids: &[],
                    end: true,
                },
            )?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// Summaries and merging

/// What `bpe-tokens info` says of one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    file: String,
    format: Format,
    dtype: Dtype,
    tokens: u64,
    /// Megatron: its documents; raw and llm.c: the records `boundary` cuts (if given).
    documents: Option<u64>,
    /// Megatron only.
    sequences: Option<u64>,
    /// Megatron: documents with no sequence or no tokens; with a boundary: records with
    /// no ids.
    empty_documents: Option<u64>,
    /// The largest id (`None` with no tokens).
    max_id: Option<u32>,
}

impl Summary {
    /// One JSON object line, keys in a fixed order (`null` for what does not apply).
    pub(crate) fn json_line(&self) -> String {
        let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
        format!(
            "{{\"file\":{},\"format\":\"{}\",\"dtype\":\"{}\",\"tokens\":{},\"documents\":{},\"sequences\":{},\"empty_documents\":{},\"max_id\":{}}}",
            super::json::json_string(&self.file),
            self.format.name(),
            self.dtype.name(),
            self.tokens,
            opt(self.documents),
            opt(self.sequences),
            opt(self.empty_documents),
            opt(self.max_id.map(u64::from))
        )
    }
}

/// Reads one token file through and summarises it.
pub(crate) fn summarize(input: &Input, boundary: Boundary, no_mmap: bool) -> Result<Summary> {
    let mut tokens = 0u64;
    let mut max_id: Option<u32> = None;
    let mut tally = |ids: &[u32]| {
        tokens += ids.len() as u64;
        if let Some(&m) = ids.iter().max() {
            max_id = Some(max_id.map_or(m, |old| old.max(m)));
        }
    };
    // Records, and those with no ids, as `boundary` (or Megatron's index) cuts them.
    let (mut records, mut empty, mut record_len) = (0u64, 0u64, 0u64);
    let mut count = |piece: &Piece| {
        record_len += piece.ids.len() as u64;
        if piece.end {
            records += 1;
            empty += u64::from(record_len == 0);
            record_len = 0;
        }
    };
    let name = input.source.name.clone();
    let (file, dtype, sequences, documents) =
        match &input.kind {
            Kind::Megatron(prefix) => {
                let dataset = Megatron::open(prefix, no_mmap)?;
                let (dtype, sequences) = (dataset.dtype, dataset.sequences);
                dataset.read_documents(Boundary::None, &mut |_, piece| {
                    tally(piece.ids);
                    count(&piece);
                    Ok(())
                })?;
                (prefix.display().to_string(), dtype, Some(sequences), true)
            }
            Kind::Raw(_) | Kind::Llmc => {
                let mut ids = IdFile::open(input)?;
                let mut stream = StreamRecords {
                    boundary,
                    open: false,
                };
                stream.start();
                let mut block = Vec::with_capacity(BLOCK_IDS);
                while let Some(offset) = ids.next_block(&mut block)? {
                    tally(&block);
                    stream.feed(&name, offset, &block, &mut |piece| {
                        count(&piece);
                        Ok(())
                    })?;
                }
                stream.end(&name, &mut |piece| {
                    count(&piece);
                    Ok(())
                })?;
                (name, ids.dtype, None, boundary != Boundary::None)
            }
            Kind::Ndjson => return Err(Error::data(
                "not a token file (no llm.c or Megatron magic); give --format u16|u32 for raw ids",
            )
            .in_file(&name)),
        };
    Ok(Summary {
        file,
        format: input.kind.format(),
        dtype,
        tokens,
        documents: documents.then_some(records),
        sequences,
        empty_documents: documents.then_some(empty),
        max_id,
    })
}

/// Combines token files written by several runs over consecutive parts of a corpus into
/// the dataset one run over the whole corpus writes: Megatron datasets into one (the
/// `.bin` files concatenated, the indexes rewritten: lengths concatenated, pointers and
/// document entries moved past the earlier parts), llm.c files into one file or shards
/// of `shard_tokens`, raw files concatenated. All inputs must be of one format (and one
/// dtype). Returns the tokens written.
pub(crate) fn merge(
    inputs: &[Input],
    output: &Path,
    shard_tokens: Option<u64>,
    no_mmap: bool,
) -> Result<u64> {
    let Some(first) = inputs.first() else {
        return Err(Error::usage("merge needs at least one input"));
    };
    for input in inputs {
        if input.kind.format() != first.kind.format() {
            return Err(Error::usage(format!(
                "{} is {} but {} is {}: merge files of one format",
                input.source.name,
                input.kind.format().name(),
                first.source.name,
                first.kind.format().name()
            )));
        }
    }
    if shard_tokens.is_some() && first.kind != Kind::Llmc {
        return Err(Error::usage("--shard-tokens applies to llmc files only"));
    }
    match &first.kind {
        Kind::Megatron(_) => merge_megatron(inputs, output, no_mmap),
        Kind::Llmc => {
            let mut sink = Box::new(LlmcSink::new(Some(output), shard_tokens)?);
            let mut tokens = 0;
            let result = (|| {
                for input in inputs {
                    let mut ids = IdFile::open(input)?;
                    if ids.dtype != Dtype::U16 {
                        return Err(Error::data(
                            "a uint32 llm.c file (magic 20240801) cannot be merged into uint16 ones",
                        )
                        .in_file(&input.source.name));
                    }
                    let mut block = Vec::new();
                    while ids.next_block(&mut block)?.is_some() {
                        tokens += block.len() as u64;
                        sink.extend(&block)?;
                    }
                }
                Ok(())
            })();
            match result {
                Ok(()) => sink.commit()?,
                Err(err) => return Err(sink.fail(err)),
            }
            Ok(tokens)
        }
        Kind::Raw(dtype) => {
            let mut out = AtomicFile::create(output)?;
            let name = out.name().to_string();
            let mut tokens = 0;
            for input in inputs {
                let mut ids = IdFile::open(input)?;
                let mut block = Vec::new();
                let mut bytes = Vec::new();
                while ids.next_block(&mut block)?.is_some() {
                    tokens += block.len() as u64;
                    bytes.clear();
                    dtype.pack(&block, &mut bytes);
                    out.write_all(&bytes)
                        .map_err(|e| Error::write(e).in_file(&name))?;
                }
            }
            out.commit()?;
            Ok(tokens)
        }
        Kind::Ndjson => Err(Error::usage(
            "not a token file (no llm.c or Megatron magic); give --format u16|u32 for raw ids",
        )
        .in_file(&first.source.name)),
    }
}

fn merge_megatron(inputs: &[Input], output: &Path, no_mmap: bool) -> Result<u64> {
    let mut parts = Vec::with_capacity(inputs.len());
    for input in inputs {
        let Kind::Megatron(prefix) = &input.kind else {
            unreachable!("checked by merge");
        };
        parts.push(Megatron::open(prefix, no_mmap)?);
    }
    let dtype = parts[0].dtype;
    if let Some(other) = parts.iter().find(|p| p.dtype != dtype) {
        return Err(Error::data(format!(
            "{} holds {} but {} holds {}: merge datasets of one dtype",
            other.prefix.display(),
            other.dtype.name(),
            parts[0].prefix.display(),
            dtype.name()
        )));
    }
    let prefix = megatron_prefix(output);
    let mut bin = AtomicFile::create(&with_ending(&prefix, ".bin"))?;
    let mut idx = AtomicFile::create(&with_ending(&prefix, ".idx"))?;
    let (bin_name, idx_name) = (bin.name().to_string(), idx.name().to_string());
    let sequences: u64 = parts.iter().map(|p| p.sequences).sum();
    let documents: u64 = parts.iter().map(|p| p.documents).sum();
    let tokens: u64 = parts.iter().map(|p| p.tokens()).sum();
    let werr = |name: &str| {
        let name = name.to_string();
        move |e| Error::write(e).in_file(&name)
    };
    idx.write_all(&megatron_header(dtype, sequences, documents + 1))
        .map_err(werr(&idx_name))?;
    for part in &parts {
        idx.write_all(part.lengths_bytes())
            .map_err(werr(&idx_name))?;
    }
    let mut buf = Vec::with_capacity(1 << 16);
    let mut base = 0u64;
    for part in parts.iter_mut() {
        for k in 0..part.sequences {
            buf.extend_from_slice(&(part.pointer(k) + base).to_le_bytes());
            if buf.len() >= 1 << 16 {
                idx.write_all(&buf).map_err(werr(&idx_name))?;
                buf.clear();
            }
        }
        // The part's whole `.bin`, so that its pointers move by its size.
        let name = part.bin_name.clone();
        let read_failed = |e| Error::io("read failed", e).in_file(&name);
        part.bin.seek(SeekFrom::Start(0)).map_err(read_failed)?;
        let mut copied = 0u64;
        loop {
            let chunk = part.bin.fill_buf().map_err(read_failed)?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            bin.write_all(chunk).map_err(werr(&bin_name))?;
            part.bin.consume(n);
            copied += n as u64;
        }
        if copied != part.bin_len {
            return Err(Error::data("the file changed while it was read").in_file(&name));
        }
        base += part.bin_len;
    }
    buf.extend_from_slice(&0u64.to_le_bytes());
    let mut before = 0u64;
    for part in &parts {
        for k in 1..=part.documents {
            buf.extend_from_slice(&(part.document_entry(k) + before).to_le_bytes());
            if buf.len() >= 1 << 16 {
                idx.write_all(&buf).map_err(werr(&idx_name))?;
                buf.clear();
            }
        }
        before += part.sequences;
    }
    idx.write_all(&buf).map_err(werr(&idx_name))?;
    bin.commit()?;
    idx.commit()?;
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_pack_and_unpack_little_endian() {
        let mut bytes = Vec::new();
        Dtype::U16.pack(&[1, 0x1234, 65535], &mut bytes);
        assert_eq!(bytes, [1, 0, 0x34, 0x12, 0xff, 0xff]);
        let mut ids = Vec::new();
        Dtype::U16.unpack(&bytes, &mut ids).unwrap();
        assert_eq!(ids, [1, 0x1234, 65535]);
        let mut bytes = Vec::new();
        Dtype::I32.pack(&[200018], &mut bytes);
        assert_eq!(bytes, 200018i32.to_le_bytes());
        ids.clear();
        assert!(Dtype::I32.unpack(&(-5i32).to_le_bytes(), &mut ids).is_err());
        ids.clear();
        Dtype::I64.unpack(&7i64.to_le_bytes(), &mut ids).unwrap();
        assert_eq!(ids, [7]);
        for code in 1..=8 {
            let dtype = Dtype::from_megatron_code(code).unwrap();
            assert_eq!(dtype.megatron_code(), Some(code));
        }
        assert_eq!(Dtype::from_megatron_code(9), None);
    }

    #[test]
    fn llmc_headers_are_checked() {
        let header = llmc_header(5);
        assert_eq!(parse_llmc_header(&header).unwrap(), (Dtype::U16, 5));
        assert!(parse_llmc_header(&header[..100]).is_err());
        let mut wrong = header.clone();
        wrong[4] = 2;
        assert!(parse_llmc_header(&wrong)
            .unwrap_err()
            .message()
            .contains("version 2"));
        assert!(llmc_magic_start(&header[..1]));
        assert!(!llmc_magic_start(b"[1,"));
    }

    #[test]
    fn stream_records_cut_at_boundaries() {
        fn cut(boundary: Boundary, blocks: &[&[u32]]) -> Vec<Vec<u32>> {
            let mut records = Vec::new();
            let mut current = Vec::new();
            let mut stream = StreamRecords {
                boundary,
                open: false,
            };
            stream.start();
            let mut each = |piece: Piece| {
                current.extend_from_slice(piece.ids);
                if piece.end {
                    records.push(std::mem::take(&mut current));
                }
                Ok(())
            };
            let mut offset = 0;
            for block in blocks {
                stream.feed("f", offset, block, &mut each).unwrap();
                offset += block.len() as u64;
            }
            stream.end("f", &mut each).unwrap();
            records
        }
        let e = 9;
        assert_eq!(cut(Boundary::None, &[&[1, 2], &[3]]), vec![vec![1, 2, 3]]);
        assert_eq!(cut(Boundary::None, &[]), vec![Vec::<u32>::new()]);
        assert_eq!(
            cut(Boundary::Eot(e), &[&[1, 9, 9, 2], &[3, 9]]),
            vec![vec![1], vec![], vec![2, 3]]
        );
        assert_eq!(cut(Boundary::Eot(e), &[&[1, 9, 2]]), vec![vec![1], vec![2]]);
        assert_eq!(cut(Boundary::Eot(e), &[]), Vec::<Vec<u32>>::new());
        assert_eq!(
            cut(Boundary::Bos(e), &[&[9, 1, 2, 9], &[9, 3]]),
            vec![vec![1, 2], vec![], vec![3]]
        );
        assert_eq!(cut(Boundary::Bos(e), &[&[4, 9, 5]]), vec![vec![4], vec![5]]);
        assert_eq!(cut(Boundary::Bos(e), &[&[9]]), vec![Vec::<u32>::new()]);
    }

    #[test]
    fn megatron_prefix_drops_a_file_ending() {
        assert_eq!(megatron_prefix(Path::new("d/c.bin")), PathBuf::from("d/c"));
        assert_eq!(megatron_prefix(Path::new("d/c.idx")), PathBuf::from("d/c"));
        assert_eq!(megatron_prefix(Path::new("d/c")), PathBuf::from("d/c"));
        assert_eq!(
            megatron_prefix(Path::new("d/.bin")),
            PathBuf::from("d/.bin")
        );
        assert_eq!(
            shard_path(Path::new("d/c"), 3),
            PathBuf::from("d/c_000003.bin")
        );
    }
}
