//! Browser safety: which `Host` and `Origin` headers the server answers, and CORS for
//! the origins it is told to trust.
//!
//! - `Host` (DNS rebinding: a page on `evil.example` whose name the attacker re-points
//!   at 127.0.0.1 reaches the server with `Host: evil.example`): an IP address (v4 or
//!   `[v6]`, any port; no rebinding page can have one as its name), `localhost` or a
//!   name under `.localhost`, or a name given with `--allowed-host` (`*.example.com`
//!   for its subdomains, `*` for any) is answered; any other name gets 403. A request
//!   without `Host` (HTTP/1.0 tools) is answered.
//! - `Origin` (sent by browsers on cross-origin requests and on every POST): a request
//!   that carries one is answered only when it is one of `--cors-origin` (or that is
//!   `*`); otherwise 403, whatever its method or `Content-Type` (the "simple" requests
//!   that skip the CORS preflight included). Requests without `Origin` (curl, SDKs)
//!   are not affected.
//! - For an allowed origin, responses carry `Access-Control-Allow-Origin` (and `Vary:
//!   Origin`), and a preflight (`OPTIONS` with `Access-Control-Request-Method`) gets
//!   204 with the allowed methods, the requested headers, a max age, and Private
//!   Network Access's `Access-Control-Allow-Private-Network` when asked for. No
//!   credentials (cookies) are involved: API keys travel in `Authorization`.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};

use crate::error::{LlmError, Result};
use crate::server::errors::ApiError;

/// The methods a preflight is told the server accepts.
const ALLOW_METHODS: &str = "GET, POST, OPTIONS";
/// How long a browser may cache a preflight answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

/// A `--allowed-host` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostRule {
    /// `*`: any host.
    Any,
    /// One name.
    Exact(String),
    /// `*.example.com`: names ending in `.example.com`.
    Subdomains(String),
}

/// The `Host` and `Origin` rules of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BrowserPolicy {
    hosts: Vec<HostRule>,
    any_origin: bool,
    origins: Vec<String>,
}

/// What to add to the response of a request from an allowed origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cors {
    allow_origin: HeaderValue,
    vary: bool,
}

impl BrowserPolicy {
    /// The policy for `--cors-origin` values `cors_origins` and `--allowed-host` values
    /// `allowed_hosts`.
    ///
    /// Errors: an origin that is not `*` or `scheme://host[:port]`, or a host that is not
    /// a name (`*`, `name`, `*.name`).
    pub(crate) fn new(cors_origins: &[String], allowed_hosts: &[String]) -> Result<BrowserPolicy> {
        let mut policy = BrowserPolicy {
            hosts: Vec::new(),
            any_origin: false,
            origins: Vec::new(),
        };
        for origin in cors_origins {
            if origin == "*" {
                policy.any_origin = true;
            } else {
                policy.origins.push(normalize_origin(origin)?);
            }
        }
        for host in allowed_hosts {
            policy.hosts.push(host_rule(host)?);
        }
        Ok(policy)
    }

    /// Whether the request's `Host` may be answered (see the module doc), or a 403.
    pub(crate) fn check_host(&self, headers: &HeaderMap) -> std::result::Result<(), ApiError> {
        let Some(value) = headers.get(header::HOST) else {
            return Ok(());
        };
        let host = value.to_str().ok().and_then(host_name);
        let allowed = host.as_ref().is_some_and(|h| self.host_allowed(h));
        if allowed {
            return Ok(());
        }
        let shown = String::from_utf8_lossy(value.as_bytes()).into_owned();
        Err(ApiError::forbidden(
            "host_not_allowed",
            format!(
                "requests for the host `{shown}` are refused (DNS rebinding protection); start the server with --allowed-host NAME for the names clients use"
            ),
        ))
    }

    fn host_allowed(&self, host: &Host) -> bool {
        let name = match host {
            Host::Ip => return true,
            Host::Name(name) => name,
        };
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        self.hosts.iter().any(|rule| match rule {
            HostRule::Any => true,
            HostRule::Exact(n) => n == name,
            HostRule::Subdomains(suffix) => {
                name.len() > suffix.len() + 1
                    && name.ends_with(suffix.as_str())
                    && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
            }
        })
    }

