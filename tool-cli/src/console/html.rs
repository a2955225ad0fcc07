//! The markup the console writes. Markup enters an [`Html`] only as `&'static str`, written in
//! this crate; every other value (an argument a model chose, a reason an operator typed, a name
//! from a token, anything read from the store) enters through [`Html::text`] or [`Html::query`],
//! which escape it. A value cannot reach a page unescaped without a change to this file.

use std::fmt::Write as _;

/// A piece of a page.
#[derive(Debug, Default)]
pub(crate) struct Html(String);

impl Html {
    /// Nothing yet.
    pub(crate) fn new() -> Html {
        Html(String::with_capacity(4096))
    }

    /// `markup`, as written: only text of this crate's own.
    pub(crate) fn raw(&mut self, markup: &'static str) -> &mut Html {
        self.0.push_str(markup);
        self
    }

    /// `value` as text: `&`, `<`, `>`, `"` and `'` escaped, so it is text in an element and in a
    /// quoted attribute alike.
    pub(crate) fn text(&mut self, value: &str) -> &mut Html {
        for c in value.chars() {
            match c {
                '&' => self.0.push_str("&amp;"),
                '<' => self.0.push_str("&lt;"),
                '>' => self.0.push_str("&gt;"),
                '"' => self.0.push_str("&quot;"),
                '\'' => self.0.push_str("&#39;"),
                c => self.0.push(c),
            }
        }
        self
    }

    /// `value`, a number, as text.
    pub(crate) fn number(&mut self, value: impl std::fmt::Display) -> &mut Html {
        let mut text = String::new();
        let _ = write!(text, "{value}");
        self.text(&text)
    }

    /// `value` as one value of a URL's query, percent-encoded, then escaped for the attribute
    /// it is written in.
    pub(crate) fn query(&mut self, value: &str) -> &mut Html {
        let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
        self.text(&encoded)
    }

    /// A table cell holding `value` as text.
    pub(crate) fn cell(&mut self, value: &str) -> &mut Html {
        self.raw("<td>").text(value).raw("</td>")
    }

    /// A table cell holding `value` as code.
    pub(crate) fn code_cell(&mut self, value: &str) -> &mut Html {
        self.raw("<td><code>").text(value).raw("</code></td>")
    }

    /// `other`, appended.
    pub(crate) fn append(&mut self, other: Html) -> &mut Html {
        self.0.push_str(&other.0);
        self
    }

    /// The hidden field every form carries: the session's CSRF token.
    pub(crate) fn csrf_field(&mut self, csrf: &str) -> &mut Html {
        self.raw(r#"<input type="hidden" name="csrf" value=""#)
            .text(csrf)
            .raw(r#"">"#)
    }

    /// A hidden field `name` (markup of this crate's) holding `value`.
    pub(crate) fn hidden(&mut self, name: &'static str, value: &str) -> &mut Html {
        self.raw(r#"<input type="hidden" name=""#)
            .raw(name)
            .raw(r#"" value=""#)
            .text(value)
            .raw(r#"">"#)
    }

    /// The markup.
    pub(crate) fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_in_elements_and_attributes() {
        let mut html = Html::new();
        html.raw("<p title=\"")
            .text(r#""><script>alert('x')</script>&"#)
            .raw("\">")
            .text("<script>")
            .raw("</p>");
        assert_eq!(
            html.into_string(),
            "<p title=\"&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;\">&lt;script&gt;</p>"
        );
    }

    #[test]
    fn a_query_value_is_percent_encoded_then_escaped() {
        let mut html = Html::new();
        html.raw("<a href=\"/audit?run=")
            .query("r 1&key=\"x\"")
            .raw("\">");
        assert_eq!(
            html.into_string(),
            "<a href=\"/audit?run=r+1%26key%3D%22x%22\">"
        );
    }
}
