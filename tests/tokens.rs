//! JSONL input and token files, end to end through the binaries: every binary format read
//! back by readers written here from the published layouts (docs/formats.md, "Token
//! files": llm.c's header, Megatron's index) and held equal to the NDJSON ids of the same
//! input; JSONL errors with their lines; shards, merges and round trips through
//! `bpe-decode`.

use std::fs;
use std::path::Path;

use crate::common::{scratch, tool, Rng};

const EOT: u32 = 199_999; // o200k_base's <|endoftext|>
const GPT2_EOT: u32 = 50_256; // r50k_base's <|endoftext|>

// ---------------------------------------------------------------------------------
// Independent readers, from the layouts alone.

fn le_u16s(bytes: &[u8]) -> Vec<u32> {
    assert_eq!(bytes.len() % 2, 0, "whole u16 elements");
    bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

fn le_u32s(bytes: &[u8]) -> Vec<u32> {
    assert_eq!(bytes.len() % 4, 0, "whole u32 elements");
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// llm.c: 256 little-endian int32 words (20240520, 1, count, ...), then uint16 tokens.
fn read_llmc(bytes: &[u8]) -> Vec<u32> {
    assert!(bytes.len() >= 1024, "a 1024-byte header");
    let word = |k: usize| i32::from_le_bytes(bytes[4 * k..4 * k + 4].try_into().unwrap());
    assert_eq!(word(0), 20240520, "magic");
    assert_eq!(word(1), 1, "version");
    let count = word(2) as usize;
    assert!(
        (3..256).all(|k| word(k) == 0),
        "unused header words are zero"
    );
    assert_eq!(bytes.len(), 1024 + 2 * count, "size = header + 2 x count");
    le_u16s(&bytes[1024..])
}

/// A Megatron dataset as its readers see it.
#[derive(Debug, PartialEq)]
struct Megatron {
    dtype_code: u8,
    lengths: Vec<i32>,
    pointers: Vec<i64>,
    document_index: Vec<i64>,
    /// Each document's ids (its sequences concatenated).
    documents: Vec<Vec<u32>>,
}

fn read_megatron(prefix: &Path) -> Megatron {
    let idx = fs::read(format!("{}.idx", prefix.display())).expect("PREFIX.idx");
    let bin = fs::read(format!("{}.bin", prefix.display())).expect("PREFIX.bin");
    assert_eq!(&idx[..9], b"MMIDIDX\x00\x00", "magic");
    let u64_at = |at: usize| u64::from_le_bytes(idx[at..at + 8].try_into().unwrap());
    assert_eq!(u64_at(9), 1, "version");
    let dtype_code = idx[17];
    let size = match dtype_code {
        8 => 2,
        4 => 4,
        other => panic!("dtype code {other}: bpe-encode writes uint16 (8) or int32 (4)"),
    };
    let (s, d) = (u64_at(18) as usize, u64_at(26) as usize);
    assert_eq!(idx.len(), 34 + 12 * s + 8 * d, "index size from its counts");
    let lengths: Vec<i32> = (0..s)
        .map(|k| i32::from_le_bytes(idx[34 + 4 * k..38 + 4 * k].try_into().unwrap()))
        .collect();
    let at = 34 + 4 * s;
    let pointers: Vec<i64> = (0..s)
        .map(|k| i64::from_le_bytes(idx[at + 8 * k..at + 8 * k + 8].try_into().unwrap()))
        .collect();
    let at = 34 + 12 * s;
    let document_index: Vec<i64> = (0..d)
        .map(|k| i64::from_le_bytes(idx[at + 8 * k..at + 8 * k + 8].try_into().unwrap()))
        .collect();
    assert_eq!(
        document_index.first(),
        Some(&0),
        "document index starts at 0"
    );
    assert_eq!(*document_index.last().unwrap(), s as i64, "and ends at S");
    assert!(
        document_index.windows(2).all(|w| w[0] <= w[1]),
        "never decreases"
    );
    // Pointers: the running byte offsets of the sequences.
    let mut offset = 0i64;
    for (k, &len) in lengths.iter().enumerate() {
        assert!(len > 0, "bpe-encode writes no empty sequence");
        assert_eq!(pointers[k], offset, "pointer {k}");
        offset += i64::from(len) * size as i64;
    }
    assert_eq!(bin.len() as i64, offset, ".bin holds exactly the sequences");
    let ids = if size == 2 {
        le_u16s(&bin)
    } else {
        le_u32s(&bin)
    };
    let documents = document_index
        .windows(2)
        .map(|w| {
            let mut doc = Vec::new();
            for seq in w[0] as usize..w[1] as usize {
                let start = pointers[seq] as usize / size;
                doc.extend_from_slice(&ids[start..start + lengths[seq] as usize]);
            }
            doc
        })
        .collect();
    Megatron {
        dtype_code,
        lengths,
        pointers,
        document_index,
        documents,
    }
}

/// The records of an NDJSON id stream (header lines left out).
fn ndjson_records(out: &[u8]) -> Vec<Vec<u32>> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('{'))
        .map(|l| serde_json::from_str::<Vec<u32>>(l).expect("an id array"))
        .collect()
}

// ---------------------------------------------------------------------------------
// Inputs.

