//! Secrets redacted from review handoffs before they are stored (the original's
//! `redact_review_value`, which forces its `redact_sensitive_text` over every string of a review
//! summary, reason and metadata): a review handoff is read by another profile, so a token an
//! implementer pasted must not reach it.
//!
//! What is recognised: tokens with a known secret prefix (`sk-`, `ghp_`, `github_pat_`, `xoxb-`,
//! `AKIA`, `glpat-`, `AIza` …), the credential after `Bearer` / `Basic`, and the value of a
//! `key=value` or `key: value` whose key names a password, secret, token or API key. Each is
//! replaced by [`REDACTED`]. Pure text work, no I/O.

use serde_json::Value;

/// What a redacted secret is replaced by.
pub const REDACTED: &str = "[REDACTED]";

/// Prefixes of well-known credential formats, with the shortest tail that makes one a secret.
const SECRET_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 12),
    ("sk_live_", 8),
    ("sk_test_", 8),
    ("rk_live_", 8),
    ("ghp_", 16),
    ("gho_", 16),
    ("ghs_", 16),
    ("ghu_", 16),
    ("ghr_", 16),
    ("github_pat_", 16),
    ("glpat-", 12),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("AKIA", 12),
    ("AIza", 20),
    ("hf_", 16),
];

/// Key names whose value is a secret (compared lowercased, as a substring).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "api-key",
    "access_key",
    "private_key",
    "credential",
];

/// `value` with every string in it redacted (objects and arrays walked; other values kept).
pub fn redact_review_value(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(redact_text(s)),
        Value::Array(items) => Value::Array(items.iter().map(redact_review_value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if is_secret_key(k) && !v.is_null() {
                        Value::String(REDACTED.to_owned())
                    } else {
                        redact_review_value(v)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_KEYS.iter().any(|k| key.contains(k))
}

/// Whether `c` may be part of a credential token.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+' | '=')
}

fn is_secret_token(token: &str) -> bool {
    SECRET_PREFIXES.iter().any(|(prefix, tail)| {
        token
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.len() >= *tail)
    })
}

/// `text` with its secrets replaced by [`REDACTED`].
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // What the previous word was: a scheme (`Bearer`) or a secret key (`password=`, `token:`)
    // makes the next token a secret.
    let mut next_is_secret = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if !token_char(c) {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            if !(c.is_whitespace() || matches!(c, ':' | '=' | '"' | '\'')) {
                next_is_secret = false;
            }
            continue;
        }
        let end = rest.find(|c: char| !token_char(c)).unwrap_or(rest.len());
        let (token, after) = rest.split_at(end);
        // `key=value` in one token.
        if let Some((key, value)) = token.split_once('=')
            && is_secret_key(key)
            && !value.is_empty()
        {
            out.push_str(key);
            out.push('=');
            out.push_str(REDACTED);
            next_is_secret = false;
        } else if next_is_secret || is_secret_token(token) {
            out.push_str(REDACTED);
            next_is_secret = false;
        } else {
            out.push_str(token);
            let word = token.trim_end_matches('=').to_ascii_lowercase();
            next_is_secret = word == "bearer"
                || word == "basic"
                || (is_secret_key(&word) && after.starts_with([':', '=', '"', '\'']));
            // `Authorization: Bearer x`: the header name itself is not the secret.
            if word == "authorization" {
                next_is_secret = false;
            }
        }
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_tokens_schemes_and_secret_keys_are_redacted() {
        assert_eq!(
            redact_text("used ghp_abcdefghijklmnopqrstuvwxyz0123 to push"),
            "used [REDACTED] to push"
        );
        assert_eq!(
            redact_text("Authorization: Bearer abc.def-ghi"),
            "Authorization: Bearer [REDACTED]"
        );
        assert_eq!(redact_text("password=hunter2 ok"), "password=[REDACTED] ok");
        assert_eq!(redact_text("api_key: 12345"), "api_key: [REDACTED]");
        assert_eq!(redact_text("token=\"xyz\""), "token=\"[REDACTED]\"");
        assert_eq!(
            redact_text("plain words, sk-short"),
            "plain words, sk-short"
        );
    }

    #[test]
    fn values_are_walked_and_secret_keys_masked() {
        let v = serde_json::json!({
            "auth": "Bearer s3cr3t",
            "api_token": "abc",
            "list": ["sk-0123456789abcdef", 3],
            "n": 1
        });
        assert_eq!(
            redact_review_value(&v),
            serde_json::json!({
                "auth": "Bearer [REDACTED]",
                "api_token": "[REDACTED]",
                "list": ["[REDACTED]", 3],
                "n": 1
            })
        );
    }
}
