//! The board's write actions: what a form `POST`ed to `/act/VERB` asks for ([`Action`], read
//! from the form by [`Action::from_form`], which refuses a missing or malformed field before
//! any board is touched), and how the [`crate::Source`] answers ([`ActionDone`],
//! [`ActionError`]). The runtime carries each action out with the same library call as the
//! matching CLI command.
//!
//! The guards every write passes first (the token, the `Origin`, the per-session CSRF token, the
//! body's size) are [`crate::http`]'s; this file only reads fields.

/// The verbs of `/act/VERB`, in the order the task page offers them.
pub const VERBS: [&str; 12] = [
    "create",
    "promote",
    "unblock",
    "block",
    "archive",
    "reopen",
    "schedule",
    "reassign",
    "reclaim",
    "comment",
    "attach",
    "decompose",
];

/// Longest title, assignee or reason accepted from a form (bytes).
pub const MAX_LINE: usize = 1024;

/// One write asked for by a form. `id` is a task id (or a unique prefix, as on the CLI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `kanban create TITLE [--body B] [--assignee P] [--priority N] [--triage]`.
    Create {
        title: String,
        body: Option<String>,
        assignee: Option<String>,
        priority: i64,
        triage: bool,
    },
    /// `kanban promote ID`.
    Promote { id: String },
    /// `kanban unblock ID [--reason R]`.
    Unblock { id: String, reason: Option<String> },
    /// `kanban block ID REASON` as an operator (no run expected).
    Block { id: String, reason: String },
    /// `kanban archive ID`.
    Archive { id: String },
    /// `kanban reopen ID [--reason R]`.
    Reopen { id: String, reason: Option<String> },
    /// `kanban schedule ID --in DURATION | --at TIME`: `when` is the text of either (a
    /// duration such as `30m`, or a time), read by the runtime with the CLI's parsers.
    Schedule {
        id: String,
        when: String,
        reason: Option<String>,
    },
    /// `kanban reassign ID PROFILE [--reclaim]`.
    Reassign {
        id: String,
        profile: String,
        reclaim: bool,
    },
    /// `kanban reclaim ID [--reason R]`.
    Reclaim { id: String, reason: Option<String> },
    /// `kanban comment ID TEXT`.
    Comment { id: String, body: String },
    /// `kanban attach ID FILE`: the file's name and bytes as uploaded.
    Attach {
        id: String,
        filename: String,
        data: Vec<u8>,
    },
    /// `kanban decompose ID --children JSON [--root-assignee P] [--no-promote]`.
    Decompose {
        id: String,
        children: String,
        root_assignee: Option<String>,
        promote: bool,
    },
}

