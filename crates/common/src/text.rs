//! Text from the user shown back to the user.

use std::borrow::Cow;

/// `text` with every control character escaped as `\u{1b}` except those in `keep` (a
/// message's own `\n` and `\t`): C0 and C1 controls, DEL, and the bidirectional overrides
/// and isolates that reorder what a terminal shows. An error that echoes a name from a
/// file or a flag (a tenant called `"\u001b[2J"`) then shows it as written, and cannot
/// clear the screen, recolour it or hide text.
pub fn escape_controls<'a>(text: &'a str, keep: &str) -> Cow<'a, str> {
    let escaped = |c: char| {
        (c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'))
            && !keep.contains(c)
    };
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::escape_controls;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_controls("plain ünïcode", ""), "plain ünïcode");
        assert_eq!(
            escape_controls("a\u{1b}[31mred\u{7}\u{9b}\u{202e}x", ""),
            "a\\u{1b}[31mred\\u{7}\\u{9b}\\u{202e}x"
        );
        assert_eq!(
            escape_controls("two\nlines\tand\r", "\n\t"),
            "two\nlines\tand\\u{d}"
        );
    }
}
