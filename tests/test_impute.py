"""Filling in a reference a node did not measure from that node's other measurements
(registry.match.impute): the rule recovers a reference that follows the predictors, says how far
off it is on nodes left out of its fit, and fills nothing where it has nothing to learn from."""

import numpy as np

from registry.match import impute


def _nodes(n: int = 120, seed: int = 0):
    """Log figures of n nodes: 4 predictors measured everywhere, and a reference that is a
    combination of them (plus 1% noise) that the last 30 nodes did not measure."""
    rng = np.random.default_rng(seed)
    predictors = rng.normal(size=(n, 4))
    truth = predictors @ np.array([0.8, -0.3, 0.5, 0.0]) + 2.0 + rng.normal(scale=0.01, size=n)
    values = truth.copy()[:, None]
    values[-30:] = np.nan
    return values, predictors, truth


def test_a_reference_that_follows_the_predictors_is_recovered_where_it_was_not_measured():
    values, predictors, truth = _nodes()
    done = impute.fill(values, predictors, np.zeros((1, 4), dtype=bool))
    assert done.imputed[:, 0].tolist() == [False] * 90 + [True] * 30
    assert np.abs(done.values[-30:, 0] - truth[-30:]).max() < 0.05
    assert done.values[:90, 0].tolist() == values[:90, 0].tolist()      # what was measured stays
    assert 0.003 < done.error[0] < 0.02                                  # left out: about the noise


def test_the_leave_one_out_penalty_matches_the_closed_form_of_scikit_learn():
    from sklearn.linear_model import RidgeCV
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 12))
    y = x @ rng.normal(size=(12, 3)) * 0.3 + rng.normal(size=(200, 3))
    coef, intercept, _ = impute._ridge_loo(x, y)
    ref = RidgeCV(alphas=impute._ALPHAS, alpha_per_target=True).fit(x, y)
    assert np.allclose(coef, ref.coef_.T) and np.allclose(intercept, ref.intercept_)


def test_nothing_is_filled_without_enough_nodes_to_learn_from():
    values, predictors, _ = _nodes(n=impute.MIN_TRAIN + 29)           # MIN_TRAIN - 1 measured it
    done = impute.fill(values, predictors, np.zeros((1, 4), dtype=bool))
    assert not done.imputed.any() and np.isnan(done.values[-30:]).all()


def test_a_reference_that_is_itself_a_predictor_is_not_filled_from_its_own_gap():
    """Measured on 118 of 120 nodes, the reference is among the predictors: filled in, it would be
    regressed on its own gap."""
    values, predictors, _ = _nodes()
    values[:-2] = 1.0
    values[-2:] = np.nan
    own = np.zeros((1, 5), dtype=bool)
    own[0, 4] = True
    assert not impute.fill(values, np.hstack([predictors, values]), own).imputed.any()
    assert impute.fill(values, predictors, own[:, :4]).imputed[-2:, 0].all()     # not a predictor: filled


def test_a_node_that_measured_few_of_the_predictors_is_left_as_it_was():
    values, predictors, _ = _nodes()
    predictors[-1, 1:] = np.nan                                        # 1 of 4 predictors measured
    done = impute.fill(values, predictors, np.zeros((1, 4), dtype=bool))
    assert not done.imputed[-1, 0] and np.isnan(done.values[-1, 0])
    assert done.imputed[-2, 0]


def test_references_missing_each_on_its_own_nodes_cost_at_most_max_fits_fits():
    """Scattered failures (each reference missing on other nodes) would need one fit per reference:
    the largest MAX_FITS sets are filled, the rest left as they were."""
    rng = np.random.default_rng(2)
    predictors = rng.normal(size=(200, 4))
    values = predictors @ rng.normal(size=(4, impute.MAX_FITS + 5))
    for j in range(values.shape[1]):
        values[j, j] = np.nan                         # reference j missing on node j only
    done = impute.fill(values, predictors, np.zeros((values.shape[1], 4), dtype=bool))
    assert done.imputed.any(axis=0).sum() == impute.MAX_FITS
    assert np.isnan(done.values).sum() == 5