/// A JSON string literal of `text` the way many writers escape: some characters as
/// `\uXXXX` (surrogate pairs beyond the BMP), the rest as they are.
fn json_literal(text: &str, rng: &mut Rng) -> String {
    let mut s = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
            c if !c.is_ascii() && rng.below(2) == 0 => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    s.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Seeded documents: words, newlines, NUL, non-ASCII (surrogate pairs), empty ones, and
/// ones of special-token text only.
fn random_documents(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng::new(seed);
    let pieces = [
        "the",
        " cat",
        " sat",
        "\n",
        "\n\n",
        "\0",
        " café",
        " 😀",
        "日本語",
        " 12345",
        "\t",
        "<|endoftext|>",
        "  ",
        "ẞ",
        "\r\n",
        "\u{10FFFF}",
        " x",
    ];
    (0..count)
        .map(|k| match k % 9 {
            3 => String::new(),
            6 => "<|endoftext|>".repeat(1 + rng.below(2) as usize),
            _ => (0..rng.below(40))
                .map(|_| pieces[rng.below(pieces.len() as u64) as usize])
                .collect(),
        })
        .collect()
}

fn jsonl_of(documents: &[String], seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    for (k, doc) in documents.iter().enumerate() {
        // Other members around the field, in various orders.
        let line = match k % 3 {
            0 => format!("{{\"text\":{}}}", json_literal(doc, &mut rng)),
            1 => format!(
                "{{\"id\":{k},\"meta\":{{\"text\":[1,2]}},\"text\": {} }}",
                json_literal(doc, &mut rng)
            ),
            _ => format!(
                "{{ \"text\" : {}, \"url\":\"https://x/{k}\"}}\r",
                json_literal(doc, &mut rng)
            ),
        };
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out
}

fn encode(dir: &Path, args: &[&str]) -> Vec<u8> {
    tool("bpe-encode", dir)
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone()
}

fn no_temp_files(dir: &Path) {
    for entry in fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains(".tmp"), "temporary file left behind: {name}");
    }
}

// ---------------------------------------------------------------------------------
// Tests.

/// Each binary format, read back by the readers above, equals the NDJSON ids of the same
/// JSONL input with the boundary ids placed as documented.
#[test]
fn each_format_equals_the_ndjson_ids() {
    let dir = scratch("tokens-formats");
    let docs = random_documents(7, 60);
    fs::write(dir.join("docs.jsonl"), jsonl_of(&docs, 7)).unwrap();
    for model in ["o200k_base", "r50k_base"] {
        let eot = if model == "o200k_base" { EOT } else { GPT2_EOT };
        let records = ndjson_records(&encode(
            &dir,
            &["-m", model, "--field", "text", "docs.jsonl"],
        ));
        assert_eq!(records.len(), docs.len());
        assert!(records.iter().any(|r| r.is_empty()), "an empty document");
        // Special-token text is ordinary text by default ...
        assert!(records.iter().all(|r| !r.contains(&eot)));
        let with_eot: Vec<u32> = records
            .iter()
            .flat_map(|r| r.iter().copied().chain([eot]))
            .collect();
        let with_bos: Vec<u32> = records
            .iter()
            .flat_map(|r| [eot].into_iter().chain(r.iter().copied()))
            .collect();

        // NDJSON with --eot: each record ends with it.
        let ndjson_eot = ndjson_records(&encode(
            &dir,
            &[
                "-m",
                model,
                "--field",
                "text",
                "--eot",
                "<|endoftext|>",
                "docs.jsonl",
            ],
        ));
        assert_eq!(ndjson_eot.concat(), with_eot);

        encode(
            &dir,
            &[
                "-m",
                model,
                "--field",
                "text",
                "--format",
                "u32",
                "--eot",
                "<|endoftext|>",
                "-o",
                "t.u32",
                "docs.jsonl",
            ],
        );
        assert_eq!(
            le_u32s(&fs::read(dir.join("t.u32")).unwrap()),
            with_eot,
            "{model} u32"
        );

        // To standard output too, the same bytes.
        let stdout = encode(
            &dir,
            &[
                "-m",
                model,
                "--field",
                "text",
                "--format",
                "u32",
                "--eot",
                &eot.to_string(),
                "docs.jsonl",
            ],
        );
        assert_eq!(
            stdout,
            fs::read(dir.join("t.u32")).unwrap(),
            "an id names the token too"
        );

        let megatron = {
            encode(
                &dir,
                &[
                    "-m",
                    model,
                    "--field",
                    "text",
                    "--format",
                    "megatron",
                    "--eot",
                    "<|endoftext|>",
                    "-o",
                    "corpus",
                    "docs.jsonl",
                ],
            );
            read_megatron(&dir.join("corpus"))
        };
        // Megatron's dtype rule: uint16 below 65500 ids, else int32.
        assert_eq!(
            megatron.dtype_code,
            if model == "o200k_base" { 4 } else { 8 }
        );
        // As Megatron's --append-eod writes it: an empty document has no sequence.
        let expected: Vec<Vec<u32>> = records
            .iter()
            .map(|r| {
                if r.is_empty() {
                    vec![]
                } else {
                    r.iter().copied().chain([eot]).collect()
                }
            })
            .collect();
        assert_eq!(megatron.documents, expected, "{model} megatron");
        assert_eq!(
            megatron.lengths.len(),
            records.iter().filter(|r| !r.is_empty()).count()
        );
        let empty_at: Vec<usize> = (0..records.len())
            .filter(|&k| records[k].is_empty())
            .collect();
        for k in empty_at {
            assert_eq!(megatron.document_index[k], megatron.document_index[k + 1]);
        }

        if model == "r50k_base" {
            encode(
                &dir,
                &[
                    "-m",
                    model,
                    "--field",
                    "text",
                    "--format",
                    "u16",
                    "--eot",
                    "<|endoftext|>",
                    "-o",
                    "t.u16",
                    "docs.jsonl",
                ],
            );
            assert_eq!(
                le_u16s(&fs::read(dir.join("t.u16")).unwrap()),
                with_eot,
                "u16"
            );
            encode(
                &dir,
                &[
                    "-m",
                    model,
                    "--field",
                    "text",
                    "--format",
                    "llmc",
                    "--bos",
                    "<|endoftext|>",
                    "-o",
                    "t.llmc",
                    "docs.jsonl",
                ],
            );
            assert_eq!(
                read_llmc(&fs::read(dir.join("t.llmc")).unwrap()),
                with_bos,
                "llmc"
            );
            // To a pipe: the count is known only at the end, the header comes first.
            let piped = encode(
                &dir,
                &[
                    "-m",
                    model,
                    "--field",
                    "text",
                    "--format",
                    "llmc",
                    "--bos",
                    "<|endoftext|>",
                    "docs.jsonl",
                ],
            );
            assert_eq!(
                piped,
                fs::read(dir.join("t.llmc")).unwrap(),
                "llmc to stdout"
            );
        }
    }
    no_temp_files(&dir);
}

