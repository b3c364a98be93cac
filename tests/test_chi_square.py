"""The chi-square test's p-value comes from upper_gamma, plain Python (grading a sample imports no torch): held to
mpmath's regularised upper incomplete gamma at 40 digits, on both sides of x = a + 1 where it switches methods."""
import mpmath
import pytest

from autograder.chi_square import upper_gamma

POINTS = [(a, x) for a in (0.5, 1, 1.5, 2, 3.5, 10, 20.5, 100, 2000)
          for x in (1e-6, 0.1, 1, a / 2, a, a + 0.5, a + 1, a + 2, 2 * a, a + 60, 400)]


@pytest.mark.parametrize("a,x", POINTS)
def test_upper_gamma_matches_mpmath(a, x):
    mpmath.mp.dps = 40
    exact = float(mpmath.gammainc(a, x, mpmath.inf, regularized=True))
    assert upper_gamma(a, x) == pytest.approx(exact, rel=1e-11, abs=1e-300)


def test_no_chi_square_at_zero():
    assert upper_gamma(3.0, 0.0) == 1.0
