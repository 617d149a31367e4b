//! A vocabulary's words by id ([`WordList`]) and the table from a word to its id
//! ([`WordIds`]).

use super::key_of;
use super::table::BigTable;

/// The words of a vocabulary in id order, their bytes back to back (one allocation for
/// all of them: a 540k-word model used to hold 540k `String`s).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct WordList {
    text: Vec<u8>,
    /// Word `id` is `text[starts[id]..starts[id + 1]]`; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl Default for WordList {
    fn default() -> Self {
        WordList::with_capacity(0, 0)
    }
}

impl WordList {
    /// An empty list with room for `words` words of `bytes` bytes in all.
    pub(crate) fn with_capacity(words: usize, bytes: usize) -> WordList {
        let mut starts = Vec::with_capacity(words + 1);
        starts.push(0);
        WordList {
            text: Vec::with_capacity(bytes),
            starts,
        }
    }

    /// Appends a word (it gets the next id).
    pub(crate) fn push(&mut self, word: &[u8]) {
        self.text.extend_from_slice(word);
        self.starts.push(self.text.len());
    }

    /// Appends the words of `other` (they get the next ids).
    pub(crate) fn append(&mut self, other: &WordList) {
        let shift = self.text.len();
        self.text.extend_from_slice(&other.text);
        self.starts
            .extend(other.starts[1..].iter().map(|&start| start + shift));
    }

    /// The number of words.
    pub(crate) fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// True when there are no words.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of word `id`, if there is one.
    pub(crate) fn get(&self, id: u32) -> Option<&[u8]> {
        let (start, end) = (
            self.starts.get(id as usize)?,
            self.starts.get(id as usize + 1)?,
        );
        Some(&self.text[*start..*end])
    }

    /// The bytes of word `id` (`id < len`).
    #[inline(always)]
    pub(crate) fn word(&self, id: u32) -> &[u8] {
        &self.text[self.starts[id as usize]..self.starts[id as usize + 1]]
    }

    /// The words in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.starts.windows(2).map(|w| &self.text[w[0]..w[1]])
    }

    #[cfg(test)]
    /// The words' display keys ([`key_of`]) in id order.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.iter().map(|w| key_of(w).into_owned()).collect()
    }
}

impl std::fmt::Debug for WordList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter().map(key_of)).finish()
    }
}

/// A word that repeats an earlier one: its id and the earlier word's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Repeat {
    pub(crate) id: u32,
    pub(crate) earlier: u32,
}

/// The words of a [`WordModel`](super::WordModel) and the table from a word (its bytes) to its id: built
/// once when the model is read or trained, and used as is by the encoder.
///
/// The table is `wordtable::BigTable`: one open-addressing array whose slots hold words
/// of up to 24 bytes in full, looked up in batches by [`WordEncoder`](super::WordEncoder) so that cache
/// misses overlap. (Measured on the 27 MB benchmark text with its 540k-word model, CPU
/// seconds for load and encode: a 64k-word hash table of the most frequent words in
/// front of it 0.40-0.48; a 16k-word one 0.40-0.44; the big table alone 0.37. The front
/// table's own misses and hashing cost more than the lines of the big table that stay in
/// cache anyway.)
#[derive(Clone)]
pub(crate) struct WordIds {
    pub(super) words: WordList,
    pub(super) table: BigTable,
}

impl WordIds {
    /// The table of `words`. A word that repeats an earlier one fails the build with the
    /// first such repeat (the lowest id whose word has a lower id too), and the words back.
    pub(crate) fn build(words: WordList) -> std::result::Result<WordIds, (Repeat, WordList)> {
        match BigTable::build(&words) {
            Ok(table) => Ok(WordIds { words, table }),
            Err(repeat) => Err((repeat, words)),
        }
    }

    /// The words, by id.
    pub(crate) fn words(&self) -> &WordList {
        &self.words
    }

    /// The id of `word`.
    #[inline]
    pub(crate) fn get(&self, word: &[u8]) -> Option<u32> {
        self.table.find(&self.table.probe(word), &self.words)
    }

    /// The number of words.
    pub(crate) fn len(&self) -> usize {
        self.words.len()
    }
}

impl std::fmt::Debug for WordIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WordIds({} words)", self.len())
    }
}
