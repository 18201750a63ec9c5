"""Fitting: known coefficients are recovered, the regime is detected, the band and runtime
behave, and the scikit-learn conventions hold."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronus_py.errors import InputError
from chronus_py.profiler import (
    Coefficients,
    NotFittedError,
    Profile,
    features,
    iteration_seconds,
    learn_beyond,
    learn_inter_node,
    nnls,
    predict_seconds,
)
from chronus_py.samples import Sample, Samples

GPUS = [1, 2, 4, 8, 12, 16]


def assert_close(actual: float, expected: float, rel: float = 0.02) -> None:
    assert actual == pytest.approx(expected, rel=rel), (actual, expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weak_scaling_coefficients_are_recovered_within_2_percent(make_samples, weak_coef, seed):
    profile = Profile().fit(make_samples(weak_coef, GPUS, seed=seed))
    assert profile.coef_.batch_cap_gpus is None
    assert profile.coef_.overhead == 0.0
    for name in ("compute", "intra", "inter"):
        assert_close(getattr(profile.coef_, name), getattr(weak_coef, name))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_capped_global_batch_is_detected_and_recovered(make_samples, capped_coef, seed):
    """Four coefficients from six placements need quieter data than three do."""
    profile = Profile().fit(make_samples(capped_coef, GPUS, seed=seed, cv=0.01, iterations=1000))
    assert profile.coef_.batch_cap_gpus == 4
    for name in ("compute", "overhead", "intra", "inter"):
        assert_close(getattr(profile.coef_, name), getattr(capped_coef, name))


def test_ring_shape_is_recovered_and_extrapolates_differently(make_samples, weak_coef):
    samples = make_samples(weak_coef, GPUS, inter_node="ring")
    ring = Profile(inter_node="ring").fit(samples)
    linear = Profile(inter_node="linear").fit(samples)
    assert_close(ring.coef_.inter, weak_coef.inter)
    # 1- and 2-node data cannot tell the shapes apart; four nodes can: (k-1) = 3 vs 2(k-1)/k = 1.5
    assert linear.predict(16).iteration_seconds == pytest.approx(
        ring.predict(16).iteration_seconds, rel=1e-9
    )
    gap = linear.predict(32, 4).iteration_seconds - ring.predict(32, 4).iteration_seconds
    assert_close(gap, 1.5 * weak_coef.inter)


def test_fixed_batch_cap_parameter_is_used_as_given(make_samples, weak_coef):
    profile = Profile(batch_cap=None).fit(make_samples(weak_coef, GPUS))
    assert profile.batch_cap is None and profile.coef_.batch_cap_gpus is None
    forced = Profile(batch_cap=8).fit(make_samples(weak_coef, GPUS))
    assert forced.batch_cap == 8 and forced.coef_.batch_cap_gpus == 8


def test_prediction_matches_the_generating_model_far_from_the_data(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    for g, k in [(32, 4), (64, 8), (24, 3)]:
        truth = predict_seconds(weak_coef, (g // k,) * k, "linear")
        assert_close(profile.predict(g, k).iteration_seconds, truth)


@settings(max_examples=60, deadline=None)
@given(
    compute=st.floats(0.01, 2),
    intra=st.floats(0, 1),
    inter=st.floats(0, 1),
    shape=st.sampled_from(["linear", "ring"]),
    g=st.integers(1, 63),
    k=st.integers(1, 8),
)
def test_weak_scaling_predictions_are_monotone(compute, intra, inter, shape, g, k):
    """Under weak scaling more GPUs never make an iteration faster, and neither do more nodes
    for the same GPUs."""
    profile = profile_with(Coefficients(compute, 0.0, intra, inter, None), shape)
    if g + 1 <= 8 * k and k <= g:
        assert (
            profile.predict(g + 1, k).iteration_seconds
            >= profile.predict(g, k).iteration_seconds - 1e-12
        )
    assert profile.predict(g + 1).iteration_seconds >= profile.predict(g).iteration_seconds - 1e-12
    if k + 1 <= g and g <= 8 * k:
        assert (
            profile.predict(g, k + 1).iteration_seconds
            >= profile.predict(g, k).iteration_seconds - 1e-12
        )


@settings(max_examples=40, deadline=None)
@given(
    compute=st.floats(0.01, 2),
    overhead=st.floats(0, 1),
    cap=st.integers(1, 16),
    g=st.integers(1, 63),
)
def test_capped_compute_share_never_grows_with_gpus(compute, overhead, cap, g):
    """Past the cap the global batch is fixed: with free communication, more GPUs never slow
    down."""
    profile = profile_with(Coefficients(compute, overhead, 0.0, 0.0, cap), "linear")
    assert profile.predict(g + 1).iteration_seconds <= profile.predict(g).iteration_seconds + 1e-12


def profile_with(coef: Coefficients, shape: str) -> Profile:
    profile = Profile(inter_node=shape)
    profile.model_, profile.coef_ = "m", coef
    profile.iteration_cv_, profile.model_cv_, profile.mean_ratio_ = 0.02, 0.0, 1.0
    profile.observations_, profile.n_samples_ = (), 0
    return profile


def test_placement_forms_agree(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    by_indices = profile.predict(placement={"node-a": [0, 1, 2, 3, 4, 5], "node-b": [0, 1]})
    by_counts = profile.predict(placement={"node-a": 6, "node-b": 2})
    by_sequence = profile.predict(8, placement=[2, 6])
    assert by_indices == by_counts == by_sequence
    assert profile.predict(16, 2) == profile.predict(placement=[8, 8]) == profile.predict(16)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(gpus=16, nodes=1),
        dict(gpus=4, nodes=5),
        dict(gpus=4, placement=[2, 1]),
        dict(placement=[9]),
        dict(placement=[]),
        dict(nodes=2),
        dict(gpus=0),
    ],
)
def test_impossible_requests_raise_value_error(make_samples, weak_coef, kwargs):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    with pytest.raises(ValueError):
        profile.predict(**kwargs)


def test_band_reflects_iteration_noise_and_contains_the_estimate(make_samples, weak_coef):
    quiet = Profile().fit(make_samples(weak_coef, GPUS, cv=0.01))
    noisy = Profile().fit(make_samples(weak_coef, GPUS, cv=0.05))
    assert quiet.iteration_cv_ == pytest.approx(0.01, rel=0.1)
    for p in (quiet, noisy):
        est = p.predict(32, 4)
        assert est.low < est.iteration_seconds < est.high
    width = lambda p: p.predict(16, 2).high / p.predict(16, 2).iteration_seconds - 1  # noqa: E731
    assert width(noisy) > 3 * width(quiet)
    assert width(quiet) == pytest.approx(
        1.96 * math.hypot(quiet.iteration_cv_, quiet.model_cv_), rel=1e-3
    )
    wider = Profile(band=0.99).fit(make_samples(weak_coef, GPUS, cv=0.01))
    assert width(wider) > width(quiet)


def test_runtime_scales_with_iterations_and_narrows_its_noise_band(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS, cv=0.05))
    per_iteration = profile.predict(32, 4)
    one, many = profile.runtime(1, 32, 4), profile.runtime(10_000, 32, 4)
    assert many.seconds == pytest.approx(10_000 * one.seconds)
    assert many.seconds == pytest.approx(
        10_000 * per_iteration.iteration_seconds * profile.mean_ratio_
    )
    assert many.high / many.seconds < one.high / one.seconds
    assert profile.runtime(0, 32, 4).seconds == 0.0
    with pytest.raises(ValueError):
        profile.runtime(-1, 32, 4)


def test_runtime_counts_stragglers_through_the_mean(weak_coef):
    """Rare slow iterations barely move the median but do lengthen the run."""
    times = np.full(1000, 0.5)
    times[::10] = 1.5
    samples = Samples(
        (
            Sample("m", (8,), times, "a"),
            Sample("m", (8, 8), times * 1.1, "b"),
            Sample("m", (1,), times * 0.9, "c"),
        )
    )
    profile = Profile().fit(samples)
    assert profile.mean_ratio_ == pytest.approx(0.6 / 0.5, rel=1e-6)
    assert profile.runtime(100, 8).seconds == pytest.approx(100 * 0.6, rel=0.02)


def test_single_node_samples_are_rejected(make_samples, weak_coef):
    with pytest.raises(InputError, match="single-node"):
        Profile().fit(make_samples(weak_coef, [1, 2, 4, 8]))


def test_empty_samples_and_oversized_nodes_are_rejected(make_samples, weak_coef):
    with pytest.raises(InputError, match="no samples"):
        Profile().fit(Samples(()))
    with pytest.raises(InputError, match="exceed gpus_per_node=4"):
        Profile(gpus_per_node=4).fit(make_samples(weak_coef, [1, 8, 16]))


@pytest.mark.parametrize(
    "params",
    [
        dict(gpus_per_node=0),
        dict(band=1.0),
        dict(inter_node="tree"),
        dict(inter_node=1.5),
        dict(inter_node=True),
        dict(batch_cap=0),
        dict(batch_cap="sometimes"),
    ],
)
def test_bad_parameters_are_stored_as_given_and_rejected_by_fit(make_samples, weak_coef, params):
    profile = Profile(**params)
    for name, value in params.items():
        assert getattr(profile, name) == value
    with pytest.raises(ValueError):
        profile.fit(make_samples(weak_coef, GPUS))


def test_fit_returns_self_and_refitting_forgets(make_samples, weak_coef, capped_coef):
    profile = Profile()
    assert profile.fit(make_samples(capped_coef, GPUS)) is profile
    assert profile.coef_.batch_cap_gpus == 4
    profile.fit(make_samples(weak_coef, GPUS))
    assert profile.coef_.batch_cap_gpus is None
    assert profile.n_samples_ == len(GPUS)


def test_unfitted_profile_raises_not_fitted_error():
    profile = Profile()
    for call in (lambda: profile.predict(8), lambda: profile.runtime(10, 8), profile.to_dict):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(profile))


def test_partial_fit_pulls_the_estimate_towards_a_running_job(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    before = profile.predict(32, 4).iteration_seconds
    slower = Coefficients(weak_coef.compute, 0.0, weak_coef.intra, 2 * weak_coef.inter, None)
    running = make_samples(slower, [32], iterations=20_000, seed=5)
    observed = float(np.median(running.items[0].seconds))
    assert profile.partial_fit(running) is profile
    after = profile.predict(32, 4).iteration_seconds
    assert abs(after - observed) < 0.25 * abs(before - observed)
    assert profile.n_samples_ == len(GPUS) + 1
    again = profile.partial_fit(make_samples(slower, [32], iterations=20_000, seed=6))
    assert again.n_samples_ == len(GPUS) + 1  # the same placement is pooled, not duplicated
    assert again.observations_[-1].iterations == 40_000


def test_partial_fit_on_unfitted_profile_is_fit(make_samples, weak_coef):
    samples = make_samples(weak_coef, GPUS)
    assert Profile().partial_fit(samples).to_dict() == Profile().fit(samples).to_dict()


def test_partial_fit_rejects_another_model(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    with pytest.raises(InputError, match="cannot refine"):
        profile.partial_fit(make_samples(weak_coef, [8], model="other"))


def test_to_dict_round_trips(make_samples, capped_coef):
    profile = Profile(band=0.9, inter_node="ring").fit(make_samples(capped_coef, GPUS))
    again = Profile.from_dict(profile.to_dict())
    assert again.to_dict() == profile.to_dict()
    assert repr(again) == repr(profile)
    for g, k in [(1, 1), (12, 2), (32, 4)]:
        assert again.predict(g, k) == profile.predict(g, k)
        assert again.runtime(100, g, k) == profile.runtime(100, g, k)


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d.pop("format"), None),
        (lambda d: d.update(params=[]), "params"),
        (lambda d: d["params"].update(inter_node="tree"), "params"),
        (lambda d: d["params"].update(colour="red"), "params"),
        (lambda d: d["coefficients"].update(intra=-1.0), "coefficients"),
        (lambda d: d["coefficients"].pop("compute"), "coefficients"),
        (lambda d: d["coefficients"].update(batch_cap_gpus="4"), "coefficients"),
        (lambda d: d.update(model_cv="wide"), "model_cv"),
        (lambda d: d["observations"][0].update(placement=[9]), "observations[0]"),
        (lambda d: d.update(model=3), "model"),
    ],
)
def test_malformed_profile_dicts_name_the_field(make_samples, weak_coef, mutate, field):
    data = Profile().fit(make_samples(weak_coef, GPUS)).to_dict()
    mutate(data)
    with pytest.raises(InputError) as info:
        Profile.from_dict(data, source="p.json")
    assert info.value.source == "p.json" and info.value.field == field
    assert "\n" not in str(info.value)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-3, 3), min_size=3, max_size=3), min_size=2, max_size=7),
    st.lists(st.floats(-3, 3), min_size=7, max_size=7),
)
def test_nnls_matches_a_dense_grid_search(rows, target):
    a = np.array(rows)
    b = np.array(target[: len(rows)])
    x = nnls(a, b)
    assert np.all(x >= 0)
    best = float(np.sum((a @ x - b) ** 2))
    grid = np.linspace(0, 3, 13)
    for point in itertools.product(grid, repeat=3):
        assert float(np.sum((a @ np.array(point) - b) ** 2)) >= best - 1e-9


def test_features_are_the_documented_physics():
    assert list(features((1,), None, "linear")) == [1.0, 0.0, 0.0, 0.0]
    assert list(features((8, 8, 8, 8), None, "linear")) == [1.0, 0.0, 1.75, 3.0]
    assert list(features((8, 8, 8, 8), None, "ring")) == [1.0, 0.0, 1.75, 1.5]
    assert list(features((8, 8), 4, "linear")) == [0.25, 1.0, 1.75, 1.0]


def test_packed_predictions_are_the_fitted_model_and_spreading_never_helps():
    """The monotone envelope changes nothing where the model was fitted (packed placements)
    and stops a profile without measurable network cost from favouring thin nodes."""
    coef = Coefficients(compute=0.81, overhead=0.0, intra=0.044, inter=0.0, batch_cap_gpus=None)
    profile = profile_with(coef, "linear")
    for g in (1, 4, 8, 12, 16, 32):
        placement = tuple(profile.placement_for(g))
        assert profile.predict(g).iteration_seconds == pytest.approx(
            predict_seconds(coef, placement, "linear")
        )
    assert predict_seconds(coef, (4, 4, 4, 4), "linear") < predict_seconds(coef, (8, 8), "linear")
    assert profile.predict(16, 4).iteration_seconds >= profile.predict(16, 2).iteration_seconds


def test_partial_fit_accepts_progress_totals(make_samples, weak_coef):
    """A running job reports only 'n iterations in T seconds': std 0 means spread unknown."""
    from chronus_py.profiler import Observation

    profile = Profile().fit(make_samples(weak_coef, GPUS))
    cv_before = profile.iteration_cv_
    observed = 1.3 * profile.predict(32, 4).iteration_seconds
    profile.partial_fit(
        [Observation({"a": 8, "b": 8, "c": 8, "d": 8}, 50_000, observed, observed, 0.0)]
    )
    assert profile.predict(32, 4).iteration_seconds == pytest.approx(observed, rel=0.03)
    assert profile.iteration_cv_ == pytest.approx(cv_before)
    assert profile.observations_[-1].placement == (8, 8, 8, 8)
    profile.partial_fit([Observation((8, 8, 8, 8), 50_000, observed, observed, 0.0)])
    assert profile.observations_[-1].std == 0.0 and profile.observations_[-1].iterations == 100_000
    fresh = Profile().partial_fit(
        [Observation((8,), 10, 1.0, 1.0, 0.0), Observation((8, 8), 10, 1.2, 1.2, 0.0)]
    )
    assert fresh.model_ == "" and fresh.iteration_cv_ == 0.0
    with pytest.raises(InputError, match="observations: all samples are single-node"):
        Profile().partial_fit([Observation((8,), 10, 1.0, 1.0, 0.0)])


def test_band_widens_beyond_the_profiled_nodes_by_the_unknown_inter_node_shape(
    make_samples, weak_coef
):
    """1-2 node profiles cannot tell "linear" from "ring" growth past two nodes: a 4-node band
    must reach the other shape's prediction, a 2-node band is the fitted one."""
    linear = Profile(inter_node="linear").fit(make_samples(weak_coef, GPUS, cv=0.01))
    ring = Profile(inter_node="ring").fit(make_samples(weak_coef, GPUS, cv=0.01))
    est = linear.predict(32, 4)
    assert est.low <= ring.predict(32, 4).iteration_seconds < est.iteration_seconds
    inside = linear.predict(16, 2)
    assert inside.high / inside.iteration_seconds - 1 == pytest.approx(
        1.96 * math.hypot(linear.iteration_cv_, linear.model_cv_), rel=1e-3
    )
    rel = lambda r: r.high / r.seconds - 1  # noqa: E731
    assert rel(linear.runtime(1000, 32, 4)) > 2 * rel(linear.runtime(1000, 16, 2))


