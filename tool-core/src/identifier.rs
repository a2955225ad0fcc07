//! What a name that decides must be: an identifier, compared exactly as it was given, with
//! nothing in it that a reader cannot see. `agent`, `Agent`, `agent ` and `agent` followed by a
//! zero-width space read alike on a screen and are four names to a comparison; only the first is
//! an identifier.

/// Why `name` is not an identifier, or `None` when it is: not empty, and no whitespace, control
/// character or character that is invisible by definition (Unicode's default-ignorable code
/// points: zero-width spaces and joiners, bidirectional marks, variation selectors, the soft
/// hyphen and the like).
///
/// ```
/// use toolgate::identity::identifier_flaw;
///
/// assert_eq!(identifier_flaw("agent2"), None);
/// assert_eq!(identifier_flaw("ana.lópez@acme"), None);
/// assert_eq!(identifier_flaw("agent "), Some("it holds whitespace"));
/// assert_eq!(identifier_flaw("agent\u{200b}"), Some("it holds an invisible character"));
/// assert_eq!(identifier_flaw(""), Some("it is empty"));
/// ```
pub fn identifier_flaw(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    name.chars().find_map(|c| {
        if c.is_whitespace() {
            Some("it holds whitespace")
        } else if c.is_control() {
            Some("it holds a control character")
        } else if is_default_ignorable(c) {
            Some("it holds an invisible character")
        } else {
            None
        }
    })
}

/// Unicode's `Default_Ignorable_Code_Point` (DerivedCoreProperties.txt, Unicode 16): characters
/// shown as nothing at all.
fn is_default_ignorable(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF0..=0xFFF8
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_look_alike_are_refused_and_plain_ones_pass() {
        for plain in [
            "agent",
            "Agent",
            "agent2",
            "ops-1",
            "ana.lópez@acme",
            "審査員",
        ] {
            assert_eq!(identifier_flaw(plain), None, "{plain:?}");
        }
        for (name, flaw) in [
            ("", "it is empty"),
            ("agent ", "it holds whitespace"),
            (" agent", "it holds whitespace"),
            ("a\u{00a0}gent", "it holds whitespace"),
            ("agent\t", "it holds whitespace"),
            ("agent\u{0}", "it holds a control character"),
            ("agent\u{7f}", "it holds a control character"),
            ("agent\u{200b}", "it holds an invisible character"),
            ("age\u{200d}nt", "it holds an invisible character"),
            ("\u{feff}agent", "it holds an invisible character"),
            ("agent\u{2066}", "it holds an invisible character"),
            ("agent\u{ad}", "it holds an invisible character"),
            ("agent\u{e0041}", "it holds an invisible character"),
        ] {
            assert_eq!(identifier_flaw(name), Some(flaw), "{name:?}");
        }
    }
}
