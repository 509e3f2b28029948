//! `tempra chat` and `tempra serve` through the binary: a piped conversation, a server
//! that answers on an ephemeral port, the KV-slot memory guard, and their help texts.
#![cfg(all(feature = "cli", feature = "server"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tempra_llm::chat::{ChatMessage, ChatTemplate};
use tempra_llm::engine::{Generation, LoadOptions, Model, Sampler, SamplerConfig, StopConditions};
use tempra_llm::testing::{ModelShape, RandomModelSpec, write_random_model};
use tempra_llm::tokenizer::TokenizeOptions;

fn random_model_file(dir: &Path) -> PathBuf {
    let shape = ModelShape::parse("dim=64,layers=2,heads=4,kv_heads=2,ffn=128,vocab=300").unwrap();
    let bytes =
        write_random_model(&RandomModelSpec::llama(shape).with_seed(5), Vec::new()).unwrap();
    let path = dir.join("story-model.gguf");
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn chat_reads_stdin_and_streams_replies_with_the_template() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_model_file(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tempra"))
        .args([
            "chat",
            "-m",
            path.to_str().unwrap(),
            "-n",
            "6",
            "--temp",
            "0",
            "--ctx",
            "256",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello there\n\nhow are you\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no chat template; using ChatML"),
        "{stderr}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();

    // Each reply is what the engine generates for the rendered conversation so far.
    let model = Model::load(
        &path,
        &LoadOptions {
            context_length: Some(256),
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let template = ChatTemplate::from_metadata(model.file().metadata(), model.vocab()).unwrap();
    let reply_to = |history: &[ChatMessage]| -> String {
        let text = template.render(history, true).unwrap();
        let prompt = model.vocab().tokenize(
            &text,
            TokenizeOptions {
                add_special: true,
                parse_special: true,
            },
        );
        let mut session = model.session().unwrap();
        let stop = StopConditions {
            max_tokens: Some(6),
            stop_strings: template.stop_strings(),
            ignore_eog: false,
        };
        let mut generation = Generation::new(
            &mut session,
            &prompt,
            Sampler::new(SamplerConfig::greedy()),
            stop,
        )
        .unwrap();
        let mut reply = String::new();
        for piece in generation.by_ref() {
            reply.push_str(&piece.unwrap().text);
        }
        reply.push_str(&generation.take_remaining_text());
        reply
    };
    let mut history = vec![ChatMessage::new("user", "hello there")];
    let first = reply_to(&history);
    history.push(ChatMessage::new("assistant", first.trim()));
    history.push(ChatMessage::new("user", "how are you"));
    let second = reply_to(&history);
    assert_eq!(stdout, format!("{first}\n{second}\n"));
}

#[test]
fn serve_answers_on_an_ephemeral_port() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_model_file(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tempra"))
        .args([
            "serve",
            "-m",
            path.to_str().unwrap(),
            "--port",
            "0",
            "--kv-slots",
            "2",
            "--ctx",
            "64",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited"
        );
    }
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");
    assert!(line.contains("2 slots"), "{line}");
    let mut stream = TcpStream::connect(&addr).unwrap();
    stream
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"id\":\"story-model\""), "{response}");
}

#[test]
fn serve_refuses_slots_that_do_not_fit_with_the_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let path = random_model_file(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_tempra"))
        .args([
            "serve",
            "-m",
            path.to_str().unwrap(),
            "--port",
            "0",
            "--kv-slots",
            "1000000000",
            "--ctx",
            "256",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("warning: a debug build"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    // 2 layers x 256 positions x 2 KV heads x (16 + 16) values x 2 bytes = 65536 B a slot.
    assert!(
        lines[0].contains("not enough memory for 1000000000 KV slots: 1000000000 x 65536 B (context 256 positions of 256 B)"),
        "{stderr}"
    );
}

#[test]
fn help_texts() {
    for command in ["serve", "chat"] {
        let out = Command::new(env!("CARGO_BIN_EXE_tempra"))
            .args([command, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success());
        insta::assert_snapshot!(
            format!("{command}_help"),
            String::from_utf8(out.stdout).unwrap()
        );
    }
}
