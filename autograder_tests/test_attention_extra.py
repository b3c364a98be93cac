"""Extra attention tests, written the gradescope-utils way (see test_ngram_extra.py for what each piece does)."""
import torch
from gradescope_utils.autograder_utils.decorators import hide_errors, number, weight

from autograder.unittests import TestCase


def qkv(rng, B=2, h=2, Tq=4, Tk=6, dk=3, dv=5):
    return [torch.from_numpy(rng.standard_normal(shape)) for shape in ((B, h, Tq, dk), (B, h, Tk, dk), (B, h, Tk, dv))]


class AttentionExtra(TestCase):
    @weight(1)
    def test_full_mask_is_no_mask(self):
        """a mask that keeps every key changes nothing"""
        Q, K, V = qkv(self.rng)
        keep_all = torch.ones(Q.shape[-2], K.shape[-2], dtype=torch.bool)
        masked = self.student.attention.scaled_dot_product_attention(Q, K, V, keep_all)
        plain = self.student.attention.scaled_dot_product_attention(Q, K, V, None)
        self.assertTrue(torch.allclose(masked, plain, atol=1e-12), "an all-True mask changed the output: True must mean 'may attend'")

    @weight(1)
    @number("5.90")
    @hide_errors("Reordering the keys (with their values) changed the output; attention must not depend on the keys' order.")
    def test_keys_in_any_order(self):
        """permuting the keys and their values together leaves the output unchanged"""
        Q, K, V = qkv(self.rng)
        order = torch.from_numpy(self.rng.permutation(K.shape[-2]))
        # The student's own output with the keys in order, not the reference's: the message above says that reordering
        # changed the output, and only this comparison shows that (a wrong scale, say, is another test's to name).
        plain = self.student.attention.scaled_dot_product_attention(Q, K, V)
        reordered = self.student.attention.scaled_dot_product_attention(Q, K[:, :, order], V[:, :, order])
        self.assertTrue(torch.allclose(reordered, plain, rtol=1e-9, atol=1e-12, equal_nan=True))
