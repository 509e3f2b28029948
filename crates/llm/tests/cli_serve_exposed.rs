//! `tempra serve` as a process: SIGTERM with a request half sent (the drain, then exit),
//! SIGTERM while the model loads (exit 0),
//! running out of file descriptors, API keys from the environment and a file, and the
//! curl examples of `docs/serving.md` (run with curl when it is installed, else sent as
//! the same requests).
#![cfg(all(feature = "cli", feature = "server", unix))]

mod cli_helpers;
#[allow(dead_code)]
#[path = "server/http_client.rs"]
mod http_client;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cli_helpers::{fails, random_model_file as model_file};
use http_client::{request_with, until_closed};

/// What every server of these tests runs with, after `-m MODEL`.
const SERVE_ARGS: [&str; 6] = ["--port", "0", "--ctx", "64", "-t", "1"];

/// A `tempra serve` process and the address it printed.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command` (a `tempra serve` command line) and waits for its address.
fn serve(mut command: Command) -> Serve {
    let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut banner = Vec::new();
    let addr = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the server exited: {banner:?}"
        );
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
        banner.push(line);
    };
    // Keep reading stderr so that the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    Serve { child, addr }
}

fn tempra_serve(model: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tempra"));
    command
        .args(["serve", "-m", model.to_str().unwrap()])
        .args(SERVE_ARGS)
        .args(args)
        .env_remove("TEMPRA_API_KEY");
    command
}