/// Text lines (no --field) go to token files the same way, one document per line.
#[test]
fn text_lines_and_whole_inputs_go_to_token_files() {
    let dir = scratch("tokens-lines");
    let text = "first line\n\nthird <|endoftext|> line\nlast";
    fs::write(dir.join("t.txt"), text).unwrap();
    let records = ndjson_records(&encode(&dir, &["t.txt"]));
    encode(
        &dir,
        &[
            "--format",
            "megatron",
            "--eot",
            "<|endoftext|>",
            "-o",
            "lines",
            "t.txt",
        ],
    );
    let m = read_megatron(&dir.join("lines"));
    assert_eq!(m.documents.len(), 4);
    assert_eq!(m.documents[1], Vec::<u32>::new());
    assert_eq!(m.documents[2], [records[2].clone(), vec![EOT]].concat());
    // --whole: one document, the ids as --whole NDJSON gives them.
    let whole = ndjson_records(&encode(&dir, &["--whole", "t.txt"]));
    let raw = encode(
        &dir,
        &[
            "--whole",
            "--format",
            "u32",
            "--bos",
            "<|endoftext|>",
            "t.txt",
        ],
    );
    assert_eq!(le_u32s(&raw), [vec![EOT], whole[0].clone()].concat());
    // An empty input: Megatron keeps it as a document with no sequence; nanoGPT-style
    // raw files still end it with the id.
    fs::write(dir.join("empty.txt"), "").unwrap();
    encode(
        &dir,
        &[
            "--whole",
            "--format",
            "megatron",
            "--eot",
            "<|endoftext|>",
            "-o",
            "e",
            "empty.txt",
        ],
    );
    let m = read_megatron(&dir.join("e"));
    assert_eq!(m.documents, vec![Vec::<u32>::new()]);
    let raw = encode(
        &dir,
        &[
            "--whole",
            "--format",
            "u32",
            "--eot",
            "<|endoftext|>",
            "empty.txt",
        ],
    );
    assert_eq!(le_u32s(&raw), [EOT]);
    // No records at all: a valid empty dataset.
    encode(&dir, &["--format", "megatron", "-o", "none", "empty.txt"]);
    let m = read_megatron(&dir.join("none"));
    assert_eq!((m.lengths.len(), m.document_index), (0, vec![0]));
    let llmc = encode(&dir, &["-m", "r50k_base", "--format", "llmc", "empty.txt"]);
    assert_eq!(read_llmc(&llmc), Vec::<u32>::new());
}

