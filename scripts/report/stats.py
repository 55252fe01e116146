"""The statistics of the comparison reports, in one place.

Runs of one setup are paired by seed: the same seed gives every variant the
same batches in the same order and the same initial values in every tensor
the variants share. So a difference between two variants is read per seed,
d_s = loss(a, s) - loss(b, s), and the seed-to-seed noise that both runs
share cancels in d_s. With n seeds, mean d and standard deviation s_d:

  95% confidence interval of the mean difference (paired t):
      d +- t(0.975, n-1) s_d / sqrt(n)
  Equivalence within a margin m (two one-sided tests, TOST, at 5% each):
      both |d|-bounds of the 90% interval, d +- t(0.95, n-1) s_d / sqrt(n),
      lie inside (-m, +m). Only then are a and b called "equivalent".

A quantity read per seed (a ratio, a multiplier) has the same t interval
over its per-seed values (one_sample). A trend is a least-squares slope
with its t interval on n - 2 degrees of freedom (slope); that interval
takes the points' errors as independent, so a trend is fitted on units
that are: one slope per seed, or the means of units that share nothing.
With 2-3 seeds no interval is the seeds' range (or a bootstrap over them,
which is about the range): the range of n values covers the median of
their distribution with probability 1 - 2 (1/2)^n, 75% for 3 seeds and
50% for 2, not 95%.

The t quantiles come from scipy (Debian's python3-scipy).
"""
import math
import statistics


def mean_sd(xs):
    """Mean and sample standard deviation of the finite values (NaN, NaN if none; sd 0 for one)."""
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    if not xs:
        return math.nan, math.nan
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def fmt_mean_sd(xs, spec=".4f"):
    """'4.5848 ± 0.0123' (mean ± sd of the finite values), or 'n/a' if there are none."""
    m, sd = mean_sd(xs)
    return "n/a" if math.isnan(m) else f"{format(m, spec)} ± {format(sd, spec)}"


def t_quantile(p, df):
    from scipy.stats import t
    return float(t.ppf(p, df))


def paired(a, b):
    """a, b: {seed: value}. The seeds both have, their differences a - b, and
    {n, mean, sd, lo95, hi95, lo90, hi90, wins} (wins: seeds where a < b);
    intervals are NaN for fewer than 2 seeds."""
    seeds = sorted(s for s in a if s in b and not math.isnan(a[s]) and not math.isnan(b[s]))
    d = [a[s] - b[s] for s in seeds]
    n = len(d)
    m, sd = mean_sd(d)
    r = {"n": n, "mean": m, "sd": sd, "wins": sum(x < 0 for x in d),
         "lo95": math.nan, "hi95": math.nan, "lo90": math.nan, "hi90": math.nan}
    if n >= 2:
        se = sd / math.sqrt(n)
        h95, h90 = t_quantile(0.975, n - 1) * se, t_quantile(0.95, n - 1) * se
        r.update(lo95=m - h95, hi95=m + h95, lo90=m - h90, hi90=m + h90)
    return r


def one_sample(xs):
    """{n, mean, sd, lo95, hi95} of the finite values: the mean's 95% interval
    (t over n - 1 degrees of freedom; NaN for fewer than 2 values)."""
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    m, sd = mean_sd(xs)
    r = {"n": len(xs), "mean": m, "sd": sd, "lo95": math.nan, "hi95": math.nan}
    if len(xs) >= 2:
        h = t_quantile(0.975, len(xs) - 1) * sd / math.sqrt(len(xs))
        r.update(lo95=m - h, hi95=m + h)
    return r


def slope(xs, ys):
    """Least squares y = a + b x: {n, intercept, slope, se, lo95, hi95}. With
    Sxx = sum (x - mean x)^2 and s^2 = (sum of squared residuals) / (n - 2),
    se = s / sqrt(Sxx) and the 95% interval is b +- t(0.975, n - 2) se (NaN
    for fewer than 3 points, which leave no degree of freedom for s)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    r = {"n": n, "intercept": a, "slope": b, "se": math.nan, "lo95": math.nan, "hi95": math.nan}
    if n >= 3:
        se = math.sqrt(sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / (n - 2) / sxx)
        h = t_quantile(0.975, n - 2) * se
        r.update(se=se, lo95=b - h, hi95=b + h)
    return r


def sign_verdict(lo, hi, up, down):
    """'up' where the 95% interval [lo, hi] lies above 0, 'down' where below, else 'undetermined'."""
    if math.isnan(lo) or math.isnan(hi):
        return "undetermined (no interval)"
    return up if lo > 0 else down if hi < 0 else "undetermined"


def fmt_seeds(seeds):
    """'seeds 1-3', 'seeds 1, 3', 'seed 2': the seeds a figure rests on, named."""
    seeds = sorted(seeds)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(str(s) for s in seeds)


def equivalent(r, margin):
    """TOST at 5%: the 90% interval of the paired difference inside (-margin, +margin)."""
    return r["n"] >= 2 and -margin < r["lo90"] and r["hi90"] < margin


def verdict(r, margin, a="a", b="b"):
    """One phrase for a paired difference a - b: which is lower, or equivalent, or undecided."""
    if r["n"] < 2 or math.isnan(r["lo95"]):
        return "too few seeds"
    small = f", by less than {margin:g} (equivalent within {margin:g})" if equivalent(r, margin) else ""
    if r["hi95"] < 0:
        return f"{a} lower{small}"
    if r["lo95"] > 0:
        return f"{b} lower{small}"
    if small:
        return f"equivalent within {margin:g}"
    return "undecided"


def fmt_interval(r, spec="+.4f", key="mean"):
    """'+0.0123 [+0.0050, +0.0196]' (r[key], the mean or a slope, and its 95% interval)."""
    if r["n"] == 0 or math.isnan(r[key]):
        return "n/a"
    if math.isnan(r["lo95"]):
        return format(r[key], spec)
    return f"{format(r[key], spec)} [{format(r['lo95'], spec)}, {format(r['hi95'], spec)}]"
