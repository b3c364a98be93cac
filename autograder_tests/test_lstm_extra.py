"""Extra LSTM tests, written the gradescope-utils way (see test_ngram_extra.py for what each piece does)."""
import torch
from gradescope_utils.autograder_utils.decorators import partial_credit, tags, weight

from autograder.unittests import TestCase


def inputs(rng, B=3, T=6, I=4, H=5):
    """x, h0, c0, W_ih, W_hh, b in float64, from the case's generator."""
    shapes = [(B, T, I), (B, H), (B, H), (4 * H, I), (4 * H, H), (4 * H,)]
    return [torch.from_numpy(rng.standard_normal(shape) * 0.5) for shape in shapes]


class LSTMExtra(TestCase):
    @weight(2)
    @tags("consistency")
    def test_forward_is_lstm_step_repeated(self):
        """lstm_forward equals lstm_step applied once per time step"""
        x, h, c, W_ih, W_hh, b = inputs(self.rng)
        # What comes back is (hs, (h_last, c_last)) of the declared shapes and dtype: the grader checks every return against
        # the student API before a test sees it (autograder/returns.py), and a wrong one is the student's failure, in words.
        hs, (h_last, c_last) = self.student.lstm.lstm_forward(x, h, c, W_ih, W_hh, b)
        for step in range(x.shape[1]):
            h, c = self.student.lstm.lstm_step(x[:, step], h, c, W_ih, W_hh, b)
            self.assertTrue(torch.allclose(hs[:, step], h, atol=1e-12), f"hs[:, {step}] differs from lstm_step's h at step {step}")
        self.assertTrue(torch.allclose(h_last, h, atol=1e-12) and torch.allclose(c_last, c, atol=1e-12),
                        "(h_last, c_last) are not the states after the last step")

    @partial_credit(2)
    def test_lengths(self, set_score=None):
        """lstm_forward against the reference for T = 1, 2, 5 and 9, one share of the points each"""
        lengths = (1, 2, 5, 9)
        right = 0
        for T in lengths:
            args = inputs(self.rng, T=T)
            want = self.expect(lambda ref: ref.lstm.lstm_forward(*args)[0])
            got = self.student.lstm.lstm_forward(*args)[0]
            right += got.shape == want.shape and torch.allclose(got, want, rtol=1e-9, atol=1e-12)
        set_score(2 * right / len(lengths))
        self.score_reason = f"{right} of {len(lengths)} sequence lengths match"
