//! How many calls of each tool of a turn may run: [`Admission::granted`](super::Admission).

use std::fmt;
use std::ops::Deref;

/// A turn's grants: for each tool of the turn, in the order of
/// [`TurnRequest::tools`](super::TurnRequest), how many of its calls may run.
///
/// It reads as a slice of `u32` (it derefs to `[u32]`) and compares equal to any list of the
/// same numbers. A turn of one or two tools (nearly every turn) keeps its grants inline, without
/// a heap allocation.
///
/// ```
/// use toolgate::store::Grants;
///
/// let grants: Grants = [2, 1].into_iter().collect();
/// assert_eq!(grants, [2, 1]);
/// assert_eq!(grants[0], 2);
/// assert_eq!(Grants::from(vec![3, 0, 1]).iter().sum::<u32>(), 4);
/// ```
#[derive(Clone, Default, Eq)]
pub struct Grants(smallvec::SmallVec<[u32; 2]>);

impl Grants {
    /// The grants, as a slice.
    pub fn as_slice(&self) -> &[u32] {
        &self.0
    }
}

impl Deref for Grants {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &self.0
    }
}

impl FromIterator<u32> for Grants {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Grants(iter.into_iter().collect())
    }
}

impl From<Vec<u32>> for Grants {
    fn from(grants: Vec<u32>) -> Self {
        Grants(smallvec::SmallVec::from_vec(grants))
    }
}

impl<const N: usize> From<[u32; N]> for Grants {
    fn from(grants: [u32; N]) -> Self {
        grants.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Grants {
    type Item = &'a u32;
    type IntoIter = std::slice::Iter<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Debug for Grants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl PartialEq for Grants {
    fn eq(&self, other: &Grants) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl PartialEq<[u32]> for Grants {
    fn eq(&self, other: &[u32]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<[u32; N]> for Grants {
    fn eq(&self, other: &[u32; N]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<Vec<u32>> for Grants {
    fn eq(&self, other: &Vec<u32>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_compare_by_their_numbers_however_they_are_held() {
        let inline: Grants = [2, 1].into();
        let from_heap = Grants::from(vec![2, 1]);
        assert_eq!(inline, from_heap);
        assert_eq!(inline, vec![2, 1]);
        assert_ne!(inline, Grants::from([2, 1, 0]));
        assert_eq!(format!("{inline:?}"), "[2, 1]");
        let many: Grants = (0..5).collect();
        assert_eq!(many.as_slice(), [0, 1, 2, 3, 4]);
        assert_eq!(Grants::default(), [0u32; 0]);
    }
}
