//! `TokenTrie`: a vocabulary's token pieces as a byte trie laid out in depth-first
//! order, so that a grammar can find every token it allows in one forward pass that
//! skips whole subtrees the grammar rules out.

use crate::grammar::bytes::ByteSet;
use crate::tokenizer::{TokenId, Vocabulary};

/// The pieces of a vocabulary's tokens (the bytes each adds to the output, as the
/// server's and `Generation`'s stream decoders render them), as a trie.
///
/// Control tokens render as nothing and are left out (a grammar never allows a token
/// that adds nothing), except the `preserved` ones given to [`TokenTrie::new`], which
/// render as their text (a tool-call marker such as Mistral's `[TOOL_CALLS]`).
/// End-of-generation tokens are kept apart: a constraint allows them exactly when the
/// output is complete.
#[derive(Clone, Debug)]
pub struct TokenTrie {
    /// Per node, in depth-first order (node 0 is the root): the byte on the edge from
    /// the parent, the depth (root 0), the index just past the node's subtree and the
    /// first of its tokens in `tokens` (those of node `i` are
    /// `tokens[first[i]..first[i + 1]]`).
    byte: Vec<u8>,
    depth: Vec<u16>,
    end: Vec<u32>,
    first: Vec<u32>,
    tokens: Vec<TokenId>,
    /// Each token's piece: `piece_bytes[piece_at[id]..piece_at[id + 1]]`.
    piece_at: Vec<u32>,
    piece_bytes: Vec<u8>,
    /// The end-of-generation ids.
    eog: Vec<TokenId>,
    /// Bytes some token is exactly.
    single: ByteSet,
    /// The ids of the preserved control tokens.
    preserved: Vec<TokenId>,
    max_depth: usize,
    vocab_len: usize,
}

impl TokenTrie {
    /// The trie of `vocab`'s tokens; `preserved` control tokens render as their text.
    pub fn new(vocab: &Vocabulary, preserved: &[TokenId]) -> TokenTrie {
        let n = vocab.len();
        let mut piece_at = Vec::with_capacity(n + 1);
        let mut piece_bytes = Vec::with_capacity(n * 6);
        let mut preserved: Vec<TokenId> = preserved
            .iter()
            .copied()
            .filter(|&id| (id as usize) < n)
            .collect();
        preserved.sort_unstable();
        preserved.dedup();
        for id in 0..n as TokenId {
            piece_at.push(piece_bytes.len() as u32);
            if vocab.is_eog(id) {
                continue;
            }
            let render = preserved.binary_search(&id).is_ok();
            // Ids are in range, so this cannot fail.
            let _ = vocab.token_piece_into(id, render, &mut piece_bytes);
        }
        piece_at.push(piece_bytes.len() as u32);
        let piece = |id: TokenId| {
            &piece_bytes[piece_at[id as usize] as usize..piece_at[id as usize + 1] as usize]
        };
        let mut order: Vec<TokenId> = (0..n as TokenId)
            .filter(|&id| !piece(id).is_empty())
            .collect();
        order.sort_by(|&a, &b| piece(a).cmp(piece(b)).then(a.cmp(&b)));
        let mut trie = TokenTrie {
            byte: vec![0],
            depth: vec![0],
            end: vec![0],
            first: vec![0],
            tokens: Vec::with_capacity(order.len()),
            piece_at: Vec::new(),
            piece_bytes: Vec::new(),
            eog: vocab.eog_ids().to_vec(),
            single: ByteSet::EMPTY,
            preserved,
            max_depth: 0,
            vocab_len: n,
        };
        // The open path: node index per depth (path[0] is the root).
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        for &id in &order {
            let p = piece(id);
            let common = p.iter().zip(prev).take_while(|(a, b)| a == b).count();
            if common == p.len() && p.len() == prev.len() {
                // Same piece as the previous token: same node.
                trie.tokens.push(id);
                continue;
            }
            while path.len() > common + 1 {
                let done = path.pop().unwrap_or(0);
                trie.end[done] = trie.byte.len() as u32;
            }
            for (d, &b) in p.iter().enumerate().skip(common) {
                trie.byte.push(b);
                trie.depth.push((d + 1).min(u16::MAX as usize) as u16);
                trie.end.push(0);
                trie.first.push(trie.tokens.len() as u32);
                path.push(trie.byte.len() - 1);
            }
            trie.tokens.push(id);
            trie.max_depth = trie.max_depth.max(p.len());
            if p.len() == 1 {
                trie.single.insert(p[0]);
            }
            prev = p;
        }
        while let Some(done) = path.pop() {
            trie.end[done] = trie.byte.len() as u32;
        }
        trie.first.push(trie.tokens.len() as u32);
        trie.piece_at = piece_at;
        trie.piece_bytes = piece_bytes;
        trie
    }

