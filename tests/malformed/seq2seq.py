"""A seq2seq.py written the way a well-known PyTorch translation tutorial writes its model (our own rewrite, in this
course's API): a packed encoder, with the handout's total_length fix, and a decoder loop that writes each step into
output buffers made with torch.zeros, as the tutorial's `outputs = torch.zeros(trg_len, batch_size, trg_vocab_size)`
does. Those buffers are float32 whatever the model's dtype, so the grader's float64 model returns float32 logits: a
return of another dtype than the API declares (tests/test_malformed_returns.py). Everything else is right.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

PAD, BOS, EOS = 0, 1, 2


def attend(s, Hs, mask):
    energy = torch.bmm(Hs, s.unsqueeze(2)).squeeze(2)
    energy = energy.masked_fill(mask == 0, float("-inf"))
    attention = F.softmax(energy, dim=1)
    context = torch.bmm(attention.unsqueeze(1), Hs).squeeze(1)
    return context, attention


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_emb, d_hidden):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab, d_emb)
        self.encoder = nn.GRU(d_emb, d_hidden, batch_first=True)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_emb)
        self.decoder = nn.GRUCell(d_emb + d_hidden, d_hidden)
        self.out = nn.Linear(2 * d_hidden, tgt_vocab)
        self.tgt_vocab = tgt_vocab

    def encode(self, src):
        mask = src != PAD
        lengths = mask.sum(dim=1)
        packed = pack_padded_sequence(self.src_embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_outputs, hidden = self.encoder(packed)
        outputs, _ = pad_packed_sequence(packed_outputs, batch_first=True, total_length=src.shape[1])
        return outputs, mask, hidden[0]

    def decode_step(self, y_prev, s_prev, Hs, mask):
        context, attention = attend(s_prev, Hs, mask)
        embedded = self.tgt_embed(y_prev)
        s = self.decoder(torch.cat((embedded, context), dim=1), s_prev)
        prediction = self.out(torch.cat((s, context), dim=1))
        return prediction, s, attention

    def forward(self, src, tgt_in):
        batch_size, tgt_len = tgt_in.shape
        outputs = torch.zeros(batch_size, tgt_len, self.tgt_vocab)
        attentions = torch.zeros(batch_size, tgt_len, src.shape[1])
        encoder_outputs, mask, hidden = self.encode(src)
        for t in range(tgt_len):
            output, hidden, attention = self.decode_step(tgt_in[:, t], hidden, encoder_outputs, mask)
            outputs[:, t] = output
            attentions[:, t] = attention
        return outputs, attentions


def seq2seq_loss(model, src, tgt):
    output, _ = model(src, tgt[:, :-1])
    output_dim = output.shape[-1]
    return F.cross_entropy(output.reshape(-1, output_dim), tgt[:, 1:].reshape(-1), ignore_index=PAD)


@torch.no_grad()
def greedy_decode(model, src, max_len):
    encoder_outputs, mask, hidden = model.encode(src)
    tokens = torch.full((src.shape[0],), BOS, dtype=torch.long)
    results = [[] for _ in range(src.shape[0])]
    finished = [False] * src.shape[0]
    for _ in range(max_len):
        output, hidden, _ = model.decode_step(tokens, hidden, encoder_outputs, mask)
        tokens = output.argmax(1)
        for b, token in enumerate(tokens.tolist()):
            if finished[b]:
                continue
            if token == EOS:
                finished[b] = True
            else:
                results[b].append(token)
        if all(finished):
            break
    return results
