//! Collects every error of one expansion so the user sees all of them at once.

/// The errors found so far, combined into one on the way out.
#[derive(Default)]
pub(crate) struct Errors {
    first: Option<syn::Error>,
}

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    pub(crate) fn into_result(self) -> Result<(), syn::Error> {
        self.first.map_or(Ok(()), Err)
    }
}