/// The value of the metric line `name value`.
fn metric(addr: SocketAddr, name: &str) -> f64 {
    let text = request_with(addr, "GET", "/metrics", &[], None)
        .unwrap()
        .body;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Sends SIGTERM to `child`.
fn sigterm(child: &Child) {
    // SAFETY: `kill` with a child's pid and SIGTERM has no memory effects here.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
}

/// `child`'s exit status, once it exits before `deadline`.
fn exit_status(child: &mut Child, deadline: Instant) -> std::process::ExitStatus {
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection whose request body stops half way: a request in progress.
fn half_sent_body(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\": ")
        .unwrap();
    stream
}

/// Waits until the server counts a half-sent request busy (the metrics request is the
/// other busy connection).
fn wait_until_busy(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(addr, "tempra_http_connections_busy") < 2.0 {
        assert!(
            Instant::now() < deadline,
            "the half-sent request never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_with_a_half_sent_request_exits_after_the_drain_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(dir.path());
    let drain = Duration::from_secs(1);
    let mut server = serve(tempra_serve(
        &model,
        &[
            "--drain-timeout",
            "1",
            "--body-timeout",
            "60",
            "--header-timeout",
            "60",
        ],
    ));
    let addr = server.addr;
    // A request whose body stops half way (in progress), and a head that stops half way.
    let mut body_half = half_sent_body(addr);
    let mut head_half = TcpStream::connect(addr).unwrap();
    head_half
        .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    wait_until_busy(addr);
    let signalled = Instant::now();
    sigterm(&server.child);
    // Both are closed at the end of the drain without an answer: the request in
    // progress, and the half-sent head, which could still have become a request.
    assert!(until_closed(&mut head_half).unwrap().is_empty());
    assert!(until_closed(&mut body_half).unwrap().is_empty());
    let status = exit_status(&mut server.child, signalled + Duration::from_secs(60));
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= drain,
        "exited after {:?}, before the drain timeout",
        signalled.elapsed()
    );
}

/// A second signal cuts a drain short: with a request in progress and a drain timeout
/// of a minute, the second SIGTERM ends the process at once.
#[test]
fn a_second_sigterm_cuts_the_drain_short() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(dir.path());
    let mut server = serve(tempra_serve(
        &model,
        &["--drain-timeout", "60", "--body-timeout", "60"],
    ));
    let addr = server.addr;
    let mut body_half = half_sent_body(addr);
    wait_until_busy(addr);
    sigterm(&server.child);
    // Draining: the request in progress holds the process.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "exited on the first signal with a request in progress"
    );
    let second = Instant::now();
    sigterm(&server.child);
    let status = exit_status(&mut server.child, second + Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert!(until_closed(&mut body_half).unwrap().is_empty());
}

#[test]
fn sigterm_while_the_model_loads_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    // Opening a FIFO for reading waits for a writer: the load is held until SIGTERM.
    let fifo = dir.path().join("model.gguf");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_tempra"));
    command
        .args(["serve", "-m", fifo.to_str().unwrap(), "-t", "1", "--port"])
        .arg(port.to_string())
        .env_remove("TEMPRA_API_KEY");
    let mut server = Serve {
        child: command.stderr(Stdio::piped()).spawn().unwrap(),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let health = loop {
        match request_with(server.addr, "GET", "/health", &[], None) {
            Ok(reply) => break reply,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("never answered: {e}"),
        }
    };
    assert_eq!(health.status, 503, "{}", health.body);
    assert_eq!(
        health.json().unwrap()["status"],
        "loading",
        "{}",
        health.body
    );
    sigterm(&server.child);
    let status = exit_status(&mut server.child, deadline);
    assert!(status.success(), "{status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut server.child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("stopped while loading"), "{stderr}");
}

#[test]
fn out_of_file_descriptors_idle_connections_make_room_for_health() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(dir.path());
    // 64 descriptors for the process; the connection cap (512) is never reached, so
    // `accept` fails for lack of descriptors and the oldest idle connection must go.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_tempra"))
        .args(["serve", "-m", model.to_str().unwrap()])
        .args(SERVE_ARGS)
        .args(["--header-timeout", "60"]);
    let server = serve(command);
    let idle: Vec<TcpStream> = (0..80)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    let health = request_with(server.addr, "GET", "/health", &[], None).unwrap();
    assert_eq!(health.status, 200, "{}", health.body);
    let evicted = metric(
        server.addr,
        "tempra_http_connections_closed_total{reason=\"evicted\"}",
    );
    assert!(evicted >= 16.0, "{evicted} evicted");
    drop(idle);
}

#[test]
fn api_keys_come_from_flags_the_environment_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(dir.path());
    let file = dir.path().join("keys.txt");
    std::fs::write(&file, "# team keys\nsk-file-one\n\n  sk-file-two  \n").unwrap();
    let mut command = tempra_serve(
        &model,
        &[
            "--api-key",
            "sk-flag",
            "--api-key-file",
            file.to_str().unwrap(),
        ],
    );
    command.env("TEMPRA_API_KEY", "sk-env");
    let server = serve(command);
    for key in ["sk-flag", "sk-env", "sk-file-one", "sk-file-two"] {
        let auth = format!("Bearer {key}");
        let reply = request_with(
            server.addr,
            "GET",
            "/v1/models",
            &[("Authorization", &auth)],
            None,
        )
        .unwrap();
        assert_eq!(reply.status, 200, "{key}");
    }
    for auth in ["Bearer # team keys", "Bearer sk-other"] {
        let reply = request_with(
            server.addr,
            "GET",
            "/v1/models",
            &[("Authorization", auth)],
            None,
        )
        .unwrap();
        assert_eq!(reply.status, 401, "{auth}");
    }
    drop(server);
    // Bad settings are one-line errors that name what is wrong.
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let model = model.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["--api-key-file", empty.to_str().unwrap()],
            "no API keys",
        ),
        (vec!["--api-key", "has space"], "printable ASCII"),
        (vec!["--api-key-concurrency", "2"], "--api-key-concurrency"),
        (
            vec!["--cors-origin", "example.com"],
            "--cors-origin `example.com`",
        ),
        (
            vec!["--allowed-host", "http://x.example"],
            "--allowed-host `http://x.example`",
        ),
        (vec!["--allow-role", "a b"], "the role `a b`"),
    ] {
        let mut all = vec!["serve", "-m", model];
        all.extend(SERVE_ARGS);
        all.extend(args);
        fails(dir.path(), &all, needle);
    }
    let out = tempra_serve(Path::new(model), &["--header-timeout", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`soon` is not a duration"));
}

/// A curl command line of the doc, split into words as a shell would (quotes, and
/// `$TEMPRA_API_KEY`).
fn shell_words(line: &str, key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                words.extend(word.take());
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                for c in chars.by_ref().take_while(|&c| c != '\'') {
                    w.push(c);
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                let mut quoted = String::new();
                for c in chars.by_ref().take_while(|&c| c != '"') {
                    quoted.push(c);
                }
                w.push_str(&quoted.replace("$TEMPRA_API_KEY", key));
            }
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The commands of the doc's sh blocks: each with its continuation lines joined and its
/// trailing `# comment` apart.
fn doc_commands(doc: &str) -> Vec<(String, String)> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let (code, comment) = match line.split_once("  # ") {
            Some((code, comment)) => (code.trim_end(), comment.trim()),
            None => (line.trim_end(), ""),
        };
        match code.strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(code);
                commands.push((std::mem::take(&mut pending), comment.to_owned()));
            }
        }
    }
    commands
}