impl Action {
    /// The verb of `/act/VERB` this action is posted to.
    pub fn verb(&self) -> &'static str {
        match self {
            Action::Create { .. } => "create",
            Action::Promote { .. } => "promote",
            Action::Unblock { .. } => "unblock",
            Action::Block { .. } => "block",
            Action::Archive { .. } => "archive",
            Action::Reopen { .. } => "reopen",
            Action::Schedule { .. } => "schedule",
            Action::Reassign { .. } => "reassign",
            Action::Reclaim { .. } => "reclaim",
            Action::Comment { .. } => "comment",
            Action::Attach { .. } => "attach",
            Action::Decompose { .. } => "decompose",
        }
    }

    /// Reads the action of `verb` from a url-encoded form's fields; a missing, blank, repeated,
    /// too long or malformed field is an [`ActionError::Invalid`] naming it. `attach` is not a
    /// url-encoded form (see [`Action::from_upload`]).
    pub fn from_form(verb: &str, form: &Form) -> Result<Action, ActionError> {
        let id = || form.required("id");
        Ok(match verb {
            "create" => Action::Create {
                title: form.required("title")?,
                body: form.multiline("body", usize::MAX)?,
                assignee: form.line_field("assignee")?,
                priority: match form.line_field("priority")? {
                    None => 0,
                    Some(p) => p.parse::<i64>().map_err(|_| {
                        ActionError::Invalid(format!(
                            "priority {p:?} is not a whole number (e.g. 0, 5 or -1)"
                        ))
                    })?,
                },
                triage: form.flag("triage")?,
            },
            "promote" => Action::Promote { id: id()? },
            "unblock" => Action::Unblock {
                id: id()?,
                reason: form.line_field("reason")?,
            },
            "block" => Action::Block {
                id: id()?,
                reason: form.required("reason")?,
            },
            "archive" => Action::Archive { id: id()? },
            "reopen" => Action::Reopen {
                id: id()?,
                reason: form.line_field("reason")?,
            },
            "schedule" => Action::Schedule {
                id: id()?,
                when: form.required("when")?,
                reason: form.line_field("reason")?,
            },
            "reassign" => Action::Reassign {
                id: id()?,
                profile: form.required("profile")?,
                reclaim: form.flag("reclaim")?,
            },
            "reclaim" => Action::Reclaim {
                id: id()?,
                reason: form.line_field("reason")?,
            },
            "comment" => Action::Comment {
                id: id()?,
                body: form
                    .multiline("body", usize::MAX)?
                    .ok_or_else(|| ActionError::Invalid("the comment is empty".to_owned()))?,
            },
            "decompose" => Action::Decompose {
                id: id()?,
                children: form.multiline("children", usize::MAX)?.ok_or_else(|| {
                    ActionError::Invalid(
                        "the children are empty: give a JSON list such as [{\"title\": \"…\"}]"
                            .to_owned(),
                    )
                })?,
                root_assignee: form.line_field("root_assignee")?,
                promote: !form.flag("no_promote")?,
            },
            "attach" => {
                return Err(ActionError::Invalid(
                    "attach takes a multipart/form-data upload with a `file` field".to_owned(),
                ));
            }
            other => {
                return Err(ActionError::NotFound(format!(
                    "no action {other:?}; the actions are {}",
                    VERBS.join(", ")
                )));
            }
        })
    }

    /// The attach action from a multipart form's parts: `id` and one non-empty `file`.
    pub fn from_upload(parts: &[Part]) -> Result<Action, ActionError> {
        let field =
            |name: &str| -> Vec<&Part> { parts.iter().filter(|p| p.name == name).collect() };
        let id = match field("id").as_slice() {
            [one] => String::from_utf8(one.data.clone())
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty() && s.len() <= MAX_LINE)
                .ok_or_else(|| ActionError::Invalid("the field `id` is not a task id".into()))?,
            [] => return Err(ActionError::Invalid("the field `id` is missing".into())),
            _ => return Err(ActionError::Invalid("the field `id` is given twice".into())),
        };
        let file = match field("file").as_slice() {
            [one] => *one,
            [] => return Err(ActionError::Invalid("no file was uploaded".into())),
            _ => return Err(ActionError::Invalid("give one file at a time".into())),
        };
        let filename = file
            .filename
            .clone()
            .filter(|f| !f.trim().is_empty())
            .ok_or_else(|| ActionError::Invalid("choose a file to attach".into()))?;
        Ok(Action::Attach {
            id,
            filename,
            data: file.data.clone(),
        })
    }

    /// The task the action is about (`None` for `create`).
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Action::Create { .. } => None,
            Action::Promote { id }
            | Action::Unblock { id, .. }
            | Action::Block { id, .. }
            | Action::Archive { id }
            | Action::Reopen { id, .. }
            | Action::Schedule { id, .. }
            | Action::Reassign { id, .. }
            | Action::Reclaim { id, .. }
            | Action::Comment { id, .. }
            | Action::Attach { id, .. }
            | Action::Decompose { id, .. } => Some(id),
        }
    }
}

/// What an action did: the task to show next and a line saying what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDone {
    pub task_id: String,
    pub message: String,
}

/// Why an action did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionError {
    /// A field is missing or malformed (400).
    Invalid(String),
    /// No such board, task or action (404).
    NotFound(String),
    /// The board refused the transition: wrong status, a race, unfinished parents (409).
    Refused(String),
    /// The board could not be written (500).
    Failed(String),
}

