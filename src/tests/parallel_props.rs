//! Work spread over threads and written in order: `parallel::ordered` against a plain
//! loop, and the line-mode encoding driver on many items against one record at a time.

use std::fs;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cmd::encode::{encode, EncodeConfig};
use crate::cmd::train::{train, ModelType, TrainConfig};
use crate::encode::AllowedSpecial;
use crate::input::Source;
use crate::model::Model;
use crate::parallel::ordered;

use super::{scratch, Rng};

/// Work whose cost varies a lot from item to item, so that threads finish out of order.
fn uneven_work(seed: u64, item: u64) -> u64 {
    let mut rng = Rng::new(seed ^ item.wrapping_mul(0x9e37_79b9));
    let spins = rng.below(20_000);
    let mut x = item;
    for _ in 0..spins {
        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
    }
    std::hint::black_box(x);
    item * 1000 + spins % 7
}

#[test]
fn ordered_writes_every_result_in_item_order() {
    let mut rng = Rng::new(11);
    for case in 0..60 {
        let n = rng.below(200);
        let threads = 1 + rng.below(3) as usize;
        let ahead = 1 + rng.below(6) as usize;
        let expected: Vec<u64> = (0..n).map(|i| uneven_work(case, i)).collect();
        let mut written = Vec::new();
        let stopped = ordered(
            threads,
            ahead,
            0..n,
            |i| uneven_work(case, i),
            |r| {
                written.push(r);
                ControlFlow::<()>::Continue(())
            },
        );
        assert_eq!(stopped, None);
        assert_eq!(
            written, expected,
            "case {case}: {threads} threads, ahead {ahead}"
        );
    }
}

#[test]
fn ordered_stops_at_a_break_and_works_at_most_ahead() {
    let mut rng = Rng::new(12);
    for case in 0..60 {
        let n = 1 + rng.below(150);
        let stop_at = rng.below(n);
        let threads = 1 + rng.below(3) as usize;
        let ahead = 1 + rng.below(5) as usize;
        let worked = AtomicUsize::new(0);
        let mut written = Vec::new();
        let stopped = ordered(
            threads,
            ahead,
            0..n,
            |i| {
                worked.fetch_add(1, Ordering::Relaxed);
                uneven_work(case, i)
            },
            |r| {
                written.push(r);
                if r / 1000 == stop_at {
                    ControlFlow::Break(r)
                } else {
                    ControlFlow::Continue(())
                }
            },
        );
        assert_eq!(stopped, Some(uneven_work(case, stop_at)), "case {case}");
        let expected: Vec<u64> = (0..=stop_at).map(|i| uneven_work(case, i)).collect();
        assert_eq!(written, expected, "case {case}");
        // Taken items never run more than `ahead` past the written ones.
        let worked = worked.load(Ordering::Relaxed);
        assert!(
            worked <= stop_at as usize + 1 + ahead,
            "case {case}: {worked} items worked on, stop at {stop_at}, ahead {ahead}"
        );
    }
}

#[test]
fn ordered_resumes_a_panic_of_the_work() {
    for threads in 1..=3 {
        let outcome = std::panic::catch_unwind(|| {
            ordered(
                threads,
                3,
                0..50u64,
                |i| {
                    assert!(i != 17, "planted failure");
                    i
                },
                |_| ControlFlow::<()>::Continue(()),
            )
        });
        assert!(outcome.is_err(), "{threads} threads: the panic was lost");
    }
}

