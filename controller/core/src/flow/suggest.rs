//! "Did you mean": the known name a mistyped one is a slip of the keyboard
//! away from, for the validator's and the linter's hints and for typed
//! references.

/// The name among `names` closest to `wrong`, if it is close enough to be
/// a slip of the keyboard: one edit for names of four characters or fewer,
/// two for longer ones.
pub(crate) fn closest<'n>(wrong: &str, names: impl Iterator<Item = &'n str>) -> Option<&'n str> {
    let close_enough = if wrong.chars().count() <= 4 { 1 } else { 2 };
    names
        .filter(|k| !k.is_empty())
        .map(|k| (edit_distance(wrong, k), k))
        .filter(|(d, _)| *d <= close_enough)
        .min()
        .map(|(_, k)| k)
}

/// Edit distance for "did you mean" hints: insertions, deletions,
/// substitutions and swaps of two neighbouring characters (`exti` is one
/// swap from `exit`) each count one.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one before the previous, for swaps.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (prev[j - 1] + cost).min(row[j - 1] + 1).min(prev[j] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut prev, row);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn a_swap_of_neighbours_is_one_edit() {
        assert_eq!(edit_distance("exti", "exit"), 1);
        assert_eq!(edit_distance("drat", "draft"), 1);
        assert_eq!(edit_distance("atempts", "attempts"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("abc", "ca"), 3);
    }
}
