//! Text from the board (titles, bodies, comments, summaries: agents write them) made safe for a
//! terminal. Human output passes every stored string through [`line`] or [`block`], so an ESC
//! sequence, a BEL, a carriage return or a newline in a title can neither drive the terminal nor
//! forge another line of output; `--json` prints the exact text (JSON escapes it itself).

use std::borrow::Cow;

/// `text` on one line: every control character (newlines and tabs too) and every bidirectional
/// formatting character is written as a visible escape (`\n`, `\r`, `\t`, `\x1b`, `\u{202e}`).
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// A multi-line `text` (a body): newlines and tabs are kept, every other control or bidirectional
/// formatting character is escaped, and each continuation line is indented by two spaces so that
/// the body cannot pass for the lines printed around it.
pub(crate) fn block(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape(text: &str, multi_line: bool) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' if multi_line => out.push_str("\n  "),
            '\t' if multi_line => out.push('\t'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && u32::from(c) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(line("plain title"), "plain title");
        assert!(matches!(line("plain"), Cow::Borrowed(_)));
        assert_eq!(
            line("a\u{1b}[31mred\u{7}\r\nfake\tline"),
            "a\\x1b[31mred\\x07\\r\\nfake\\tline"
        );
        assert_eq!(line("\u{9b}2J \u{202e}evil"), "\\u{9b}2J \\u{202e}evil");
        assert_eq!(line("\u{7f}"), "\\x7f");
    }

    #[test]
    fn a_block_keeps_its_lines_indented_and_escapes_the_rest() {
        assert_eq!(block("one\ntwo\tx"), "one\n  two\tx");
        assert_eq!(block("x\u{1b}]0;title\u{7}\r"), "x\\x1b]0;title\\x07\\r");
        for text in ["a\u{1b}b", "c\rd\ne\u{7}"] {
            let out = block(text);
            assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        }
    }
}
