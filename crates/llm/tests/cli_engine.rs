//! `tempra logits`, `tempra bench`, `tempra perplexity` and `tempra run` through the
//! binary: their output formats, agreement with the library, one clean error line on bad
//! input, and the same generated text at any thread count.
#![cfg(feature = "cli")]

use tempra_llm::engine::{LoadOptions, Model, logits_slice};
use tempra_llm::quantize::QuantType;
use tempra_llm::testing::{ModelShape, RandomModelSpec, shared_file, write_random_model};
use tempra_tensor::DType;

mod cli_helpers;
use cli_helpers::{fails, ok, random_model_file, succeeds};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{text}"))
}

fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &v)| if v > b.1 { (i, v) } else { b },
        )
        .0
}

#[test]
fn logits_prints_one_json_object_equal_to_the_library_logits() {
    let dir = tempfile::tempdir().unwrap();
    let model_path = random_model_file(dir.path());
    let stdout = succeeds(
        dir.path(),
        &[
            "logits",
            "-m",
            "model.gguf",
            "--tokens",
            "7,1,299,42",
            "--kv-type",
            "f32",
        ],
    );
    let value = json(&stdout);
    assert_eq!(
        ids(&value["tokens"]),
        [7, 1, 299, 42],
        "--tokens are used verbatim"
    );
    let rows: Vec<Vec<f32>> = value["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    assert_eq!((rows.len(), rows[0].len()), (4, 300));

    let options = LoadOptions {
        kv_type: DType::F32,
        ..LoadOptions::default()
    };
    let model = Model::load(&model_path, &options).unwrap();
    let logits = model
        .session()
        .unwrap()
        .logits_all(&[7, 1, 299, 42])
        .unwrap();
    let want = logits_slice(&logits).unwrap();
    for (got, want) in rows.iter().flatten().zip(want) {
        assert!(
            (got - want).abs() <= 1e-5 * want.abs().max(1.0),
            "{got} vs {want}"
        );
    }

    // A quantized cache stores heads in whole blocks of 32 values; these hold 16.
    fails(
        dir.path(),
        &[
            "logits",
            "-m",
            "model.gguf",
            "--tokens",
            "1",
            "--kv-type-k",
            "q8_0",
        ],
        "--kv-type-k q8_0: stores blocks of 32 values, and this model's heads hold 16",
    );

    // --prompt adds the model's BOS.
    let value = json(&succeeds(
        dir.path(),
        &["logits", "-m", "model.gguf", "--prompt", "ab"],
    ));
    let tokens = ids(&value["tokens"]);
    assert_eq!(tokens[0], model.vocab().bos().unwrap());
    assert_eq!(value["logits"].as_array().unwrap().len(), tokens.len());
}

#[test]
fn logits_on_stories260k_predict_what_run_c_generates() {
    let (Some(ckpt), Some(tok), Some(greedy)) = (
        shared_file("models/stories260K/stories260K.bin"),
        shared_file("models/stories260K/tok512.bin"),
        shared_file("models/stories260K/greedy.json"),
    ) else {
        return;
    };
    let cases: serde_json::Value = serde_json::from_slice(&std::fs::read(greedy).unwrap()).unwrap();
    let case = &cases["cases"][0];
    let (ckpt, tok) = (ckpt.to_str().unwrap(), tok.to_str().unwrap());
    let prompt = case["prompt"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let value = json(&succeeds(
        dir.path(),
        &["logits", "-m", ckpt, "--tokenizer", tok, "--prompt", prompt],
    ));
    let tokens = ids(&value["tokens"]);
    assert_eq!(tokens, ids(&case["prompt_ids"]));
    let last: Vec<f32> = value["logits"][tokens.len() - 1]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(
        argmax(&last) as u32,
        ids(&case["next_ids"])[tokens.len() - 1]
    );
}

#[test]
fn bench_reports_every_field() {
    let dir = tempfile::tempdir().unwrap();
    random_model_file(dir.path());
    let value = json(&succeeds(
        dir.path(),
        &[
            "bench",
            "-m",
            "model.gguf",
            "-p",
            "8",
            "-n",
            "4",
            "-r",
            "2",
            "--json",
        ],
    ));
    for key in [
        "pp_tok_s",
        "pp_tok_s_sd",
        "tg_tok_s",
        "tg_tok_s_sd",
        "mem_bw_gbs",
    ] {
        assert!(
            value[key]
                .as_f64()
                .is_some_and(|v| v.is_finite() && v >= 0.0),
            "{key}: {value}"
        );
    }
    assert!(value["pp_tok_s"].as_f64().unwrap() > 0.0 && value["tg_tok_s"].as_f64().unwrap() > 0.0);
    assert_eq!(
        (value["n_prompt"].as_u64(), value["n_gen"].as_u64()),
        (Some(8), Some(4))
    );
    for key in [
        "threads",
        "model_bytes",
        "peak_rss_bytes",
        "pool_peak_bytes",
        "kv_cache_bytes",
    ] {
        assert!(value[key].as_u64().is_some_and(|v| v > 0), "{key}: {value}");
    }

    let value = json(&succeeds(
        dir.path(),
        &[
            "bench",
            "-m",
            "model.gguf",
            "-p",
            "0",
            "-n",
            "2",
            "-r",
            "1",
            "--json",
        ],
    ));
    assert!(
        value["pp_tok_s"].is_null() && value["pp_tok_s_sd"].is_null(),
        "{value}"
    );
    assert!(value["tg_tok_s"].as_f64().unwrap() > 0.0);

    let table = succeeds(
        dir.path(),
        &["bench", "-m", "model.gguf", "-p", "4", "-n", "0", "-r", "1"],
    );
    assert!(
        table.contains("| pp4 |") && !table.contains("| tg"),
        "{table}"
    );
    assert!(
        table.contains("KV cache:") && table.contains("memory read bandwidth"),
        "{table}"
    );
}

/// A TinyStories-like text (stories260K's own kind of text).
const STORY: &str = "Once upon a time, there was a little girl named Lily. She loved to play outside in \
the park. One day, she saw a big, red ball. She wanted to play with it, so she ran to get it. But the ball \
was too high up in a tree. Lily asked her mom for help. Her mom said, \"Let's get a ladder.\" They got the \
ladder and Lily climbed up to get the ball. She was so happy! She played with the ball all day long. When \
it was time to go home, Lily said thank you to her mom. They went home and had a yummy dinner together. The \
next day, Lily went back to the park with her friend Tom. Tom had a little dog named Max. Max liked to run \
and jump. Lily threw the ball and Max ran after it. They laughed and played until the sun went down.\n";

/// The final estimate from `tempra perplexity`'s stdout.
fn final_ppl(stdout: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Final estimate: PPL = "))
        .expect(stdout);
    line["Final estimate: PPL = ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn perplexity_of_stories260k_on_a_story_is_low() {
    let (Some(ckpt), Some(tok)) = (
        shared_file("models/stories260K/stories260K.bin"),
        shared_file("models/stories260K/tok512.bin"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("story.txt"), STORY).unwrap();
    let (ckpt, tok) = (ckpt.to_str().unwrap(), tok.to_str().unwrap());
    let stdout = succeeds(
        dir.path(),
        &[
            "perplexity",
            "-m",
            ckpt,
            "--tokenizer",
            tok,
            "-f",
            "story.txt",
            "--ctx",
            "64",
        ],
    );
    assert!(
        stdout.starts_with("[1]"),
        "running perplexity first: {stdout}"
    );
    let ppl = final_ppl(&stdout);
    // A trained model on its own kind of text: far below the 512-token vocabulary.
    assert!(ppl > 1.0 && ppl < 10.0, "{ppl}");
}

#[test]
fn perplexity_of_a_random_model_is_near_chance() {
    let dir = tempfile::tempdir().unwrap();
    random_model_file(dir.path());
    std::fs::write(dir.path().join("story.txt"), STORY).unwrap();
    let stdout = succeeds(
        dir.path(),
        &[
            "perplexity",
            "-m",
            "model.gguf",
            "-f",
            "story.txt",
            "--ctx",
            "32",
            "--chunks",
            "3",
        ],
    );
    assert_eq!(
        stdout.matches('[').count(),
        3,
        "one running value per window: {stdout}"
    );
    let ppl = final_ppl(&stdout);
    assert!(ppl.is_finite() && ppl > 20.0, "{ppl}");
}

#[test]
fn bad_input_is_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    random_model_file(d);
    std::fs::write(d.join("short.txt"), "tiny").unwrap();
    fails(
        d,
        &["logits", "-m", "model.gguf", "--tokens", "1,300"],
        "token 300 (at index 1) is outside the vocabulary",
    );
    fails(
        d,
        &["logits", "-m", "model.gguf", "--tokens", "1,x"],
        "invalid value 'x'",
    );
    fails(
        d,
        &["logits", "-m", "model.gguf"],
        "required arguments were not provided",
    );
    fails(
        d,
        &[
            "logits",
            "-m",
            "model.gguf",
            "--tokens",
            "1",
            "--prompt",
            "a",
        ],
        "cannot be used with",
    );
    fails(
        d,
        &[
            "logits",
            "-m",
            "model.gguf",
            "--tokens",
            "1,2,3",
            "--ctx",
            "2",
        ],
        "3 tokens do not fit the context of 2",
    );
    fails(
        d,
        &["logits", "-m", "missing.gguf", "--tokens", "1"],
        "missing.gguf: No such file",
    );
    fails(
        d,
        &["bench", "-m", "model.gguf", "-p", "0", "-n", "0"],
        "nothing to measure",
    );
    fails(
        d,
        &["bench", "-m", "model.gguf", "-p", "8", "--ctx", "4"],
        "--ctx 4 is smaller than the 128 tokens",
    );
    fails(
        d,
        &["bench", "-m", "model.gguf", "-r", "0"],
        "-r must be at least 1",
    );
    fails(
        d,
        &["perplexity", "-m", "model.gguf", "-f", "missing.txt"],
        "missing.txt",
    );
    fails(
        d,
        &[
            "perplexity",
            "-m",
            "model.gguf",
            "-f",
            "short.txt",
            "--ctx",
            "16",
        ],
        "needs at least 32",
    );
    fails(
        d,
        &[
            "perplexity",
            "-m",
            "model.gguf",
            "-f",
            "short.txt",
            "--ctx",
            "2",
        ],
        "too short",
    );
}

/// `tempra bench --json-schema`: decode sampled freely and held to the schema, the mask
/// counts, and every output closed within the budget (the last token ends the output).
#[test]
fn bench_with_a_schema_reports_the_grammar_cost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    random_model_file(d);
    std::fs::write(
        d.join("schema.json"),
        r#"{"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}}, "required": ["n", "ok"], "additionalProperties": false}"#,
    )
    .unwrap();
    let args = [
        "bench",
        "-m",
        "model.gguf",
        "-p",
        "0",
        "-r",
        "2",
        "--json-schema",
        "schema.json",
        "--seed",
        "3",
    ];
    let value = json(&succeeds(d, &[&args[..], &["-n", "24", "--json"]].concat()));
    for key in [
        "sampled_tok_s",
        "constrained_tok_s",
        "choose_us_sampled",
        "choose_us_constrained",
        "mask_us_mean",
    ] {
        assert!(
            value[key]
                .as_f64()
                .is_some_and(|v| v.is_finite() && v > 0.0),
            "{key}: {value}"
        );
    }
    assert!(
        value["constrained_slowdown_percent"]
            .as_f64()
            .is_some_and(f64::is_finite)
    );
    let masks = value["masks_computed"].as_u64().unwrap() + value["masks_cached"].as_u64().unwrap();
    assert!(masks > 0, "{value}");
    // Two timed runs, each closing at least the output its 24-token budget held.
    assert!(
        value["constrained_outputs"].as_u64().unwrap() >= 2,
        "{value}"
    );

    let table = succeeds(d, &[&args[..], &["-n", "24"]].concat());
    assert!(
        table.contains("| tg24 sampled |") && table.contains("| tg24 +grammar |"),
        "{table}"
    );
    assert!(
        table.contains("grammar: ") && table.contains("masks computed"),
        "{table}"
    );
    // The shortest output ({"n":0,"ok":true} and the end token) does not fit 4 tokens.
    fails(
        d,
        &[&args[..], &["-n", "4"]].concat(),
        "the shortest output the grammar allows",
    );
    let mut prompt_only = args.to_vec();
    prompt_only[4] = "8";
    fails(d, &[&prompt_only[..], &["-n", "0"]].concat(), "give -n");
}

#[test]
fn help_texts() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["logits", "bench", "perplexity"] {
        let help = succeeds(dir.path(), &[command, "--help"]);
        insta::assert_snapshot!(format!("{command}_help"), help);
    }
}

/// Issue #28, "same request, same tokens", through `tempra run`: on a block-quantized
/// model the CPU backend is row-invariant however its worker pool splits the work, so
/// the generated text must not depend on `-t`. The random Q4_0 model is large enough
/// for the pool to split its matrices (a quantized product splits one holding two tasks
/// of 64 KiB of weight bytes: at dim 512 and ffn 1536 every matrix but K and V does in
/// decode, and every one in the prompt's prefill).
#[test]
fn run_generates_the_same_text_at_one_two_and_three_threads() {
    let dir = tempfile::tempdir().unwrap();
    let shape =
        ModelShape::parse("dim=512,layers=2,heads=8,kv_heads=2,ffn=1536,vocab=2048,context=128")
            .unwrap();
    let spec = RandomModelSpec::llama(shape)
        .with_qtype(QuantType::Q4_0)
        .with_seed(28);
    std::fs::write(
        dir.path().join("model.gguf"),
        write_random_model(&spec, Vec::new()).unwrap(),
    )
    .unwrap();
    let prompt = "once upon a time there was a quick brown fox who lived by the river";
    let greedy: &[&str] = &["--temp", "0"];
    let seeded: &[&str] = &[
        "--temp", "0.8", "--top-k", "40", "--top-p", "0.9", "--seed", "7",
    ];
    let mut texts = Vec::new();
    for sampling in [greedy, seeded] {
        // (stdout, the generated-token count and the finish reason from stderr)
        let mut runs: Vec<(String, String)> = Vec::new();
        for threads in ["1", "2", "3"] {
            let mut args = vec![
                "run",
                "-m",
                "model.gguf",
                "-p",
                prompt,
                "-n",
                "32",
                "-t",
                threads,
            ];
            args.extend(sampling);
            let out = ok(dir.path(), &args);
            let stdout = String::from_utf8(out.stdout).unwrap();
            let stderr = String::from_utf8(out.stderr).unwrap();
            let summary = stderr
                .lines()
                .find(|l| l.starts_with("prompt: "))
                .unwrap_or_else(|| panic!("no summary line: {stderr}"));
            // "... | generation: N tokens, X tok/s | stop: R": keep N and R.
            let (_, generation) = summary.split_once("generation: ").unwrap();
            let produced = generation.split(" tokens").next().unwrap().to_owned();
            let (_, stop) = summary.split_once("| stop: ").unwrap();
            assert!(
                stdout.starts_with(prompt) && stdout.trim_end().len() > prompt.len(),
                "{sampling:?} -t {threads}: nothing generated: {stdout:?}"
            );
            assert_ne!(produced, "0", "{summary}");
            runs.push((stdout, format!("{produced} tokens, stop {stop}")));
        }
        for (threads, run) in ["2", "3"].iter().zip(&runs[1..]) {
            assert_eq!(
                run, &runs[0],
                "{sampling:?}: -t {threads} differs from -t 1"
            );
        }
        texts.push(runs.swap_remove(0).0);
    }
    // The seed really drives the sampling: not the greedy text.
    assert_ne!(texts[0], texts[1], "the sampled text is the greedy one");
}

/// `tempra run --json-schema` and `--grammar`: the generated text is JSON the schema
/// accepts (or a string of the grammar) however short `-n` is, as long as it fits the
/// shortest output; bad grammars and schemas are one error line naming where.
#[test]
fn run_holds_the_output_to_a_json_schema_or_a_grammar() {
    let dir = tempfile::tempdir().unwrap();
    random_model_file(dir.path());
    let schema = r#"{"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}, "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"], "additionalProperties": false}"#;
    std::fs::write(dir.path().join("schema.json"), schema).unwrap();
    for (n, seed) in [("40", "1"), ("28", "2"), ("200", "3")] {
        let stdout = succeeds(
            dir.path(),
            &[
                "run",
                "-m",
                "model.gguf",
                "-p",
                "x",
                "-n",
                n,
                "--seed",
                seed,
                "--temp",
                "1.5",
                "--json-schema",
                "schema.json",
            ],
        );
        let generated = stdout.strip_prefix('x').unwrap().trim_end_matches('\n');
        let value: serde_json::Value = serde_json::from_str(generated)
            .unwrap_or_else(|e| panic!("-n {n}: {e}: {generated:?}"));
        assert!(
            value["name"].is_string() && value["ok"].is_boolean(),
            "{value}"
        );
        assert!(value["n"].as_u64().is_some_and(|v| v <= 9), "{value}");
        assert_eq!(value.as_object().unwrap().len(), 3, "{value}");
    }
    fails(
        dir.path(),
        &[
            "run",
            "-m",
            "model.gguf",
            "-p",
            "x",
            "-n",
            "10",
            "--json-schema",
            "schema.json",
        ],
        "the shortest output the grammar allows takes",
    );
    std::fs::write(
        dir.path().join("g.gbnf"),
        "root ::= (\"ab\" | [0-9]+) \"!\"\n",
    )
    .unwrap();
    let stdout = succeeds(
        dir.path(),
        &[
            "run",
            "-m",
            "model.gguf",
            "-p",
            "x",
            "-n",
            "12",
            "--grammar",
            "g.gbnf",
            "--seed",
            "4",
        ],
    );
    let generated = stdout.strip_prefix('x').unwrap().trim_end_matches('\n');
    assert!(
        generated == "ab!"
            || (generated.ends_with('!')
                && generated[..generated.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_digit())),
        "{generated:?}"
    );
    std::fs::write(
        dir.path().join("bad.gbnf"),
        "root ::= \"a\"\nitem ::= [a-\n",
    )
    .unwrap();
    fails(
        dir.path(),
        &[
            "run",
            "-m",
            "model.gguf",
            "-p",
            "x",
            "--grammar",
            "bad.gbnf",
        ],
        "grammar line 2, column 11",
    );
    std::fs::write(
        dir.path().join("bad.json"),
        r#"{"type": "string", "format": "date", "not": {}}"#,
    )
    .unwrap();
    fails(
        dir.path(),
        &[
            "run",
            "-m",
            "model.gguf",
            "-p",
            "x",
            "--json-schema",
            "bad.json",
        ],
        "JSON schema at `#/not`",
    );
}