#[test]
fn the_exposing_examples_of_the_docs_work() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/serving.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let commands = doc_commands(&doc);
    let key = commands
        .iter()
        .find_map(|(c, _)| c.strip_prefix("export TEMPRA_API_KEY="))
        .expect("the example exports TEMPRA_API_KEY")
        .to_owned();
    let (start, _) = commands
        .iter()
        .find(|(c, _)| c.starts_with("tempra serve "))
        .expect("the example starts the server");
    let dir = tempfile::tempdir().unwrap();
    let model = model_file(dir.path());
    // The doc's command line, on this model and an ephemeral loopback port.
    let mut args = shell_words(start, &key);
    for (flag, value) in [
        ("-m", model.to_str().unwrap()),
        ("--port", "0"),
        ("--host", "127.0.0.1"),
    ] {
        let at = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("{flag} in {start}"));
        args[at + 1] = value.to_owned();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_tempra"));
    command
        .args(&args[1..])
        .args(["--ctx", "64", "-t", "1"])
        .env("TEMPRA_API_KEY", &key);
    let server = serve(command);
    let curl_installed = Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let curls: Vec<_> = commands
        .iter()
        .filter(|(c, _)| c.starts_with("curl "))
        .collect();
    assert!(curls.len() >= 8, "{curls:?}");
    for (line, comment) in curls {
        let want: u16 = comment
            .split(|c: char| !c.is_ascii_digit())
            .find(|w| w.len() == 3)
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no status in the comment of {line}"));
        let needle = comment
            .split_whitespace()
            .nth(1)
            .filter(|w| !w.ends_with(':'));
        let words: Vec<String> = shell_words(line, &key)
            .into_iter()
            .map(|w| w.replace("127.0.0.1:8080", &server.addr.to_string()))
            .collect();
        let (status, body) = if curl_installed {
            run_curl(&words[1..])
        } else {
            send_as_curl(server.addr, &words[1..])
        };
        assert_eq!(status, want, "{line}: {body}");
        if let Some(needle) = needle.filter(|n| n.contains('_') || n.contains('[')) {
            assert!(body.contains(needle), "{line}: {body}");
        }
    }
}

/// Runs curl with `args`; its status and body.
fn run_curl(args: &[String]) -> (u16, String) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("curl")
        .args(args)
        .args([
            "-sS",
            "-o",
            body.path().to_str().unwrap(),
            "-w",
            "%{http_code}",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (status, std::fs::read_to_string(body.path()).unwrap())
}

/// Sends the request curl `args` describe (`-X`, `-H`, `-d`, the URL); its status and
/// body.
fn send_as_curl(addr: SocketAddr, args: &[String]) -> (u16, String) {
    let mut method = None;
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut data = None;
    let mut path = None;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "-s" | "-sS" | "-i" | "-N" => {}
            "-X" => method = words.next().cloned(),
            "-H" => {
                let (name, value) = words.next().unwrap().split_once(':').unwrap();
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
            "-d" => data = words.next().cloned(),
            url => {
                let rest = url
                    .strip_prefix("http://")
                    .unwrap_or_else(|| panic!("{url}"));
                path = Some(rest[rest.find('/').unwrap()..].to_owned());
            }
        }
    }
    let method = method.unwrap_or_else(|| if data.is_some() { "POST" } else { "GET" }.to_owned());
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let reply = request_with(addr, &method, &path.unwrap(), &headers, data.as_deref()).unwrap();
    (reply.status, reply.body)
}
