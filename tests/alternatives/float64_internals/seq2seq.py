"""A correct `seq2seq` with float64 internals: the embeddings, both GRUs (written out from the modules' own
weights, gates in PyTorch's order r, z, n), the attention and the output layer all run in float64 on casts of the
parameters, and every result is cast back to the parameters' dtype; autograd carries the gradients through the
casts. The mask is additive (finfo.min where PAD) and the weights are multiplied by it after the softmax. The loss
is a log-softmax gathered at the targets and averaged over the non-PAD ones, in float64."""
from __future__ import annotations

import torch
import torch.nn as nn

PAD, BOS, EOS = 0, 1, 2


def attend(s, Hs, mask):
    scores = (Hs.double() @ s.double()[:, :, None])[..., 0]
    scores = scores + torch.zeros_like(scores).masked_fill(~mask, torch.finfo(torch.float64).min)
    weights = torch.softmax(scores, dim=-1) * mask
    return (weights[:, None, :] @ Hs.double())[:, 0].to(s.dtype), weights.to(s.dtype)


def _gru64(x, h, W_ih, W_hh, b_ih, b_hh):
    r_x, z_x, n_x = torch.addmm(b_ih.double(), x, W_ih.double().T).chunk(3, -1)
    r_h, z_h, n_h = torch.addmm(b_hh.double(), h, W_hh.double().T).chunk(3, -1)
    r, z = torch.sigmoid(r_x + r_h), torch.sigmoid(z_x + z_h)
    n = torch.tanh(n_x + r * n_h)
    return n + z * (h - n)


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_emb, d_hidden):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, d_emb)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_emb)
        self.decoder = nn.GRUCell(d_emb + d_hidden, d_hidden)
        self.out = nn.Linear(2 * d_hidden, tgt_vocab)

    def encode(self, src):
        dtype, g = self.out.weight.dtype, self.encoder
        x = self.src_embed.weight.double()[src]
        h = x.new_zeros(len(src), g.hidden_size)
        Hs = []
        for t in range(src.shape[1]):
            h = _gru64(x[:, t], h, g.weight_ih_l0, g.weight_hh_l0, g.bias_ih_l0, g.bias_hh_l0)
            Hs.append(h)
        Hs = torch.stack(Hs, 1)
        mask = src != PAD
        last = torch.stack([Hs[b, int(mask[b].nonzero().max())] for b in range(len(src))])
        return Hs.to(dtype), mask, last.to(dtype)

    def decode_step(self, y_prev, s_prev, Hs, mask):
        cell, dtype = self.decoder, self.out.weight.dtype
        c, weights = attend(s_prev, Hs, mask)
        x = torch.cat([self.tgt_embed.weight.double()[y_prev], c.double()], -1)
        s = _gru64(x, s_prev.double(), cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
        logits = torch.addmm(self.out.bias.double(), torch.cat([s, c.double()], -1), self.out.weight.double().T)
        return logits.to(dtype), s.to(dtype), weights

    def forward(self, src, tgt_in):
        Hs, mask, s = self.encode(src)
        logits, weights = [], []
        for y in tgt_in.unbind(1):
            step, s, w = self.decode_step(y, s, Hs, mask)
            logits.append(step)
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)


def seq2seq_loss(model, src, tgt):
    logits, _ = model(src, tgt[:, :-1])
    targets = tgt[:, 1:]
    nll = -torch.log_softmax(logits.double(), -1).gather(-1, targets[..., None])[..., 0]
    keep = targets != PAD
    return ((nll * keep).sum() / keep.sum()).to(logits.dtype)


@torch.no_grad()
def greedy_decode(model, src, max_len):
    Hs, mask, s = model.encode(src)
    y = torch.full((len(src),), BOS)
    out, done = [[] for _ in range(len(src))], [False] * len(src)
    for _ in range(max_len):
        logits, s, _ = model.decode_step(y, s, Hs, mask)
        y = logits.argmax(-1)
        for b, token in enumerate(y.tolist()):
            done[b] = done[b] or token == EOS
            if not done[b]:
                out[b].append(token)
        if all(done):
            break
    return out