    /// The CORS headers for the request's `Origin`: `Ok(None)` without one, `Ok(Some)`
    /// for an allowed one, a 403 for any other.
    pub(crate) fn check_origin(
        &self,
        headers: &HeaderMap,
    ) -> std::result::Result<Option<Cors>, ApiError> {
        let Some(value) = headers.get(header::ORIGIN) else {
            return Ok(None);
        };
        if self.any_origin {
            return Ok(Some(Cors {
                allow_origin: HeaderValue::from_static("*"),
                vary: false,
            }));
        }
        let origin = value
            .to_str()
            .ok()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase());
        if let Some(origin) = origin.filter(|o| self.origins.contains(o)) {
            return Ok(Some(Cors {
                allow_origin: HeaderValue::from_str(&origin).unwrap_or_else(|_| value.clone()),
                vary: true,
            }));
        }
        let shown = String::from_utf8_lossy(value.as_bytes()).into_owned();
        Err(ApiError::forbidden(
            "origin_not_allowed",
            format!(
                "cross-origin requests from `{shown}` are refused; start the server with --cors-origin {shown} to allow that web page"
            ),
        ))
    }
}

/// Whether a request is a CORS preflight.
pub(crate) fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS
        && headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

impl Cors {
    /// The answer to a preflight from this origin.
    pub(crate) fn preflight(&self, request: &HeaderMap) -> Response<Body> {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        self.decorate(response.headers_mut());
        let h = response.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        if let Some(asked) = request.get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
            h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
        }
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE),
        );
        let private_network = request
            .get("access-control-request-private-network")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        if private_network {
            h.insert(
                "access-control-allow-private-network",
                HeaderValue::from_static("true"),
            );
        }
        for vary in [
            "access-control-request-method",
            "access-control-request-headers",
        ] {
            h.append(header::VARY, HeaderValue::from_static(vary));
        }
        response
    }

    /// Adds `Access-Control-Allow-Origin` (and `Vary: Origin`) to a response.
    pub(crate) fn decorate(&self, headers: &mut HeaderMap) {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            self.allow_origin.clone(),
        );
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("retry-after"),
        );
        if self.vary {
            headers.append(header::VARY, HeaderValue::from_static("origin"));
        }
    }
}

/// A `Host` header's host, without the port.
#[derive(Debug, PartialEq, Eq)]
enum Host {
    /// An IP address.
    Ip,
    /// A name, lower case, without a trailing dot.
    Name(String),
}