@pytest.mark.parametrize("true_weight", [0.0, 0.3, 1.0])
def test_learned_inter_node_shape_recovers_the_clusters_growth(make_samples, true_weight):
    """A cluster whose larger runs grow as a 0.3 mix of "linear" and "ring" teaches that weight
    from other jobs' 4- and 8-node runs, and a new job profiled on 1-2 nodes then predicts its
    own larger runs as they are, where the default "linear" is off."""
    models = [
        Coefficients(compute=c, overhead=0.0, intra=0.02 * c, inter=share * c, batch_cap_gpus=None)
        for c, share in ((0.2, 0.5), (0.4, 0.2), (0.3, 0.8), (0.5, 0.35))
    ]
    history = []
    for i, coef in enumerate(models[:-1]):
        truth = make_samples(coef, [32, 64], inter_node=true_weight, cv=0.0, iterations=1, seed=i)
        profile = Profile().fit(make_samples(coef, [1, 8, 16], cv=0.005, seed=i))
        history += [(profile, s.placement, float(s.seconds[0])) for s in truth]
    weight = learn_inter_node(history)
    assert weight == pytest.approx(true_weight, abs=0.03)
    new = models[-1]
    learned = Profile(inter_node=weight).fit(make_samples(new, [1, 8, 16], cv=0.005, seed=9))
    measured = make_samples(new, [64], inter_node=true_weight, cv=0.0, iterations=1)
    seconds = float(measured.items[0].seconds[0])
    assert learned.predict(64).iteration_seconds == pytest.approx(seconds, rel=0.02)
    if true_weight < 1.0:
        default = Profile().fit(make_samples(new, [1, 8, 16], cv=0.005, seed=9))
        assert abs(default.predict(64).iteration_seconds / seconds - 1) > 0.05