impl ActionError {
    /// The HTTP status and reason phrase of the answer.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            ActionError::Invalid(_) => (400, "Bad Request"),
            ActionError::NotFound(_) => (404, "Not Found"),
            ActionError::Refused(_) => (409, "Conflict"),
            ActionError::Failed(_) => (500, "Internal Server Error"),
        }
    }

    /// The message shown.
    pub fn message(&self) -> &str {
        match self {
            ActionError::Invalid(m)
            | ActionError::NotFound(m)
            | ActionError::Refused(m)
            | ActionError::Failed(m) => m,
        }
    }
}

/// A url-encoded form's fields, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Form(pub Vec<(String, String)>);

impl Form {
    /// Parses `application/x-www-form-urlencoded` (`+` is a space, `%XX` strict, UTF-8);
    /// `None` when it is malformed.
    pub fn parse(body: &[u8]) -> Option<Form> {
        let text = std::str::from_utf8(body).ok()?;
        let mut fields = Vec::new();
        for pair in text.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            fields.push((percent_decode(k, true)?, percent_decode(v, true)?));
        }
        Some(Form(fields))
    }

    /// The one value of `name` (`None` when absent); given twice is refused.
    pub fn single(&self, name: &str) -> Result<Option<&str>, ActionError> {
        let mut values = self.0.iter().filter(|(k, _)| k == name).map(|(_, v)| v);
        let first = values.next();
        if values.next().is_some() {
            return Err(ActionError::Invalid(format!(
                "the field `{name}` is given twice"
            )));
        }
        Ok(first.map(String::as_str))
    }

    /// A one-line field, trimmed; blank is `None`. Longer than [`MAX_LINE`] or with a control
    /// character is refused.
    pub fn line_field(&self, name: &str) -> Result<Option<String>, ActionError> {
        let Some(value) = self.single(name)? else {
            return Ok(None);
        };
        let value = value.trim();
        if value.len() > MAX_LINE {
            return Err(ActionError::Invalid(format!(
                "the field `{name}` is longer than {MAX_LINE} bytes"
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(ActionError::Invalid(format!(
                "the field `{name}` must be one line of text"
            )));
        }
        Ok((!value.is_empty()).then(|| value.to_owned()))
    }

    /// A one-line field that must be given.
    pub fn required(&self, name: &str) -> Result<String, ActionError> {
        self.line_field(name)?
            .ok_or_else(|| ActionError::Invalid(format!("the field `{name}` is required")))
    }

    /// A multi-line text field (a body, a comment, JSON); blank is `None`. Line ends are kept.
    pub fn multiline(&self, name: &str, max: usize) -> Result<Option<String>, ActionError> {
        let Some(value) = self.single(name)? else {
            return Ok(None);
        };
        if value.len() > max {
            return Err(ActionError::Invalid(format!(
                "the field `{name}` is too long"
            )));
        }
        let value = value.replace("\r\n", "\n");
        Ok((!value.trim().is_empty()).then_some(value))
    }

    /// A checkbox: absent is `false`; `1`, `on` or `true` is `true`; anything else is refused.
    pub fn flag(&self, name: &str) -> Result<bool, ActionError> {
        match self.single(name)? {
            None => Ok(false),
            Some("1" | "on" | "true") => Ok(true),
            Some(other) => Err(ActionError::Invalid(format!(
                "the field `{name}` is a checkbox; {other:?} is not on or off"
            ))),
        }
    }
}

/// Decodes `%XX` and `+` (in query strings); `None` for a `%` not followed by two hex digits or
/// invalid UTF-8.
pub fn percent_decode(text: &str, plus_is_space: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(i, &b)| {
        b != b'%'
            || bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return None;
    }
    let spaced;
    let text = if plus_is_space {
        spaced = text.replace('+', " ");
        spaced.as_str()
    } else {
        text
    };
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(std::borrow::Cow::into_owned)
}

/// One part of a `multipart/form-data` body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub filename: Option<String>,
    pub data: Vec<u8>,
}

/// The boundary of a `multipart/form-data` Content-Type; `None` when it has none.
pub fn multipart_boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("boundary") {
            return None;
        }
        let v = v.trim().trim_matches('"');
        (!v.is_empty() && v.len() <= 70).then(|| v.to_owned())
    })
}

