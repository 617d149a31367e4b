//! attn as a command: the seed's tables, PyTorch goldens (multi-head, causal, cross,
//! both normal_ kernels), bad input, exit codes, pipes, and the man page.

use std::path::Path;

use predicates::prelude::*;
use serde_json::Value;

use crate::common::{scratch, tool};

const SEED_TABLE: &str = "[[-0.1564,0.1028,-0.0763,-0.0764],[0.5313,1.3607,0.7891,1.3110],\
[-0.3542,-0.1234,-0.2627,-0.3706],[0.0071,0.3345,0.0969,0.1998],\
[0.1008,0.4780,0.2021,0.3674],[-0.5296,-0.2799,-0.4107,-0.6006]]\n";

fn goldens(flavour: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/attn/goldens-{flavour}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn default_run_prints_the_seed_table() {
    let dir = scratch("attn-seed");
    tool("attn", &dir)
        .write_stdin("[0,4,5,2,1,3]\n")
        .assert()
        .success()
        .stdout(SEED_TABLE)
        .stderr("");
    // Header lines are skipped; each record gives one line.
    tool("attn", &dir)
        .write_stdin("{\"model\":\"words.json\"}\n[0,4,5,2,1,3]\n[]\n[0,4,5,2,1,3]")
        .assert()
        .success()
        .stdout(format!("{SEED_TABLE}[]\n{SEED_TABLE}"));
}

#[test]
fn x86_kernel_gives_pytorch_x86_digits() {
    let dir = scratch("attn-x86");
    let out = tool("attn", &dir)
        .args(["--normal-fill", "avx2"])
        .write_stdin("[0,4,5,2,1,3]\n")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, SEED_TABLE.replace("-0.2627", "-0.2626"));
}

fn run_case(dir: &Path, case: &Value, extra: &[&str], simd: &str) -> Vec<Vec<f64>> {
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    for a in case["args"].as_array().unwrap() {
        let a = a.as_str().unwrap();
        if a == "CONTEXT" {
            let path = dir.join("context.jsonl");
            std::fs::write(&path, format!("{}\n", case["context"])).unwrap();
            args.push(path.display().to_string());
        } else {
            args.push(a.to_string());
        }
    }
    args.extend(["--precision".to_string(), "shortest".to_string()]);
    let out = tool("attn", dir)
        .args(&args)
        .env("TOKSUITE_ATTN_SIMD", simd)
        .write_stdin(format!("{}\n", case["input"]))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect()
}

/// Every compiled path of the kernels (any runs on any x86-64 CPU: one whose features
/// the CPU lacks runs its tile shape built for the baseline).
const PATHS: [&str; 3] = ["avx512", "avx2", "portable"];