def test_learning_the_shape_needs_runs_beyond_the_profiles(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    with pytest.raises(ValueError, match="no observed run beyond"):
        learn_inter_node([(profile, (8, 8), 1.0)])


def larger_runs_history(make_samples, errors, true_weight=0.3):
    """A cluster's history: per model, a 1-2 node profile and its 32- and 64-GPU runs, whose
    measured time is the true model's times ``1 + error``."""
    history = []
    for i, error in enumerate(errors):
        c = 0.2 + 0.05 * i
        coef = Coefficients(
            compute=c, overhead=0.0, intra=0.02 * c, inter=0.4 * c, batch_cap_gpus=None
        )
        profile = Profile().fit(make_samples(coef, [1, 8, 16], cv=0.005, seed=i))
        for s in make_samples(coef, [32, 64], inter_node=true_weight, cv=0.0, iterations=1):
            history.append((profile, s.placement, float(s.seconds[0]) * (1 + error)))
    return history


def scores(history, weight):
    return sorted(
        abs(math.log(seconds / iteration_seconds(p.coef_, placement, weight, 8)))
        for p, placement, seconds in history
    )


def test_learned_band_is_the_conformal_quantile_of_the_clusters_errors(make_samples):
    """With 20 runs and a 0.9 band the spread is the 19th smallest |ln(measured/predicted)|;
    with too few runs for the band (4 runs at 0.95), the largest."""
    history = larger_runs_history(make_samples, np.linspace(-0.2, 0.2, 10))
    beyond = learn_beyond(history, band=0.9)
    assert beyond.cases == 20
    assert beyond.spread == scores(history, beyond.inter_node)[18]
    few = learn_beyond(history[:4], band=0.95)
    assert few.spread == scores(history[:4], few.inter_node)[-1]


def test_learned_band_covers_new_runs_like_the_history(make_samples):
    """Runs drawn like the history fall inside the learned band about as often as promised,
    and the band is narrower than the default one (the linear-ring gap), which knows nothing
    of the cluster."""
    rng = np.random.default_rng(3)
    history = larger_runs_history(make_samples, rng.normal(0, 0.15, 30))
    beyond = learn_beyond(history, band=0.9)
    fresh = larger_runs_history(make_samples, rng.normal(0, 0.15, 30))
    learned = 0
    widths = {"learned": [], "default": []}
    for profile, placement, seconds in fresh:
        observed = Samples(
            tuple(
                Sample("m", o.placement, np.full(o.iterations, o.median), "s")
                for o in profile.observations_
            )
        )
        calibrated = Profile(inter_node=beyond.inter_node, beyond_spread=beyond.spread)
        est = calibrated.fit(observed).predict(placement=placement)
        learned += est.low <= seconds <= est.high
        widths["learned"].append((est.high - est.low) / seconds)
        est = Profile().fit(observed).predict(placement=placement)
        widths["default"].append((est.high - est.low) / seconds)
    assert learned / len(fresh) >= 0.8
    assert np.mean(widths["learned"]) < np.mean(widths["default"])


def test_learned_band_applies_only_past_the_profiled_nodes(make_samples, weak_coef):
    plain = Profile(inter_node=0.3).fit(make_samples(weak_coef, GPUS, cv=0.01))
    wide = Profile(inter_node=0.3, beyond_spread=0.2).fit(make_samples(weak_coef, GPUS, cv=0.01))
    assert wide.predict(16, 2) == plain.predict(16, 2)
    est = wide.predict(32, 4)
    noise = 1.96 * wide.iteration_cv_
    assert est.high == pytest.approx(est.iteration_seconds * math.exp(0.2) * (1 + noise))
    assert est.low == pytest.approx(est.iteration_seconds * math.exp(-0.2) * (1 - noise))
    assert Profile.from_dict(wide.to_dict()).predict(32, 4) == est


@pytest.mark.parametrize("spread", [-0.1, float("nan"), "wide", True])
def test_bad_beyond_spread_is_refused(make_samples, weak_coef, spread):
    with pytest.raises(ValueError, match="beyond_spread must be None or a number >= 0"):
        Profile(beyond_spread=spread).fit(make_samples(weak_coef, GPUS))


def test_learning_the_band_needs_positive_measurements(make_samples, weak_coef):
    profile = Profile().fit(make_samples(weak_coef, GPUS))
    with pytest.raises(ValueError, match="must be positive"):
        learn_beyond([(profile, (8, 8, 8, 8), 0.0)])