/// A document of special tokens only (with --allowed-special) is their ids: a document
/// like any other, in every format.
#[test]
fn a_document_of_only_special_tokens() {
    let dir = scratch("tokens-specials");
    fs::write(
        dir.join("s.jsonl"),
        "{\"text\":\"<|endoftext|><|endoftext|>\"}\n{\"text\":\"\"}\n{\"text\":\"<|endoftext|>\"}\n",
    )
    .unwrap();
    let args = [
        "--allowed-special",
        "all",
        "--field",
        "text",
        "--eot",
        "<|endoftext|>",
    ];
    let records = ndjson_records(&encode(&dir, &[&args[..], &["s.jsonl"]].concat()));
    assert_eq!(
        records,
        vec![vec![EOT, EOT, EOT], vec![EOT], vec![EOT, EOT]]
    );
    encode(
        &dir,
        &[&args[..], &["--format", "megatron", "-o", "s", "s.jsonl"]].concat(),
    );
    let m = read_megatron(&dir.join("s"));
    assert_eq!(
        m.documents,
        vec![vec![EOT, EOT, EOT], vec![], vec![EOT, EOT]]
    );
    // Megatron's index keeps the documents apart: bpe-decode leaves out one end id each.
    let out = tool("bpe-decode", &dir)
        .args(["--eot", "<|endoftext|>", "s"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(out, b"<|endoftext|><|endoftext|>\n\n<|endoftext|>\n");
    // A raw file has only the ids to go by: every end id ends a record.
    let out = tool("bpe-decode", &dir)
        .args(["--format", "u32", "--eot", "<|endoftext|>", "-"])
        .write_stdin(encode(
            &dir,
            &[&args[..], &["--format", "u32", "s.jsonl"]].concat(),
        ))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(out, b"\n\n\n\n\n\n");
}

/// u16 and llm.c files refuse a model whose ids do not fit, naming the largest id, before
/// writing anything.
#[test]
fn u16_refuses_ids_that_do_not_fit() {
    let dir = scratch("tokens-u16");
    fs::write(dir.join("t.txt"), "hello\n").unwrap();
    for format in ["u16", "llmc"] {
        let out = tool("bpe-encode", &dir)
            .args(["--format", format, "-o", "t.bin", "t.txt"])
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("bpe-encode: error: "), "{err}");
        assert!(err.contains("200018"), "names the largest id: {err}");
        assert!(err.contains("65535"), "{err}");
        assert!(!dir.join("t.bin").exists());
    }
    no_temp_files(&dir);
    // A model that fits is accepted.
    encode(
        &dir,
        &["-m", "r50k_base", "--format", "u16", "-o", "t.bin", "t.txt"],
    );
}

/// llm.c shards of N tokens: a document cut where a shard fills (llm.c's FineWeb way);
/// the shards in order are the single file's tokens; a merge of per-part files re-shards
/// to the same files.
#[test]
fn llmc_shards_cut_inside_documents() {
    let dir = scratch("tokens-shards");
    let docs = random_documents(11, 40);
    let jsonl = jsonl_of(&docs, 11);
    fs::write(dir.join("docs.jsonl"), &jsonl).unwrap();
    let base = [
        "-m",
        "r50k_base",
        "--field",
        "text",
        "--format",
        "llmc",
        "--bos",
        "<|endoftext|>",
    ];
    encode(
        &dir,
        &[&base[..], &["-o", "all.bin", "docs.jsonl"]].concat(),
    );
    let all = read_llmc(&fs::read(dir.join("all.bin")).unwrap());
    let n = 37;
    encode(
        &dir,
        &[
            &base[..],
            &["--shard-tokens", "37", "-o", "shard", "docs.jsonl"],
        ]
        .concat(),
    );
    let mut joined = Vec::new();
    let mut k = 0;
    while dir.join(format!("shard_{k:06}.bin")).exists() {
        let shard = read_llmc(&fs::read(dir.join(format!("shard_{k:06}.bin"))).unwrap());
        assert!(!shard.is_empty());
        joined.extend(shard);
        if dir.join(format!("shard_{:06}.bin", k + 1)).exists() {
            assert_eq!(
                joined.len(),
                (k + 1) * n,
                "every shard but the last is full"
            );
        }
        k += 1;
    }
    assert_eq!(k, all.len().div_ceil(n));
    assert_eq!(joined, all);
    // Some shard ends inside a document: the token after it is not a document's first.
    let inside = (1..k).any(|s| all[s * n] != GPT2_EOT && all[s * n - 1] != GPT2_EOT);
    assert!(inside, "a shard boundary falls inside a document");

    // Parts from separate runs, merged and re-sharded, give the same shards.
    let lines: Vec<&[u8]> = jsonl.split_inclusive(|&b| b == b'\n').collect();
    let cut = [0, 13, 14, 40];
    let mut parts = Vec::new();
    for p in 0..3 {
        let name = format!("part{p}.jsonl");
        fs::write(dir.join(&name), lines[cut[p]..cut[p + 1]].concat()).unwrap();
        let out = format!("part{p}.bin");
        encode(&dir, &[&base[..], &["-o", &out, &name]].concat());
        parts.push(out);
    }
    let mut merge = tool("bpe-tokens", &dir);
    merge
        .args(["merge", "--shard-tokens", "37", "-o", "merged"])
        .args(&parts);
    merge.assert().success();
    for s in 0..k {
        let name = format!("_{s:06}.bin");
        assert_eq!(
            fs::read(dir.join(format!("merged{name}"))).unwrap(),
            fs::read(dir.join(format!("shard{name}"))).unwrap(),
            "shard {s}"
        );
    }
    assert!(!dir.join(format!("merged_{k:06}.bin")).exists());
    no_temp_files(&dir);
}

/// Megatron datasets of consecutive parts merge into the single run's files, byte for
/// byte; raw parts concatenate.
#[test]
fn megatron_parts_merge_into_the_single_run() {
    let dir = scratch("tokens-merge");
    let docs = random_documents(23, 50);
    let jsonl = jsonl_of(&docs, 23);
    fs::write(dir.join("docs.jsonl"), &jsonl).unwrap();
    let base = [
        "--field",
        "text",
        "--format",
        "megatron",
        "--eot",
        "<|endoftext|>",
    ];
    encode(&dir, &[&base[..], &["-o", "single", "docs.jsonl"]].concat());
    let lines: Vec<&[u8]> = jsonl.split_inclusive(|&b| b == b'\n').collect();
    let cut = [0, 1, 3, 3, 30, 50];
    let mut parts = Vec::new();
    for p in 0..5 {
        let name = format!("part{p}.jsonl");
        fs::write(dir.join(&name), lines[cut[p]..cut[p + 1]].concat()).unwrap();
        let prefix = format!("part{p}");
        encode(&dir, &[&base[..], &["-o", &prefix, &name]].concat());
        parts.push(prefix);
    }
    tool("bpe-tokens", &dir)
        .args(["merge", "-o", "merged"])
        .args(&parts)
        .assert()
        .success();
    for ending in ["bin", "idx"] {
        assert_eq!(
            fs::read(dir.join(format!("merged.{ending}"))).unwrap(),
            fs::read(dir.join(format!("single.{ending}"))).unwrap(),
            "merged.{ending}"
        );
    }
    // Raw parts: the merge is their concatenation, which is the single run.
    let raw = [
        "--field",
        "text",
        "--format",
        "u32",
        "--eot",
        "<|endoftext|>",
    ];
    let single = encode(&dir, &[&raw[..], &["docs.jsonl"]].concat());
    let mut cat = Vec::new();
    for p in 0..5 {
        let out = encode(&dir, &[&raw[..], &[&format!("part{p}.jsonl")[..]]].concat());
        fs::write(dir.join(format!("raw{p}.u32")), &out).unwrap();
        cat.extend(out);
    }
    assert_eq!(cat, single);
    tool("bpe-tokens", &dir)
        .args(["merge", "--format", "u32", "-o", "raw.u32"])
        .args((0..5).map(|p| format!("raw{p}.u32")))
        .assert()
        .success();
    assert_eq!(fs::read(dir.join("raw.u32")).unwrap(), single);
    // Formats and dtypes do not mix.
    encode(
        &dir,
        &[
            "-m",
            "r50k_base",
            "--field",
            "text",
            "--format",
            "megatron",
            "-o",
            "small",
            "part1.jsonl",
        ],
    );
    tool("bpe-tokens", &dir)
        .args(["merge", "-o", "mixed", "part0", "small"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("dtype"));
    no_temp_files(&dir);
}

/// `bpe-tokens info` reports what the readers above find.
#[test]
fn info_summarises_token_files() {
    let dir = scratch("tokens-info");
    fs::write(
        dir.join("d.jsonl"),
        "{\"text\":\"a b\"}\n{\"text\":\"\"}\n{\"text\":\"c\"}\n",
    )
    .unwrap();
    encode(
        &dir,
        &[
            "--field",
            "text",
            "--format",
            "megatron",
            "--eot",
            "<|endoftext|>",
            "-o",
            "c",
            "d.jsonl",
        ],
    );
    let m = read_megatron(&dir.join("c"));
    let tokens: usize = m.documents.iter().map(Vec::len).sum();
    let out = tool("bpe-tokens", &dir)
        .args(["info", "c"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let line = String::from_utf8(out).unwrap();
    assert_eq!(
        line,
        format!("{{\"file\":\"c\",\"format\":\"megatron\",\"dtype\":\"int32\",\"tokens\":{tokens},\"documents\":3,\"sequences\":2,\"empty_documents\":1,\"max_id\":199999}}\n")
    );
    encode(
        &dir,
        &[
            "--field",
            "text",
            "--format",
            "u32",
            "--eot",
            "<|endoftext|>",
            "-o",
            "c.u32",
            "d.jsonl",
        ],
    );
    tool("bpe-tokens", &dir)
        .args(["info", "--format", "u32", "--eot", "<|endoftext|>", "c.u32"])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "\"format\":\"u32\",\"dtype\":\"uint32\",\"tokens\":",
        ))
        .stdout(predicates::str::contains("\"documents\":3"))
        .stdout(predicates::str::contains("\"empty_documents\":1"));
    // Not a token file: said so, exit 1.
    tool("bpe-tokens", &dir)
        .args(["info", "d.jsonl"])
        .assert()
        .code(1)
        .stderr(predicates::str::starts_with(
            "bpe-tokens: error: d.jsonl: not a token file",
        ));
}

/// Token files read back through bpe-decode: an llm.c stream from a pipe, a Megatron
/// prefix, raw files cut at their end ids, shards read as one stream.
#[test]
fn token_files_decode_back_to_the_documents() {
    let dir = scratch("tokens-decode");
    let docs = random_documents(5, 30);
    fs::write(dir.join("d.jsonl"), jsonl_of(&docs, 5)).unwrap();
    let mut expected = Vec::new();
    for doc in &docs {
        expected.extend_from_slice(doc.as_bytes());
        expected.push(b'\n');
    }
    let decode = |args: &[&str], stdin: Option<Vec<u8>>| {
        let mut cmd = tool("bpe-decode", &dir);
        cmd.args(args);
        if let Some(input) = stdin {
            cmd.write_stdin(input);
        }
        cmd.assert().success().get_output().stdout.clone()
    };
    let llmc = encode(
        &dir,
        &[
            "-m",
            "r50k_base",
            "--field",
            "text",
            "--format",
            "llmc",
            "--bos",
            "<|endoftext|>",
            "d.jsonl",
        ],
    );
    assert_eq!(
        decode(&["-m", "r50k_base", "--bos", "<|endoftext|>"], Some(llmc)),
        expected
    );
    encode(
        &dir,
        &[
            "--field",
            "text",
            "--format",
            "megatron",
            "--eot",
            "<|endoftext|>",
            "-o",
            "m",
            "d.jsonl",
        ],
    );
    for name in ["m", "m.idx", "m.bin"] {
        assert_eq!(
            decode(&["--eot", "<|endoftext|>", name], None),
            expected,
            "{name}"
        );
    }
    encode(
        &dir,
        &[
            "--field",
            "text",
            "--format",
            "u32",
            "--eot",
            "<|endoftext|>",
            "-o",
            "r.u32",
            "d.jsonl",
        ],
    );
    assert_eq!(
        decode(
            &["--format", "u32", "--eot", "<|endoftext|>", "r.u32"],
            None
        ),
        expected
    );
    // Without boundaries, a raw file is one record: the documents' bytes and their ids'
    // text; --whole leaves out the final newline.
    let whole = decode(&["--format", "u32", "--whole", "r.u32"], None);
    let mut with_text = Vec::new();
    for doc in &docs {
        with_text.extend_from_slice(doc.as_bytes());
        with_text.extend_from_slice(b"<|endoftext|>");
    }
    assert_eq!(whole, with_text);
    // Shards are one stream: a document cut between two shards decodes whole.
    encode(
        &dir,
        &[
            "-m",
            "r50k_base",
            "--field",
            "text",
            "--format",
            "llmc",
            "--bos",
            "<|endoftext|>",
            "--shard-tokens",
            "50",
            "-o",
            "s",
            "d.jsonl",
        ],
    );
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("s_"))
        .collect();
    names.sort();
    assert!(names.len() > 2);
    let mut args = vec!["-m", "r50k_base", "--bos", "<|endoftext|>"];
    args.extend(names.iter().map(String::as_str));
    assert_eq!(decode(&args, None), expected);
    // An id outside the vocabulary: file and token named, after the bytes before it.
    let mut bad = Vec::new();
    for id in [24912u32, 2375, 250_000] {
        bad.extend_from_slice(&id.to_le_bytes());
    }
    fs::write(dir.join("bad.u32"), &bad).unwrap();
    let out = tool("bpe-decode", &dir)
        .args(["--format", "u32", "bad.u32"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert_eq!(out.stdout, b"hello world");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "bpe-decode: error: bad.u32: token 2: id 250000 is not in the vocabulary (size 200019)\n"
    );
    // Damaged files are named, never trusted.
    let mut llmc = fs::read(dir.join("s_000000.bin")).unwrap();
    llmc.truncate(1024 + 20);
    fs::write(dir.join("short.bin"), &llmc).unwrap();
    tool("bpe-decode", &dir)
        .args(["-m", "r50k_base", "short.bin"])
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "short.bin: the header counts 50 tokens but the file ends after 10",
        ));
    let mut idx = fs::read(dir.join("m.idx")).unwrap();
    idx.pop();
    fs::write(dir.join("m.idx"), &idx).unwrap();
    tool("bpe-decode", &dir)
        .arg("m")
        .assert()
        .code(1)
        .stderr(predicates::str::contains("m.idx: "));
}

