//! Help text, man pages and completions held together: every tool (each `[[bin]]` of
//! Cargo.toml) has a man page whose OPTIONS section names exactly the flags its parser
//! has (both directions), a `--help` that ends with examples, a generated bash completion
//! script that parses and names every flag, and a page groff formats without warnings.

use std::collections::BTreeSet;
use std::fs;
use std::process::Command as StdCommand;

use crate::common::{scratch, tool};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The tools: the `[[bin]]` names of Cargo.toml.
fn tools() -> Vec<String> {
    let manifest = fs::read_to_string(format!("{ROOT}/Cargo.toml")).unwrap();
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin {
            if let Some(value) = line.strip_prefix("name = ") {
                names.push(value.trim_matches('"').to_string());
            }
        }
    }
    assert!(names.len() >= 4, "Cargo.toml lists the tools: {names:?}");
    names
}

/// The long flags (`--name`) in `text`, which may be roff with `\-` escapes.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut text = text.replace("\\-", "-");
    for font in ["\\fR", "\\fP", "\\fB", "\\fI", "\\fC"] {
        text = text.replace(font, " ");
    }
    let mut flags = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(k) = text[i..].find("--") {
        let start = i + k;
        let mut end = start + 2;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'-') {
            end += 1;
        }
        let before_ok = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if end > start + 2 && before_ok && bytes[start + 2].is_ascii_alphabetic() {
            flags.insert(text[start..end].to_string());
        }
        i = end.max(start + 2);
    }
    flags
}

/// The flags `TOOL --help` lists in its options (the examples after them are left out),
/// and the whole help text. Subcommands' flags are included (`TOOL SUB --help`).
fn help_flags(name: &str) -> (BTreeSet<String>, String) {
    let dir = scratch("docs");
    let help = tool(name, &dir).arg("--help").assert().success();
    let help = String::from_utf8(help.get_output().stdout.clone()).unwrap();
    let mut flags = options_of_help(&help);
    if let Some(commands) = section(&help, "Commands:") {
        for line in commands.lines() {
            let Some(sub) = line.split_whitespace().next() else {
                continue;
            };
            if sub == "help" {
                continue;
            }
            let out = tool(name, &dir).args([sub, "--help"]).assert().success();
            flags.extend(options_of_help(&String::from_utf8_lossy(
                &out.get_output().stdout,
            )));
        }
    }
    (flags, help)
}

fn section<'t>(text: &'t str, heading: &str) -> Option<&'t str> {
    let start = text.find(heading)? + heading.len();
    let rest = &text[start..];
    // Up to the next heading (a line starting at column 0 with a word and a colon).
    let end = rest
        .match_indices("\n\n")
        .map(|(k, _)| k)
        .find(|&k| {
            let next = &rest[k + 2..];
            next.lines()
                .next()
                .is_some_and(|l| !l.starts_with(' ') && l.ends_with(':'))
        })
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

fn options_of_help(help: &str) -> BTreeSet<String> {
    let options = section(help, "Options:").expect("--help has an Options section");
    // Flag names are what starts an option line; the descriptions may mention others.
    let mut flags = BTreeSet::new();
    for line in options.lines() {
        let head = line.trim_start();
        if !head.starts_with('-') {
            continue;
        }
        let head = head.split("  ").next().unwrap_or(head);
        flags.extend(long_flags(head));
    }
    flags
}

/// The flags a man page's OPTIONS section documents (`.TP` items, first line each).
fn page_flags(page: &str) -> BTreeSet<String> {
    let start = page.find(".SH OPTIONS").expect("the page has OPTIONS");
    let rest = &page[start + 11..];
    let options = &rest[..rest.find("\n.SH ").unwrap_or(rest.len())];
    let mut flags = BTreeSet::new();
    let lines: Vec<&str> = options.lines().collect();
    for (k, line) in lines.iter().enumerate() {
        if *line == ".TP" {
            if let Some(item) = lines.get(k + 1) {
                flags.extend(long_flags(item));
            }
        }
    }
    flags
}

