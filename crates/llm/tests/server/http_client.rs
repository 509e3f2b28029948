//! A minimal HTTP/1.1 client over `TcpStream` (one request per connection), enough to
//! drive the server: JSON bodies, chunked responses and server-sent events.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};

/// A response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Reply {
    /// The body as JSON.
    pub(crate) fn json(&self) -> anyhow::Result<serde_json::Value> {
        serde_json::from_str(&self.body).with_context(|| format!("body: {}", self.body))
    }

    /// A header's value.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `data:` payloads of a server-sent-event body.
    pub(crate) fn sse_data(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
            .map(str::to_owned)
            .collect()
    }
}

/// Writes a request on a fresh connection and returns the stream.
pub(crate) fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
) -> anyhow::Result<TcpStream> {
    send_with(addr, method, path, &[], body)
}

/// [`send`] with extra headers; a `Host` or `Content-Type` among them replaces the
/// default one.
pub(crate) fn send_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let body = body.unwrap_or_default();
    let given = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !given("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    if !given("content-type") {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()?;
    Ok(stream)
}

/// A request with extra headers on a fresh connection, and its whole response.
pub(crate) fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> anyhow::Result<Reply> {
    read_reply(send_with(
        addr,
        method,
        path,
        headers,
        body.map(str::as_bytes),
    )?)
}

/// Sends a request and reads the whole response.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<Reply> {
    request_with(addr, method, path, &[], body)
}

/// `POST path` with a JSON body.
pub(crate) fn post(
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
) -> anyhow::Result<Reply> {
    request(addr, "POST", path, Some(&body.to_string()))
}

/// `GET path`.
pub(crate) fn get(addr: SocketAddr, path: &str) -> anyhow::Result<Reply> {
    request(addr, "GET", path, None)
}

/// Reads the status line and headers of a response.
pub(crate) fn read_head(reader: &mut impl BufRead) -> anyhow::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .context("no status")?
        .parse()?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').context("bad header")?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok((status, headers))
}

/// Waits for the server to close `stream` (up to 30 s) and returns what it sent before
/// closing; an error if it is still open.
pub(crate) fn until_closed(stream: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
                ) =>
            {
                return Ok(got);
            }
            Err(e) => bail!("the server did not close the connection: {e}"),
        }
    }
}

/// Reads one chunk of a chunked body (`None` at the last chunk).
pub(crate) fn read_chunk(reader: &mut impl BufRead) -> anyhow::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let size =
        usize::from_str_radix(line.trim(), 16).with_context(|| format!("chunk size {line:?}"))?;
    let mut data = vec![0; size + 2];
    reader.read_exact(&mut data)?;
    data.truncate(size);
    Ok((size > 0).then_some(data))
}

/// Reads one whole response from `stream`.
pub(crate) fn read_reply(stream: impl Read) -> anyhow::Result<Reply> {
    let mut reader = BufReader::new(stream);
    read_reply_from(&mut reader)
}

/// Reads one whole response from `reader`, leaving what follows it (keep-alive).
pub(crate) fn read_reply_from(reader: &mut impl BufRead) -> anyhow::Result<Reply> {
    let reader = &mut *reader;
    let (status, headers) = read_head(reader)?;
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(reader)? {
            body.extend(chunk);
        }
    } else if let Some((_, len)) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        body.resize(len.parse()?, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    let Ok(body) = String::from_utf8(body) else {
        bail!("the body is not UTF-8");
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}