/// Every kind of bad JSONL line: exit 1, `FILE:LINE: what was found`, after the records
/// before it are written; a failed token-file run leaves no file.
#[test]
fn jsonl_errors_name_file_line_and_what_was_found() {
    let dir = scratch("tokens-errors");
    let cases: [(&[u8], &str); 12] = [
        (
            b"{\"id\":7,\"url\":\"u\"}",
            "no field \"text\" (keys: id, url)",
        ),
        (b"{\"text\":null}", "field \"text\" is null"),
        (b"{\"text\":42}", "field \"text\" is a number, not a string"),
        (
            b"{\"text\":true}",
            "field \"text\" is a boolean, not a string",
        ),
        (
            b"{\"text\":[\"a\"]}",
            "field \"text\" is an array, not a string",
        ),
        (
            b"{\"text\":{\"a\":1}}",
            "field \"text\" is an object, not a string",
        ),
        (b"", "blank line where a JSON object was expected"),
        (
            b"{\"text\":\"a\" \"b\"}",
            "bad JSON: expected `,` or `}` at column 13",
        ),
        (b"{\"text\":\"caf\xe9\"}", "invalid UTF-8 at column 13"),
        (
            b"{\"text\":\"\\ud800\"}",
            "bad JSON: a lone surrogate escape (\\ud800-\\udfff not in a pair), which is no character at column 16",
        ),
        (b"[\"text\"]", "expected a JSON object, found an array"),
        (b"\xef\xbb\xbf{\"text\":\"a\"}", "byte-order mark"),
    ];
    for (k, (line, message)) in cases.iter().enumerate() {
        let mut input = b"{\"text\":\"good\"}\n{\"text\":\"also good\"}\n".to_vec();
        input.extend_from_slice(line);
        input.extend_from_slice(b"\n{\"text\":\"after\"}\n");
        let name = format!("bad{k}.jsonl");
        fs::write(dir.join(&name), &input).unwrap();
        let out = tool("bpe-encode", &dir)
            .args(["--field", "text", &name])
            .assert()
            .code(1)
            .get_output()
            .clone();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let want = format!("bpe-encode: error: {name}:3: ");
        assert!(err.starts_with(&want), "case {k}: {err}");
        assert!(err.contains(message), "case {k}: {err} lacks {message}");
        assert_eq!(err.lines().count(), 1, "case {k}: one line: {err}");
        assert_eq!(
            ndjson_records(&out.stdout).len(),
            2,
            "case {k}: the records before"
        );
        // From standard input, named so.
        tool("bpe-encode", &dir)
            .args(["--field", "text"])
            .write_stdin(input.clone())
            .assert()
            .code(1)
            .stderr(predicates::str::starts_with(
                "bpe-encode: error: <stdin>:3: ",
            ));
        // Into a Megatron dataset: nothing is left.
        tool("bpe-encode", &dir)
            .args([
                "--field", "text", "--format", "megatron", "-o", "out", &name,
            ])
            .assert()
            .code(1);
        assert!(!dir.join("out.bin").exists() && !dir.join("out.idx").exists());
        // Skipped and counted instead.
        let out = tool("bpe-encode", &dir)
            .args(["--field", "text", "--skip-invalid", &name])
            .assert()
            .success()
            .get_output()
            .clone();
        assert_eq!(ndjson_records(&out.stdout).len(), 3, "case {k}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.starts_with("bpe-encode: skipped 1 line (")
                && err.contains(&format!("first at {name}:3: ")),
            "case {k}: {err}"
        );
    }
    no_temp_files(&dir);
    // The line counts run on across items and threads: a bad line far down.
    let mut big = Vec::new();
    for k in 0..40_000 {
        big.extend_from_slice(format!("{{\"text\":\"line {k} of a longer input\"}}\n").as_bytes());
    }
    big.extend_from_slice(b"{\"txt\":\"x\"}\n");
    fs::write(dir.join("big.jsonl"), &big).unwrap();
    for threads in ["1", "2"] {
        let out = tool("bpe-encode", &dir)
            .args(["--field", "text", "-j", threads, "big.jsonl"])
            .assert()
            .code(1)
            .get_output()
            .clone();
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "bpe-encode: error: big.jsonl:40001: no field \"text\" (keys: txt)\n"
        );
        assert_eq!(ndjson_records(&out.stdout).len(), 40_000);
    }
    let out = tool("bpe-encode", &dir)
        .args(["--field", "text", "--skip-invalid", "--stats", "big.jsonl"])
        .assert()
        .success()
        .get_output()
        .clone();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("skipped 1 line (1 without \"text\"); first at big.jsonl:40001"),
        "{err}"
    );
    assert!(err.contains("bpe-encode: records 40000 "), "{err}");
}

