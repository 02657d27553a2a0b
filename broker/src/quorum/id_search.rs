//! Binary search of a persistent vector kept in id order, by whole chunks.
//!
//! `imbl::Vector::binary_search_by` walks down the tree for every probe;
//! probing the chunk in the middle, and searching inside it as a plain
//! slice once the id falls within it, walks the tree once per halving of
//! the chunks instead (about 64 times fewer elements to halve). The index
//! and the resident bodies look up ids this way.
//!
//! It must not know what the elements are beyond their id.

/// Where the element with `id` is in `vector` (sorted by `id_of`), if it
/// is there. The first element is looked at before any search: the
/// index's slots and bodies are most often sought at the front (a
/// settlement in queue order), where a search would walk the tree for
/// nothing.
pub(crate) fn position<T: Clone>(
    vector: &imbl::Vector<T>,
    id: u64,
    id_of: impl Fn(&T) -> u64,
) -> Option<usize> {
    if vector.front().is_some_and(|first| id_of(first) == id) {
        return Some(0);
    }
    search(vector, id, id_of).ok()
}

/// Where the element with `id` is in `vector` (sorted by `id_of`), or
/// where it would go.
pub(crate) fn search<T: Clone>(
    vector: &imbl::Vector<T>,
    id: u64,
    id_of: impl Fn(&T) -> u64,
) -> Result<usize, usize> {
    let mut focus = vector.focus();
    let (mut low, mut high) = (0, vector.len());
    while low < high {
        let (range, chunk) = focus.chunk_at(low + (high - low) / 2);
        match (chunk.first(), chunk.last()) {
            (Some(first), _) if id < id_of(first) => high = range.start,
            (_, Some(last)) if id > id_of(last) => low = range.end,
            _ => {
                return match chunk.binary_search_by(|e| id_of(e).cmp(&id)) {
                    Ok(i) => Ok(range.start + i),
                    Err(i) => Err(range.start + i),
                }
            }
        }
    }
    Err(low)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_id_and_every_gap_like_a_plain_binary_search() {
        // Enough elements for a tree of many chunks, built by pushes at
        // both ends and a split so that chunks are not all full.
        let mut vector: imbl::Vector<u64> = (1000..3000u64).map(|i| i * 2).collect();
        for i in (1..1000u64).rev() {
            vector.push_front(i * 2);
        }
        let tail = vector.split_off(2500);
        vector.append(tail);
        let plain: Vec<u64> = vector.iter().copied().collect();
        for id in 0..6005u64 {
            assert_eq!(
                search(&vector, id, |e| *e),
                plain.binary_search(&id),
                "{id}"
            );
        }
        for id in [0, 2, 3, 1998, 2000, 5998, 6000] {
            assert_eq!(
                position(&vector, id, |e| *e),
                plain.binary_search(&id).ok(),
                "{id}"
            );
        }
        let empty: imbl::Vector<u64> = imbl::Vector::new();
        assert_eq!(search(&empty, 5, |e| *e), Err(0));
        assert_eq!(position(&empty, 5, |e| *e), None);
    }
}