fn host_name(value: &str) -> Option<Host> {
    let value = value.trim();
    if let Some(rest) = value.strip_prefix('[') {
        let (ip, port) = rest.split_once(']')?;
        ip.parse::<Ipv6Addr>().ok()?;
        return (port.is_empty() || is_port(port.strip_prefix(':')?)).then_some(Host::Ip);
    }
    let name = match value.rsplit_once(':') {
        Some((name, port)) if is_port(port) => name,
        Some(_) => return None,
        None => value,
    };
    if name.parse::<Ipv4Addr>().is_ok() {
        return Some(Host::Ip);
    }
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    valid.then_some(Host::Name(name))
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

fn host_rule(host: &str) -> Result<HostRule> {
    let bad = || LlmError::Argument {
        what: format!(
            "--allowed-host `{host}`: give a host name (`api.example.com`), `*.example.com` for its subdomains, or `*`, without scheme or port"
        ),
    };
    if host == "*" {
        return Ok(HostRule::Any);
    }
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    match host_name(name) {
        Some(Host::Name(n)) if !name.contains(':') => Ok(if wildcard {
            HostRule::Subdomains(n)
        } else {
            HostRule::Exact(n)
        }),
        _ => Err(bad()),
    }
}

fn normalize_origin(origin: &str) -> Result<String> {
    let bad = || LlmError::Argument {
        what: format!(
            "--cors-origin `{origin}`: give an origin as a browser sends it (`https://app.example.com`, `http://localhost:3000`), or `*`"
        ),
    };
    let trimmed = origin.trim_end_matches('/');
    let (scheme, rest) = trimmed.split_once("://").ok_or_else(bad)?;
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
    let rest_ok = !rest.is_empty()
        && !rest.contains('/')
        && rest.bytes().all(|b| b.is_ascii_graphic())
        && !rest.contains(['?', '#', '@']);
    if !scheme_ok || !rest_ok {
        return Err(bad());
    }
    Ok(trimmed.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("header"));
        h
    }

    #[test]
    fn hosts_ip_localhost_and_allowed_names() {
        let policy = BrowserPolicy::new(&[], &["api.example.com".into(), "*.corp.example".into()])
            .expect("policy");
        for ok in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[fe80::1]",
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:3000",
            "api.example.com",
            "API.Example.com.:443",
            "a.corp.example",
            "x.y.corp.example",
        ] {
            assert_eq!(policy.check_host(&with(header::HOST, ok)), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "corp.example",
            "xcorp.example",
            "api.example.com.evil",
            "127.0.0.1.nip.io",
            "localhost.evil",
            "[::1",
            "host:port",
            "",
        ] {
            let err = policy.check_host(&with(header::HOST, bad)).expect_err(bad);
            assert_eq!(err.status, StatusCode::FORBIDDEN, "{bad}");
            assert_eq!(err.code, Some("host_not_allowed"));
        }
        assert_eq!(policy.check_host(&HeaderMap::new()), Ok(()));
        let any = BrowserPolicy::new(&[], &["*".into()]).expect("policy");
        assert_eq!(any.check_host(&with(header::HOST, "evil.example")), Ok(()));
    }

    #[test]
    fn origins_are_refused_unless_allowed() {
        let none = BrowserPolicy::new(&[], &[]).expect("policy");
        assert_eq!(none.check_origin(&HeaderMap::new()), Ok(None));
        let err = none
            .check_origin(&with(header::ORIGIN, "https://evil.example"))
            .expect_err("refused");
        assert_eq!(err.code, Some("origin_not_allowed"));
        assert!(none.check_origin(&with(header::ORIGIN, "null")).is_err());

        let some = BrowserPolicy::new(&["https://App.example.com/".into()], &[]).expect("policy");
        let cors = some
            .check_origin(&with(header::ORIGIN, "https://app.example.com"))
            .expect("allowed")
            .expect("cors");
        let mut h = HeaderMap::new();
        cors.decorate(&mut h);
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example.com"
        );
        assert_eq!(h[header::VARY], "origin");
        assert!(
            some.check_origin(&with(header::ORIGIN, "http://app.example.com"))
                .is_err()
        );
        assert!(
            some.check_origin(&with(header::ORIGIN, "https://app.example.com:8443"))
                .is_err()
        );

        let any = BrowserPolicy::new(&["*".into()], &[]).expect("policy");
        let cors = any
            .check_origin(&with(header::ORIGIN, "https://whoever.example"))
            .expect("allowed")
            .expect("cors");
        let preflight = {
            let mut req = with(header::ORIGIN, "https://whoever.example");
            req.insert(
                header::ACCESS_CONTROL_REQUEST_METHOD,
                HeaderValue::from_static("POST"),
            );
            req.insert(
                header::ACCESS_CONTROL_REQUEST_HEADERS,
                HeaderValue::from_static("authorization, content-type"),
            );
            req.insert(
                "access-control-request-private-network",
                HeaderValue::from_static("true"),
            );
            assert!(is_preflight(&Method::OPTIONS, &req));
            assert!(!is_preflight(&Method::POST, &req));
            cors.preflight(&req)
        };
        assert_eq!(preflight.status(), StatusCode::NO_CONTENT);
        let h = preflight.headers();
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_HEADERS],
            "authorization, content-type"
        );
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], ALLOW_METHODS);
        assert_eq!(h["access-control-allow-private-network"], "true");
    }

    #[test]
    fn bad_settings_are_errors() {
        for origin in [
            "example.com",
            "https://",
            "https://a.example/path",
            "https://a b",
            "null",
        ] {
            assert!(
                BrowserPolicy::new(&[origin.into()], &[]).is_err(),
                "{origin}"
            );
        }
        for host in ["http://a.example", "a.example:80", "", "*.", "a/b"] {
            assert!(BrowserPolicy::new(&[], &[host.into()]).is_err(), "{host}");
        }
    }
}