/// The string's exact bytes: escaped newlines stay inside the record, `\u0000` is a NUL
/// byte, a surrogate pair is one character; equal to the same text encoded as a whole.
#[test]
fn jsonl_strings_are_read_exactly() {
    let dir = scratch("tokens-exact");
    let text = "two\nlines\r\n\0nul \u{1F600} \u{10348} é\u{2028}end";
    let mut rng = Rng::new(3);
    let line = format!("{{\"text\":{}}}\n", json_literal(text, &mut rng));
    assert!(line.contains("\\n") && line.contains("\\u0000"));
    fs::write(dir.join("one.jsonl"), &line).unwrap();
    fs::write(dir.join("one.txt"), text).unwrap();
    let from_jsonl = encode(&dir, &["--field", "text", "--no-header", "one.jsonl"]);
    let from_text = encode(&dir, &["--whole", "--no-header", "one.txt"]);
    assert_eq!(from_jsonl, from_text);
    // The surrogate pair written both ways.
    fs::write(
        dir.join("pair.jsonl"),
        "{\"text\":\"\\ud83d\\ude00\"}\n{\"text\":\"\u{1F600}\"}\n",
    )
    .unwrap();
    let records = ndjson_records(&encode(&dir, &["--field", "text", "pair.jsonl"]));
    assert_eq!(records[0], records[1]);
    let decoded = tool("bpe-decode", &dir)
        .write_stdin(encode(&dir, &["--field", "text", "pair.jsonl"]))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(decoded, "\u{1F600}\n\u{1F600}\n".as_bytes());
    // Another field name, with escapes in the key.
    fs::write(
        dir.join("key.jsonl"),
        "{\"cont\\u0065nt\":\"x\",\"text\":\"y\"}\n",
    )
    .unwrap();
    fs::write(dir.join("x.jsonl"), "{\"text\":\"x\"}\n").unwrap();
    assert_eq!(
        encode(&dir, &["--field", "content", "key.jsonl"]),
        encode(&dir, &["--field", "text", "x.jsonl"])
    );
}

