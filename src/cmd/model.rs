//! `bpe-model`'s work: load a model of any format the suite reads, then write it in
//! another (`convert`) or describe it (`info`). Writers refuse, naming the reason, what
//! their format cannot hold exactly; nothing is written then.

use std::io::{Read, Write};

use crate::error::{Error, ErrorKind, Result};
use crate::format::json::json_string;
use crate::format::{self, hf, minbpe, model_file, tiktoken, word_file, Loaded, ModelFormat};
use crate::model::merge_list::{merge_list, token_ids};
use crate::model::{BpeModel, Model, ModelSource};
use crate::pretokenize;

/// What `bpe-model` was asked to do.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// `-m MODEL`: a built-in name, a file, or `-` for standard input.
    pub model: String,
    /// `--split` and `--special`, for a rank file.
    pub rank_file: format::RankFileOptions,
    pub command: ModelCommand,
}

/// The subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelCommand {
    /// Write the model in another format (`Builtin` is not one).
    Convert { to: ModelFormat },
    /// Describe the model as one JSON object.
    Info,
}

/// Runs `bpe-model`: loads the model, then converts or describes it onto `out`. Notes
/// (where a rank file's pattern and special tokens go, how minbpe must load a file, what
/// the source library does that the ids do not show) go to `note`.
pub fn run(config: &ModelConfig, out: &mut dyn Write, note: &mut dyn FnMut(&str)) -> Result<()> {
    let loaded = load(&config.model, &config.rank_file)?;
    match config.command {
        ModelCommand::Convert { to } => {
            for n in &loaded.notes {
                note(&format!("{}: {n}", config.model));
            }
            convert(&loaded, to, out, note).map_err(|e| match e.kind() {
                ErrorKind::Data => e.in_file(&config.model),
                _ => e,
            })
        }
        ModelCommand::Info => info(&config.model, &loaded, out),
    }
}

/// `-m MODEL`, where `-` is standard input.
fn load(spec: &str, options: &format::RankFileOptions) -> Result<Loaded> {
    if spec != "-" {
        return format::open(spec, options);
    }
    let mut data = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut data)
        .map_err(|e| Error::io("read failed", e).in_file("<stdin>"))?;
    format::parse(&data, "<stdin>", options)
}

/// Writes the model in format `to`.
pub(crate) fn convert(
    loaded: &Loaded,
    to: ModelFormat,
    out: &mut dyn Write,
    note: &mut dyn FnMut(&str),
) -> Result<()> {
    let bpe = match (&loaded.model, to) {
        (Model::Word(word), ModelFormat::Ndjson) => {
            return word_file::write_model(out, word).map_err(Error::write)
        }
        (Model::Word(_), _) => {
            return Err(Error::data(format!(
                "a word model has no {} form (only BPE models convert)",
                to.name()
            )))
        }
        (Model::Bpe(bpe), _) => bpe,
    };
    match to {
        ModelFormat::Ndjson => model_file::write_model(out, bpe),
        ModelFormat::Hf => hf::write(bpe, out),
        ModelFormat::Minbpe => {
            minbpe::write(bpe, out)?;
            note(&match &bpe.split {
                None => "load it with minbpe's BasicTokenizer().load(FILE); the name must end in .model"
                    .to_string(),
                Some(spec) => format!(
                    "load it with minbpe's RegexTokenizer(pattern=P).load(FILE), P being the file's \
                     second line ({}); RegexTokenizer().load keeps its own GPT-4 pattern, and the \
                     name must end in .model",
                    preset_or_custom(&spec.pattern)
                ),
            });
            Ok(())
        }
        ModelFormat::Tiktoken => {
            tiktoken::write_rank_file(bpe, out)?;
            note(&rank_file_note(bpe));
            Ok(())
        }
        ModelFormat::Builtin => Err(Error::usage("a model cannot be converted to a built-in")),
    }
}