#[test]
fn pytorch_goldens_both_kernels_every_path() {
    let dir = scratch("attn-goldens");
    for (flavour, extra) in [("scalar", vec![]), ("avx2", vec!["--normal-fill", "avx2"])] {
        let g = goldens(flavour);
        for (case, simd) in g["cases"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| PATHS.map(|p| (c, p)))
        {
            let want = case["output"].as_array().unwrap();
            let got = run_case(&dir, case, &extra, simd);
            assert_eq!(got.len(), want.len(), "{flavour} {}", case["name"]);
            for (i, (gr, wr)) in got.iter().zip(want).enumerate() {
                let wr = wr.as_array().unwrap();
                assert_eq!(gr.len(), wr.len());
                for (j, (g, w)) in gr.iter().zip(wr).enumerate() {
                    let w = w.as_f64().unwrap();
                    assert!(
                        (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{flavour} {simd} {}: [{i}][{j}] {g} vs torch {w}",
                        case["name"]
                    );
                }
            }
        }
    }
}

#[test]
fn drawn_weights_are_pytorch_bits() {
    let dir = scratch("attn-bits");
    for (flavour, fill) in [("scalar", "scalar"), ("avx2", "avx2")] {
        let g = goldens(flavour);
        for (shape, want) in g["small_embeddings"].as_object().unwrap() {
            let (v, d) = shape.split_once('x').unwrap();
            let path = dir.join(format!("w-{flavour}-{shape}.json"));
            tool("attn", &dir)
                .args([
                    "--vocab-size",
                    v,
                    "--dim",
                    d,
                    "--normal-fill",
                    fill,
                    "--dump-weights",
                ])
                .arg(&path)
                .write_stdin("")
                .assert()
                .success()
                .stdout("");
            let w: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let bits: Vec<u64> = w["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_array().unwrap().clone())
                .map(|x| (x.as_f64().unwrap() as f32).to_bits() as u64)
                .collect();
            let want: Vec<u64> = want["bits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(bits, want, "{flavour} {shape}");
        }
        // The seed's weights.
        let path = dir.join(format!("seed-{flavour}.json"));
        tool("attn", &dir)
            .args(["--normal-fill", fill, "--dump-weights"])
            .arg(&path)
            .write_stdin("")
            .assert()
            .success();
        let w: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for (k, name) in ["W_query", "W_key", "W_value"].iter().enumerate() {
            let bits: Vec<u64> = w["heads"][0][name]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r.as_array().unwrap().clone())
                .map(|x| (x.as_f64().unwrap() as f32).to_bits() as u64)
                .collect();
            let want: Vec<u64> = g["weights_bits"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            assert_eq!(bits, want, "{flavour} {name}");
        }
        let emb = &w["embedding"];
        let bits: Vec<u64> = (0..6)
            .flat_map(|r| emb[r].as_array().unwrap().clone())
            .map(|x| (x.as_f64().unwrap() as f32).to_bits() as u64)
            .collect();
        let want: Vec<u64> = g["embedding_rows_0_5_bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        assert_eq!(bits, want, "{flavour} embedding");
        // Loading the dump reproduces the drawn run exactly.
        let direct = tool("attn", &dir)
            .args(["--normal-fill", fill, "--precision", "shortest"])
            .write_stdin("[0,4,5,2,1,3]\n")
            .output()
            .unwrap();
        tool("attn", &dir)
            .args(["--precision", "shortest", "--weights"])
            .arg(&path)
            .write_stdin("[0,4,5,2,1,3]\n")
            .assert()
            .success()
            .stdout(direct.stdout);
    }
}

#[test]
fn vectors_mode_and_weights_without_embedding() {
    let dir = scratch("attn-vectors");
    // The seed's embedded sentence given as vectors, with the seed's drawn weights.
    let rows = "[[0.3374,-0.1778,-0.3035],[0.1794,1.8951,0.4954],[0.2692,-0.0770,-1.0205],\
                [-0.2196,-0.3792,0.7671],[-0.5880,0.3486,0.6603],[-1.1925,0.6984,-1.4097]]\n";
    tool("attn", &dir)
        .args(["--vectors", "--precision", "2"])
        .write_stdin(rows)
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "[[-0.16,0.10,-0.08,-0.08],[0.53,1.36,0.79,1.31],",
        ));
    let w = r#"{"heads":[{"W_query":[[1],[0]],"W_key":[[1],[0]],"W_value":[[1,0],[0,1]]}]}"#;
    std::fs::write(dir.join("w.json"), w).unwrap();
    tool("attn", &dir)
        .args(["--weights", "w.json", "--vectors", "--precision", "3"])
        .write_stdin("[[0,1],[0,3]]\n")
        .assert()
        .success()
        .stdout("[[0.000,2.000],[0.000,2.000]]\n");
    tool("attn", &dir)
        .args(["--weights", "w.json"])
        .write_stdin("[0]\n")
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no embedding"));
}

fn fails(dir: &Path, args: &[&str], stdin: &str, code: i32, message: &str) {
    tool("attn", dir)
        .args(args)
        .write_stdin(stdin.to_string())
        .assert()
        .code(code)
        .stderr(predicate::str::starts_with("attn: error: "))
        .stderr(predicate::str::contains(message));
}

#[test]
fn bad_input_is_an_error_with_its_place() {
    let dir = scratch("attn-bad");
    fails(
        &dir,
        &[],
        "[0]\n[50000]\n",
        1,
        "<stdin>:2: id 50000 is not in the vocabulary (size 50000)",
    );
    fails(&dir, &[], "[0,-1]\n", 1, "<stdin>:1:");
    fails(&dir, &[], "[0,1\n", 1, "<stdin>:1:");
    fails(
        &dir,
        &["--vectors"],
        "[[1,2,3],[1,2]]\n",
        1,
        "<stdin>:1: row 1 has 2 numbers, expected 3",
    );
    fails(
        &dir,
        &["--vectors"],
        "[[1,2,3],[1,2,NaN]]\n",
        1,
        "<stdin>:1:",
    );
    fails(
        &dir,
        &["--vectors"],
        "[[1,2,3],[1,2,1e39]]\n",
        1,
        "not a finite float32",
    );
    // Output before the bad record has been written.
    tool("attn", &dir)
        .write_stdin("[0,4,5,2,1,3]\n[99999]\n")
        .assert()
        .code(1)
        .stdout(SEED_TABLE);
    std::fs::write(dir.join("ctx.jsonl"), "[1,2]\n[3]\n").unwrap();
    fails(
        &dir,
        &["--context", "ctx.jsonl"],
        "[0]\n[1]\n[2]\n",
        1,
        "<stdin>:3: record 3 has no partner in the context file ctx.jsonl",
    );
    fails(
        &dir,
        &["--context", "ctx.jsonl"],
        "[0]\n",
        1,
        "ctx.jsonl:2: the context file has more records",
    );
    tool("attn", &dir)
        .args(["--context", "ctx.jsonl", "--precision", "1"])
        .write_stdin("[0]\n{\"model\":\"x\"}\n[1,2]\n")
        .assert()
        .success()
        .stdout(predicate::function(|s: &str| s.lines().count() == 2));
    let nan = r#"{"heads":[{"W_query":[[1]],"W_key":[[1]],"W_value":[[NaN]]}]}"#;
    std::fs::write(dir.join("nan.json"), nan).unwrap();
    fails(
        &dir,
        &["--weights", "nan.json", "--vectors"],
        "[[1]]\n",
        1,
        "nan.json:",
    );
    let ragged = r#"{"heads":[{"W_query":[[1],[2]],"W_key":[[1]],"W_value":[[1]]}]}"#;
    std::fs::write(dir.join("ragged.json"), ragged).unwrap();
    fails(
        &dir,
        &["--weights", "ragged.json", "--vectors"],
        "[[1]]\n",
        1,
        "rows of heads[0].W_key: 1, expected 2",
    );
    fails(&dir, &["--weights", "missing.json"], "", 1, "missing.json");
}

#[test]
fn usage_errors_exit_2() {
    let dir = scratch("attn-usage");
    for args in [
        vec!["--heads", "0"],
        vec!["--vocab-size", "18446744073709551615", "--dim", "9"],
        vec!["--d-kq", "9223372036854775807"],
        vec!["--precision", "12"],
        vec!["--print", "everything"],
        vec!["--no-such-flag"],
        vec!["--weights", "w.json", "--heads", "2"],
    ] {
        tool("attn", &dir)
            .args(&args)
            .write_stdin("")
            .assert()
            .code(2);
    }
}

#[test]
fn closed_pipe_is_quiet() {
    let dir = scratch("attn-pipe");
    let input = "[0,4,5,2,1,3]\n".repeat(20_000);
    let mut child = std::process::Command::new("bash")
        .current_dir(&dir)
        .arg("-c")
        .arg(format!(
            "{} | head -n 1 >/dev/null; echo ${{PIPESTATUS[0]}}",
            assert_cmd::cargo::cargo_bin("attn").display()
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn output_file_and_long_record() {
    let dir = scratch("attn-long");
    let ids: Vec<String> = (0..20_000).map(|i| (i * 7 % 50_000).to_string()).collect();
    tool("attn", &dir)
        .args(["--causal", "-o", "out.jsonl"])
        .write_stdin(format!("[{}]\n", ids.join(",")))
        .assert()
        .success()
        .stdout("");
    let v: Value = serde_json::from_slice(&std::fs::read(dir.join("out.jsonl")).unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 20_000);
}

/// The rows of one JSON output line, each number parsed as float32 from its text.
fn json_rows(line: &str) -> Vec<Vec<f32>> {
    let inner = line
        .trim()
        .strip_prefix('[')
        .unwrap()
        .strip_suffix(']')
        .unwrap();
    if inner.is_empty() {
        return Vec::new();
    }
    let inner = inner.strip_prefix('[').unwrap().strip_suffix(']').unwrap();
    inner
        .split("],[")
        .map(|row| row.split(',').map(|x| x.parse::<f32>().unwrap()).collect())
        .collect()
}

/// Reads one NPY stream from the front of `bytes` (an independent reader: the NPY 1.0
/// format as numpy documents it): returns the shape, the numbers and the rest.
fn read_npy(bytes: &[u8]) -> ((usize, usize), Vec<f32>, &[u8]) {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "magic");
    assert_eq!((bytes[6], bytes[7]), (1, 0), "version");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + len) % 64, 0, "data aligned to 64 bytes");
    let header = std::str::from_utf8(&bytes[10..10 + len]).unwrap();
    assert!(header.ends_with('\n'));
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape = header.split("'shape': (").nth(1).unwrap();
    let shape: Vec<usize> = shape[..shape.find(')').unwrap()]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let (rows, cols) = (shape[0], shape[1]);
    let data = &bytes[10 + len..];
    let nums = f32_le(&data[..rows * cols * 4]);
    ((rows, cols), nums, &data[rows * cols * 4..])
}

fn f32_le(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn bits(rows: &[Vec<f32>]) -> Vec<u32> {
    rows.iter().flatten().map(|x| x.to_bits()).collect()
}

#[test]
fn binary_output_read_back_equals_the_json_rows() {
    let dir = scratch("attn-binary");
    let input = "{\"model\":\"x\"}\n[0,4,5,2,1,3]\n[]\n[7]\n[9,8,7,6,5,4,3,2,1,0,11,12,13,14,15,16,17,18,19,20]\n";
    for extra in [
        vec!["--heads", "3", "--dim", "5", "--causal"],
        vec!["--print", "weights", "--heads", "2"],
    ] {
        let run = |format: &str| {
            let out = tool("attn", &dir)
                .args(&extra)
                .args(["--format", format, "--precision", "shortest"])
                .write_stdin(input)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            out.stdout
        };
        let json = String::from_utf8(run("ndjson")).unwrap();
        let records: Vec<Vec<Vec<f32>>> = json.lines().map(json_rows).collect();
        assert_eq!(records.len(), 4);
        // f32: the numbers of every record, back to back.
        let raw = f32_le(&run("f32"));
        let want: Vec<u32> = records.iter().flat_map(|r| bits(r)).collect();
        assert_eq!(raw.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
        // npy: one stream per record, in order, shapes (T, C).
        let npy = run("npy");
        let mut rest = &npy[..];
        for rows in &records {
            let (shape, nums, more) = read_npy(rest);
            assert_eq!(shape.0, rows.len());
            if let Some(first) = rows.first() {
                assert_eq!(shape.1, first.len());
            }
            let got: Vec<u32> = nums.iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, bits(rows));
            rest = more;
        }
        assert!(rest.is_empty());
    }
}

#[test]
fn hostile_sizes_and_records_are_clean_errors() {
    let dir = scratch("attn-hostile");
    // Sizes from flags are checked before anything is allocated.
    fails(
        &dir,
        &["--heads", "10000000", "--d-v", "1", "--d-kq", "1"],
        "[1]\n",
        1,
        "attn: error: 10000000 heads: at most 65536",
    );
    fails(
        &dir,
        &[
            "--dim", "100000", "--heads", "8", "--d-kq", "1000", "--d-v", "1000",
        ],
        "",
        1,
        "more than 2^30 numbers",
    );
    // And sizes from records: a 40 000-id record's weights matrix is 1.6e9 numbers.
    let ids = vec!["1"; 40_000].join(",");
    fails(
        &dir,
        &["--print", "weights"],
        &format!("[1,2]\n[{ids}]\n"),
        1,
        "<stdin>:2: the matrix of this record (T x heads x S) would be 40000 x 1 x 40000",
    );
    // An object that is not a header is not skipped silently.
    fails(
        &dir,
        &[],
        "[1,2]\n{}\n[3]\n",
        1,
        "<stdin>:2: header has no \"model\" name",
    );
    fails(&dir, &[], "[1]\n{\"model\":7}\n", 1, "<stdin>:2:");
    // Unknown fields of a weights file are errors, at the top and in a head.
    for (text, field) in [
        (
            r#"{"dimm":1,"heads":[{"W_query":[[1]],"W_key":[[1]],"W_value":[[1]]}]}"#,
            "\"dimm\"",
        ),
        (
            r#"{"heads":[{"W_query":[[1]],"W_key":[[1]],"W_value":[[1]],"W_out":[[1]]}]}"#,
            "\"heads[0].W_out\"",
        ),
    ] {
        std::fs::write(dir.join("typo.json"), text).unwrap();
        fails(
            &dir,
            &["--weights", "typo.json", "--vectors"],
            "[[1]]\n",
            1,
            &format!("typo.json: unknown field {field}"),
        );
    }
}

/// The example that runs the whole of the first word-and-attention pipeline, with the
/// built binaries, prints the table its golden holds.
#[test]
fn seed_pipeline_script_prints_the_seeds_attention_table() {
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_bpe-train"))
        .parent()
        .unwrap()
        .to_path_buf();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("word-seed-pipeline");
    let _ = std::fs::remove_dir_all(&dir);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/seed-pipeline.sh");
    let output = std::process::Command::new("sh")
        .arg(script)
        .arg(&dir)
        .env("TOKSUITE_BIN", &bin_dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The vocabulary is the seed's, written as the golden model file.
    assert_eq!(
        std::fs::read(dir.join("words.json")).unwrap(),
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/word/seed-words.json"
        ))
        .unwrap()
    );
    // One line: the seed's 6x4 table (printed there to 4 decimals; attn agrees with
    // PyTorch to 1e-4).
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let got: Vec<Vec<f64>> = serde_json::from_str(lines[0]).unwrap();
    let want: Vec<Vec<f64>> =
        serde_json::from_slice(include_bytes!("fixtures/word/seed-context.json")).unwrap();
    assert_eq!(got.len(), 6);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), 4);
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1.5e-4, "{got:?} vs {want:?}");
        }
    }
}