/// A single 50 MB document (with escapes, so it is decoded into a buffer of its own):
/// the same ids as the text read whole, written as a Megatron sequence, as raw u32s
/// and as one NDJSON list.
#[test]
fn a_fifty_megabyte_document() {
    let dir = scratch("tokens-50mb");
    let mut text = String::with_capacity(50 << 20);
    let mut rng = Rng::new(50);
    let words = [
        "alpha", "beta", "gamma", "delta", "éps", "日本", "\n", "\t", "\"q\"",
    ];
    while text.len() < 50 << 20 {
        text.push_str(words[rng.below(words.len() as u64) as usize]);
        text.push(' ');
    }
    let escaped = serde_json::to_string(&text).unwrap();
    fs::write(
        dir.join("big.jsonl"),
        format!("{{\"id\":1,\"text\":{escaped}}}\n"),
    )
    .unwrap();
    fs::write(dir.join("big.txt"), &text).unwrap();
    drop(text);
    encode(
        &dir,
        &[
            "--field",
            "text",
            "--format",
            "megatron",
            "-o",
            "big",
            "big.jsonl",
        ],
    );
    let whole = encode(&dir, &["--whole", "--format", "u32", "big.txt"]);
    let m = read_megatron(&dir.join("big"));
    assert_eq!(m.lengths.len(), 1);
    assert_eq!(m.documents[0], le_u32s(&whole));
    assert!(m.documents[0].len() > 10_000_000);
    // As NDJSON: one list, formatted and written a part at a time.
    let listed = ndjson_records(&encode(&dir, &["--whole", "big.txt"]));
    assert_eq!(listed, [le_u32s(&whole)]);
}

/// Flags that do not go together are usage errors (exit 2) before any output.
#[test]
fn token_file_flags_are_checked() {
    let dir = scratch("tokens-usage");
    fs::write(dir.join("t.txt"), "x\n").unwrap();
    let cases: [&[&str]; 8] = [
        &["--format", "megatron", "t.txt"],
        &["--format", "u32", "--count", "t.txt"],
        &["--shard-tokens", "5", "--format", "u32", "t.txt"],
        &[
            "-m",
            "r50k_base",
            "--format",
            "llmc",
            "--shard-tokens",
            "5",
            "t.txt",
        ],
        &["--eot", "<|nope|>", "t.txt"],
        &["--eot", "999999", "t.txt"],
        &["--field", "text", "--whole", "t.txt"],
        &["--skip-invalid", "t.txt"],
    ];
    for args in cases {
        tool("bpe-encode", &dir)
            .args(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicates::str::starts_with("bpe-encode: error: "));
    }
    tool("bpe-encode", &dir)
        .args(["--eot", "<|nope|>", "t.txt"])
        .assert()
        .stderr(predicates::str::contains("<|endoftext|>"));
    tool("bpe-decode", &dir)
        .args(["--eot", "<|endoftext|>", "-"])
        .write_stdin("[1]\n")
        .assert()
        .code(2);
    no_temp_files(&dir);
}

