//! What Anthropic's grammar for strict tools compiles of a regular expression.

/// Whether Anthropic's grammar compiles the regular expression `pattern`: it takes anchors,
/// quantifiers, character classes and groups, but no backreference (`\1`, `\k<name>`), no
/// lookahead or lookbehind (`(?=`, `(?!`, `(?<=`, `(?<!`) and no word boundary (`\b`, `\B`).
/// Where in doubt (an escape inside a character class), the pattern counts as not compiled,
/// which only drops it.
pub(super) fn grammar_takes_pattern(pattern: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    let mut in_class = false;
    let mut index = 0;
    while index < chars.len() {
        match chars[index] {
            '\\' => {
                if matches!(chars.get(index + 1), Some('1'..='9' | 'k' | 'b' | 'B')) {
                    return false;
                }
                // The escaped character is not read as syntax.
                index += 1;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class && chars.get(index + 1) == Some(&'?') => {
                if matches!(chars[index + 2..], ['=' | '!', ..] | ['<', '=' | '!', ..]) {
                    return false;
                }
            }
            _ => {}
        }
        index += 1;
    }
    true
}