/// About 1.4 MB of lines: short and long, empty, with `\r`, tabs and invalid UTF-8, one
/// line longer than an item (256 KB), and no `\n` at the end.
fn many_lines(rng: &mut Rng) -> Vec<u8> {
    let words: Vec<Vec<u8>> = (0..400)
        .map(|_| {
            let len = 1 + rng.below(9) as usize;
            rng.bytes_from(b"abcdeflmnoz\xc3\xa9\xff", len)
        })
        .collect();
    let mut text = Vec::new();
    let mut line_no = 0;
    while text.len() < 1_400_000 {
        line_no += 1;
        let count = match rng.below(20) {
            0 => 0,
            1 if line_no % 7 == 1 && text.len() > 400_000 && text.len() < 500_000 => 60_000,
            _ => rng.below(30) as usize,
        };
        for k in 0..count {
            if k > 0 {
                text.extend_from_slice(if rng.below(9) == 0 { b"\t " } else { b" " });
            }
            text.extend_from_slice(&words[rng.below(words.len() as u64) as usize]);
        }
        if rng.below(10) == 0 {
            text.push(b'\r');
        }
        text.push(b'\n');
    }
    text.extend_from_slice(b"last line without end");
    text
}

/// What line mode must give: each line encoded alone, in order, after the header.
fn one_record_at_a_time(model: &Model, text: &[u8]) -> (Vec<u8>, u64, u64) {
    let mut out = Vec::new();
    let (mut tokens, mut unknown) = (0u64, 0u64);
    for line in crate::input::Lines::new(text) {
        let ids = match model {
            Model::Bpe(m) => crate::encode::encode(m, &AllowedSpecial::None, line).unwrap(),
            Model::Word(m) => {
                let mut ids = Vec::new();
                crate::word::encode(m, line, &mut ids);
                unknown += ids.iter().filter(|&&id| id == m.unk_id).count() as u64;
                ids
            }
        };
        tokens += ids.len() as u64;
        crate::format::ids::push_ids(&mut out, &ids);
        out.push(b'\n');
    }
    (out, tokens, unknown)
}

/// The encoding driver (the binary's one library call) in line mode, on a file mapped or
/// read, on one to three threads, gives the ids and the totals of one record at a time.
/// (`bpe-encode` from standard input is checked from the outside, tests/encode_threads.rs.)
#[test]
fn line_mode_encodes_many_items_alike_on_any_thread_count() {
    let dir = scratch("items");
    let mut rng = Rng::new(21);
    let text = many_lines(&mut rng);
    assert!(text.len() > 5 * (1 << 18));
    let input = dir.join("in.txt");
    fs::write(&input, &text).unwrap();
    // Models from part of the text, so that the rest has unknown words.
    let part = dir.join("part.txt");
    fs::write(&part, &text[..200_000]).unwrap();
    for (model_type, vocab_size) in [(ModelType::Bpe, Some(400)), (ModelType::Word, None)] {
        let config = TrainConfig {
            model_type,
            vocab_size,
            ..TrainConfig::new()
        };
        let path = dir.join("model.json");
        let mut model_file = Vec::new();
        train(
            &config,
            &[Source::file(&part)],
            &mut model_file,
            &mut |_| {},
        )
        .unwrap();
        fs::write(&path, &model_file).unwrap();
        let model = crate::format::load(path.to_str().unwrap(), None).unwrap();
        let (expected, tokens, unknown) = one_record_at_a_time(&model, &text);
        let records = crate::input::Lines::new(&text).count();
        let newlines = text.iter().filter(|&&b| b == b'\n').count();
        let mut stats = format!(
            "records {records} tokens {tokens} bytes {} bytes/token {:.3}",
            text.len() - newlines,
            (text.len() - newlines) as f64 / tokens as f64
        );
        if let Model::Word(_) = model {
            stats.push_str(&format!(
                " unknown {unknown} unknown-rate {:.2}%",
                100.0 * unknown as f64 / tokens as f64
            ));
        }
        for threads in [1, 2, 3] {
            for no_mmap in [false, true] {
                let output = dir.join("ids.jsonl");
                let config = EncodeConfig {
                    threads,
                    no_mmap,
                    ..super::encode_config(model.clone(), &output)
                };
                let report = encode(&config, &[Source::file(&input)]).unwrap();
                let what = format!("{model_type:?}, {threads} threads, no_mmap {no_mmap}");
                assert!(
                    fs::read(&output).unwrap() == expected,
                    "{what}: ids differ from one record at a time"
                );
                assert_eq!(report.stats.summary(), stats, "{what}");
            }
        }
    }
}