    /// The number of token ids the vocabulary has.
    pub fn vocab_len(&self) -> usize {
        self.vocab_len
    }

    /// Trie nodes (the root included).
    pub fn node_count(&self) -> usize {
        self.byte.len()
    }

    /// The bytes token `id` adds to the output (empty for end-of-generation tokens,
    /// control tokens that are not preserved, and ids out of range).
    pub fn piece(&self, id: TokenId) -> &[u8] {
        match (
            self.piece_at.get(id as usize),
            self.piece_at.get(id as usize + 1),
        ) {
            (Some(&a), Some(&b)) => &self.piece_bytes[a as usize..b as usize],
            _ => &[],
        }
    }

    /// The end-of-generation ids.
    pub fn eog(&self) -> &[TokenId] {
        &self.eog
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The preserved control tokens (rendered as their text).
    pub fn preserved(&self) -> &[TokenId] {
        &self.preserved
    }

    /// The bytes that some token's whole piece is: the output can always grow by one
    /// of these in one token.
    pub(crate) fn single_bytes(&self) -> &ByteSet {
        &self.single
    }

    /// The longest piece, in bytes.
    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The nodes in depth-first order: byte, depth, end of subtree, and token range.
    pub(crate) fn nodes(&self) -> TrieNodes<'_> {
        TrieNodes { trie: self }
    }
}

/// Read access to a trie's node arrays for the mask walk.
#[derive(Clone, Copy)]
pub(crate) struct TrieNodes<'t> {
    trie: &'t TokenTrie,
}

impl<'t> TrieNodes<'t> {
    /// The node count.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.trie.byte.len()
    }

    /// Node `i`'s edge byte.
    #[inline]
    pub(crate) fn byte(&self, i: usize) -> u8 {
        self.trie.byte[i]
    }

    /// Node `i`'s depth.
    #[inline]
    pub(crate) fn depth(&self, i: usize) -> usize {
        self.trie.depth[i] as usize
    }

    /// The index just past node `i`'s subtree.
    #[inline]
    pub(crate) fn end(&self, i: usize) -> usize {
        self.trie.end[i] as usize
    }

    /// The tokens whose piece ends at node `i`.
    #[inline]
    pub(crate) fn tokens(&self, i: usize) -> &'t [TokenId] {
        let a = self.trie.first[i] as usize;
        let b = self.trie.first[i + 1] as usize;
        &self.trie.tokens[a..b]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::TokenType;
    use crate::grammar::test_vocab::byte_vocab;
    use crate::tokenizer::{TokenizerModel, VocabParts};

    #[test]
    fn depth_first_nodes_cover_every_piece() {
        let vocab = byte_vocab(&["ab", "abc", " a", "b", "abd"]);
        let trie = TokenTrie::new(&vocab, &[]);
        // Walk the trie and rebuild each token's piece from the path.
        let nodes = trie.nodes();
        let mut path: Vec<u8> = Vec::new();
        let mut seen = Vec::new();
        for i in 1..nodes.len() {
            path.truncate(nodes.depth(i) - 1);
            path.push(nodes.byte(i));
            for &id in nodes.tokens(i) {
                assert_eq!(trie.piece(id), &path[..], "token {id}");
                seen.push(id);
            }
            assert!(nodes.end(i) > i && nodes.end(i) <= nodes.len());
        }
        seen.sort_unstable();
        // 256 byte tokens plus 5 words (a byte token and "b" share a node); not <unk>,
        // <s> or </s>.
        assert_eq!(seen.len(), 261);
        assert_eq!(seen[0], 3);
        assert!(trie.is_eog(2));
        assert!(trie.piece(2).is_empty());
        assert_eq!(trie.single_bytes().count(), 256);
        assert_eq!(trie.max_depth(), 3);
    }

    #[test]
    fn preserved_control_tokens_render_as_text() {
        let mut tokens: Vec<Vec<u8>> =
            vec![b"<s>".to_vec(), b"[TOOL_CALLS]".to_vec(), b"a".to_vec()];
        tokens.push(b"</s>".to_vec());
        let mut parts = VocabParts::new(TokenizerModel::Bpe, tokens);
        parts.token_types = Some(vec![
            TokenType::Control,
            TokenType::Control,
            TokenType::Normal,
            TokenType::Control,
        ]);
        let vocab = Vocabulary::from_parts(parts).expect("vocab");
        assert!(TokenTrie::new(&vocab, &[]).piece(1).is_empty());
        let trie = TokenTrie::new(&vocab, &[1]);
        assert_eq!(trie.piece(1), b"[TOOL_CALLS]");
        assert_eq!(trie.preserved(), &[1]);
    }
}
