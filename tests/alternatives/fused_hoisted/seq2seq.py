"""A correct `seq2seq` in another style: attention with einsum and masked_fill; the encoder run on a packed
sequence (pack_padded_sequence: the states at PAD positions come back as zeros, and the final state is each
source's last token's); forward with the embedding half of the decoder's input projection hoisted out of the time
loop (one matmul for all steps), the GRU cell written out with fused gates from the GRUCell's own weights, and the
output layer applied once to all steps after the loop; greedy decoding that drops each example as it finishes."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 1, 2


def attend(s, Hs, mask):
    weights = torch.softmax(torch.einsum("bh,bsh->bs", s, Hs).masked_fill(~mask, float("-inf")), dim=-1)
    return torch.einsum("bs,bsh->bh", weights, Hs), weights


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_emb, d_hidden):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, d_emb)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_emb)
        self.decoder = nn.GRUCell(d_emb + d_hidden, d_hidden)
        self.out = nn.Linear(2 * d_hidden, tgt_vocab)

    def encode(self, src):
        mask = src != PAD
        packed = pack_padded_sequence(self.src_embed(src), mask.sum(1).cpu(), batch_first=True, enforce_sorted=False)
        states, last = self.encoder(packed)
        Hs, _ = pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        return Hs, mask, last[0]

    def _cell(self, gates_x, s):
        """The GRUCell's update from the input part of its gates, computed already."""
        cell = self.decoder
        r_x, z_x, n_x = gates_x.chunk(3, dim=-1)
        r_h, z_h, n_h = F.linear(s, cell.weight_hh, cell.bias_hh).chunk(3, dim=-1)
        r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
        return (1 - z) * torch.tanh(n_x + r * n_h) + z * s

    def decode_step(self, y_prev, s_prev, Hs, mask):
        c, weights = attend(s_prev, Hs, mask)
        s = self._cell(F.linear(torch.cat([self.tgt_embed(y_prev), c], -1), self.decoder.weight_ih, self.decoder.bias_ih), s_prev)
        return self.out(torch.cat([s, c], -1)), s, weights

    def forward(self, src, tgt_in):
        Hs, mask, s = self.encode(src)
        E = self.tgt_embed.embedding_dim
        W_emb, W_ctx = self.decoder.weight_ih[:, :E], self.decoder.weight_ih[:, E:]
        hoisted = self.tgt_embed(tgt_in) @ W_emb.T + self.decoder.bias_ih  # (B, T, 3H): every step's embedding part at once
        states, contexts, weights = [], [], []
        for t in range(tgt_in.shape[1]):
            c, w = attend(s, Hs, mask)
            s = self._cell(hoisted[:, t] + c @ W_ctx.T, s)
            states.append(s)
            contexts.append(c)
            weights.append(w)
        return self.out(torch.cat([torch.stack(states, 1), torch.stack(contexts, 1)], -1)), torch.stack(weights, 1)


def seq2seq_loss(model, src, tgt):
    logits, _ = model(src, tgt[:, :-1])
    keep = tgt[:, 1:] != PAD
    return F.cross_entropy(logits[keep], tgt[:, 1:][keep])


@torch.no_grad()
def greedy_decode(model, src, max_len):
    Hs, mask, s = model.encode(src)
    out = [[] for _ in range(len(src))]
    live = torch.arange(len(src))  # the examples still decoding
    y = torch.full((len(src),), BOS, dtype=torch.long)
    for _ in range(max_len):
        logits, s, _ = model.decode_step(y, s, Hs, mask)
        y = logits.argmax(-1)
        going = y != EOS
        for b, token in zip(live[going].tolist(), y[going].tolist()):
            out[b].append(token)
        live, y, s, Hs, mask = live[going], y[going], s[going], Hs[going], mask[going]
        if len(live) == 0:
            break
    return out