/// Splits a `multipart/form-data` body (RFC 7578) into its parts; `None` when it is malformed
/// (no closing boundary, a part without a `Content-Disposition: form-data; name=…`).
pub fn parse_multipart(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut rest = body.strip_prefix(delimiter.as_slice())?;
    let next_delimiter = [b"\r\n".as_slice(), &delimiter].concat();
    let mut parts = Vec::new();
    loop {
        if rest.starts_with(b"--") {
            return Some(parts);
        }
        rest = rest.strip_prefix(b"\r\n")?;
        let head_end = find(rest, b"\r\n\r\n")?;
        let head = std::str::from_utf8(&rest[..head_end]).ok()?;
        let content = &rest[head_end + 4..];
        let end = find(content, &next_delimiter)?;
        let (name, filename) = disposition(head)?;
        parts.push(Part {
            name,
            filename,
            data: content[..end].to_vec(),
        });
        rest = &content[end + next_delimiter.len()..];
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The `name` and `filename` of a part's `Content-Disposition: form-data` header.
fn disposition(head: &str) -> Option<(String, Option<String>)> {
    let line = head.split("\r\n").find(|l| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("content-disposition"))
    })?;
    let (_, value) = line.split_once(':')?;
    let mut params = value.split(';');
    if !params.next()?.trim().eq_ignore_ascii_case("form-data") {
        return None;
    }
    let mut name = None;
    let mut filename = None;
    for p in params {
        let Some((k, v)) = p.trim().split_once('=') else {
            continue;
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v)
            .to_owned();
        match k.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(v),
            "filename" => filename = Some(v),
            _ => {}
        }
    }
    Some((name?, filename))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(text: &str) -> Form {
        Form::parse(text.as_bytes()).expect("form")
    }

    #[test]
    fn forms_decode_and_bad_fields_are_refused_by_name() {
        let f = form("title=Fix+the+%3Cparser%3E&priority=3&triage=on&body=a%0D%0Ab");
        assert_eq!(
            Action::from_form("create", &f),
            Ok(Action::Create {
                title: "Fix the <parser>".into(),
                body: Some("a\nb".into()),
                assignee: None,
                priority: 3,
                triage: true,
            })
        );
        let err = |verb: &str, text: &str| match Action::from_form(verb, &form(text)) {
            Err(ActionError::Invalid(m)) => m,
            other => panic!("{verb} {text}: {other:?}"),
        };
        assert!(err("create", "title=x&priority=high").contains("priority"));
        assert!(err("create", "title=+").contains("`title` is required"));
        assert!(err("create", "title=a&title=b").contains("twice"));
        assert!(err("create", "title=a&triage=maybe").contains("checkbox"));
        assert!(err("block", "id=t_1").contains("`reason` is required"));
        assert!(err("block", "id=t_1&reason=a%0Ab").contains("one line"));
        assert!(err("comment", "id=t_1&body=+").contains("empty"));
        assert!(matches!(
            Action::from_form("explode", &form("id=t_1")),
            Err(ActionError::NotFound(_))
        ));
        assert_eq!(Form::parse(b"a=%zz"), None);
        assert_eq!(Form::parse(&[0xff]), None);
    }

    #[test]
    fn multipart_bodies_split_into_parts_with_their_file_names() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\nt_1\r\n\
--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\n\
Content-Type: text/plain\r\n\r\nline\r\nmore\r\n--XyZ--\r\n";
        let boundary = multipart_boundary("multipart/form-data; boundary=XyZ").expect("boundary");
        let parts = parse_multipart(body, &boundary).expect("parts");
        assert_eq!(
            Action::from_upload(&parts),
            Ok(Action::Attach {
                id: "t_1".into(),
                filename: "notes.txt".into(),
                data: b"line\r\nmore".to_vec(),
            })
        );
        assert_eq!(parse_multipart(b"--XyZ\r\nno end", "XyZ"), None);
        assert_eq!(multipart_boundary("text/plain; boundary=x"), None);
    }
}
