//! API keys: who may call the server (`Authorization: Bearer KEY`, compared in constant
//! time against every key) and how many generation requests each key may have running
//! or queued at once.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, header};

use crate::error::{LlmError, Result};
use crate::server::errors::ApiError;

/// A secret the server accepts as `Authorization: Bearer KEY`. Its `Debug` form hides
/// it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key `text`: at least one character, printable ASCII without spaces (what an
    /// HTTP header can carry).
    ///
    /// Errors: [`LlmError::Argument`] naming what is wrong (never the key itself).
    pub fn new(text: impl Into<String>) -> Result<ApiKey> {
        let text = text.into();
        if text.is_empty() {
            return Err(LlmError::Argument {
                what: "an API key cannot be empty".into(),
            });
        }
        if let Some(bad) = text.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(LlmError::Argument {
                what: format!(
                    "an API key must be printable ASCII without spaces (character {} of a {}-character key is not)",
                    bad + 1,
                    text.len()
                ),
            });
        }
        Ok(ApiKey(text))
    }

    /// The key's text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<hidden>)")
    }
}

/// Who made a request: the index of the API key it presented (`None` when the server
/// has no keys or the path is open).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    /// Index into the server's keys.
    pub(crate) key: Option<usize>,
}

/// The server's keys.
#[derive(Debug)]
pub(crate) struct KeyCheck {
    keys: Vec<ApiKey>,
}

impl KeyCheck {
    /// A check against `keys` (none: every request passes).
    pub(crate) fn new(keys: Vec<ApiKey>) -> KeyCheck {
        KeyCheck { keys }
    }

    /// The caller a request's `Authorization` header names, or a 401.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> std::result::Result<Caller, ApiError> {
        if self.keys.is_empty() {
            return Ok(Caller::default());
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .and_then(bearer_token);
        let Some(presented) = presented else {
            return Err(ApiError::unauthorized(
                "this server needs an API key: send the header `Authorization: Bearer YOUR_KEY`",
            ));
        };
        // Every key is compared in full, whatever the outcome.
        let mut found = usize::MAX;
        for (i, key) in self.keys.iter().enumerate().rev() {
            let equal = usize::from(constant_time_eq(key.0.as_bytes(), presented));
            found = (found & !equal.wrapping_neg()) | (i & equal.wrapping_neg());
        }
        if found == usize::MAX {
            return Err(ApiError::unauthorized("incorrect API key provided"));
        }
        Ok(Caller { key: Some(found) })
    }
}

/// The token of `Bearer TOKEN` (scheme case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Whether `a == b`, in a time that depends only on the longer length.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// Per-key limits on generation requests running or queued at once.
#[derive(Debug)]
pub(crate) struct KeyLimits {
    limit: Option<usize>,
    in_flight: Vec<AtomicUsize>,
}

/// One request's share of its key's limit, given back on drop (when its response ends
/// or its client goes away).
#[derive(Debug)]
pub(crate) struct KeyPermit {
    limits: Arc<KeyLimits>,
    key: usize,
}

impl Drop for KeyPermit {
    fn drop(&mut self) {
        self.limits.in_flight[self.key].fetch_sub(1, Ordering::AcqRel);
    }
}

impl KeyLimits {
    /// At most `limit` requests per key for `keys` keys (`None`: no limit).
    pub(crate) fn new(keys: usize, limit: Option<usize>) -> KeyLimits {
        KeyLimits {
            limit,
            in_flight: (0..keys).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// A permit for `caller`'s key, `None` when there is nothing to count, or a 429.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        caller: Caller,
    ) -> std::result::Result<Option<KeyPermit>, ApiError> {
        let (Some(limit), Some(key)) = (self.limit, caller.key) else {
            return Ok(None);
        };
        let Some(count) = self.in_flight.get(key) else {
            return Ok(None);
        };
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .map_err(|_| {
                ApiError::rate_limited(format!(
                    "this API key already has {limit} requests running or queued (the server's limit per key); retry later"
                ))
            })?;
        Ok(Some(KeyPermit {
            limits: Arc::clone(self),
            key,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(authorization: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = authorization {
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(a).expect("header"),
            );
        }
        h
    }

    #[test]
    fn bearer_keys_are_checked_against_every_key() {
        let check = KeyCheck::new(vec![
            ApiKey::new("sk-one").expect("key"),
            ApiKey::new("sk-two").expect("key"),
        ]);
        assert_eq!(
            check
                .authenticate(&headers(Some("Bearer sk-two")))
                .map(|c| c.key),
            Ok(Some(1))
        );
        assert_eq!(
            check
                .authenticate(&headers(Some("bearer  sk-one ")))
                .map(|c| c.key),
            Ok(Some(0))
        );
        for bad in [
            None,
            Some("Bearer"),
            Some("Bearer "),
            Some("Basic sk-one"),
            Some("Bearer sk-on"),
            Some("Bearer sk-one1"),
        ] {
            let err = check.authenticate(&headers(bad)).expect_err("refused");
            assert_eq!(err.status, axum::http::StatusCode::UNAUTHORIZED, "{bad:?}");
            assert_eq!(err.code, Some("invalid_api_key"));
        }
        let open = KeyCheck::new(Vec::new());
        assert_eq!(open.authenticate(&headers(None)), Ok(Caller::default()));
    }

    #[test]
    fn constant_time_eq_compares_lengths_and_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abc\0"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn keys_are_validated_and_hidden() {
        assert!(ApiKey::new("").is_err());
        assert!(ApiKey::new("has space").is_err());
        assert!(ApiKey::new("tab\t").is_err());
        let key = ApiKey::new("sk-secret").expect("key");
        assert!(!format!("{key:?}").contains("secret"));
        assert_eq!(key.expose(), "sk-secret");
    }

    #[test]
    fn per_key_limits_count_and_release() {
        let limits = Arc::new(KeyLimits::new(2, Some(1)));
        let a = Caller { key: Some(0) };
        let first = limits.acquire(a).expect("first").expect("permit");
        let err = limits.acquire(a).expect_err("second");
        assert_eq!(err.status, axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(
            limits
                .acquire(Caller { key: Some(1) })
                .expect("other key")
                .is_some()
        );
        drop(first);
        assert!(limits.acquire(a).expect("again").is_some());
        let unlimited = Arc::new(KeyLimits::new(2, None));
        assert!(unlimited.acquire(a).expect("no limit").is_none());
    }
}