/// Where a rank file's pattern and special tokens go.
fn rank_file_note(model: &BpeModel) -> String {
    let pattern = match &model.split {
        None => "r\"[\\s\\S]+\" (no split: each text is one sequence)".to_string(),
        Some(spec) => format!(
            "{} ({})",
            json_string(&spec.pattern),
            preset_or_custom(&spec.pattern)
        ),
    };
    let specials: Vec<String> = model
        .specials
        .iter()
        .map(|s| format!("{}: {}", json_string(&s.text), s.id))
        .collect();
    let split_flag = match &model.split {
        None => "none".to_string(),
        Some(spec) => match pretokenize::split_of_pattern(&spec.pattern).name.as_str() {
            "custom" => "REGEX".to_string(),
            name => name.to_string(),
        },
    };
    let mut special_flags = String::new();
    for s in &model.specials {
        special_flags.push_str(&format!(" --special '{}={}'", s.text, s.id));
    }
    format!(
        "a rank file holds neither the split pattern nor the special tokens: give them to \
         tiktoken.Encoding(pat_str={pattern}, special_tokens={{{}}}, mergeable_ranks=...), and \
         to the suite as bpe-encode --split {split_flag} (bpe-model --split {split_flag}{special_flags})",
        specials.join(", ")
    )
}

/// `preset NAME` or `custom`, for a pattern's text.
fn preset_or_custom(pattern: &str) -> String {
    match pretokenize::split_of_pattern(pattern).name.as_str() {
        "custom" => "a custom pattern".to_string(),
        name => format!("the {name} preset"),
    }
}

/// Which byte order the base ids have: `identity`, `gpt2` (the order of GPT-2's
/// byte-level characters, which the GPT vocabularies use) or `permuted`.
fn byte_order(model: &BpeModel) -> &'static str {
    if model.base_id_of_byte == crate::model::identity_bytes() {
        return "identity";
    }
    let printable = |b: u8| hf::byte_char(b) as u32 == u32::from(b);
    let mut gpt2: Vec<u8> = (0..=255u8).filter(|&b| printable(b)).collect();
    gpt2.extend((0..=255u8).filter(|&b| !printable(b)));
    let is_gpt2 = gpt2
        .iter()
        .enumerate()
        .all(|(id, &b)| model.base_id_of_byte[b as usize] == id as u32);
    if is_gpt2 {
        "gpt2"
    } else {
        "permuted"
    }
}

/// One JSON object describing the model: where it came from, its format and kind, vocab
/// size, tokens, merges, split, special tokens, byte order, sha256 and notes.
pub(crate) fn info(name: &str, loaded: &Loaded, out: &mut dyn Write) -> Result<()> {
    let source = loaded.model.source();
    let sha256 = match source {
        ModelSource::File { sha256, .. } => json_string(sha256),
        ModelSource::Builtin(_) => "null".to_string(),
    };
    let mut line = format!(
        "{{\"model\":{},\"format\":\"{}\"",
        json_string(name),
        loaded.format.name()
    );
    match &loaded.model {
        Model::Word(word) => {
            line.push_str(&format!(
                ",\"kind\":\"word\",\"vocab_size\":{},\"words\":{},\"unk\":{{\"text\":{},\"id\":{}}}",
                word.unk_id as u64 + 1,
                word.unk_id,
                json_string(&word.unk_text),
                word.unk_id
            ));
        }
        Model::Bpe(bpe) => {
            let tokens = token_ids(bpe).count();
            let merges = match merge_list(bpe) {
                Ok(list) => list.len().to_string(),
                Err(_) => "null".to_string(),
            };
            let (split, pattern) = match &bpe.split {
                None => ("\"none\"".to_string(), "null".to_string()),
                Some(spec) => (
                    json_string(&pretokenize::split_of_pattern(&spec.pattern).name),
                    json_string(&spec.pattern),
                ),
            };
            let specials: Vec<String> = bpe
                .specials
                .iter()
                .map(|s| format!("{{\"text\":{},\"id\":{}}}", json_string(&s.text), s.id))
                .collect();
            line.push_str(&format!(
                ",\"kind\":\"bpe\",\"vocab_size\":{},\"tokens\":{tokens},\"merges\":{merges},\
                 \"rank_table\":{},\"split\":{split},\"pattern\":{pattern},\"special_tokens\":[{}],\
                 \"base_bytes\":\"{}\"",
                bpe.vocab_size(),
                bpe.merges.is_empty() && bpe.merge_ids.count() > 0,
                specials.join(","),
                byte_order(bpe)
            ));
        }
    }
    let notes: Vec<String> = loaded.notes.iter().map(|n| json_string(n)).collect();
    line.push_str(&format!(
        ",\"sha256\":{sha256},\"notes\":[{}]}}\n",
        notes.join(",")
    ));
    out.write_all(line.as_bytes()).map_err(Error::write)
}