/// `bpe-train --field` trains on the documents: the same merges as training on their
/// texts kept apart by a special token (which never pairs with its neighbours).
#[test]
fn train_on_jsonl_documents() {
    let dir = scratch("tokens-train");
    let docs = random_documents(31, 40);
    fs::write(dir.join("d.jsonl"), jsonl_of(&docs, 31)).unwrap();
    let joined = docs.join("<|sep|>");
    fs::write(dir.join("d.txt"), &joined).unwrap();
    let merges = |model: &[u8]| -> Vec<String> {
        String::from_utf8(model.to_vec())
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect()
    };
    for split in ["none", "gpt4", "o200k"] {
        let from_jsonl = tool("bpe-train", &dir)
            .args([
                "--field",
                "text",
                "--split",
                split,
                "--vocab-size",
                "300",
                "--special",
                "<|endoftext|>",
                "d.jsonl",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let from_text = tool("bpe-train", &dir)
            .args([
                "--split",
                split,
                "--vocab-size",
                "300",
                "--special",
                "<|endoftext|>",
                "--special",
                "<|sep|>",
                "d.txt",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        assert_eq!(merges(&from_jsonl), merges(&from_text), "--split {split}");
        assert!(merges(&from_jsonl).len() > 30);
    }
    tool("bpe-train", &dir)
        .args(["--field", "text", "-"])
        .write_stdin("{\"text\":\"ab\"}\n{\"x\":1}\n")
        .assert()
        .code(1)
        .stderr("bpe-train: error: <stdin>:2: no field \"text\" (keys: x)\n");
}

/// `bpe-train --field` with `--emit-counts`: documents are records, so counting the
/// JSONL in shards cut at line ends and training from the merged counts gives the single
/// run's merges.
#[test]
fn jsonl_documents_train_in_shards() {
    let dir = scratch("tokens-train-shards");
    let docs = random_documents(47, 60);
    let jsonl = jsonl_of(&docs, 47);
    fs::write(dir.join("all.jsonl"), &jsonl).unwrap();
    let train = |args: &[&str]| -> Vec<u8> {
        tool("bpe-train", &dir)
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    let single = train(&[
        "--field",
        "text",
        "--split",
        "gpt4",
        "--vocab-size",
        "320",
        "all.jsonl",
    ]);
    let lines: Vec<&[u8]> = jsonl.split_inclusive(|&b| b == b'\n').collect();
    for shards in [1, 2, 5] {
        let mut counts = Vec::new();
        for (k, part) in lines.chunks(lines.len().div_ceil(shards)).enumerate() {
            let input = format!("part{shards}-{k}.jsonl");
            fs::write(dir.join(&input), part.concat()).unwrap();
            let name = format!("part{shards}-{k}.counts");
            let key = (k + 1).to_string();
            train(&[
                "--field",
                "text",
                "--split",
                "gpt4",
                "--emit-counts",
                "--shard",
                &key,
                "-o",
                &name,
                &input,
            ]);
            counts.push(name);
        }
        // Merged in reverse order: the first-occurrence keys keep the corpus order.
        counts.reverse();
        let mut args = vec!["--from-counts", "--vocab-size", "320"];
        args.extend(counts.iter().map(String::as_str));
        assert_eq!(train(&args), single, "{shards} shards");
    }
}

/// Long records from a pipe (a JSONL document and a text line over the 4 MB run, a
/// `--whole` input over the 8 MB part) are read in parts, yet give the same token files,
/// boundary ids included, as the same files read whole.
#[test]
fn long_records_from_a_pipe_match_the_files() {
    let dir = scratch("tokens-long-pipe");
    let mut rng = Rng::new(12);
    let words = ["alpha", "beta", "gamma", "éps", "日本", "\t", "\"q\""];
    let mut text = String::new();
    while text.len() < 10 << 20 {
        text.push_str(words[rng.below(words.len() as u64) as usize]);
        text.push(' ');
    }
    let escaped = serde_json::to_string(&text).unwrap();
    let jsonl = format!("{{\"text\":\"short\"}}\n{{\"text\":{escaped}}}\n{{\"text\":\"\"}}\n");
    let lines = format!("short\n{text}\n\n");
    fs::write(dir.join("d.jsonl"), &jsonl).unwrap();
    fs::write(dir.join("d.txt"), &lines).unwrap();
    let eot = ["--eot", "<|endoftext|>"];
    for (input, extra, piped) in [
        ("d.jsonl", &["--field", "text"][..], jsonl.as_bytes()),
        ("d.txt", &[][..], lines.as_bytes()),
        ("d.txt", &["--whole"][..], lines.as_bytes()),
    ] {
        for format in ["u32", "ndjson"] {
            let mut args: Vec<&str> = vec!["--format", format];
            if format == "u32" {
                args.extend(eot);
            }
            args.extend(extra);
            let from_file = tool("bpe-encode", &dir)
                .args(&args)
                .arg(input)
                .assert()
                .success()
                .get_output()
                .stdout
                .clone();
            let from_pipe = tool("bpe-encode", &dir)
                .args(&args)
                .write_stdin(piped.to_vec())
                .assert()
                .success()
                .get_output()
                .stdout
                .clone();
            assert!(from_file.len() > 1000, "{input} {extra:?} {format}");
            assert!(
                from_pipe == from_file,
                "{input} {extra:?} --format {format}"
            );
        }
    }
}

/// `attn` reads token files: the records of raw, llm.c and Megatron files cut at `--eot`
/// give exactly the rows the same ids give as an id stream.
#[test]
fn attn_reads_token_files() {
    let dir = scratch("tokens-attn");
    let docs = [
        "hello world",
        "",
        "a second document, longer than the first",
        "x",
    ];
    let jsonl: String = docs
        .iter()
        .map(|d| format!("{{\"text\":{}}}\n", serde_json::to_string(d).unwrap()))
        .collect();
    fs::write(dir.join("d.jsonl"), &jsonl).unwrap();
    let base = ["-m", "r50k_base", "--field", "text"];
    let ndjson = encode(&dir, &[&base[..], &["--no-header", "d.jsonl"]].concat());
    let attn = |args: &[&str], stdin: Option<&[u8]>| -> Vec<u8> {
        let mut cmd = tool("attn", &dir);
        cmd.args(["--vocab-size", "50257", "--dim", "4"]).args(args);
        if let Some(input) = stdin {
            cmd.write_stdin(input.to_vec());
        }
        cmd.assert().success().get_output().stdout.clone()
    };
    let expected = attn(&[], Some(&ndjson));
    let eot = ["--eot", "50256"];
    for (format, file) in [("u16", "d.u16"), ("u32", "d.u32"), ("llmc", "d.llmc")] {
        encode(
            &dir,
            &[
                &base[..],
                &["--format", format, "--eot", "50256", "-o", file, "d.jsonl"],
            ]
            .concat(),
        );
        let mut args = vec![file];
        args.extend(eot);
        if format != "llmc" {
            args.extend(["--input-format", format]);
        }
        assert_eq!(attn(&args, None), expected, "--format {format}");
    }
    encode(
        &dir,
        &[
            &base[..],
            &[
                "--format", "megatron", "--eot", "50256", "-o", "meg", "d.jsonl",
            ],
        ]
        .concat(),
    );
    // An empty document has no sequence but is still a document: an empty record.
    assert_eq!(attn(&["meg", "--eot", "50256"], None), expected);
    // Id streams and token files do not mix; --eot needs token files.
    fs::write(dir.join("ids.ndjson"), &ndjson).unwrap();
    tool("attn", &dir)
        .args(["--vocab-size", "50257", "ids.ndjson", "d.llmc"])
        .assert()
        .code(2);
    tool("attn", &dir)
        .args(["--eot", "1", "ids.ndjson"])
        .assert()
        .code(2);
}
