"""The EM logistic regression's fit, as a lot's freeze runs it, against a fit on scipy's logsumexp.

:class:`engine.lot_model.LotModel` fits :class:`engine.learners.em_logistic.EmLogisticPllClassifier`
to the candidate sets whenever a lot is frozen, so a replayed campaign on lost spends most of its
time there. The baseline is the same EM written out here with ``scipy.special.logsumexp`` in the
loss, as the engine computed it before; both fits must give the same coefficients.

    python -m benchmarks.bench_em_logistic --sizes 1000 5000 20000 --features 100
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from benchmarks.bench_lots import cpu
from engine.learners.em_logistic import EmLogisticPllClassifier


def logsumexp_fit(X: np.ndarray, Y: np.ndarray, n_em_steps: int = 5, penalty: float = 0.01) -> np.ndarray:
    """The engine's EM (standardised features, an intercept, L-BFGS M-steps from the last weights),
    with each softmax taken through ``scipy.special.logsumexp``; the weights, intercept last."""
    scale = X.std(axis=0)
    Xb = np.hstack([(X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0), np.ones((X.shape[0], 1))])
    n, shape = Xb.shape[0], (Xb.shape[1], Y.shape[1])
    soft = Y / Y.sum(axis=1, keepdims=True)
    weights = np.zeros(shape)
    for _ in range(n_em_steps + 1):

        def loss_and_gradient(flat: np.ndarray, soft: np.ndarray = soft) -> tuple[float, np.ndarray]:
            w = flat.reshape(shape)
            z = Xb @ w
            log_p = z - logsumexp(z, axis=1, keepdims=True)
            gradient = Xb.T @ (np.exp(log_p) - soft) / n
            gradient[:-1] += 2.0 * penalty * w[:-1]
            return float(-(soft * log_p).sum() / n + penalty * (w[:-1] ** 2).sum()), gradient.ravel()

        result = minimize(loss_and_gradient, weights.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": 100})
        weights = result.x.reshape(shape)
        z = Xb @ weights
        proba = np.exp(z - logsumexp(z, axis=1, keepdims=True)) * Y
        soft = proba / np.maximum(proba.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    return weights


def problem(n: int, n_features: int, n_labels: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian clusters, one per label, each item with its label and, for two in three, one more."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(n_labels, size=n)
    X = rng.normal(size=(n_labels, n_features))[truth] + rng.normal(scale=2.0, size=(n, n_features))
    Y = np.zeros((n, n_labels), dtype=bool)
    Y[np.arange(n), truth] = True
    extra = rng.random(n) < 2 / 3
    Y[np.flatnonzero(extra), rng.integers(n_labels, size=int(extra.sum()))] = True
    return X, Y


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1_000, 5_000, 20_000])
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--labels", type=int, default=10)
    args = parser.parse_args(argv)
    print("CPU seconds of one fit; the baseline is the logsumexp fit of the same problem, in this process.\n")
    print("| items | features | labels | logsumexp fit (baseline) | engine fit | ratio | largest weight difference |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        X, Y = problem(size, args.features, args.labels, seed=size)
        baseline, reference = cpu(logsumexp_fit, X, Y)
        seconds, model = cpu(EmLogisticPllClassifier().fit, X, Y)
        weights = np.vstack([model.coef_, model.intercept_])
        difference = float(np.abs(weights - reference).max())
        if not np.allclose(weights, reference, atol=1e-6):
            raise SystemExit(f"the fits differ at {size:,} items: largest weight difference {difference:.2e}")
        print(
            f"| {size:,} | {args.features} | {args.labels} | {baseline:.2f} | {seconds:.2f} "
            f"| {seconds / baseline:.2f} | {difference:.1e} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
