//! "Did you mean" for misspelt keys and values.

use proc_macro2::Span;

/// The error for a key `found` where one of `valid` was expected in `context`, suggesting the
/// nearest.
pub(crate) fn unknown_key(span: Span, found: &str, valid: &[&str], context: &str) -> syn::Error {
    let list = valid
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let message = match nearest(found, valid) {
        Some(best) => format!(
            "unknown key `{found}` in {context}: did you mean `{best}`? the keys are {list}"
        ),
        None => format!("unknown key `{found}` in {context}; the keys are {list}"),
    };
    syn::Error::new(span, message)
}

/// The error for the string value `found` of `key` where one of `valid` was expected, suggesting
/// the nearest as the user would write it.
pub(crate) fn unknown_value(span: Span, key: &str, found: &str, valid: &[&str]) -> syn::Error {
    let list = valid
        .iter()
        .map(|v| format!("`\"{v}\"`"))
        .collect::<Vec<_>>()
        .join(", ");
    let lowered = found.trim().to_lowercase();
    let message = match nearest(&lowered, valid) {
        Some(best) => format!(
            "unknown {key} `\"{found}\"`: did you mean `{key} = \"{best}\"`? the values are {list}"
        ),
        None => format!("unknown {key} `\"{found}\"`; the values are {list}"),
    };
    syn::Error::new(span, message)
}

/// The valid word closest to `found`, if it is close enough to be a likely typo. A word that
/// `found` begins (`approval` of `approval_over`) comes first, the first such in `valid`'s order;
/// then the nearest by edits.
pub(crate) fn nearest<'a>(found: &str, valid: &[&'a str]) -> Option<&'a str> {
    valid
        .iter()
        .map(|candidate| (distance(found, candidate), *candidate))
        .filter(|(d, candidate)| {
            *d <= candidate.len().max(found.len()) / 2
                || candidate.contains(found) && found.len() >= 3
        })
        .min_by_key(|(d, candidate)| {
            let begins = found.len() >= 3 && candidate.starts_with(found);
            if begins { 0 } else { d + 1 }
        })
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_nearest_key() {
        let keys = &crate::keys::names(crate::keys::Level::Top);
        assert_eq!(nearest("sideeffect", keys), Some("side_effect"));
        assert_eq!(nearest("timout", keys), Some("timeout"));
        assert_eq!(nearest("permisson", keys), Some("permission"));
        assert_eq!(nearest("approval", keys), Some("approval_over"));
        assert_eq!(nearest("approve", keys), Some("approver"));
        assert_eq!(nearest("approval_tll", keys), Some("approval_ttl"));
        assert_eq!(nearest("chek", keys), Some("check"));
        assert_eq!(nearest("zzzzzzzz", keys), None);
    }
}