#[test]
fn man_pages_name_exactly_the_flags_of_each_tool() {
    for name in tools() {
        let (mut help, text) = help_flags(&name);
        let last = text.trim_end().lines().last().unwrap_or("");
        assert!(
            last.contains(name.as_str()),
            "{name} --help ends with examples: {last}"
        );
        // Every tool also takes --generate (handled before the flag parser).
        help.insert("--generate".to_string());
        let page = fs::read_to_string(format!("{ROOT}/man/{name}.1"))
            .unwrap_or_else(|_| panic!("man/{name}.1 exists"));
        let documented = page_flags(&page);
        let missing: Vec<_> = help.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(&help).collect();
        assert!(missing.is_empty(), "man/{name}.1 OPTIONS lacks {missing:?}");
        assert!(
            extra.is_empty(),
            "man/{name}.1 OPTIONS documents flags {name} does not have: {extra:?}"
        );
    }
}

#[test]
fn every_man_page_is_a_tool_and_formats_without_warnings() {
    let tools = tools();
    for entry in fs::read_dir(format!("{ROOT}/man")).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            tools.contains(&stem),
            "{} is the page of a tool",
            path.display()
        );
        let out = StdCommand::new("groff")
            .args(["-man", "-ww", "-z"])
            .arg(&path)
            .output()
            .expect("groff runs (Debian: groff-base)");
        assert!(out.status.success(), "groff on {}", path.display());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "groff warns on {}",
            path.display()
        );
    }
}

#[test]
fn bash_completions_parse_and_name_every_flag() {
    let dir = scratch("complete");
    for name in tools() {
        let (flags, _) = help_flags(&name);
        let script = tool(&name, &dir)
            .args(["--generate", "complete-bash"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let script = String::from_utf8(script).unwrap();
        let path = dir.join(format!("{name}.bash"));
        fs::write(&path, &script).unwrap();
        let check = StdCommand::new("bash")
            .arg("-n")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "bash -n {name}.bash: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        for flag in &flags {
            assert!(
                script.contains(flag.as_str()),
                "{name}'s completion names {flag}"
            );
        }
        for kind in ["complete-zsh", "complete-fish"] {
            let out = tool(&name, &dir)
                .args(["--generate", kind])
                .assert()
                .success();
            assert!(
                out.get_output().stdout.len() > 100,
                "{name} --generate {kind}"
            );
        }
    }
    tool("bpe-encode", &dir)
        .args(["--generate", "complete-tcsh"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "bpe-encode: error: --generate takes",
        ));
}

#[test]
fn readme_points_to_every_tool_and_its_man_page() {
    let readme = fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    for name in tools() {
        assert!(
            readme.contains(&format!("## {name}")),
            "README has a section for {name}"
        );
        assert!(
            readme.contains(&format!("man/{name}.1")),
            "README points to man/{name}.1"
        );
    }
}

/// README's pipeline to paste runs as written (from a folder holding README.md, the
/// tools on PATH) and does what its comments say.
#[test]
fn readme_pipeline_runs_as_pasted() {
    let readme = fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    let start = readme
        .find("A pipeline to paste")
        .expect("README has the pipeline");
    let block = &readme[start..];
    let open = block.find("```sh\n").unwrap() + 6;
    let script = &block[open..open + block[open..].find("```").unwrap()];
    let dir = scratch("readme");
    fs::copy(format!("{ROOT}/README.md"), dir.join("README.md")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("bpe-train");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = StdCommand::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(&dir)
        .env("PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "README pipeline failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("some text\n"), "decoded back: {stdout}");
    assert!(
        stdout.contains("[0.5313,1.3607,0.7891,1.3110]"),
        "attn's table: {stdout}"
    );
    let merges = fs::read_to_string(dir.join("merges.json")).unwrap();
    assert_eq!(
        merges.lines().count(),
        1 + 144,
        "144 merges after the header"
    );
}
