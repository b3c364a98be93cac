"""A second, independent `seq2seq` in the nanoGPT style (written from scratch to the student API, whose state-dict
names it keeps): attention as `att = q @ k.T; att.masked_fill(mask == 0, -inf); softmax; att @ v` with a query
axis of one, s0 gathered from the encoder's states at each source's length - 1, the teacher-forced loop over
`tgt_in.unbind(1)`, the loss as cross_entropy's per-token losses averaged over a PAD mask, and greedy decoding
that always runs max_len steps and then cuts each example at its first EOS."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 1, 2


def attend(s, Hs, mask):
    att = s[:, None, :] @ Hs.transpose(1, 2)  # (B, 1, S)
    att = att.masked_fill(mask[:, None, :] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    return (att @ Hs)[:, 0], att[:, 0]


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
        Hs, _ = self.encoder(self.src_embed(src))
        idx = (mask.sum(1) - 1)[:, None, None].expand(-1, 1, Hs.shape[-1])
        return Hs, mask, Hs.gather(1, idx)[:, 0]

    def decode_step(self, y_prev, s_prev, Hs, mask):
        c, att = attend(s_prev, Hs, mask)
        s = self.decoder(torch.cat((self.tgt_embed(y_prev), c), dim=1), s_prev)
        return self.out(torch.cat((s, c), dim=1)), s, att

    def forward(self, src, tgt_in):
        Hs, mask, s = self.encode(src)
        steps = []
        for y in tgt_in.unbind(1):
            logits, s, att = self.decode_step(y, s, Hs, mask)
            steps.append((logits, att))
        logits, att = zip(*steps)
        return torch.stack(logits, 1), torch.stack(att, 1)


def seq2seq_loss(model, src, tgt):
    logits, _ = model(src, tgt[:, :-1])
    targets = tgt[:, 1:]
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
    keep = (targets != PAD).to(losses.dtype)
    return (losses * keep).sum() / keep.sum()


@torch.no_grad()
def greedy_decode(model, src, max_len):
    Hs, mask, s = model.encode(src)
    y = torch.full((src.size(0),), BOS, dtype=torch.long, device=src.device)
    tokens = []
    for _ in range(max_len):
        logits, s, _ = model.decode_step(y, s, Hs, mask)
        y = logits.argmax(-1)
        tokens.append(y)
    rows = torch.stack(tokens, 1).tolist()
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]
